//! The warm shim's scheduling class: a sandbox built ahead of its job must
//! not take CPU time from jobs starting meanwhile, so a warm shim (and what
//! it starts, which inherits the class) runs as `SCHED_IDLE` until its job
//! arrives. A nice value is not enough: the scheduler lets a niced task
//! finish its time slice (milliseconds) before a waking job's process gets
//! the CPU, while an idle-class task gives it up at once.

use std::io;

/// Puts the calling thread (and the threads and processes it creates from
/// now on) in `SCHED_IDLE`. Async-signal-safe: also used between fork and
/// exec.
pub(crate) fn enter_idle() -> io::Result<()> {
    set_policy(0, libc::SCHED_IDLE)
}

/// Puts the process's main thread (its tid is the pid) in the normal class.
pub(crate) fn leave_idle_main() -> io::Result<()> {
    set_policy(std::process::id() as libc::pid_t, libc::SCHED_OTHER)
}

/// Puts the calling thread in the normal class.
pub(crate) fn leave_idle_thread() -> io::Result<()> {
    set_policy(0, libc::SCHED_OTHER)
}

/// Puts every thread of this process back in the normal class
/// (`SCHED_OTHER`, nice 0): a warm shim whose job has come.
pub(crate) fn leave_idle() -> io::Result<()> {
    for entry in std::fs::read_dir("/proc/self/task")? {
        let name = entry?.file_name();
        let Some(tid) = name.to_str().and_then(|s| s.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        match set_policy(tid, libc::SCHED_OTHER) {
            Ok(()) => {}
            // A helper thread that has just ended.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Puts every thread of this process and of all its descendants in the
/// normal class: a warm shim whose job has come, possibly while its
/// sandbox is still being built by `SCHED_IDLE` processes that a busy
/// machine would otherwise leave waiting. Each process is promoted before
/// its children are listed, so a child forked meanwhile inherits the
/// normal class.
pub(crate) fn leave_idle_tree() -> io::Result<()> {
    leave_idle()?;
    let mut todo = children(None)?;
    while let Some(pid) = todo.pop() {
        let tasks = match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(t) => t,
            // Gone meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in tasks {
            let name = entry?.file_name();
            let Some(tid) = name.to_str().and_then(|s| s.parse::<libc::pid_t>().ok()) else {
                continue;
            };
            match set_policy(tid, libc::SCHED_OTHER) {
                Ok(()) => {}
                // A thread that has just ended.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
        todo.extend(children(Some(pid))?);
    }
    Ok(())
}

/// The children of every thread of `pid` (`None`: this process).
fn children(pid: Option<libc::pid_t>) -> io::Result<Vec<libc::pid_t>> {
    let dir = match pid {
        Some(p) => format!("/proc/{p}/task"),
        None => "/proc/self/task".to_string(),
    };
    let mut out = Vec::new();
    let tasks = match std::fs::read_dir(&dir) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in tasks {
        let path = entry?.path().join("children");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<libc::pid_t>().ok()),
        );
    }
    Ok(out)
}

fn set_policy(tid: libc::pid_t, policy: libc::c_int) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; the
    // kernel only reads it. A plain system call, safe after fork.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
