//! The daemon's own scheduling class: its threads run in `SCHED_BATCH`.
//!
//! `SCHED_BATCH` has the weight and nice value of the normal class; the
//! one difference is that a waking batch thread never preempts the task
//! running on the CPU it is woken on. That matters for a job's start: the
//! client (`rnx`) writes its HTTP/2 preface, settings, headers and body in
//! separate writes to the local socket, and Linux wakes the daemon on the
//! client's CPU for each (a synchronous wake-up), where it preempted the
//! client, read a fragment and slept again, four or five times per
//! request. In `SCHED_BATCH` the daemon runs once the client waits for the
//! answer and reads the request whole; a shim or job it wakes (normal
//! class) still preempts it at once, and on a busy CPU it still gets its
//! fair share at the next tick.
//!
//! What the daemon starts does not inherit the class: shims start in the
//! normal class (or `SCHED_IDLE`, warm ones; `joblet_shim` sets it in the
//! child), and so do the MPS control daemons ([`normal_in_child`]).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Puts the calling thread in `SCHED_BATCH`. For the daemon's main thread
/// and, via the runtime's `on_thread_start`, every runtime thread.
pub fn batch_current_thread() -> io::Result<()> {
    joblet_shim::set_own_policy(libc::SCHED_BATCH)
}

/// [`batch_current_thread`] for the runtime's `on_thread_start`, which
/// cannot return an error: a failure is logged and the thread stays in the
/// normal class (only a little slower to answer).
pub fn batch_runtime_thread() {
    if let Err(e) = batch_current_thread() {
        tracing::warn!(error = %e, "cannot move a daemon thread to SCHED_BATCH");
    }
}

/// Makes the program `cmd` runs start in the normal class (`SCHED_OTHER`),
/// whatever the class of the thread that spawns it.
pub fn normal_in_child(cmd: &mut Command) {
    // SAFETY: the hook runs in the forked child before exec and makes one
    // async-signal-safe system call (`set_own_policy`); it allocates
    // nothing and takes no locks.
    unsafe {
        cmd.pre_exec(|| joblet_shim::set_own_policy(libc::SCHED_OTHER));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread (so the test harness's thread keeps its
    /// class) and returns its result.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn batch_threads_start_children_in_the_normal_class() {
        let (mine, child) = on_thread(|| {
            batch_current_thread().unwrap();
            // SAFETY: sched_getscheduler takes no memory.
            let mine = unsafe { libc::sched_getscheduler(0) };
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "cut -d' ' -f41 /proc/self/stat"]);
            let inherited = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
            normal_in_child(&mut cmd);
            let normal = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
            (mine, (inherited, normal))
        });
        assert_eq!(mine, libc::SCHED_BATCH);
        let (inherited, normal) = child;
        assert_eq!(inherited.trim(), libc::SCHED_BATCH.to_string(), "inherited");
        assert_eq!(
            normal.trim(),
            libc::SCHED_OTHER.to_string(),
            "reset in the child"
        );
    }
}
