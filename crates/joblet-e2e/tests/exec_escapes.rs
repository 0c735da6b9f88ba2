//! The sandbox escape suite through `rnx job exec`: a process started
//! inside a running job is held exactly as the job's own — the same
//! small world (identity, pids, hostname, `/dev`, no `/sys`), every escape
//! attempt of `sandbox_escapes.rs` refused with the same answer, no way to
//! another job's processes or files, and the job's limits binding it (its
//! cgroups, its memory limit). Needs root, like the daemon.

mod sandbox_common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use sandbox_common::*;

/// Starts `sleep 300` as a job and waits until it runs; its id.
fn sleeping_job(node: &SandboxNode, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--", "sleep", "300"]);
    let id = node.run(&all);
    wait_running(node, &id);
    id
}

fn wait_running(node: &SandboxNode, id: &str) {
    let deadline = Instant::now() + T;
    while node.status(id)["state"] != "RUNNING"
        || joblet_e2e::read_pid_file(&node.state_dir().join("jobs").join(id).join("job.pid"))
            .is_none()
    {
        assert!(Instant::now() < deadline, "job {id} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the probe with `args` through `rnx job exec`; its report.
fn exec_probe(node: &SandboxNode, id: &str, args: &[&str]) -> Value {
    let probe = node.probe_bin();
    let mut all = vec!["job", "exec", id, "--", probe.as_str()];
    all.extend_from_slice(args);
    let out = node.rnx(&all);
    assert!(out.status.success(), "rnx job exec {id}: {out:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("probe output is not JSON ({e}): {out:?}"))
}

/// The host pids of a job's own processes (the init's children).
fn job_processes(node: &SandboxNode, id: &str) -> Vec<i32> {
    let leader =
        joblet_e2e::read_pid_file(&node.state_dir().join("jobs").join(id).join("job.pid")).unwrap();
    let init = children_of(leader);
    assert_eq!(init.len(), 1, "{init:?}");
    children_of(init[0])
}

#[test]
fn an_exec_is_nobody_in_the_jobs_small_world_and_every_escape_fails() {
    let node = start("");
    let id = sleeping_job(&node, &[]);
    let daemon = node.daemon_pid().unwrap().to_string();
    let daemon_status = format!("/proc/{daemon}/status");
    let target = format!("/usr/joblet-e2e-exec-escape-{}", std::process::id());
    let p = exec_probe(
        &node,
        &id,
        &[
            "--try-read",
            "/sys/kernel/notes",
            "--try-write",
            &target,
            "--try-read",
            &daemon_status,
            "--try-read",
            "/proc/1/environ",
            "--try-mount",
            "--try-bpf",
            "--try-setns",
            "--try-unshare-user",
            "--try-clone-newuser",
            "--try-io-uring",
            "--try-perf",
            "--try-vsock",
            "--try-ptrace",
            &daemon,
        ],
    );

    // Identity: the job's unprivileged user, nothing to gain.
    assert_eq!(
        (p["uid"].as_u64(), p["euid"].as_u64()),
        (Some(65534), Some(65534)),
        "{p}"
    );
    assert_eq!(p["groups"], serde_json::json!([]), "{p}");
    for cap in ["cap_eff", "cap_prm", "cap_inh", "cap_amb", "cap_bnd"] {
        assert_eq!(p[cap].as_u64(), Some(0), "{cap}: {p}");
    }
    assert_eq!(p["status"]["NoNewPrivs"], "1", "{p}");
    assert_eq!(p["status"]["Seccomp"], "2", "{p}");

    // The job's pid namespace: its sleep (pid 2) and the exec itself; not
    // its init (hidepid), not the daemon, not this test.
    let pids: BTreeSet<u64> = p["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let me = p["pid"].as_u64().unwrap();
    assert_eq!(pids, BTreeSet::from([2, me]), "{p}");
    assert!(me < 100, "a pid of the job's namespace: {p}");
    assert_eq!(p["hostname"], format!("job-{}", &id[..8]));

    // The job's /dev, the minimal set; no sysfs, no host root.
    assert_minimal_dev_no_sys_no_host_root(&p);

    // Every escape of the batch suite, refused with the same answer.
    assert_eq!(tried_on(&p, "read", "/sys/kernel/notes"), "ENOENT", "{p}");
    assert_eq!(tried(&p, "write"), "EROFS", "{p}");
    assert!(!Path::new(&target).exists(), "nothing written on the host");
    assert_eq!(tried_on(&p, "read", &daemon_status), "ENOENT", "{p}");
    assert_eq!(tried_on(&p, "read", "/proc/1/environ"), "ENOENT", "{p}");
    for (op, errno) in [
        ("mount", "EPERM"),
        ("bpf", "EPERM"),
        ("setns", "EPERM"),
        ("unshare-user", "EPERM"),
        ("clone-newuser", "EPERM"),
        ("io-uring", "ENOSYS"),
        ("perf", "EPERM"),
        ("vsock", "EPERM"),
        ("ptrace", "EPERM"),
    ] {
        assert_eq!(tried(&p, op), errno, "{op}: {p}");
    }
    node.rnx_ok(&["job", "kill", &id]);
}

/// With ptrace let through the filter, another job's processes and the
/// daemon do not exist for an exec (ESRCH: the pid namespace's answer, not
/// the filter's), and the other job's files are not in its world.
#[test]
fn an_exec_cannot_reach_the_host_or_another_job() {
    let node = start_sandbox("  seccomp_allow: [ptrace]\n");
    let a = sleeping_job(&node, &[]);
    let b = node.run(&["--", "sh", "-c", "echo b-secret > secret; exec sleep 300"]);
    wait_running(&node, &b);
    let b_secret = node
        .state_dir()
        .join("jobs")
        .join(&b)
        .join("work")
        .join("secret");
    let deadline = Instant::now() + T;
    while !b_secret.exists() {
        assert!(Instant::now() < deadline, "job {b} wrote no secret");
        std::thread::sleep(Duration::from_millis(20));
    }
    let b_pid = job_processes(&node, &b)[0].to_string();
    let daemon = node.daemon_pid().unwrap().to_string();
    let b_secret = b_secret.to_str().unwrap().to_owned();
    let p = exec_probe(
        &node,
        &a,
        &[
            "--try-ptrace",
            &b_pid,
            "--try-ptrace",
            &daemon,
            "--try-read",
            &b_secret,
            "--try-read",
            "/work/secret",
        ],
    );
    assert_eq!(tried_on(&p, "ptrace", &b_pid), "ESRCH", "{p}");
    assert_eq!(tried_on(&p, "ptrace", &daemon), "ESRCH", "{p}");
    assert_eq!(tried_on(&p, "read", &b_secret), "ENOENT", "{p}");
    assert_eq!(tried_on(&p, "read", "/work/secret"), "ENOENT", "{p}");
    // ... while an exec in B does see its own job's file.
    let own = exec_probe(&node, &b, &["--read-file", "/work/secret"]);
    assert_eq!(tried(&own, "read-file"), "ok", "{own}");
    assert_eq!(own["tries"][0]["content"], "b-secret\n", "{own}");
    node.rnx_ok(&["job", "kill", &a]);
    node.rnx_ok(&["job", "kill", &b]);
}

/// An exec lives in the job's cgroups (the same membership as the job's
/// own process, in every hierarchy), cannot reach the cgroup files, and
/// the job's memory limit binds it: an exec that allocates past it is
/// killed by the kernel's OOM killer.
#[test]
fn an_exec_is_held_by_the_jobs_limits() {
    let node = start("");
    let id = node.run(&[
        "--max-memory=32",
        "--",
        "sh",
        "-c",
        "cat /proc/self/cgroup; echo LISTED; exec sleep 300",
    ]);
    wait_running(&node, &id);
    let deadline = Instant::now() + T;
    let job_cgroups = loop {
        let log = String::from_utf8_lossy(&node.rnx(&["job", "log", &id]).stdout).into_owned();
        if let Some((cgroups, _)) = log.split_once("LISTED") {
            break cgroups.to_owned();
        }
        assert!(Instant::now() < deadline, "job {id} listed no cgroups");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = node.rnx(&["job", "exec", &id, "--", "cat", "/proc/self/cgroup"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), job_cgroups);

    // From the host: the exec's process is in the job's cgroup directories.
    let mut sleeper = node
        .rnx_cmd()
        .args(["job", "exec", &id, "--", "sleep", "300"])
        .spawn()
        .unwrap();
    let job_pid = job_processes(&node, &id)[0];
    let deadline = Instant::now() + T;
    let exec_pid = loop {
        let others: Vec<i32> = node
            .base
            .job_dirs(&id)
            .iter()
            .flat_map(|d| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .filter(|&p| p != job_pid && status_line(p, "Name:") == "sleep")
            .collect();
        if let Some(&p) = others.first() {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the exec's sleep never showed up in {:?}",
            node.base.job_dirs(&id)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for dir in node.base.job_dirs(&id) {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
        assert!(
            procs.lines().any(|l| l == exec_pid.to_string()),
            "exec pid {exec_pid} not in {}: {procs}",
            dir.display()
        );
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    // No cgroup file to raise the limit with.
    let p = exec_probe(
        &node,
        &id,
        &["--try-write", "/sys/fs/cgroup/memory.max", "--try-mount"],
    );
    assert_eq!(tried(&p, "write"), "ENOENT", "{p}");
    assert_eq!(tried(&p, "mount"), "EPERM", "{p}");

    // Past the job's 32 MiB: the kernel's OOM killer ends the exec.
    let hog = node.rnx(&[
        "job",
        "exec",
        &id,
        "--",
        "/usr/bin/python3",
        "-c",
        "bytearray(200*1024*1024)",
    ]);
    assert_eq!(hog.status.code(), Some(137), "killed by SIGKILL: {hog:?}");
    let execs = node.rnx_json(&["job", "execs", &id]);
    let last = execs.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["command"][0], "/usr/bin/python3", "{last}");
    assert_eq!(last["signal"], 9, "{last}");
    // The job itself: with memory.oom.group (cgroup v2's memory
    // controller) the whole job goes; under v1 the kernel kills the
    // largest process only, and the job's own process runs on.
    let st = node.status(&id);
    if st["state"] == "RUNNING" {
        node.rnx_ok(&["job", "kill", &id]);
    } else {
        let st = node.wait_done(&id, T);
        assert_eq!(st["state"], "FAILED", "{st}");
        let reason = st["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("out of memory"), "{st}");
    }
}
