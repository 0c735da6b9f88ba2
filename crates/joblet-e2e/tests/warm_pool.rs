//! The pool of warm sandboxes (`sandbox.warm_pool`): jobs take the ids of
//! sandboxes built ahead and start in them, the pool refills, a job the
//! warm sandbox does not fit still runs right, a job stopped before it
//! starts gives its warm shim back, and warm shims go away with their
//! daemon without leaving a process, a directory or a cgroup (a daemon
//! that stops reaps them before it exits).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use joblet_e2e::{cgroup_mounts, Node, NodeOptions};

const POOL: usize = 2;

fn node() -> Node {
    Node::start_with(NodeOptions {
        max_running: 1,
        extra_config: format!("sandbox:\n  warm_pool: {POOL}\n  allow_host_network: true\n"),
        ..Default::default()
    })
    .unwrap()
}

/// Warm shims of `node` that wait for a job: (shim pid, job id), sorted.
/// A warm shim is started with `--warm`; one that got its job has written
/// `job.pid` (or `exit.json`).
fn idle_warm(node: &Node) -> Vec<(i32, String)> {
    let jobs = node.state_dir().join("jobs");
    let mut out = Vec::new();
    for (pid, args) in processes() {
        if args.last().map(String::as_str) != Some("--warm") {
            continue;
        }
        let Some(dir) = args.iter().rev().nth(1).map(PathBuf::from) else {
            continue;
        };
        if dir.parent() != Some(jobs.as_path()) {
            continue;
        }
        if dir.join("job.pid").exists() || dir.join("exit.json").exists() {
            continue;
        }
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.push((pid, id));
    }
    out.sort();
    out
}

/// Every process with its command line, but sandbox inits: a warm shim
/// forks its init, which keeps the shim's command line and is told apart
/// by its name.
fn processes() -> Vec<(i32, Vec<String>)> {
    let mut out = Vec::new();
    for pid in joblet_e2e::pids() {
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() == "sandbox-init" {
            continue;
        }
        let args = raw
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push((pid, args));
    }
    out
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Cgroups named `id` in any hierarchy (job cgroups are named by job id).
fn cgroups_of(id: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for m in cgroup_mounts() {
        for base in std::fs::read_dir(&m).into_iter().flatten().flatten() {
            let d = base.path().join(id);
            if d.is_dir() {
                out.push(d);
            }
        }
    }
    out
}

fn wait_until<T>(what: &str, node: &Node, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            node.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `POOL` idle warm shims whose sandboxes are built.
fn full_pool(node: &Node) -> Vec<(i32, String)> {
    wait_until("a full pool of built warm sandboxes", node, || {
        let w = idle_warm(node);
        let built = |id: &str| {
            std::fs::read_to_string(node.state_dir().join("jobs").join(id).join("shim.log"))
                .is_ok_and(|l| l.contains("warm sandbox prepared"))
        };
        (w.len() == POOL && w.iter().all(|(_, id)| built(id))).then_some(w)
    })
}

#[test]
fn jobs_start_in_warm_sandboxes_and_the_pool_refills() {
    let node = node();
    let warm = full_pool(&node);
    let ids: Vec<&str> = warm.iter().map(|(_, id)| id.as_str()).collect();

    let job = node.run(&["--", "sh", "-c", "hostname; cut -d' ' -f41 /proc/self/stat"]);
    let done = node.wait_done(&job, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
    let out = node.rnx_ok(&["job", "log", &job]);
    assert!(
        ids.contains(&job.as_str()),
        "job {job} did not take a warm id of {ids:?}"
    );
    // Its own hostname, and the normal scheduling class (0), not the
    // pool's SCHED_IDLE (5).
    assert_eq!(out, format!("job-{}\n0\n", &job[..8]));
    let log =
        std::fs::read_to_string(node.state_dir().join("jobs").join(&job).join("shim.log")).unwrap();
    assert!(log.contains("sandboxed job started (warm)"), "{log}");

    // The pool is back to full, with a new sandbox in place of the used one.
    let again = wait_until("the pool to refill", &node, || {
        let w = idle_warm(&node);
        (w.len() == POOL && w.iter().all(|(_, id)| *id != job)).then_some(w)
    });
    assert!(
        again.iter().any(|(_, id)| !ids.contains(&id.as_str())),
        "{again:?}"
    );

    // A job the warm sandbox was not built for (the host's network) gets a
    // fresh one and sees the host's interfaces.
    let out = node.rnx_ok(&[
        "job",
        "run",
        "--follow",
        "--network=host",
        "--",
        "sh",
        "-c",
        "wc -l < /proc/net/dev",
    ]);
    let lines: usize = out.trim().parse().unwrap();
    assert!(
        lines > 3,
        "host network expected, /proc/net/dev has {lines} lines"
    );
}

#[test]
fn a_job_stopped_before_it_starts_gives_its_warm_shim_back() {
    let node = node();
    full_pool(&node);
    // max_running 1: the first job holds the slot, the second queues.
    let first = node.run(&["--", "sleep", "600"]);
    let queued = node.run(&["--", "true"]);
    assert_eq!(node.status(&queued)["state"], "QUEUED");
    let dir = node.state_dir().join("jobs").join(&queued);
    let shim = wait_until("the queued job's warm shim", &node, || {
        processes().into_iter().find_map(|(pid, args)| {
            (args.last().map(String::as_str) == Some("--warm")
                && args.iter().any(|a| Path::new(a) == dir))
            .then_some(pid)
        })
    });
    node.rnx_ok(&["job", "stop", &queued]);
    assert_eq!(node.status(&queued)["state"], "STOPPED");
    wait_until("the discarded warm shim to exit", &node, || {
        (!alive(shim)).then_some(())
    });
    wait_until("its directory and cgroups to go", &node, || {
        (!dir.exists() && cgroups_of(&queued).is_empty()).then_some(())
    });
    node.rnx_ok(&["job", "stop", &first]);
    node.wait_done(&first, Duration::from_secs(30));
}

#[test]
fn warm_shims_go_away_with_their_daemon() {
    let mut node = node();
    let warm = full_pool(&node);
    for (_, id) in &warm {
        assert!(
            !cgroups_of(id).is_empty(),
            "warm sandbox {id} has no cgroup"
        );
    }
    node.kill_daemon();
    for (pid, id) in &warm {
        wait_until("a warm shim of the killed daemon to exit", &node, || {
            (!alive(*pid)).then_some(())
        });
        wait_until("its cgroups to go", &node, || {
            cgroups_of(id).is_empty().then_some(())
        });
    }
    // A restarted daemon removes the directories they leave (a job
    // recorded as started in one, but never given to its shim, is told by
    // them) and builds a new pool; a stopped one takes it along.
    node.restart().unwrap();
    let fresh = full_pool(&node);
    for (_, id) in &warm {
        let dir = node.state_dir().join("jobs").join(id);
        assert!(!dir.exists(), "{} left after the restart", dir.display());
    }
    assert!(fresh.iter().all(|w| !warm.contains(w)), "{fresh:?}");
    // A stopped daemon tears its warm sandboxes down and reaps their shims
    // before it exits: nothing is left for the host's init (which, on some
    // machines, never reaps orphans: they stayed as zombies).
    node.stop_daemon();
    for (pid, id) in &fresh {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "warm shim {pid} outlived its stopped daemon\n{}",
            node.daemon_log()
        );
        let dir = node.state_dir().join("jobs").join(id);
        assert!(
            !dir.exists() && cgroups_of(id).is_empty(),
            "warm sandbox {id} left behind by its stopped daemon"
        );
    }
    assert!(node.daemon_log().contains("warm sandboxes torn down"));
}
