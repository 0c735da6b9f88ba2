//! The job sandbox through the real daemon, part 1: what a job sees
//! (identity, pids, hostname, `/dev`, no `/sys`) and escape attempts that
//! must fail, one test each. Needs root, like the daemon.

mod sandbox_common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use sandbox_common::*;

// --- 1. identity and view -------------------------------------------------

#[test]
fn a_job_is_nobody_without_privileges_in_its_own_small_world() {
    let node = start("");
    let (p, id) = probe(&node, &["--try-read", "/sys/kernel/notes"]);

    // Identity: the unprivileged job user, nothing to gain.
    assert_eq!(
        (p["uid"].as_u64(), p["euid"].as_u64()),
        (Some(65534), Some(65534)),
        "{p}"
    );
    assert_eq!(p["gid"], p["egid"], "{p}");
    assert_eq!(
        p["groups"],
        serde_json::json!([]),
        "no supplementary groups: {p}"
    );
    for cap in ["cap_eff", "cap_prm", "cap_inh", "cap_amb", "cap_bnd"] {
        assert_eq!(p[cap].as_u64(), Some(0), "{cap}: {p}");
    }
    assert_eq!(p["status"]["NoNewPrivs"], "1", "{p}");
    assert_eq!(p["status"]["Seccomp"], "2", "seccomp filter mode: {p}");

    // Pid namespace: the job is a child of its own init, and sees only a
    // few small pids, none of them the host's.
    assert_eq!(p["ppid"], 1, "{p}");
    let pid = p["pid"].as_u64().unwrap();
    assert!(
        pid <= 3,
        "the job is one of the first pids of its namespace: {p}"
    );
    let pids: BTreeSet<u64> = p["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    // Its init (pid 1, root) is not even listed: /proc is hidepid=invisible.
    assert!(
        pids.contains(&pid) && pids.iter().all(|&p| p == 1 || p == pid),
        "only the job's own pids are visible: {pids:?}"
    );
    let daemon = node.daemon_pid().unwrap() as u64;
    assert!(daemon > 3 && !pids.contains(&daemon));

    assert_eq!(p["hostname"], format!("job-{}", &id[..8]));
    assert_eq!(p["cwd"], "/work");

    // /dev: the minimal set only, no host disks; no sysfs, no host root.
    assert_minimal_dev_no_sys_no_host_root(&p);
    assert_eq!(tried(&p, "read"), "ENOENT", "/sys must not exist: {p}");
}

// --- 2. escape attempts ---------------------------------------------------

#[test]
fn escape_writing_to_usr_hits_a_read_only_mount() {
    let node = start("");
    let target = format!("/usr/joblet-e2e-escape-{}", std::process::id());
    let (p, _) = probe(&node, &["--try-write", &target]);
    assert_eq!(tried(&p, "write"), "EROFS", "{p}");
    assert!(!Path::new(&target).exists(), "nothing written on the host");
    let usr = p["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mount_point"] == "/usr")
        .unwrap_or_else(|| panic!("/usr not mounted: {p}"));
    assert_eq!(usr["ro"], true, "{usr}");
}

/// Even with ptrace let through the seccomp filter
/// (`sandbox.seccomp_allow: [ptrace]`), the daemon's pid does not exist
/// in the job's pid namespace.
#[test]
fn escape_host_pids_are_invisible() {
    let node = start_sandbox("  seccomp_allow: [ptrace]\n");
    let daemon = node.daemon_pid().unwrap().to_string();
    let me = std::process::id().to_string();
    let daemon_status = format!("/proc/{daemon}/status");
    let (p, _) = probe(
        &node,
        &["--try-read", &daemon_status, "--try-ptrace", &daemon],
    );
    let pids: Vec<String> = p["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert!(
        !pids.contains(&daemon) && !pids.contains(&me),
        "host pids {daemon} (daemon) and {me} (test) visible in {pids:?}"
    );
    assert_eq!(tried(&p, "read"), "ENOENT", "{p}");
    assert_eq!(tried(&p, "ptrace"), "ESRCH", "{p}");
    assert!(Path::new(&daemon_status).exists(), "the daemon does exist");
}

#[test]
fn escape_mount_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-mount"]);
    assert_eq!(tried(&p, "mount"), "EPERM", "{p}");
}

#[test]
fn escape_loading_bpf_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-bpf"]);
    assert_eq!(tried(&p, "bpf"), "EPERM", "{p}");
}

#[test]
fn escape_setns_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-setns"]);
    assert_eq!(tried(&p, "setns"), "EPERM", "{p}");
}

#[test]
fn escape_pid_1_is_the_sandbox_init_and_unreadable() {
    let node = start("");
    let (id, gate) = start_gated_probe(
        &node,
        "--try-read /proc/1/environ --try-read /proc/1/cmdline",
    );

    // From the host: the job's leader has one child, pid 1 of a new pid
    // namespace, which is joblet's sandbox init, not the host's init.
    let leader =
        joblet_e2e::read_pid_file(&node.state_dir().join("jobs").join(&id).join("job.pid"))
            .unwrap();
    let kids = children_of(leader);
    assert_eq!(kids.len(), 1, "the leader forks only pid 1: {kids:?}");
    let init = kids[0];
    assert_eq!(status_line(init, "NSpid:"), format!("{init} 1"));
    // Named so by the init itself, whether it was exec'd or forked from
    // a warm shim (whose command line it then still shows).
    let comm = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm(leader).trim_end(), "sandbox-init");
    assert_eq!(comm(init).trim_end(), "sandbox-init");
    // The leader starts from a clean process state either way: no signal
    // blocked, of the standard signals only SIGPIPE ignored (as the Rust
    // runtime sets it), a process group of its own, and none of the
    // shim's descriptors (its lock, log, control socket): /dev/null as 0-2
    // and its two pipes. (An exec'd init keeps what its ancestors ignored
    // among glibc's reserved signals 32 and 33, which glibc cannot reset;
    // the job itself resets every signal.)
    assert_eq!(status_line(leader, "SigBlk:"), "0000000000000000");
    let ignored = u64::from_str_radix(&status_line(leader, "SigIgn:"), 16).unwrap();
    // Bit n-1 is signal n; SIGPIPE is 13.
    assert_eq!(ignored & 0x7fff_ffff, 1 << 12, "{ignored:x}");
    let stat = std::fs::read_to_string(format!("/proc/{leader}/stat")).unwrap();
    let pgrp = stat.rsplit_once(") ").unwrap().1.split(' ').nth(2).unwrap();
    assert_eq!(pgrp, leader.to_string(), "{stat}");
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{leader}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap();
            format!(
                "{} -> {}",
                e.file_name().to_string_lossy(),
                target.display()
            )
        })
        .collect();
    let pipes = fds.iter().filter(|f| f.contains("-> pipe:")).count();
    let null = fds.iter().filter(|f| f.ends_with("-> /dev/null")).count();
    assert_eq!((null, pipes, fds.len()), (3, 2, 5), "{fds:?}");
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).unwrap();
    assert_ne!(
        ns(&init.to_string()),
        ns("self"),
        "a pid namespace of its own"
    );
    let job = children_of(init);
    assert_eq!(job.len(), 1, "{job:?}");
    assert_eq!(status_line(job[0], "NSpid:"), format!("{} 2", job[0]));
    assert_eq!(ns(&job[0].to_string()), ns(&init.to_string()));

    // From the job: its pid 1 is not even listed (hidepid), so neither the
    // init's environment nor its command line can be read.
    std::fs::write(&gate, "").unwrap();
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let out = node.rnx(&["job", "log", &id]);
    let p: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(p["ppid"], 1, "{p}");
    assert_eq!(tried_on(&p, "read", "/proc/1/environ"), "ENOENT", "{p}");
    assert_eq!(tried_on(&p, "read", "/proc/1/cmdline"), "ENOENT", "{p}");
}

#[test]
fn escape_user_namespaces_are_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-unshare-user", "--try-clone-newuser"]);
    assert_eq!(tried(&p, "unshare-user"), "EPERM", "{p}");
    assert_eq!(tried(&p, "clone-newuser"), "EPERM", "{p}");
}

// --- 3. the seccomp filter beyond Docker's default ------------------------

/// `io_uring_setup` gets ENOSYS (liburing users fall back to epoll), and
/// `perf_event_open`, an `AF_VSOCK` socket and `ptrace` get EPERM, as with
/// Docker's current default profile (ptrace: stricter than Docker). The
/// ptrace target is the daemon, which the job cannot see: ESRCH once
/// ptrace is let through (`escape_host_pids_are_invisible`), so EPERM
/// here is the filter's answer.
#[test]
fn escape_io_uring_perf_vsock_and_ptrace_are_refused_by_the_filter() {
    let node = start("");
    let daemon = node.daemon_pid().unwrap().to_string();
    let (p, _) = probe(
        &node,
        &[
            "--try-io-uring",
            "--try-perf",
            "--try-vsock",
            "--try-ptrace",
            &daemon,
        ],
    );
    assert_eq!(tried(&p, "io-uring"), "ENOSYS", "{p}");
    assert_eq!(tried(&p, "perf"), "EPERM", "{p}");
    assert_eq!(tried(&p, "vsock"), "EPERM", "{p}");
    assert_eq!(tried(&p, "ptrace"), "EPERM", "{p}");
}

/// What the probe's attempt `op` gives on the host, outside any sandbox.
fn on_the_host(node: &SandboxNode, op: &str) -> String {
    let out = std::process::Command::new(node.probe_bin())
        .arg(format!("--try-{op}"))
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    tried(&report, op)
}

/// `sandbox.seccomp_allow: [io_uring]` lets `io_uring_setup` through (a
/// ring as on the host) and nothing else; the warm sandboxes the node
/// keeps are built with it.
#[test]
fn seccomp_allow_io_uring_lets_a_job_set_up_a_ring_and_nothing_else() {
    let node = start_sandbox("  seccomp_allow: [io_uring]\n");
    let host = on_the_host(&node, "io-uring");
    if host != "ok" {
        eprintln!(
            "io_uring_setup gives {host} on this host without any filter (io_uring disabled?): \
             only checking that the job gets the same, not a ring"
        );
    }
    for _ in 0..2 {
        let (p, _) = probe(&node, &["--try-io-uring", "--try-perf", "--try-bpf"]);
        assert_eq!(tried(&p, "io-uring"), host, "{p}");
        assert_ne!(tried(&p, "io-uring"), "ENOSYS", "{p}");
        assert_eq!(tried(&p, "perf"), "EPERM", "{p}");
        assert_eq!(tried(&p, "bpf"), "EPERM", "{p}");
        assert_eq!(p["status"]["Seccomp"], "2", "{p}");
    }
}
