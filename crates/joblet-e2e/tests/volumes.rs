//! Volumes end to end: a 16 MB filesystem volume keeps what one job wrote
//! for the next, refuses writes past its size (ENOSPC) and through `:ro`,
//! survives a daemon restart and a detach (as a reboot leaves it), cannot
//! be removed while a job mounts it; a create without a working loop device
//! fails with the reason and leaves nothing; a memory volume is a sized
//! tmpfs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use joblet_e2e::{Node, NodeOptions};

/// Runs `sh -c script` in a job with `flags`, to its end; returns (exit
/// code, output).
fn sh(node: &Node, flags: &[&str], script: &str) -> (i64, String) {
    let mut args = vec!["job", "run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let id = node.rnx_ok(&args).trim().to_owned();
    let st = node.wait_done(&id, Duration::from_secs(60));
    let log = node.rnx_ok(&["job", "log", &id]);
    let code = st["exit_code"].as_i64().unwrap_or(-1);
    if code == -1 {
        eprintln!("job {id} ended without an exit code: {st}");
    }
    (code, log)
}

/// Loop devices whose backing file lies under `dir`.
fn loops_under(dir: &Path) -> Vec<String> {
    let out = Command::new("losetup")
        .args(["--list", "--noheadings", "--output", "NAME,BACK-FILE"])
        .output()
        .expect("losetup");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&*dir.to_string_lossy()))
        .map(str::to_owned)
        .collect()
}

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&*path.to_string_lossy()))
}

#[test]
fn a_filesystem_volume_keeps_its_data_and_its_size_across_jobs_restarts_and_a_detach() {
    let mut node = Node::start().expect("node");
    let vols = node.state_dir().join("volumes");
    let created = node.rnx_json(&["volume", "create", "data", "--size=16MB"]);
    assert_eq!(created["type"], "filesystem", "{created}");
    assert_eq!(created["size_bytes"], 16 * 1024 * 1024, "{created}");

    // A job writes 10 MB; a later job reads it back.
    let (code, log) = sh(
        &node,
        &["--volume=data"],
        "dd if=/dev/urandom of=/volumes/data/blob bs=1M count=10 2>/dev/null && sha256sum /volumes/data/blob > /volumes/data/blob.sum && echo wrote",
    );
    assert_eq!((code, log.trim()), (0, "wrote"));
    let (code, log) = sh(
        &node,
        &["--volume=data"],
        "cd /volumes/data && sha256sum -c blob.sum && stat -c %s blob",
    );
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("blob: OK") && log.contains("10485760"),
        "{log}"
    );

    // Past its size: ENOSPC.
    let (code, log) = sh(
        &node,
        &["--volume=data"],
        "dd if=/dev/zero of=/volumes/data/more bs=1M count=16 2>&1; rc=$?; rm -f /volumes/data/more; exit $rc",
    );
    assert_ne!(code, 0, "{log}");
    assert!(log.contains("No space left on device"), "{log}");

    // :ro refuses writes and reads the same data.
    let (code, log) = sh(
        &node,
        &["--volume=data:ro"],
        "cat /volumes/data/blob.sum >/dev/null && touch /volumes/data/x 2>&1",
    );
    assert_ne!(code, 0);
    assert!(log.contains("Read-only file system"), "{log}");

    // Listed with its usage, and no job.
    let list = node.rnx_json(&["volume", "list"]);
    let v = &list.as_array().expect("list")[0];
    assert_eq!(v["name"], "data", "{list}");
    assert!(v["used_bytes"].as_u64().unwrap() >= 10 * 1024 * 1024, "{v}");

    // Mounted by a running job: remove is refused, naming the job.
    let id = node.run(&["--volume=data", "--", "sleep", "30"]);
    node.wait_list(Duration::from_secs(20), "the job running", |jobs| {
        jobs.iter()
            .any(|j| j["id"] == id.as_str() && j["state"] == "RUNNING")
    });
    let refused = node.rnx(&["volume", "remove", "data"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("mounted by 1 unfinished job") && err.contains(&id),
        "{err}"
    );
    node.rnx_ok(&["job", "kill", &id]);
    node.wait_done(&id, Duration::from_secs(20));

    // A daemon restart keeps it mounted; a detach (what a reboot leaves)
    // is undone at the next start.
    node.stop_daemon();
    node.restart().expect("restart");
    let data = vols.join("data/data");
    assert!(mounted(&data));
    node.stop_daemon();
    let out = Command::new("umount").arg(&data).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!mounted(&data));
    node.restart().expect("restart after the detach");
    assert!(mounted(&data), "{}", node.daemon_log_tail(20));
    let (code, log) = sh(
        &node,
        &["--volume=data"],
        "cd /volumes/data && sha256sum -c blob.sum",
    );
    assert_eq!(code, 0, "{log}");

    // Removed: nothing left, not even a loop device.
    node.rnx_ok(&["volume", "remove", "data"]);
    assert!(!vols.join("data").exists());
    assert!(loops_under(&vols).is_empty(), "{:?}", loops_under(&vols));
    let out = node.rnx(&["job", "run", "--volume=data", "--", "true"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("volume data does not exist"));
}

#[test]
fn a_job_naming_a_missing_volume_is_refused_before_it_is_recorded() {
    let node = Node::start().expect("node");
    let who = node.rnx_json(&["whoami"]);
    let supported: Vec<&str> = who["supported"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        supported.contains(&"runtime") && supported.contains(&"volume"),
        "{who}"
    );
    let out = node.rnx(&["job", "run", "--volume=nope", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("volume nope does not exist") && err.contains("rnx volume create nope"),
        "{err}"
    );
    assert_eq!(node.rnx_json(&["job", "list"]).as_array().unwrap().len(), 0);
}

#[test]
fn a_create_without_a_loop_device_fails_with_the_reason_and_leaves_nothing() {
    // A losetup that finds no free loop device, first on the daemon's PATH.
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("losetup");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'losetup: cannot find an unused loop device' >&2\nexit 1\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&fake)
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let node = Node::start_with(NodeOptions {
        daemon_env: vec![("PATH".into(), path)],
        ..Default::default()
    })
    .expect("node");
    let vols: PathBuf = node.state_dir().join("volumes");
    let out = node.rnx(&["volume", "create", "data", "--size=16MB"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot find an unused loop device"), "{err}");
    assert!(err.contains("loop"), "{err}");
    assert!(
        !vols.join("data").exists(),
        "left {:?}",
        std::fs::read_dir(&vols).map(|d| d.count())
    );
    assert!(loops_under(&vols).is_empty());
    assert_eq!(node.rnx_json(&["volume", "list"]), serde_json::json!([]));
}

#[test]
fn a_memory_volume_is_a_sized_tmpfs_shared_by_jobs() {
    let node = Node::start().expect("node");
    node.rnx_ok(&["volume", "create", "scratch", "--size=8MB", "--type=memory"]);
    let (code, log) = sh(
        &node,
        &["--volume=scratch"],
        "echo kept > /volumes/scratch/note; dd if=/dev/zero of=/volumes/scratch/big bs=1M count=9 2>&1; rc=$?; rm -f /volumes/scratch/big; exit $rc",
    );
    assert_ne!(code, 0, "{log}");
    assert!(log.contains("No space left on device"), "{log}");
    let (code, log) = sh(&node, &["--volume=scratch"], "cat /volumes/scratch/note");
    assert_eq!((code, log.trim()), (0, "kept"));
    node.rnx_ok(&["volume", "remove", "scratch"]);
}

#[test]
fn viewers_only_read_and_only_owners_mount_an_unshared_volume() {
    let node = Node::start().expect("node");
    node.rnx_ok(&["volume", "create", "team", "--size=4MB"]);
    let bob = node.issue_identity("bob", "viewer");
    let carol = node.issue_identity("carol", "admin");

    let listed = node.rnx_as(&bob, &["volume", "list"]);
    assert!(listed.status.success());
    for args in [
        &["volume", "create", "mine", "--size=4MB"][..],
        &["volume", "remove", "team"],
        &["volume", "share", "team"],
    ] {
        let o = node.rnx_as(&bob, args);
        assert!(!o.status.success(), "viewer {args:?} succeeded");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("permission denied"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // Carol's jobs may not mount the node admin's volume until it is
    // shared, nor remove it without --force.
    let o = node.rnx_as(&carol, &["job", "run", "--volume=team", "--", "true"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("has not shared it") && err.contains("rnx volume share team"),
        "{err}"
    );
    let o = node.rnx_as(&carol, &["volume", "remove", "team"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    node.rnx_ok(&["volume", "share", "team"]);
    let o = node.rnx_as(
        &carol,
        &[
            "job",
            "run",
            "--follow",
            "--volume=team",
            "--",
            "sh",
            "-c",
            "echo hi > /volumes/team/carol && cat /volumes/team/carol",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "hi");
}
