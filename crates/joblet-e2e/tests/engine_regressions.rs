//! Regression tests for the daemon's engine, through the real daemon and
//! `rnx` (needs root):
//!
//! 1. A queued job taken off its queue (`rnx job stop`, `kill` or
//!    `delete`), at the head of the queue or behind it, CPU or GPU: the job
//!    behind it starts, runs and completes with its output, and once every
//!    job has ended every GPU is AVAILABLE with no job on it. (It used to
//!    leave the GPU job behind it RUNNING with GPUs ALLOCATED and no
//!    process.) `delete` of a QUEUED job takes it off the queue and deletes
//!    it; a RUNNING job still refuses `delete` with a hint to stop it.
//! 2. `kill -9` restarts while mixed CPU/GPU jobs are submitted: the daemon
//!    always comes back (its start-up sweep used to die on a job cgroup a
//!    surviving shim removed meanwhile), and no job fails its sandbox set-up
//!    because a warm shim of the killed daemon removed its cgroup.
//! 3. A `kill -9` of the daemon as a GPU job ends: after the restart the
//!    job is final, its GPU AVAILABLE (not ALLOCATED to the finished job)
//!    and `rnx gpu offline` accepts it.
//!
//! Jobs that must stay running wait for a gate file the test writes into
//! their work dir (the harness makes `/work` the job's host dir), so
//! nothing waits on a blind sleep.

use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions, SimGpuNode};
use serde_json::Value;

/// How long any single wait of these tests may take.
const T: Duration = Duration::from_secs(30);
/// Daemon log lines shown with a failed assertion.
const TAIL: usize = 80;

/// A job that runs until the test writes `gate` into its work dir.
const GATED: &str = "while [ ! -e gate ]; do sleep 0.05; done; echo A-done";

/// `rnx --json job status`, or `None` when the node does not know the job.
fn try_status(node: &Node, id: &str) -> Option<Value> {
    let out = node.rnx(&["--json", "job", "status", id]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// One line per named job (state, exit code, reason, GPUs) and the
/// daemon log's tail: the context of every assertion below.
fn report(node: &Node, jobs: &[(&str, &str)]) -> String {
    let mut s = String::from("jobs:\n");
    for (name, id) in jobs {
        match try_status(node, id) {
            Some(st) => s.push_str(&format!(
                "  {name} {id}: {} exit {} reason {} gpus {}\n",
                st["state"], st["exit_code"], st["reason"], st["gpus"]["indices"]
            )),
            None => s.push_str(&format!("  {name} {id}: unknown to the node\n")),
        }
    }
    let gpus = node.rnx(&["--json", "gpu", "status"]);
    if gpus.status.success() {
        let v: Value = serde_json::from_slice(&gpus.stdout).unwrap_or_default();
        if let Some(gs) = v["gpus"].as_array() {
            s.push_str("gpus:\n");
            for g in gs {
                s.push_str(&format!(
                    "  GPU {}: {} jobs {}\n",
                    g["index"], g["state"], g["jobs"]
                ));
            }
        }
    }
    s.push_str("daemon log tail:\n");
    s.push_str(&node.daemon_log_tail(TAIL));
    s
}

/// Waits until job `name` is in one of `states`; returns its status.
fn wait_state(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str, states: &[&str]) -> Value {
    let deadline = Instant::now() + T;
    loop {
        let st = try_status(node, id);
        if let Some(st) = &st {
            if st["state"].as_str().is_some_and(|s| states.contains(&s)) {
                return st.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "expected job {name} to be {states:?} within {T:?}, it is {}\n{}",
            st.map_or_else(|| "unknown".into(), |s| s["state"].to_string()),
            report(node, jobs)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_final(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str) -> Value {
    wait_state(node, jobs, name, id, &["COMPLETED", "FAILED", "STOPPED"])
}

/// Job `name` starts, runs and completes (exit 0) with exactly `output`.
fn expect_completed(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str, output: &str) {
    let st = wait_final(node, jobs, name, id);
    assert!(
        st["state"] == "COMPLETED" && st["exit_code"] == 0,
        "expected job {name} to start, run and COMPLETE with exit code 0, got {} exit {} ({})\n{}",
        st["state"],
        st["exit_code"],
        st["reason"],
        report(node, jobs)
    );
    let log = node.rnx_ok(&["job", "log", id]);
    assert_eq!(
        log,
        output,
        "expected job {name}'s log to be exactly its output\n{}",
        report(node, jobs)
    );
}

fn open_gate(node: &Node, id: &str) {
    let work = node.state_dir().join("jobs").join(id).join("work");
    std::fs::write(work.join("gate"), "").expect("writing the gate into the job's work dir");
}

/// Job `name` waits in the queue (a precondition of the scenario).
fn expect_queued(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str) {
    let st = try_status(node, id);
    assert!(
        st.as_ref().is_some_and(|s| s["state"] == "QUEUED"),
        "precondition: expected job {name} to be QUEUED\n{}",
        report(node, jobs)
    );
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    Stop,
    Kill,
    Delete,
}

impl How {
    fn verb(self) -> &'static str {
        match self {
            How::Stop => "stop",
            How::Kill => "kill",
            How::Delete => "delete",
        }
    }
}

/// Takes the QUEUED job `name` off its queue `how`, and checks what is
/// left of it: STOPPED without having started (stop, kill), or gone
/// (delete: it never ran, nothing is lost).
fn remove_queued(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str, how: How) {
    let out = node.rnx(&["job", how.verb(), id]);
    assert!(
        out.status.success(),
        "expected `rnx job {} {name}` of a QUEUED job to be accepted, it failed ({}): {}\n{}",
        how.verb(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim(),
        report(node, jobs)
    );
    if how == How::Delete {
        assert!(
            try_status(node, id).is_none(),
            "expected the deleted QUEUED job {name} to be gone from `rnx job status`\n{}",
            report(node, jobs)
        );
        let list = node.rnx_json(&["job", "list"]);
        assert!(
            !list
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["id"].as_str() == Some(id)),
            "expected the deleted QUEUED job {name} to be gone from `rnx job list`: {list}"
        );
        return;
    }
    let st = wait_final(node, jobs, name, id);
    assert!(
        st["state"] == "STOPPED"
            && st["exit_code"].is_null()
            && st["started_unix_ms"].is_null()
            && st["reason"]
                .as_str()
                .is_some_and(|r| r.contains("before it started")),
        "expected the {}ed QUEUED job {name} to be STOPPED \"stopped before it started\", never started, no exit code; got {st}\n{}",
        how.verb(),
        report(node, jobs)
    );
    assert_eq!(
        node.rnx_ok(&["job", "log", id]),
        "",
        "a job that never started has no output"
    );
}

/// `rnx job delete` of a RUNNING job is refused with a hint to stop it.
fn expect_running_delete_refused(node: &Node, jobs: &[(&str, &str)], name: &str, id: &str) {
    let out = node.rnx(&["job", "delete", id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("rnx job stop"),
        "expected `rnx job delete` of the RUNNING job {name} to be refused with a hint to stop it first; got {} stdout {} stderr {stderr}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        report(node, jobs)
    );
    wait_state(node, jobs, name, id, &["RUNNING"]);
}

/// GPU jobs under `gpu.policy: fifo`: A runs on some GPUs, B waits at the
/// head of the queue for more than are free, C (fits in the free GPUs)
/// waits behind B. B is taken off the queue: C starts at once (while A
/// still runs) and completes; then A completes and every GPU is free.
/// Sizes: the two reproductions (4/8/1 and 6/4/2).
fn gpu_queue_head(how: How) {
    let (a, b, c) = match how {
        How::Kill => (6, 4, 2),
        How::Stop | How::Delete => (4, 8, 1),
    };
    let node = SimGpuNode::start(64, "  policy: fifo\n", "").unwrap();
    let a_id = node.run(&[&format!("--gpu={a}"), "--", "sh", "-c", GATED]);
    wait_state(&node, &[("A", a_id.as_str())], "A", &a_id, &["RUNNING"]);
    let b_id = node.run(&[&format!("--gpu={b}"), "--", "echo", "B-ran"]);
    let c_id = node.run(&[&format!("--gpu={c}"), "--", "echo", "C-ran"]);
    let jobs = [("A", a_id.as_str()), ("B", &b_id), ("C", &c_id)];
    expect_queued(&node, &jobs, "B", &b_id);
    expect_queued(&node, &jobs, "C", &c_id);
    if how == How::Delete {
        expect_running_delete_refused(&node, &jobs, "A", &a_id);
    }

    remove_queued(&node, &jobs, "B", &b_id, how);
    expect_completed(&node, &jobs, "C", &c_id, "C-ran\n");
    let a_st = try_status(&node, &a_id);
    assert!(
        a_st.is_some_and(|s| s["state"] == "RUNNING"),
        "expected A still RUNNING: C must start because B left the queue, not because A ended\n{}",
        report(&node, &jobs)
    );
    open_gate(&node, &a_id);
    expect_completed(&node, &jobs, "A", &a_id, "A-done\n");
    node.wait_gpus_free(T, "every job has ended");
}

/// GPU jobs under fifo, the removed job not at the head: A runs on 6
/// GPUs; B (4) heads the queue, C (8) waits behind it, D (2) behind C. C
/// is taken off the queue; once A ends, B and D run and complete.
fn gpu_queue_middle(how: How) {
    let node = SimGpuNode::start(64, "  policy: fifo\n", "").unwrap();
    let a_id = node.run(&["--gpu=6", "--", "sh", "-c", GATED]);
    wait_state(&node, &[("A", a_id.as_str())], "A", &a_id, &["RUNNING"]);
    let b_id = node.run(&["--gpu=4", "--", "echo", "B-ran"]);
    let c_id = node.run(&["--gpu=8", "--", "echo", "C-ran"]);
    let d_id = node.run(&["--gpu=2", "--", "echo", "D-ran"]);
    let jobs = [
        ("A", a_id.as_str()),
        ("B", &b_id),
        ("C", &c_id),
        ("D", &d_id),
    ];
    for (name, id) in &jobs[1..] {
        expect_queued(&node, &jobs, name, id);
    }

    remove_queued(&node, &jobs, "C", &c_id, how);
    open_gate(&node, &a_id);
    expect_completed(&node, &jobs, "A", &a_id, "A-done\n");
    expect_completed(&node, &jobs, "B", &b_id, "B-ran\n");
    expect_completed(&node, &jobs, "D", &d_id, "D-ran\n");
    node.wait_gpus_free(T, "every job has ended");
}

/// CPU jobs with `jobs.max_running: 1`: A runs, B heads the queue, C waits
/// behind it. B is taken off the queue; once A ends, C runs and completes.
fn cpu_queue_head(how: How) {
    let node = Node::start_with(NodeOptions {
        max_running: 1,
        ..Default::default()
    })
    .unwrap();
    let a_id = node.run(&["--", "sh", "-c", GATED]);
    wait_state(&node, &[("A", a_id.as_str())], "A", &a_id, &["RUNNING"]);
    let b_id = node.run(&["--", "echo", "B-ran"]);
    let c_id = node.run(&["--", "echo", "C-ran"]);
    let jobs = [("A", a_id.as_str()), ("B", &b_id), ("C", &c_id)];
    expect_queued(&node, &jobs, "B", &b_id);
    expect_queued(&node, &jobs, "C", &c_id);
    if how == How::Delete {
        expect_running_delete_refused(&node, &jobs, "A", &a_id);
    }

    remove_queued(&node, &jobs, "B", &b_id, how);
    open_gate(&node, &a_id);
    expect_completed(&node, &jobs, "A", &a_id, "A-done\n");
    expect_completed(&node, &jobs, "C", &c_id, "C-ran\n");
}

/// CPU jobs with `jobs.max_running: 1`: A runs; B, C, D wait in that
/// order. C is taken off the queue; once A ends, B and D run and complete.
fn cpu_queue_middle(how: How) {
    let node = Node::start_with(NodeOptions {
        max_running: 1,
        ..Default::default()
    })
    .unwrap();
    let a_id = node.run(&["--", "sh", "-c", GATED]);
    wait_state(&node, &[("A", a_id.as_str())], "A", &a_id, &["RUNNING"]);
    let b_id = node.run(&["--", "echo", "B-ran"]);
    let c_id = node.run(&["--", "echo", "C-ran"]);
    let d_id = node.run(&["--", "echo", "D-ran"]);
    let jobs = [
        ("A", a_id.as_str()),
        ("B", &b_id),
        ("C", &c_id),
        ("D", &d_id),
    ];
    for (name, id) in &jobs[1..] {
        expect_queued(&node, &jobs, name, id);
    }

    remove_queued(&node, &jobs, "C", &c_id, how);
    open_gate(&node, &a_id);
    expect_completed(&node, &jobs, "A", &a_id, "A-done\n");
    expect_completed(&node, &jobs, "B", &b_id, "B-ran\n");
    expect_completed(&node, &jobs, "D", &d_id, "D-ran\n");
}

macro_rules! queue_case {
    ($name:ident, $scenario:ident, $how:expr) => {
        #[test]
        fn $name() {
            $scenario($how);
        }
    };
}

queue_case!(
    gpu_stop_of_the_queue_head_starts_the_job_behind_it,
    gpu_queue_head,
    How::Stop
);
queue_case!(
    gpu_kill_of_the_queue_head_starts_the_job_behind_it,
    gpu_queue_head,
    How::Kill
);
queue_case!(
    gpu_delete_of_the_queue_head_starts_the_job_behind_it,
    gpu_queue_head,
    How::Delete
);
queue_case!(
    gpu_stop_of_a_queued_job_behind_the_head_strands_nothing,
    gpu_queue_middle,
    How::Stop
);
queue_case!(
    gpu_kill_of_a_queued_job_behind_the_head_strands_nothing,
    gpu_queue_middle,
    How::Kill
);
queue_case!(
    gpu_delete_of_a_queued_job_behind_the_head_strands_nothing,
    gpu_queue_middle,
    How::Delete
);
queue_case!(
    cpu_stop_of_the_queue_head_starts_the_job_behind_it,
    cpu_queue_head,
    How::Stop
);
queue_case!(
    cpu_kill_of_the_queue_head_starts_the_job_behind_it,
    cpu_queue_head,
    How::Kill
);
queue_case!(
    cpu_delete_of_the_queue_head_starts_the_job_behind_it,
    cpu_queue_head,
    How::Delete
);
queue_case!(
    cpu_stop_of_a_queued_job_behind_the_head_strands_nothing,
    cpu_queue_middle,
    How::Stop
);
queue_case!(
    cpu_kill_of_a_queued_job_behind_the_head_strands_nothing,
    cpu_queue_middle,
    How::Kill
);
queue_case!(
    cpu_delete_of_a_queued_job_behind_the_head_strands_nothing,
    cpu_queue_middle,
    How::Delete
);

/// `node.restart()` or a failed assertion with the daemon log's tail.
fn restart(node: &mut Node, what: &str) {
    if let Err(e) = node.restart() {
        panic!("expected the daemon to come back after {what}, it did not: {e:#}");
    }
}

/// Restarts the daemon after a `kill -9`. A daemon that does not come
/// back is a failure, noted in `problems` (with the last line of its log,
/// its error); it is started once more so the test can see the rest of
/// its case through.
fn restart_or_note(node: &mut Node, what: &str, problems: &mut Vec<String>) {
    if let Err(e) = node.restart() {
        let why = format!("{e:#}");
        let last = why.lines().last().unwrap_or("").to_owned();
        problems.push(format!(
            "{what}: expected the daemon to come back after kill -9, it exited during start-up: {last}"
        ));
        restart(node, "a second start after a failed one");
    }
}

/// One job of the restart test: what it was told to do.
struct Planned {
    id: String,
    name: String,
    gpus: u32,
    code: i32,
    output: String,
}

fn submit_planned(node: &Node, i: usize) -> Planned {
    let gpus = if i % 3 == 1 { 1 + (i % 2) as u32 } else { 0 };
    let code = if i % 4 == 3 { 3 } else { 0 };
    let script = format!("echo job-{i}; sleep 0.2; exit {code}");
    let gpu_flag = format!("--gpu={gpus}");
    let mut args: Vec<&str> = Vec::new();
    if gpus > 0 {
        args.push(&gpu_flag);
    }
    args.extend(["--", "sh", "-c", &script]);
    let id = node.run(&args);
    Planned {
        id,
        name: format!("job-{i} ({} GPUs, exit {code})", gpus),
        gpus,
        code,
        output: format!("job-{i}\n"),
    }
}

/// 12 mixed CPU/GPU jobs (`jobs.max_running: 2`, so CPU jobs queue and
/// hold warm sandboxes' ids) submitted around three `kill -9` restarts of
/// the daemon, one of them right after each restart: the daemon comes back
/// every time (a start that fails is noted and retried, so the jobs are
/// still seen through), every job ends as it was told to (exit code,
/// "exited with code N", output), none with a sandbox set-up failure, and
/// then every GPU is AVAILABLE with no job.
#[test]
fn kill_9_restarts_amid_submissions_keep_the_daemon_and_every_job() {
    let mut node = SimGpuNode::start(2, "", "").unwrap();
    let mut planned = Vec::new();
    let mut problems = Vec::new();
    let mut i = 0;
    for round in 1..=3 {
        for _ in 0..3 {
            planned.push(submit_planned(&node, i));
            i += 1;
        }
        node.kill_daemon();
        restart_or_note(&mut node, &format!("kill -9 #{round}"), &mut problems);
        planned.push(submit_planned(&node, i));
        i += 1;
    }
    let names: Vec<(&str, &str)> = planned
        .iter()
        .map(|p| (p.name.as_str(), p.id.as_str()))
        .collect();
    for p in &planned {
        let st = wait_final(&node, &names, &p.name, &p.id);
        let reason = st["reason"].as_str().unwrap_or("");
        let want_state = if p.code == 0 { "COMPLETED" } else { "FAILED" };
        let want_reason = format!("exited with code {}", p.code);
        if st["state"] != want_state || st["exit_code"] != p.code || reason != want_reason {
            problems.push(format!(
                "{}: expected {want_state} exit {} \"{want_reason}\", got {} exit {} \"{reason}\"",
                p.name, p.code, st["state"], st["exit_code"]
            ));
            continue;
        }
        let log = node.rnx_ok(&["job", "log", &p.id]);
        if log != p.output {
            problems.push(format!(
                "{}: expected log {:?}, got {log:?}",
                p.name, p.output
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "kill -9 restarts amid submissions of {} jobs: {} problems (a sandbox set-up ENOENT means a leftover shim removed the job's cgroup):\n{}\n{}",
        planned.len(),
        problems.len(),
        problems.join("\n"),
        report(&node, &names)
    );
    assert!(planned.iter().any(|p| p.gpus > 0), "the mix has GPU jobs");
    node.wait_gpus_free(T, "every job has ended");
}

/// A 1-GPU job that sleeps 0.3 s; the daemon is `kill -9`ed around the
/// job's end (from just before to just after, measured from its recorded
/// start), then restarted: the daemon comes back, the job is COMPLETED,
/// its GPU AVAILABLE with no job, and `rnx gpu offline` of it is accepted
/// (then it goes back online). Seven tries with different timings, each
/// on the GPUs the previous ones left; while each job runs, its GPU lists
/// it alone (a GPU left held by a finished job must not be handed out
/// again either). Every try's problems are reported together.
#[test]
fn a_kill_9_as_a_gpu_job_ends_leaves_its_gpu_available_after_restart() {
    let mut node = SimGpuNode::start(64, "", "").unwrap();
    let mut problems = Vec::new();
    for (n, after_ms) in [280u64, 300, 310, 320, 330, 345, 360]
        .into_iter()
        .enumerate()
    {
        let id = node.run(&["--gpu=1", "--", "sh", "-c", "sleep 0.3"]);
        let name = format!("try {n} (kill {after_ms} ms after start)");
        let jobs = [(name.as_str(), id.as_str())];
        let st = wait_state(
            &node,
            &jobs,
            &name,
            &id,
            &["RUNNING", "COMPLETED", "FAILED", "STOPPED"],
        );
        let started = st["started_unix_ms"]
            .as_u64()
            .expect("a started job has a start time");
        // While it runs, its GPU is its own: listed with it alone.
        if let (Some("RUNNING"), Some(gpu)) =
            (st["state"].as_str(), st["gpus"]["indices"][0].as_u64())
        {
            let g = node.gpus()[gpu as usize].clone();
            if g["jobs"] != serde_json::json!([id]) {
                problems.push(format!(
                    "{name}: expected the RUNNING job {id}'s GPU {gpu} to list that job alone, it is {} with jobs {} (placed on a GPU another job holds)",
                    g["state"], g["jobs"]
                ));
            }
        }
        let kill_at = std::time::UNIX_EPOCH + Duration::from_millis(started + after_ms);
        if let Ok(wait) = kill_at.duration_since(std::time::SystemTime::now()) {
            std::thread::sleep(wait);
        }
        node.kill_daemon();
        restart_or_note(&mut node, &name, &mut problems);

        let st = wait_final(&node, &jobs, &name, &id);
        if st["state"] != "COMPLETED" || st["exit_code"] != 0 {
            problems.push(format!(
                "{name}: expected COMPLETED exit 0, got {} exit {} ({})",
                st["state"], st["exit_code"], st["reason"]
            ));
        }
        let Some(gpu) = st["gpus"]["indices"][0].as_u64() else {
            problems.push(format!("{name}: no GPU recorded: {st}"));
            continue;
        };
        // The release check may take its time; the GPU still held (or
        // listing the finished job) after it is the bug.
        let deadline = Instant::now() + Duration::from_secs(10);
        let free = |g: &Value| {
            g["state"] == "AVAILABLE" && g["jobs"].as_array().is_some_and(|j| j.is_empty())
        };
        let mut g = node.gpus()[gpu as usize].clone();
        while !free(&g) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            g = node.gpus()[gpu as usize].clone();
        }
        if !free(&g) {
            problems.push(format!(
                "{name}: expected GPU {gpu} AVAILABLE with no job 10 s after job {id} ended ({}), it is {} ({}) with jobs {}",
                st["state"], g["state"], g["state_cause"], g["jobs"]
            ));
        }
        let gpu_id = gpu.to_string();
        let off = node.rnx(&["gpu", "offline", "--gpu-id", &gpu_id]);
        if !off.status.success() {
            problems.push(format!(
                "{name}: expected `rnx gpu offline --gpu-id {gpu}` to be accepted, it failed: {}",
                String::from_utf8_lossy(&off.stderr).trim()
            ));
            continue;
        }
        let on = node.rnx(&["gpu", "online", "--gpu-id", &gpu_id]);
        if !on.status.success() {
            problems.push(format!(
                "{name}: expected `rnx gpu online --gpu-id {gpu}` to be accepted, it failed: {}",
                String::from_utf8_lossy(&on.stderr).trim()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "GPU jobs whose end met a kill -9 of the daemon:\n{}\ndaemon log tail:\n{}",
        problems.join("\n"),
        node.daemon_log_tail(TAIL)
    );
    node.wait_gpus_free(T, "every job has ended and every GPU is back online");
}
