//! How a job ended: the final state, exit code and reason recorded for it.

use joblet_core::JobState;
use serde::{Deserialize, Serialize};

/// The final state, exit code and reason recorded for a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Final {
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub reason: String,
}

impl Final {
    /// FAILED with `reason` and no exit code.
    pub fn failed(reason: impl Into<String>) -> Final {
        Final {
            state: JobState::Failed,
            exit_code: None,
            reason: reason.into(),
        }
    }

    /// STOPPED with `reason` and no exit code.
    pub fn stopped(reason: impl Into<String>) -> Final {
        Final {
            state: JobState::Stopped,
            exit_code: None,
            reason: reason.into(),
        }
    }

    /// How the allocation of a job queued again after a restart (it never
    /// ran) is closed.
    pub fn requeued() -> Final {
        Final {
            state: JobState::Preempted,
            exit_code: None,
            reason: "the daemon stopped before the job started; queued again".into(),
        }
    }

    /// A job whose directory was removed while it ran: its output and
    /// exit record went with it.
    pub fn dir_removed() -> Final {
        Final::failed(
            "its job directory was removed while it ran: its output and exit status are lost",
        )
    }

    /// A job whose shim is gone without leaving an exit record.
    pub fn lost(while_down: bool) -> Final {
        Final::failed(if while_down {
            "lost while daemon was down: its shim exited without recording an exit status"
        } else {
            "lost: the job's shim exited without recording an exit status"
        })
    }
}

/// How a job's process ended, as its node reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    pub fin: Final,
    /// It was killed at its wall-clock limit (the engine gives the reason
    /// when that limit was its GPU time budget).
    pub timed_out: bool,
}

impl Exit {
    /// An exit with no wall-clock limit involved.
    pub fn of(fin: Final) -> Exit {
        Exit {
            fin,
            timed_out: false,
        }
    }
}
