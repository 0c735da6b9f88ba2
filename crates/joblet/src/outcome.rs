//! How a shim's report on a finished job becomes the job's final state.

use joblet_core::JobState;
use joblet_shim::{Outcome, ShimExit};

/// The final state, exit code and reason recorded for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub reason: String,
}

/// COMPLETED only for exit code 0; a stop or kill the user asked for is
/// STOPPED; everything else (non-zero exit, signal, timeout, failure to
/// start) is FAILED with the shim's explanation.
pub fn from_shim(exit: &ShimExit) -> Final {
    let state = match exit.outcome {
        Outcome::Exited if exit.exit_code == Some(0) => JobState::Completed,
        Outcome::Stopped | Outcome::Killed => JobState::Stopped,
        Outcome::Exited | Outcome::Signaled | Outcome::TimedOut | Outcome::FailedToStart => {
            JobState::Failed
        }
    };
    Final {
        state,
        exit_code: exit.exit_code,
        reason: exit.message.clone(),
    }
}

/// A job whose shim is gone without leaving an exit record.
pub fn lost(while_down: bool) -> Final {
    let reason = if while_down {
        "lost while daemon was down: its shim exited without recording an exit status"
    } else {
        "lost: the job's shim exited without recording an exit status"
    };
    Final {
        state: JobState::Failed,
        exit_code: None,
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(outcome: Outcome, code: Option<i32>) -> ShimExit {
        ShimExit {
            outcome,
            exit_code: code,
            signal: None,
            message: "m".into(),
            started_unix_ms: None,
            ended_unix_ms: 0,
            log_bytes: 0,
        }
    }

    #[test]
    fn states_by_outcome() {
        let table = [
            (Outcome::Exited, Some(0), JobState::Completed),
            (Outcome::Exited, Some(3), JobState::Failed),
            (Outcome::Signaled, Some(137), JobState::Failed),
            (Outcome::Stopped, Some(143), JobState::Stopped),
            (Outcome::Killed, Some(137), JobState::Stopped),
            (Outcome::TimedOut, Some(143), JobState::Failed),
            (Outcome::FailedToStart, None, JobState::Failed),
        ];
        for (o, code, want) in table {
            let f = from_shim(&exit(o.clone(), code));
            assert_eq!((f.state, f.exit_code), (want, code), "{o:?}");
        }
        assert!(lost(true).reason.starts_with("lost while daemon was down"));
    }
}
