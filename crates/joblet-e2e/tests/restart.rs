//! `kill -9` of the daemon with 20 running and 20 queued jobs: after a
//! restart all 40 are accounted for, with complete logs and the right exit
//! codes; a `job log -f` that was following across the restart saw every
//! byte exactly once; a job whose shim vanished while the daemon was down
//! is FAILED "lost while daemon was down".

use std::process::Stdio;
use std::time::{Duration, Instant};

use joblet_e2e::{read_pid_file, Node, NodeOptions};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The job whose shim is killed while the daemon is down.
const LOST: usize = 3;

/// Job `i` prints a line, waits for a file `gate` in its working directory
/// (created once the daemon is dead), then prints more. Even jobs finish
/// while the daemon is down; odd ones outlive its restart.
fn script(i: usize) -> (String, String) {
    if i == LOST {
        // Silent after the gate, so it cannot die of a broken pipe when its
        // shim is killed: only the restarted daemon can end it.
        return (
            "echo start; while [ ! -e gate ]; do sleep 0.05; done; exec sleep 600".to_owned(),
            String::new(),
        );
    }
    let loops = if i.is_multiple_of(2) { 3 } else { 25 };
    let cmd = format!(
        "echo start-{i}; while [ ! -e gate ]; do sleep 0.05; done; for k in $(seq 1 {loops}); do echo line-{i}-$k; sleep 0.2; done; echo end-{i}; exit {}",
        i % 5
    );
    let mut expect = format!("start-{i}\n");
    for k in 1..=loops {
        expect.push_str(&format!("line-{i}-{k}\n"));
    }
    expect.push_str(&format!("end-{i}\n"));
    (cmd, expect)
}

#[test]
fn forty_jobs_survive_kill_9_of_the_daemon() {
    let mut node = Node::start_with(NodeOptions {
        max_running: 20,
        ..Default::default()
    })
    .unwrap();
    let mut jobs = Vec::new();
    for i in 0..40 {
        let (cmd, expect) = script(i);
        let id = node.run(&["--", "sh", "-c", &cmd]);
        jobs.push((id, expect, i));
    }
    node.wait_list(Duration::from_secs(30), "20 running + 20 queued", |l| {
        let n = |s: &str| l.iter().filter(|j| j["state"] == s).count();
        n("RUNNING") == 20 && n("QUEUED") == 20
    });

    // A follower on a long-running job, reading across the restart.
    let (follow_id, follow_expect, _) = jobs[1].clone();
    let follower = node
        .rnx_cmd()
        .args(["job", "log", "-f", &follow_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));

    node.kill_daemon();
    // While the daemon is down, job 3's shim dies; its job is left running,
    // unsupervised: the restarted daemon must report it lost and kill it.
    let lost_dir = node.state_dir().join("jobs").join(&jobs[LOST].0);
    let job_pid = read_pid_file(&lost_dir.join("job.pid")).expect("job 3 is running");
    let shim_pid = read_pid_file(&lost_dir.join("shim.pid")).expect("job 3's shim is running");
    kill(Pid::from_raw(shim_pid), Signal::SIGKILL).unwrap();
    // Open every job's gate (queued jobs find theirs when they start).
    for (id, _, _) in &jobs {
        let work = node.state_dir().join("jobs").join(id).join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("gate"), "").unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    node.restart().unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    let list = node.wait_list(Duration::from_secs(120), "all 40 jobs final", |l| {
        l.len() == 40
            && l.iter()
                .all(|j| matches!(j["state"].as_str(), Some("COMPLETED" | "FAILED")))
    });
    assert!(Instant::now() < deadline);
    assert_eq!(list.len(), 40);

    for (id, expect, i) in &jobs {
        let st = node.status(id);
        if *i == LOST {
            assert_eq!(st["state"], "FAILED", "{st}");
            assert!(
                st["reason"]
                    .as_str()
                    .unwrap()
                    .contains("lost while daemon was down"),
                "{st}"
            );
            continue;
        }
        let code = (i % 5) as i64;
        assert_eq!(st["exit_code"].as_i64(), Some(code), "job {i}: {st}");
        assert_eq!(
            st["state"],
            if code == 0 { "COMPLETED" } else { "FAILED" },
            "job {i}: {st}"
        );
        let log = node.rnx_ok(&["job", "log", id]);
        assert_eq!(&log, expect, "job {i} log");
    }

    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "follower: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        follow_expect,
        "follower saw every byte exactly once"
    );
    assert!(node.daemon_log().contains("reattached to running job"));
    assert_eq!(
        read_pid_file(&lost_dir.join("job.pid")),
        None,
        "the lost job's process {job_pid} was killed"
    );
}
