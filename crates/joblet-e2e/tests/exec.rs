//! `rnx job exec`: a process inside a running job, never with more than
//! the job has. On a node with simulated GPUs: inside a 2-GPU job the
//! exec runs as the job's uid, sees exactly the job's GPU nodes (they
//! open with ENXIO: the device filter lets them through to the absent
//! driver), runs under seccomp with no new privileges and no capabilities;
//! a viewer and another owner are refused, the node's admin is not; every
//! exec is in the audit with who, what and its exit code; an ended job and
//! one being stopped are refused with a clear error. Needs root.

use std::time::{Duration, Instant};

use joblet_e2e::{Node, SimGpuNode};

/// Waits until the job's own process has printed `needle`.
fn wait_log(node: &Node, id: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = String::from_utf8_lossy(&node.rnx(&["job", "log", id]).stdout).into_owned();
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} not in job {id}'s log: {log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const PROBE: &str = "echo UID=$(id -u); ls /dev | grep nvidia | tr '\\n' ' '; echo; \
                     for n in /dev/nvidia[0-9]*; do cat $n 2>&1; done; \
                     grep -E 'Seccomp|NoNewPrivs|CapEff' /proc/self/status";

#[test]
fn an_exec_in_a_two_gpu_job_has_exactly_the_jobs_uid_gpus_and_restrictions() {
    let node = SimGpuNode::start(4, "", "").expect("node");
    let id = node.run(&[
        "--gpu=2",
        "--",
        "sh",
        "-c",
        "echo JOB-UID=$(id -u); ls /dev | grep nvidia | tr '\\n' ' '; echo; echo LISTED; sleep 60",
    ]);
    let job_log = wait_log(&node, &id, "LISTED");
    let job_uid = job_log
        .lines()
        .find_map(|l| l.strip_prefix("JOB-UID="))
        .unwrap()
        .trim()
        .to_string();
    let job_nodes = job_log.lines().nth(1).unwrap().trim().to_string();

    let out = node.rnx(&["job", "exec", &id, "--", "sh", "-c", PROBE]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("UID={job_uid}")),
        "the job's uid {job_uid}: {text}"
    );
    // Exactly the job's nodes: two GPUs, the control node and uvm.
    let nodes = text.lines().nth(1).unwrap().trim().to_string();
    assert_eq!(nodes, job_nodes, "{text}");
    let gpus: Vec<&str> = nodes
        .split(' ')
        .filter(|n| n.len() == 7 && n.starts_with("nvidia"))
        .collect();
    assert_eq!(gpus.len(), 2, "{nodes}");
    for g in &gpus {
        assert!(
            text.contains(&format!("/dev/{g}: No such device or address")),
            "{g} opens (ENXIO): {text}"
        );
    }
    assert!(!text.contains("Operation not permitted"), "{text}");
    assert!(text.contains("Seccomp:\t2"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");

    // The command's code is rnx's; a missing command is 127.
    assert_eq!(
        node.rnx(&["job", "exec", &id, "--", "sh", "-c", "exit 7"])
            .status
            .code(),
        Some(7)
    );
    let missing = node.rnx(&["job", "exec", &id, "--", "no-such-program"]);
    assert_eq!(missing.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("command not found"));

    // Every exec is in the audit: who, what, how it ended.
    let execs = node.rnx_json(&["job", "execs", &id]);
    let execs = execs.as_array().unwrap();
    assert!(execs.len() >= 3, "{execs:?}");
    assert_eq!(execs[0]["caller"], "admin");
    assert_eq!(execs[0]["command"][0], "sh");
    assert_eq!(execs[0]["exit_code"], 0);
    assert_eq!(execs[1]["exit_code"], 7);
    assert_eq!(execs[2]["exit_code"], 127);
    assert!(execs
        .iter()
        .all(|e| e["ended_ms"].as_i64().unwrap() >= e["started_ms"].as_i64().unwrap()));
    // A client that goes away takes its command with it.
    let mut gone = node
        .rnx_cmd()
        .args([
            "job",
            "exec",
            &id,
            "--",
            "sh",
            "-c",
            "echo PID=$$; exec sleep 300",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        use std::io::BufRead;
        std::io::BufReader::new(gone.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
    }
    let pid = first
        .trim()
        .strip_prefix("PID=")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_string();
    gone.kill().unwrap();
    let _ = gone.wait();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let probe = node.rnx(&[
            "job",
            "exec",
            &id,
            "--",
            "test",
            "-e",
            &format!("/proc/{pid}"),
        ]);
        if probe.status.code() == Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the exec's command {pid} outlived its client"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    node.rnx_ok(&["job", "kill", &id]);
}

#[test]
fn viewers_and_other_owners_are_refused_the_nodes_admin_is_not() {
    let node = Node::start().expect("node");
    let viewer = node.issue_identity("val", "viewer");
    let bob = node.issue_identity("bob", "admin");
    let admins_job = node.run(&["--", "sleep", "60"]);
    let bobs_job = String::from_utf8_lossy(
        &node
            .rnx_as(&bob, &["job", "run", "--", "sleep", "60"])
            .stdout,
    )
    .trim()
    .to_string();
    wait_log(&node, &admins_job, "");

    let v = node.rnx_as(&viewer, &["job", "exec", &admins_job, "--", "true"]);
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(!v.status.success() && err.contains("viewer"), "{err}");
    let b = node.rnx_as(&bob, &["job", "exec", &admins_job, "--", "true"]);
    let err = String::from_utf8_lossy(&b.stderr);
    assert!(
        !b.status.success() && err.contains("another user's job"),
        "{err}"
    );
    // Bob in his own job, and the node's admin in Bob's.
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.status(&bobs_job)["state"] != "RUNNING" {
        assert!(Instant::now() < deadline, "bob's job never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let own = node.rnx_as(&bob, &["job", "exec", &bobs_job, "--", "true"]);
    assert!(
        own.status.success(),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    node.rnx_ok(&["job", "exec", &bobs_job, "--", "true"]);
    // Refused execs leave no record; the two that ran do.
    assert_eq!(
        node.rnx_json(&["job", "execs", &admins_job])
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let execs = node.rnx_json(&["job", "execs", &bobs_job]);
    let callers: Vec<&str> = execs
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["bob", "admin"]);
    node.rnx_ok(&["job", "kill", &admins_job]);
    node.rnx_ok(&["job", "kill", &bobs_job]);
}

#[test]
fn an_ended_job_and_one_being_stopped_are_refused_by_name() {
    let node = Node::start().expect("node");
    let done = node.run(&["--", "true"]);
    node.wait_done(&done, Duration::from_secs(20));
    let out = node.rnx(&["job", "exec", &done, "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("COMPLETED") && err.contains("running job"),
        "{err}"
    );

    // A job that ignores SIGTERM stays in its grace period after a stop.
    let slow = node.run(&["--", "sh", "-c", "trap '' TERM; echo READY; sleep 60"]);
    wait_log(&node, &slow, "READY");
    node.rnx_ok(&["job", "stop", "--grace=30s", &slow]);
    let out = node.rnx(&["job", "exec", &slow, "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("being stopped"),
        "{err}"
    );
    node.rnx_ok(&["job", "kill", &slow]);
}
