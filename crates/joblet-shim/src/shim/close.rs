//! After the job: its end told to the daemon first, then recorded in
//! `exit.json`, then the sandbox let go ([`close_job`]).

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use super::{remove_unused_tmp, write_exit, JobRun};
use crate::jobdir::JobDir;
use crate::priority;
use crate::reap;
use crate::runner::Runner;
use crate::spec::ShimExit;

/// How long after telling the daemon a job's end the shim lets a leader
/// that is still exiting go on with its teardown ([`Runner::end_told`]):
/// the daemon records the end and tells the client within about a
/// millisecond on the machine of BENCHMARKS.md.
const TEARDOWN_DEFER: Duration = Duration::from_millis(2);

/// After the job: tells the daemon its end (the record on the notification
/// pipe, which it then closes), records it in `exit.json`, takes the
/// control socket away, reaps a leader still exiting, and only then lets the
/// runner clean up. The daemon that launched the shim thus records the
/// end before any file is written; `exit.json` is for a daemon that
/// restarted meanwhile (or that finds the pipe closed empty).
///
/// Once the daemon has the record, the rest is teardown off every job's
/// start, and it runs in `SCHED_IDLE`, like a warm build: beside jobs
/// starting back to back it took the CPU from the next warm build, for
/// which the next job may be waiting (bench/history/runs-17-22.md, 62803a1).
/// A shim whose daemon was not told stays in the normal class: that daemon
/// learns the end from `exit.json` and the shim's exit.
pub(super) fn close_job(dir: &JobDir, run: &JobRun, notify: Option<OwnedFd>, runner: &dyn Runner) {
    if let Some(fd) = notify {
        tell_daemon(fd, &run.exit);
    }
    let told = Instant::now();
    // A daemon that restarts treats a shim gone without exit.json as lost,
    // so a failure here can only be logged.
    if let Err(source) = write_exit(dir, &run.exit) {
        tracing::error!("cannot write {}: {source}", dir.exit_path().display());
    }
    if let Some(control) = &run.control {
        tracing::info!("job ended: {}", run.exit.message);
        // Renamed out of the way rather than removed: clients find no
        // socket either way, and no inode is freed. On an ext4 without a
        // journal, every inode freed makes each new file in its block group
        // skip it for 60-300 s (`recently_deleted`), which with one socket
        // freed per job cost back-to-back starts ~0.3-0.45 ms each
        // (bench/history/runs-17-22.md, 10e5ea8). The job's directory holds
        // it until the job is deleted.
        let _ = std::fs::rename(dir.control_sock_path(), dir.closed_control_sock_path());
        control.quiesce();
    }
    if run.input_sock {
        // No more input once the job ended (also when it never started).
        let _ = std::fs::remove_file(dir.input_sock_path());
    }
    remove_unused_tmp(dir);
    if let Some(pid) = run.unreaped {
        // A leader still exiting (a sandbox's outer process) waits for
        // `end_told` to tear the job's namespaces down: kernel work that no
        // scheduling class preempts, which would otherwise take the CPU
        // from the daemon and the client hearing of the end just told.
        std::thread::sleep(TEARDOWN_DEFER.saturating_sub(told.elapsed()));
        runner.end_told();
        if let Err(e) = reap::reap(pid.as_raw()) {
            tracing::warn!("reaping job leader {pid}: {e}");
        }
    }
    runner.end_told();
    runner.cleanup();
}

/// Writes the job's exit record on the daemon's notification pipe and closes
/// it. The daemon reads it to the end of the pipe; one it cannot use (a
/// write cut short) sends it to `exit.json`.
///
/// The write wakes the daemon on this CPU (a pipe's wake-up is a "sync"
/// one: the kernel expects the writer to sleep next), where this thread
/// would keep it waiting for the rest of [`close_job`] (~0.25 ms). In
/// `SCHED_IDLE` for the write, the thread gives the CPU to the daemon at
/// once, and stays there for the teardown (see [`close_job`]); if the
/// record could not be handed over, it goes back to the normal class, as
/// the daemon then waits for `exit.json`.
fn tell_daemon(notify: OwnedFd, exit: &ShimExit) {
    let Ok(bytes) = serde_json::to_vec(exit) else {
        tracing::warn!("cannot encode the exit record for the daemon; it reads exit.json");
        return;
    };
    let yielded = priority::set_own_policy(libc::SCHED_IDLE).is_ok();
    let told = File::from(notify).write_all(&bytes);
    if let Err(e) = told {
        tracing::warn!("cannot hand the exit record to the daemon: {e}; it reads exit.json");
        if yielded {
            if let Err(e) = priority::set_own_policy(libc::SCHED_OTHER) {
                tracing::warn!(
                    "the shim stays in SCHED_IDLE after failing to tell the daemon: {e}"
                );
            }
        }
    }
}
