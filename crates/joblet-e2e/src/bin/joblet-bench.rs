//! `joblet-bench`: the numbers behind BENCHMARKS.md, all taken in one run on
//! one machine so the ratios compare like with like.
//!
//! - latency: `true` by fork/exec, `rnx job run --follow -- true` against a
//!   real local node (local socket, store, shim, sandbox) back to back and
//!   paced (`BENCH_PAUSE_MS`, default 50, between runs: a start on an idle
//!   node, whose warm sandboxes are ready, instead of one that also pays
//!   for rebuilding the last one's), and `srun true` when a Slurm cluster
//!   answers (`bench/slurm-up.sh`);
//! - throughput: 1,000 jobs submitted through the `rnx` CLI (8 at a time),
//!   through the API from one client (32 in flight), and `BENCH_SLURM_JOBS`
//!   (200) with `sbatch --wrap true` (8 at a time): submitted/s and completed/s.
//!
//! Run it through `bench/run.sh`, which builds release binaries first.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions};

fn median_ms(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[(v.len() * 9) / 10]))
}

fn time_runs(n: usize, f: impl FnMut() -> bool) -> Option<Vec<Duration>> {
    time_runs_paced(n, Duration::ZERO, f)
}

/// [`time_runs`] with an untimed `pause` before each run.
fn time_runs_paced(
    n: usize,
    pause: Duration,
    mut f: impl FnMut() -> bool,
) -> Option<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        std::thread::sleep(pause);
        let t = Instant::now();
        if !f() {
            return None;
        }
        out.push(t.elapsed());
    }
    Some(out)
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn slurm_available() -> bool {
    quiet(Command::new("sinfo").arg("-h")) && quiet(Command::new("srun").arg("true"))
}

/// Runs `submit(i)` for i in 0..n with `parallel` workers; returns the time
/// until every submission was acknowledged.
fn submit_all(n: usize, parallel: usize, submit: impl Fn(usize) -> bool + Sync) -> Duration {
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                assert!(submit(i), "submission {i} failed");
            });
        }
    });
    t.elapsed()
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn completed(node: &Node) -> usize {
    node.rnx_json(&["job", "list", "--state", "COMPLETED"])
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
}

struct Row {
    what: String,
    median_ms: f64,
    p90_ms: f64,
}

fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let jobs: usize = std::env::var("BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let slurm_jobs: usize = std::env::var("BENCH_SLURM_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let pause = Duration::from_millis(
        std::env::var("BENCH_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(50),
    );
    let slurm = slurm_available();
    eprintln!(
        "joblet-bench: {runs} latency runs, {jobs} jobs per throughput test, slurm: {}",
        if slurm {
            "yes"
        } else {
            "no (run bench/slurm-up.sh)"
        }
    );

    // The test harness binds the host work dir at /work (its tests write
    // into running jobs); measure the shipped default, a sized tmpfs.
    let node = Node::start_with(NodeOptions {
        max_running: 64,
        extra_config: "filesystem:\n  work_size_mb: 1024\n".into(),
        ..Default::default()
    })?;
    // Warm up the node and the page cache.
    for _ in 0..5 {
        quiet(
            node.rnx_cmd()
                .args(["job", "run", "--follow", "--", "true"]),
        );
    }

    let mut rows = Vec::new();
    let fork = time_runs(runs, || quiet(&mut Command::new("true"))).expect("true runs");
    let (m, p) = median_ms(fork);
    rows.push(Row {
        what: "fork/exec `true`".into(),
        median_ms: m,
        p90_ms: p,
    });
    let rnx = time_runs(runs, || {
        quiet(
            node.rnx_cmd()
                .args(["job", "run", "--follow", "--", "true"]),
        )
    })
    .expect("rnx runs");
    let (m, p) = median_ms(rnx);
    rows.push(Row {
        what: "`rnx job run --follow -- true`".into(),
        median_ms: m,
        p90_ms: p,
    });
    let paced = time_runs_paced(runs, pause, || {
        quiet(
            node.rnx_cmd()
                .args(["job", "run", "--follow", "--", "true"]),
        )
    })
    .expect("paced rnx runs");
    let (m, p) = median_ms(paced);
    rows.push(Row {
        what: format!(
            "`rnx job run --follow -- true`, each run {} ms after the last",
            pause.as_millis()
        ),
        median_ms: m,
        p90_ms: p,
    });
    if slurm {
        let srun =
            time_runs(runs.min(50), || quiet(Command::new("srun").arg("true"))).expect("srun runs");
        let (m, p) = median_ms(srun);
        rows.push(Row {
            what: "Slurm `srun true`".into(),
            median_ms: m,
            p90_ms: p,
        });
    }

    println!(
        "### Latency (median of {runs} runs; Slurm: {} runs)\n",
        runs.min(50)
    );
    println!("| command | median ms | p90 ms | × fork/exec |");
    println!("|---|---:|---:|---:|");
    let base = rows[0].median_ms;
    for r in &rows {
        println!(
            "| {} | {:.2} | {:.2} | {:.1} |",
            r.what,
            r.median_ms,
            r.p90_ms,
            r.median_ms / base
        );
    }
    if slurm {
        println!(
            "\n`rnx job run --follow -- true` is {:.1}× faster than `srun true` (medians).",
            rows[3].median_ms / rows[1].median_ms
        );
    }

    // Throughput through the CLI: from the first submission to the last completion.
    let t0 = Instant::now();
    let before = completed(&node);
    let acked = submit_all(jobs, 8, |_| {
        quiet(node.rnx_cmd().args(["job", "run", "--", "true"]))
    });
    assert!(
        wait_until(Duration::from_secs(600), || completed(&node)
            >= before + jobs),
        "CLI jobs did not complete"
    );
    let all_done = t0.elapsed();

    // Throughput through the API, one client.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let resolved = rnx::config::load_node(&node.client_config(), None)?;
    let client = rt.block_on(rnx::client::connect(&resolved))?;
    let before = completed(&node);
    let t1 = Instant::now();
    rt.block_on(async {
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(32));
        let mut tasks = Vec::new();
        for _ in 0..jobs {
            let permit = sem.clone().acquire_owned().await.expect("semaphore");
            let mut c = client.clone();
            tasks.push(tokio::spawn(async move {
                let r = c
                    .run_job(joblet_proto::pb::RunJobRequest {
                        command: "true".into(),
                        ..Default::default()
                    })
                    .await;
                drop(permit);
                r.is_ok()
            }));
        }
        for t in tasks {
            assert!(t.await.expect("task"), "API submission failed");
        }
    });
    let api_acked = t1.elapsed();
    assert!(
        wait_until(Duration::from_secs(600), || completed(&node)
            >= before + jobs),
        "API jobs did not complete"
    );
    let api_done = t1.elapsed();

    println!("\n### Throughput ({jobs} jobs of `true`, jobs.max_running = 64)\n");
    println!("| submitter | submitted/s | completed/s (first submit → last done) |");
    println!("|---|---:|---:|");
    println!(
        "| `rnx job run` CLI, 8 at a time | {:.0} | {:.0} |",
        jobs as f64 / acked.as_secs_f64(),
        jobs as f64 / all_done.as_secs_f64()
    );
    println!(
        "| API, one mTLS client, 32 in flight | {:.0} | {:.0} |",
        jobs as f64 / api_acked.as_secs_f64(),
        jobs as f64 / api_done.as_secs_f64()
    );
    if slurm {
        let t2 = Instant::now();
        submit_all(slurm_jobs, 8, |_| {
            quiet(Command::new("sbatch").args(["--wrap", "true", "-o", "/dev/null"]))
        });
        let s_acked = t2.elapsed();
        let drained = wait_until(Duration::from_secs(1200), || {
            Command::new("squeue")
                .args(["-h"])
                .output()
                .map(|o| o.status.success() && o.stdout.is_empty())
                .unwrap_or(false)
        });
        let s_done = t2.elapsed();
        let sched = std::env::var("SLURM_BENCH_SCHED_PARAMS").unwrap_or_default();
        let label = format!("Slurm `sbatch --wrap true`, 8 at a time ({slurm_jobs} jobs, SchedulerParameters={sched})");
        let done = if drained {
            format!("{:.1}", slurm_jobs as f64 / s_done.as_secs_f64())
        } else {
            "did not drain in 20 min".to_owned()
        };
        println!(
            "| {label} | {:.0} | {done} |",
            slurm_jobs as f64 / s_acked.as_secs_f64()
        );
    }
    Ok(())
}
