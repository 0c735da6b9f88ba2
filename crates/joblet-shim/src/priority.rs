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

/// Puts the calling thread in `policy` (`SCHED_OTHER`, `SCHED_BATCH`,
/// `SCHED_IDLE`); its nice value is kept. Async-signal-safe. For the
/// daemon's and the sandbox init's own choices of class.
pub fn set_own_policy(policy: libc::c_int) -> io::Result<()> {
    set_policy(0, policy)
}

/// Puts every thread of this process in the normal class.
pub(crate) fn leave_idle_threads() -> io::Result<()> {
    promote_tasks("/proc/self/task")
}

/// Puts every thread of this process and of all its descendants in the
/// normal class (`SCHED_OTHER`, nice 0): a warm shim whose job has come,
/// possibly while its sandbox is still being built by `SCHED_IDLE`
/// processes that a busy machine would otherwise leave waiting. Each
/// process is promoted before its children are listed, so a child forked
/// meanwhile inherits the normal class.
pub(crate) fn leave_idle_tree() -> io::Result<()> {
    let mut todo = vec!["/proc/self/task".to_string()];
    while let Some(task_dir) = todo.pop() {
        promote_tasks(&task_dir)?;
        todo.extend(
            children(&task_dir)?
                .into_iter()
                .map(|pid| format!("/proc/{pid}/task")),
        );
    }
    Ok(())
}

/// Puts every thread listed in `task_dir` (a process's `/proc/…/task`) in
/// the normal class; a process or thread gone meanwhile is skipped.
fn promote_tasks(task_dir: &str) -> io::Result<()> {
    let tasks = match std::fs::read_dir(task_dir) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in tasks {
        let name = entry?.file_name();
        let Some(tid) = name.to_str().and_then(|s| s.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        match set_policy(tid, libc::SCHED_OTHER) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The children of every thread listed in `task_dir`.
fn children(task_dir: &str) -> io::Result<Vec<libc::pid_t>> {
    let mut out = Vec::new();
    let tasks = match std::fs::read_dir(task_dir) {
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
