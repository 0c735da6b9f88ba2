//! A daemon that stops leaves nothing of its warm sandboxes to the host's
//! init. This test process makes itself a child subreaper, so every process
//! orphaned in the daemon's tree comes to it instead of init (which, on
//! some machines, never reaps them: a real H100 machine kept them as
//! zombies). After jobs ran in warm sandboxes, the pool refilled and the
//! daemon stopped, no such process may be there, alive or a zombie. Its
//! own test binary: a subreaper is per process. Needs root.

mod sandbox_common;

use std::time::{Duration, Instant};

use sandbox_common::*;

/// This process's children: (pid, state, command).
fn children() -> Vec<(i32, String, String)> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for pid in joblet_e2e::pids() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let Some((comm, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("").to_string();
        let ppid: i32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid == me {
            let comm = comm.split_once('(').map_or("", |(_, c)| c).to_string();
            out.push((pid, state, comm));
        }
    }
    out
}

/// The daemon's children that are not warm shims (a finished job's shim
/// until the daemon reaps it).
fn job_shims(daemon: i32) -> usize {
    let Ok(kids) = std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children")) else {
        return 0;
    };
    kids.split_whitespace()
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !cmd.ends_with(b"--warm\0")
        })
        .count()
}

#[test]
fn a_stopped_daemon_leaves_no_warm_sandbox_process_to_init() {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    // sandbox.warm_pool: 2, the default.
    let mut node = start("");
    for _ in 0..3 {
        node.rnx_ok(&["job", "run", "--follow", "--", "true"]);
    }
    let daemon = node.daemon_pid().unwrap();
    // Finished jobs' shims are the daemon's to reap (a shim that outlives
    // a stopped daemon is orphaned by design: jobs survive restarts).
    let deadline = Instant::now() + Duration::from_secs(30);
    while job_shims(daemon) > 0 {
        assert!(
            Instant::now() < deadline,
            "job shims not reaped\n{}",
            node.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The pool refills once no job has started or ended for a while.
    std::thread::sleep(Duration::from_millis(500));
    node.node.stop_daemon();
    let left = children();
    assert!(
        left.is_empty(),
        "processes orphaned by the stopped daemon: {left:?}\n{}",
        node.daemon_log()
    );
}
