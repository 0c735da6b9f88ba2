//! The job state machine (seed 002 plus Joblet's STOPPED):
//!
//! ```text
//! PENDING ─▶ QUEUED ─▶ RUNNING ─▶ COMPLETED | FAILED | STOPPED
//!               ▲          │
//!               └─ PREEMPTED ◀┘
//! ```
//! A job that has not started yet may also be STOPPED (cancelled) or FAILED
//! (rejected, or lost). Every transition the daemon makes goes through
//! [`JobState::transition`], which refuses anything not drawn above.

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobState {
    Pending,
    Queued,
    Running,
    Completed,
    Failed,
    Stopped,
    Preempted,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job cannot go from {from} to {to}")]
pub struct TransitionError {
    pub from: JobState,
    pub to: JobState,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Pending,
        JobState::Queued,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Stopped,
        JobState::Preempted,
    ];

    /// True for COMPLETED, FAILED and STOPPED: nothing follows them.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Stopped
        )
    }

    /// Whether the machine has an edge from `self` to `to`.
    pub fn can_go_to(self, to: JobState) -> bool {
        use JobState::*;
        matches!(
            (self, to),
            (Pending, Queued | Failed | Stopped)
                | (Queued, Running | Failed | Stopped)
                | (Running, Completed | Failed | Stopped | Preempted)
                | (Preempted, Queued | Failed | Stopped)
        )
    }

    /// Returns `to` if the edge exists.
    pub fn transition(self, to: JobState) -> Result<JobState, TransitionError> {
        if self.can_go_to(to) {
            Ok(to)
        } else {
            Err(TransitionError { from: self, to })
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Queued => "QUEUED",
            JobState::Running => "RUNNING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Stopped => "STOPPED",
            JobState::Preempted => "PREEMPTED",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the upper- or lowercase state name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}: expected one of PENDING, QUEUED, RUNNING, COMPLETED, FAILED, STOPPED, PREEMPTED")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::*;

    #[test]
    fn the_drawn_edges_and_only_those() {
        let allowed = [
            (Pending, Queued),
            (Pending, Failed),
            (Pending, Stopped),
            (Queued, Running),
            (Queued, Failed),
            (Queued, Stopped),
            (Running, Completed),
            (Running, Failed),
            (Running, Stopped),
            (Running, Preempted),
            (Preempted, Queued),
            (Preempted, Failed),
            (Preempted, Stopped),
        ];
        for from in JobState::ALL {
            for to in JobState::ALL {
                assert_eq!(
                    from.can_go_to(to),
                    allowed.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn terminal_states_have_no_way_out() {
        for from in JobState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in JobState::ALL {
                assert!(from.transition(to).is_err());
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in JobState::ALL {
            assert_eq!(s.as_str().parse::<JobState>().unwrap(), s);
            assert_eq!(s.as_str().to_lowercase().parse::<JobState>().unwrap(), s);
        }
        assert!("DONE".parse::<JobState>().is_err());
    }
}
