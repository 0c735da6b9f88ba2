//! A job that fills the node's state disk: its outcome (COMPLETED, exit
//! code 0) is recorded anyway, with how much output was discarded; new jobs
//! are refused with a clear error while the disk is full, and accepted
//! again once there is room; the outcome survives a restart.

use std::time::Duration;

use joblet_e2e::{Node, NodeOptions};

const T: Duration = Duration::from_secs(60);

#[test]
fn a_job_that_fills_the_state_disk_keeps_its_outcome_and_new_jobs_wait_for_room() {
    let mut node = Node::start_with(NodeOptions {
        state_tmpfs_mb: Some(24),
        extra_config: "  min_free_disk_mb: 2\n  state_reserve_mb: 4\n".into(),
        ..Default::default()
    })
    .unwrap();
    assert!(
        node.state_dir().join("reserve").is_file(),
        "the daemon keeps a reserve on its state disk"
    );
    let who = node.rnx_json(&["whoami"]);
    assert!(
        who["state_disk"]["free_bytes"].as_u64().unwrap() > 0,
        "whoami reports the state disk: {who}"
    );

    // 40 MB of output on a 24 MiB disk, then a clean exit.
    let id = node.run(&[
        "--",
        "sh",
        "-c",
        "head -c 40000000 /dev/zero; echo done >&2",
    ]);
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    assert_eq!(st["exit_code"], 0, "{st}");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.contains("output truncated")
            && reason.contains("bytes discarded")
            && reason.contains("No space left on device"),
        "{st}"
    );

    // Full: a new job is refused, naming the disk and what to do.
    let out = node.rnx(&["job", "run", "--", "true"]);
    assert!(!out.status.success(), "a job was accepted on a full disk");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No room for new jobs") && err.contains("rnx job delete"),
        "{err}"
    );

    // The outcome survives a restart.
    node.kill_daemon();
    node.restart().unwrap();
    let st = node.status(&id);
    assert_eq!(
        (st["state"].as_str(), st["exit_code"].as_i64()),
        (Some("COMPLETED"), Some(0)),
        "{st}"
    );

    // Room again (the job's output goes with it): jobs run again.
    node.rnx_ok(&["job", "delete", &id]);
    let deadline = std::time::Instant::now() + T;
    let ok = loop {
        let out = node.rnx(&["job", "run", "--follow", "--", "echo", "room"]);
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused after the disk was freed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(ok.trim(), "room");
}
