//! How a shim's report on a finished job becomes the job's end, as the
//! engine takes it.

use joblet_core::JobState;
use joblet_engine::Exit;
pub use joblet_engine::Final;
use joblet_shim::{Outcome, ShimExit};

/// COMPLETED only for exit code 0; a stop or kill the user asked for is
/// STOPPED; everything else (non-zero exit, signal, timeout, failure to
/// start) is FAILED with the shim's explanation.
pub fn from_shim(exit: &ShimExit) -> Exit {
    let state = match exit.outcome {
        Outcome::Exited if exit.exit_code == Some(0) => JobState::Completed,
        Outcome::Stopped | Outcome::Killed => JobState::Stopped,
        Outcome::Exited
        | Outcome::Signaled
        | Outcome::TimedOut
        | Outcome::FailedToStart
        | Outcome::NeverGiven => JobState::Failed,
    };
    Exit {
        fin: Final {
            state,
            exit_code: exit.exit_code,
            reason: exit.message.clone(),
        },
        timed_out: exit.outcome == Outcome::TimedOut,
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
            (Outcome::NeverGiven, None, JobState::Failed),
        ];
        for (o, code, want) in table {
            let e = from_shim(&exit(o.clone(), code));
            assert_eq!((e.fin.state, e.fin.exit_code), (want, code), "{o:?}");
            assert_eq!(e.timed_out, o == Outcome::TimedOut);
        }
        assert!(Final::lost(true)
            .reason
            .starts_with("lost while daemon was down"));
    }
}
