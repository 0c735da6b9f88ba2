//! What the node cleans up after jobs and after itself: a finished job's
//! work directory after `jobs.work_retention` (its log stays), a job whose
//! directory is removed under it ends FAILED saying so, and a clean daemon
//! stop leaves no cgroup base directory or lock file behind.

use std::path::Path;
use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions};

const T: Duration = Duration::from_secs(30);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + T;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_finished_jobs_work_dir_goes_after_the_retention_and_its_log_stays() {
    let node = Node::start_with(NodeOptions {
        extra_config: "  work_retention: 1s\n".into(),
        ..Default::default()
    })
    .unwrap();
    let id = node.run(&["--", "sh", "-c", "echo kept > /work/result.txt; echo hello"]);
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let work = node.state_dir().join("jobs").join(&id).join("work");
    wait_until("the work dir to go", || !work.exists());
    let log = node.rnx_ok(&["job", "log", &id]);
    assert_eq!(log, "hello\n", "the log stays");
}

#[test]
fn a_job_whose_directory_is_removed_under_it_fails_saying_so() {
    let node = Node::start().unwrap();
    let id = node.run(&["--", "sleep", "1"]);
    let dir = node.state_dir().join("jobs").join(&id);
    wait_until("the job to run", || node.status(&id)["state"] == "RUNNING");
    // The shim may create a file in it meanwhile (its log, say): the
    // removal is tried again until the directory is gone.
    wait_until(
        "the job directory to be removed",
        || match std::fs::remove_dir_all(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => false,
            Err(e) => panic!("removing {}: {e}", dir.display()),
        },
    );
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "FAILED", "{st}");
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .contains("job directory was removed while it ran"),
        "{st}"
    );
}

#[test]
fn a_clean_stop_leaves_no_cgroup_base_or_lock_file() {
    let mut node = Node::start().unwrap();
    let base = node
        .cgroup_base()
        .expect("the harness chose the base")
        .0
        .clone();
    let id = node.run(&["--", "true"]);
    node.wait_done(&id, T);
    assert!(
        !node.cgroup_base().unwrap().dirs().is_empty(),
        "the running daemon has its cgroup base"
    );
    node.stop_daemon();
    let left = node.cgroup_base().unwrap().dirs();
    assert!(
        left.is_empty(),
        "cgroup base dirs left after a clean stop: {left:?}"
    );
    let lock = Path::new("/run/joblet").join(format!("cgroup-{base}.lock"));
    assert!(!lock.exists(), "{} left after a clean stop", lock.display());
}
