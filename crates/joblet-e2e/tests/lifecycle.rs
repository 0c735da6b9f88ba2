//! Job lifecycle through the real binaries: run, status, list, log, stop,
//! kill, delete, timeouts, queueing, and refusal of what the node cannot enforce.

use std::time::Duration;

use joblet_e2e::{Node, NodeOptions};

const T: Duration = Duration::from_secs(30);

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_status_log_list_delete() {
    let node = Node::start().unwrap();
    let id = node.run(&[
        "-e",
        "GREETING=hi",
        "-s",
        "TOKEN=s3cret",
        "--",
        "sh",
        "-c",
        "echo $GREETING; echo to-err >&2; exit 3",
    ]);
    assert_eq!(id.len(), 36, "job run prints the id: {id:?}");

    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "FAILED", "{st}");
    assert_eq!(st["exit_code"], 3, "{st}");
    assert_eq!(st["owner"], "admin");
    assert_eq!(st["env"]["GREETING"], "hi");
    assert_eq!(st["secret_env"]["TOKEN"], "***");
    assert!(
        !st.to_string().contains("s3cret"),
        "secret leaked in status: {st}"
    );
    let states: Vec<&str> = st["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["to"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["PENDING", "QUEUED", "RUNNING", "FAILED"]);

    // Output: stdout and stderr kept apart.
    let out = node.rnx(&["job", "log", &id]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(stderr(&out), "to-err\n");

    // Any unique prefix works.
    assert_eq!(node.status(&id[..6])["id"], id.as_str());
    let list = node.rnx_json(&["job", "list"]);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["id"] == id.as_str()));
    let human = node.rnx_ok(&["job", "list"]);
    assert!(
        human.contains(&id[..8]) && human.contains("FAILED"),
        "{human}"
    );

    node.rnx_ok(&["job", "delete", &id[..8]]);
    let gone = node.rnx(&["job", "status", &id]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("no job"), "{}", stderr(&gone));
    assert!(
        !node.state_dir().join("jobs").join(&id).exists(),
        "job dir removed"
    );
}

#[test]
fn follow_streams_output_and_exits_with_the_job_code() {
    let node = Node::start().unwrap();
    let out = node.rnx(&[
        "job",
        "run",
        "--follow",
        "--",
        "sh",
        "-c",
        "echo out; sleep 0.3; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    // All of it on the one RunJobFollow stream: no reconnection.
    assert_eq!(stderr(&out), "err\n");

    // Seed 001 syntax without `--`: the job's own flags stay the job's.
    let out = node.rnx(&[
        "job",
        "run",
        "-f",
        "sh",
        "-c",
        "echo \"$0 $1\"",
        "--batch-size=64",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--batch-size=64 x\n");

    // A command that does not exist: FAILED with the OS error, rnx exits 125.
    let out = node.rnx(&["job", "run", "-f", "--", "/nonexistent/prog"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("No such file"), "{}", stderr(&out));
}

#[test]
fn stop_kill_and_timeout() {
    let node = Node::start().unwrap();
    let wait_running = |id: &str| {
        let deadline = std::time::Instant::now() + T;
        while node.status(id)["state"] != "RUNNING" {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Polite job: exits on SIGTERM.
    let polite = node.run(&["--", "sleep", "60"]);
    wait_running(&polite);
    node.rnx_ok(&["job", "stop", &polite]);
    let st = node.wait_done(&polite, T);
    assert_eq!(st["state"], "STOPPED", "{st}");

    // Stubborn job: ignores SIGTERM, gets SIGKILL after the grace period.
    let stubborn = node.run(&[
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo ready; while true; do sleep 0.1; done",
    ]);
    wait_running(&stubborn);
    std::thread::sleep(Duration::from_millis(200));
    let t0 = std::time::Instant::now();
    node.rnx_ok(&["job", "stop", "--grace", "1s", &stubborn]);
    let st = node.wait_done(&stubborn, T);
    assert_eq!(
        (st["state"].as_str(), st["exit_code"].as_i64()),
        (Some("STOPPED"), Some(137)),
        "{st}"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "SIGKILL came before the grace period"
    );

    let killed = node.run(&["--", "sleep", "60"]);
    wait_running(&killed);
    node.rnx_ok(&["job", "kill", &killed]);
    let st = node.wait_done(&killed, T);
    assert_eq!(
        (st["state"].as_str(), st["exit_code"].as_i64()),
        (Some("STOPPED"), Some(137)),
        "{st}"
    );

    // Stopping a finished job says so.
    let again = node.rnx(&["job", "stop", &killed]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already finished"),
        "{}",
        stderr(&again)
    );

    let slow = node.run(&["--timeout", "1s", "--", "sleep", "30"]);
    let st = node.wait_done(&slow, T);
    assert_eq!(st["state"], "FAILED", "{st}");
    assert!(st["reason"].as_str().unwrap().contains("timed out"), "{st}");
}

#[test]
fn queued_jobs_wait_for_a_slot_and_can_be_cancelled() {
    let node = Node::start_with(NodeOptions {
        max_running: 1,
        ..Default::default()
    })
    .unwrap();
    let first = node.run(&["--", "sleep", "30"]);
    let second = node.run(&["--", "sleep", "30"]);
    assert_eq!(node.status(&second)["state"], "QUEUED");
    node.rnx_ok(&["job", "stop", &second]);
    let st = node.status(&second);
    assert_eq!(st["state"], "STOPPED");
    assert_eq!(st["reason"], "stopped before it started");
    let third = node.run(&["--", "true"]);
    node.rnx_ok(&["job", "kill", &first]);
    let done = node.wait_done(&third, T);
    assert_eq!(done["state"], "COMPLETED", "{done}\n{}", node.daemon_log());
}

fn assert_refused(node: &Node, flag_sets: &[&[&str]]) {
    // RunJob, and RunJobFollow (`--follow`), refuse alike.
    for flags in flag_sets {
        for follow in [&[][..], &["--follow"]] {
            let mut args = vec!["job", "run"];
            args.extend_from_slice(follow);
            args.extend_from_slice(flags);
            args.extend(["--", "true"]);
            let out = node.rnx(&args);
            assert_eq!(out.status.code(), Some(1), "{args:?}");
            assert!(
                stderr(&out).contains("not supported yet on this node"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
    assert_eq!(
        node.rnx_json(&["job", "list"]).as_array().unwrap().len(),
        0,
        "refused jobs must not be recorded"
    );
}

#[test]
fn what_the_node_cannot_enforce_is_refused_and_nothing_is_recorded() {
    let node = Node::start().unwrap();
    assert_refused(&node, &[&["--gpu=1"], &["--gpu=2", "--gpu-memory=8GB"]]);
    // Without the sandbox no limit can be enforced, so none is accepted.
    let bare = Node::start_with(NodeOptions {
        extra_config: "sandbox:\n  enabled: false\n".into(),
        ..Default::default()
    })
    .unwrap();
    assert_refused(
        &bare,
        &[
            &["--max-memory=512"],
            &["--max-cpu=50"],
            &["--cpu-cores=0"],
            &["--max-iobps=1000000"],
            // Runtimes and volumes are mounts in the sandbox.
            &["--runtime=python-3.11-ml"],
            &["--volume=data-lake"],
        ],
    );
    let who = bare.rnx_ok(&["whoami"]);
    assert!(
        who.contains("env, secret_env, timeout") && !who.contains("max_memory"),
        "{who}"
    );
}

/// `jobs.default_timeout` is the node's limit: a job that gives no
/// timeout, or 0, gets it, and a job's own can only be shorter.
#[test]
fn the_node_default_timeout_is_a_limit_a_job_can_only_shorten() {
    let node = Node::start_with(NodeOptions {
        extra_config: "  default_timeout: 1s\n".into(),
        ..Default::default()
    })
    .unwrap();
    let defaulted = node.run(&["--", "sleep", "30"]);
    let zero = node.run(&["--timeout", "0", "--", "sleep", "30"]);
    let longer = node.run(&["--timeout", "1h", "--", "sleep", "30"]);
    for id in [&defaulted, &zero, &longer] {
        let st = node.wait_done(id, T);
        assert_eq!(st["state"], "FAILED", "{st}");
        assert!(st["reason"].as_str().unwrap().contains("timed out"), "{st}");
        assert_eq!(st["timeout_seconds"], 1, "{st}");
        assert_eq!(st["timeout_ms"], 1000, "{st}");
    }
    let quick = node.run(&["--timeout", "30s", "--", "true"]);
    assert_eq!(node.wait_done(&quick, T)["state"], "COMPLETED");
}
