//! Workflows end to end, through `rnx workflow` on a real daemon: a
//! failing middle job cancels exactly its dependents; a diamond runs its
//! two branches at the same time and hands files on through the run's
//! shared volume; `retries: 2` runs a failing job three times then fails
//! (and a job that fails once then succeeds completes); a cycle and a
//! missing dependency are refused with line and column before anything is
//! recorded; `stop` stops what runs and cancels the rest; `delete` takes
//! the jobs, files and volume; and a run survives `kill -9` of the daemon
//! in each stage with no job run twice and none lost. Seed 001's pipeline
//! runs byte for byte in `runtimes.rs` (it needs its runtime).

use std::path::Path;
use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions};
use serde_json::Value;

fn node() -> Node {
    Node::start_with(NodeOptions {
        max_running: 8,
        ..Default::default()
    })
    .expect("node")
}

/// Writes `yaml` as `wf.yaml` in a fresh directory; returns it.
fn workflow_dir(yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wf.yaml"), yaml).unwrap();
    dir
}

/// `rnx workflow run DIR/wf.yaml`; returns the run's id.
fn run(node: &Node, dir: &Path) -> String {
    let file = dir.join("wf.yaml");
    let v = node.rnx_json(&["workflow", "run", file.to_str().unwrap()]);
    v["id"].as_str().expect("an id").to_owned()
}

fn status(node: &Node, id: &str) -> Value {
    node.rnx_json(&["workflow", "status", id])
}

/// Polls until the run is final; returns its last status.
fn wait_final(node: &Node, id: &str, timeout: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        let s = status(node, id);
        let state = s["state"].as_str().unwrap_or_default().to_owned();
        if !["PENDING", "RUNNING"].contains(&state.as_str()) {
            return s;
        }
        assert!(
            t0.elapsed() < timeout,
            "workflow {id} still {state} after {timeout:?}: {s:#}\n{}",
            node.daemon_log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls until job `name` of the run is in `state`.
fn wait_job(node: &Node, id: &str, name: &str, state: &str, timeout: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = try_status(node, id) {
            if job(&s, name)["state"] == state {
                return s;
            }
            assert!(
                t0.elapsed() < timeout,
                "job {name} never {state}: {s:#}\n{}",
                node.daemon_log_tail(30)
            );
        }
        assert!(t0.elapsed() < timeout, "no status of {id}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn try_status(node: &Node, id: &str) -> Result<Value, String> {
    let out = node.rnx(&["--json", "workflow", "status", id]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

fn job<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {s:#}"))
}

fn states(s: &Value) -> Vec<(String, String)> {
    s["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap().to_owned(),
                j["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The node's jobs that belong to run `id`, from `rnx job list`.
fn jobs_of(node: &Node, id: &str) -> Vec<Value> {
    node.rnx_json(&["job", "list"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow_id"] == id)
        .cloned()
        .collect()
}

#[test]
fn a_failing_middle_job_cancels_exactly_its_dependents() {
    let node = node();
    let dir = workflow_dir(
        r#"name: fail-middle
jobs:
  prep:
    command: sh
    args: ["-c", "echo prep"]
  train:
    command: sh
    args: ["-c", "echo bad >&2; exit 3"]
    requires:
      - prep: COMPLETED
  evaluate:
    command: sh
    args: ["-c", "echo evaluate"]
    requires:
      - train: COMPLETED
  publish:
    command: sh
    args: ["-c", "echo publish"]
    requires:
      - evaluate: COMPLETED
  docs:
    command: sh
    args: ["-c", "echo docs"]
    requires:
      - prep: COMPLETED
  report:
    command: sh
    args: ["-c", "echo report"]
    requires:
      - evaluate: ANY
"#,
    );
    let id = run(&node, dir.path());
    let s = wait_final(&node, &id, Duration::from_secs(60));
    let want: Vec<(String, String)> = [
        ("prep", "COMPLETED"),
        ("train", "FAILED"),
        ("evaluate", "CANCELED"),
        ("publish", "CANCELED"),
        ("docs", "COMPLETED"),
        ("report", "COMPLETED"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(states(&s), want, "{s:#}");
    assert_eq!(s["state"], "FAILED", "{s:#}");
    assert!(s["outcome"].as_str().unwrap().contains("train"), "{s:#}");
    assert_eq!(
        job(&s, "evaluate")["reason"],
        "train ended FAILED, needed COMPLETED"
    );
    assert_eq!(
        job(&s, "publish")["reason"],
        "evaluate was canceled, needed COMPLETED (because train ended FAILED)"
    );
    assert_eq!(job(&s, "train")["exit_code"], 3);
    // Canceled jobs never became jobs: four ran, each once.
    assert_eq!(jobs_of(&node, &id).len(), 4);
    // The text view says what the canceled ones wait on.
    let text = node.rnx_ok(&["workflow", "status", &id]);
    assert!(
        text.contains("train ended FAILED, needed COMPLETED"),
        "{text}"
    );
}

#[test]
fn a_diamond_runs_its_branches_together_and_hands_files_on_through_the_shared_volume() {
    let node = node();
    let dir = workflow_dir(
        r#"jobs:
  top:
    command: sh
    args: ["-c", "cat input.txt > $JOBLET_WORKFLOW_SHARED/top.txt && echo $JOBLET_WORKFLOW_JOB $JOBLET_WORKFLOW_ATTEMPT"]
  left:
    command: sh
    args: ["-c", "sleep 1.5; tr a-z A-Z < $JOBLET_WORKFLOW_SHARED/top.txt > $JOBLET_WORKFLOW_SHARED/left.txt"]
    requires: [{top: COMPLETED}]
  right:
    command: sh
    args: ["-c", "sleep 1.5; rev < $JOBLET_WORKFLOW_SHARED/top.txt > $JOBLET_WORKFLOW_SHARED/right.txt; echo scratch > mine.txt"]
    requires: [{top: COMPLETED}]
  bottom:
    command: sh
    args: ["-c", "cat $JOBLET_WORKFLOW_SHARED/left.txt $JOBLET_WORKFLOW_SHARED/right.txt; ls mine.txt 2>&1; echo run $JOBLET_WORKFLOW_ID"]
    requires: [{left: COMPLETED}, {right: COMPLETED}]
"#,
    );
    std::fs::write(dir.path().join("input.txt"), "diamond\n").unwrap();
    let id = run(&node, dir.path());
    let s = wait_final(&node, &id, Duration::from_secs(60));
    assert_eq!(s["state"], "COMPLETED", "{s:#}");
    let (l, r, b) = (job(&s, "left"), job(&s, "right"), job(&s, "bottom"));
    let t = |j: &Value, k: &str| j[k].as_i64().unwrap();
    // The branches overlapped, and the bottom started after both ended.
    assert!(
        t(l, "started_unix_ms") < t(r, "ended_unix_ms")
            && t(r, "started_unix_ms") < t(l, "ended_unix_ms"),
        "branches ran one after the other: {s:#}"
    );
    assert!(t(b, "started_unix_ms") >= t(l, "ended_unix_ms").max(t(r, "ended_unix_ms")));

    let log = |name: &str| {
        let id = job(&s, name)["job_id"].as_str().unwrap().to_owned();
        node.rnx_ok(&["job", "log", &id])
    };
    assert_eq!(log("top").trim(), "top 1");
    let bottom = log("bottom");
    // Files handed on through the shared volume; each job's /work its own.
    assert!(bottom.contains("DIAMOND\n"), "{bottom}");
    assert!(bottom.contains("dnomaid\n"), "{bottom}");
    assert!(
        bottom.contains("No such file"),
        "right's scratch leaked: {bottom}"
    );
    assert!(bottom.contains(&format!("run {id}\n")), "{bottom}");

    // Jobs are listed with their run, and the env names it.
    let listed = jobs_of(&node, &id);
    assert_eq!(listed.len(), 4);
    assert!(listed
        .iter()
        .any(|j| j["workflow_job"] == "bottom" && j["workflow_attempt"] == 1));
    let volume = s["shared_volume"].as_str().unwrap().to_owned();
    assert!(volume.starts_with("wf-"), "{s:#}");
    assert_eq!(
        node.rnx_json(&["volume", "inspect", &volume])["owner"],
        node.rnx_json(&["whoami"])["name"]
    );

    // Delete takes the jobs, the files and the volume.
    let del = node.rnx_json(&["workflow", "delete", &id]);
    assert_eq!(del["jobs_deleted"], 4, "{del}");
    assert!(jobs_of(&node, &id).is_empty());
    assert!(!node.rnx(&["volume", "inspect", &volume]).status.success());
    assert!(!node.state_dir().join("workflows").join(&id).exists());
    assert!(!node.rnx(&["workflow", "status", &id]).status.success());
}

#[test]
fn retries_run_a_failing_job_again_then_fail_and_a_flaky_job_completes() {
    let node = node();
    let dir = workflow_dir(
        r#"jobs:
  always-fails:
    command: sh
    args: ["-c", "echo try; exit 1"]
    retries: 2
    retry_backoff: 200ms
  flaky:
    command: sh
    args: ["-c", "f=$JOBLET_WORKFLOW_SHARED/tries; echo x >> $f; [ $(wc -l < $f) -ge 2 ]"]
    retries: 2
    retry_backoff: 100ms
  after-flaky:
    command: "true"
    requires: [{flaky: COMPLETED}]
"#,
    );
    let id = run(&node, dir.path());
    let s = wait_final(&node, &id, Duration::from_secs(60));
    let fails = job(&s, "always-fails");
    assert_eq!(fails["state"], "FAILED", "{s:#}");
    assert_eq!(fails["attempt"], 3);
    assert_eq!(fails["max_attempts"], 3);
    assert_eq!(fails["attempt_job_ids"].as_array().unwrap().len(), 3);
    let flaky = job(&s, "flaky");
    assert_eq!(flaky["state"], "COMPLETED", "{s:#}");
    assert_eq!(flaky["attempt_job_ids"].as_array().unwrap().len(), 2);
    assert_eq!(job(&s, "after-flaky")["state"], "COMPLETED");
    assert_eq!(s["state"], "FAILED");
    // Attempts are jobs of their own, numbered.
    let mut attempts: Vec<i64> = jobs_of(&node, &id)
        .iter()
        .filter(|j| j["workflow_job"] == "always-fails")
        .map(|j| j["workflow_attempt"].as_i64().unwrap())
        .collect();
    attempts.sort();
    assert_eq!(attempts, [1, 2, 3]);
}

#[test]
fn a_cycle_and_a_missing_dependency_are_refused_with_line_and_column() {
    let node = node();
    let cycle = workflow_dir(
        "jobs:\n  a:\n    command: \"true\"\n    requires: [{c: COMPLETED}]\n  b:\n    command: \"true\"\n    requires: [{a: COMPLETED}]\n  c:\n    command: \"true\"\n    requires: [{b: COMPLETED}]\n",
    );
    let missing = workflow_dir(
        "jobs:\n  a:\n    command: \"true\"\n  b:\n    command: \"true\"\n    requires:\n      - data-prep: COMPLETED\n",
    );
    for (dir, want) in [
        (&cycle, "wf.yaml:4:17: jobs require each other in a cycle"),
        (&missing, "wf.yaml:7:9: job `b` requires `data-prep`"),
    ] {
        let file = dir.path().join("wf.yaml");
        for verb in ["run", "validate"] {
            let out = node.rnx(&["workflow", verb, file.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{verb} accepted it");
            assert!(err.contains(want), "{verb}: {err}");
        }
    }
    // Nothing was recorded or run.
    assert_eq!(node.rnx_json(&["workflow", "list"]), serde_json::json!([]));
    assert_eq!(node.rnx_json(&["job", "list"]), serde_json::json!([]));
    // Files that are fine but ask this node for GPUs it lacks, or more
    // CPU than it offers, are refused by the node at the key that asks,
    // before anything runs.
    let cpus = std::thread::available_parallelism().unwrap().get() * 100 + 100;
    for (yaml, want) in [
        (
            "jobs:\n  a:\n    command: \"true\"\n    resources: {gpu_count: 2}\n".to_owned(),
            "wf.yaml:4:17: job `a` asks for 2 GPUs",
        ),
        (
            format!("resources:\n  max_cpu: {cpus}\njobs:\n  a:\n    command: \"true\"\n"),
            "wf.yaml:2:3: job `a`: resources.max_cpu (the workflow's default)",
        ),
    ] {
        let dir = workflow_dir(&yaml);
        for verb in ["validate", "run"] {
            let out = node.rnx(&[
                "workflow",
                verb,
                dir.path().join("wf.yaml").to_str().unwrap(),
            ]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{verb} accepted {yaml}");
            assert!(err.contains(want), "{verb}: {err}");
        }
    }
    assert_eq!(node.rnx_json(&["workflow", "list"]), serde_json::json!([]));
}

#[test]
fn stop_stops_what_runs_and_cancels_the_rest() {
    let node = node();
    let dir = workflow_dir(
        "jobs:\n  long:\n    command: sleep\n    args: [\"60\"]\n  next:\n    command: \"true\"\n    requires: [{long: COMPLETED}]\n",
    );
    let id = run(&node, dir.path());
    wait_job(&node, &id, "long", "RUNNING", Duration::from_secs(30));
    let stopped = node.rnx_json(&["workflow", "stop", &id]);
    assert_eq!(stopped["stopping"], true, "{stopped:#}");
    let s = wait_final(&node, &id, Duration::from_secs(30));
    assert_eq!(s["state"], "STOPPED", "{s:#}");
    assert_eq!(job(&s, "long")["state"], "STOPPED");
    assert_eq!(job(&s, "next")["state"], "CANCELED");
    assert_eq!(job(&s, "next")["reason"], "the workflow was stopped");
    // A finished run has nothing to stop.
    let out = node.rnx(&["workflow", "stop", &id]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is STOPPED"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The chain `one → two → three`, each appending its name to a log in the
/// shared volume after `secs`; the daemon is killed (`kill -9`) while each
/// runs and while the first's end happens with no daemon at all.
#[test]
fn a_run_survives_kill_9_of_the_daemon_in_each_stage_with_no_job_twice() {
    let mut node = node();
    let step = |name: &str| {
        format!(
            "  {name}:\n    command: sh\n    args: [\"-c\", \"sleep 1.2; echo {name} >> $JOBLET_WORKFLOW_SHARED/log; cat $JOBLET_WORKFLOW_SHARED/log\"]\n"
        )
    };
    let yaml = format!(
        "jobs:\n{}    \n{}    requires: [{{one: COMPLETED}}]\n{}    requires: [{{two: COMPLETED}}]\n",
        step("one"),
        step("two"),
        step("three")
    );
    let dir = workflow_dir(&yaml);
    let id = run(&node, dir.path());

    // Stage 1: killed while `one` runs; `one` ends while no daemon runs.
    wait_job(&node, &id, "one", "RUNNING", Duration::from_secs(30));
    node.kill_daemon();
    std::thread::sleep(Duration::from_millis(1800));
    node.restart().unwrap();
    // Stage 2: killed while `two` runs, restarted at once.
    wait_job(&node, &id, "two", "RUNNING", Duration::from_secs(30));
    node.kill_daemon();
    node.restart().unwrap();
    // Stage 3: killed while `three` runs.
    wait_job(&node, &id, "three", "RUNNING", Duration::from_secs(30));
    node.kill_daemon();
    node.restart().unwrap();

    let s = wait_final(&node, &id, Duration::from_secs(60));
    assert_eq!(s["state"], "COMPLETED", "{s:#}");
    for name in ["one", "two", "three"] {
        assert_eq!(
            job(&s, name)["attempt_job_ids"].as_array().unwrap().len(),
            1,
            "{name} ran more than once: {s:#}"
        );
    }
    assert_eq!(jobs_of(&node, &id).len(), 3);
    let last = job(&s, "three")["job_id"].as_str().unwrap().to_owned();
    assert_eq!(node.rnx_ok(&["job", "log", &last]), "one\ntwo\nthree\n");
}

/// Kills the daemon at several moments right after a run of quick jobs
/// was accepted (while its first attempts are being submitted, queued or
/// just ended), restarts it, and checks after each: every job ran exactly
/// once and the run completed.
#[test]
fn a_run_killed_while_its_jobs_are_being_submitted_loses_none_and_runs_none_twice() {
    let mut node = node();
    let dir = workflow_dir(
        "jobs:\n  a: {command: \"true\"}\n  b: {command: \"true\"}\n  c: {command: \"true\", requires: [{a: COMPLETED}, {b: COMPLETED}]}\n  d: {command: \"true\", requires: [{c: COMPLETED}]}\n  e: {command: \"true\", requires: [{c: COMPLETED}]}\n",
    );
    for delay_ms in [0u64, 15, 40, 80, 150] {
        let id = run(&node, dir.path());
        std::thread::sleep(Duration::from_millis(delay_ms));
        node.kill_daemon();
        node.restart().unwrap();
        let s = wait_final(&node, &id, Duration::from_secs(60));
        assert_eq!(s["state"], "COMPLETED", "killed after {delay_ms} ms: {s:#}");
        for j in s["jobs"].as_array().unwrap() {
            assert_eq!(
                j["attempt_job_ids"].as_array().unwrap().len(),
                1,
                "killed after {delay_ms} ms: {j:#}"
            );
        }
        assert_eq!(jobs_of(&node, &id).len(), 5, "killed after {delay_ms} ms");
    }
}
