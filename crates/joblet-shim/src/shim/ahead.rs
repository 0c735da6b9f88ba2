//! A warm shim's bookkeeping done before its job comes. Once the runner
//! has prepared a sandbox whose leader is known
//! ([`Runner::prepared_leader`](crate::runner::Runner::prepared_leader)),
//! the leader's pid record goes into `job.pid`'s temporary file and the
//! thread that waits for the early word of the job's end is started. When
//! `spawn` then returns that leader, only a rename is left after the job's
//! `execve`: that work would otherwise run beside the young job, on its
//! CPU when the scheduler wakes the shim there.

use std::path::Path;
use std::sync::mpsc::Sender;

use nix::unistd::Pid;

use super::early;
use super::supervise::Event;
use crate::atomic::{publish, write_pending};
use crate::jobdir::JobDir;
use crate::procstat::{self, PROC_ROOT};
use crate::runner::PreparedLeader;

/// What was done for a prepared leader.
#[derive(Debug)]
pub(super) struct Ahead {
    pid: Pid,
    /// Its pid record is in `job.pid`'s temporary file.
    recorded: bool,
    /// A thread waits for the job's end on the runner's early descriptor.
    pub(super) watching: bool,
}

impl Ahead {
    /// Records `leader` in `dir` (not yet visible as `job.pid`) and starts
    /// waiting for its end on `events`. Failures only mean the usual work
    /// is done after the `execve`.
    pub(super) fn start(dir: &JobDir, leader: PreparedLeader, events: Sender<Event>) -> Ahead {
        let recorded = match procstat::pid_record(Path::new(PROC_ROOT), leader.pid.as_raw()) {
            Ok(rec) => match serde_json::to_vec(&rec) {
                Ok(bytes) => write_pending(&dir.job_pid_path(), &bytes)
                    .map_err(|e| tracing::debug!("cannot record the prepared leader: {e}"))
                    .is_ok(),
                Err(e) => {
                    tracing::debug!("cannot encode the prepared leader's record: {e}");
                    false
                }
            },
            Err(e) => {
                tracing::debug!("cannot read the prepared leader's record: {e}");
                false
            }
        };
        let watching = match leader.end {
            Some(fd) => early::watch(fd, events)
                .map_err(|e| tracing::debug!("cannot start the job-end thread ahead: {e}"))
                .is_ok(),
            None => false,
        };
        Ahead {
            pid: leader.pid,
            recorded,
            watching,
        }
    }

    /// What is done for `pid`, the leader `spawn` returned: nothing when it
    /// is another process (the job did not fit the prepared sandbox; the
    /// thread started ahead then sees its pipe closed and ends quietly).
    pub(super) fn for_leader(self, pid: Pid) -> Option<Ahead> {
        (self.pid == pid).then_some(self)
    }

    /// Puts the prepared record in place as `job.pid`; `false` if there is
    /// none, or it could not be (the caller writes it afresh).
    pub(super) fn publish_record(&self, dir: &JobDir) -> bool {
        self.recorded
            && publish(&dir.job_pid_path())
                .map_err(|e| tracing::debug!("cannot publish the prepared job.pid: {e}"))
                .is_ok()
    }
}
