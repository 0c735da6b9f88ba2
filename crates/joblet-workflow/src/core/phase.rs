//! Where a job of a run is, and where the run is.

use std::fmt;

use joblet_core::{JobId, UnixMillis};
use serde::{Deserialize, Serialize};

use super::reason::CancelReason;
use crate::need::{EndState, Final};

/// One job's place in a workflow run.
///
/// ```text
/// WAITING ─▶ SUBMITTING ─▶ SUBMITTED ─▶ RUNNING ─▶ COMPLETED | FAILED | STOPPED
///    │            ▲                         │
///    │            └──── RETRY_WAIT ◀────────┘ (FAILED, retries left)
///    └─▶ CANCELED (a requirement can no longer hold, or the workflow stopped;
///                  also from SUBMITTING and RETRY_WAIT when it stops)
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobPhase {
    /// Some requirement does not hold yet.
    Waiting,
    /// Its requirements hold and `Submit` was asked for this attempt; the
    /// daemon has not said the job exists yet.
    Submitting {
        attempt: u32,
    },
    /// The daemon created the attempt as `job_id` (queued).
    Submitted {
        attempt: u32,
        job_id: JobId,
    },
    Running {
        attempt: u32,
        job_id: JobId,
    },
    /// Attempt `attempt` (`job_id`) ended FAILED with retries left: attempt
    /// `attempt + 1` is submitted at `until`.
    RetryWait {
        attempt: u32,
        job_id: JobId,
        until: UnixMillis,
    },
    /// Its last attempt ended (final).
    Ended {
        attempt: u32,
        job_id: JobId,
        state: EndState,
        at: UnixMillis,
    },
    /// It will never run (again) (final).
    Canceled {
        reason: CancelReason,
    },
}

impl JobPhase {
    /// `WAITING`, `SUBMITTING`, `SUBMITTED`, `RUNNING`, `RETRY_WAIT`,
    /// `COMPLETED`, `FAILED`, `STOPPED` or `CANCELED`.
    pub fn name(&self) -> &'static str {
        match self {
            JobPhase::Waiting => "WAITING",
            JobPhase::Submitting { .. } => "SUBMITTING",
            JobPhase::Submitted { .. } => "SUBMITTED",
            JobPhase::Running { .. } => "RUNNING",
            JobPhase::RetryWait { .. } => "RETRY_WAIT",
            JobPhase::Ended { state, .. } => state.as_str(),
            JobPhase::Canceled { .. } => "CANCELED",
        }
    }

    /// The final state, once there is one.
    pub fn final_state(&self) -> Option<Final> {
        match self {
            JobPhase::Ended { state, .. } => Some(Final::Ended(*state)),
            JobPhase::Canceled { .. } => Some(Final::Canceled),
            _ => None,
        }
    }

    /// The job id of the attempt submitted last, once the daemon named it.
    pub fn job_id(&self) -> Option<&JobId> {
        match self {
            JobPhase::Submitted { job_id, .. }
            | JobPhase::Running { job_id, .. }
            | JobPhase::RetryWait { job_id, .. }
            | JobPhase::Ended { job_id, .. } => Some(job_id),
            _ => None,
        }
    }

    /// The attempt asked for last (1 for the first); `None` before any.
    pub fn attempt(&self) -> Option<u32> {
        match self {
            JobPhase::Submitting { attempt }
            | JobPhase::Submitted { attempt, .. }
            | JobPhase::Running { attempt, .. }
            | JobPhase::RetryWait { attempt, .. }
            | JobPhase::Ended { attempt, .. } => Some(*attempt),
            JobPhase::Waiting | JobPhase::Canceled { .. } => None,
        }
    }
}

/// A workflow run's state. See the crate documentation for the rule that
/// decides between the final ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WorkflowState {
    /// Accepted, not started.
    Pending,
    /// Started; some job is not final yet.
    Running,
    Completed,
    Failed,
    /// Stopped before it started: no job ran.
    Canceled,
    /// Stopped while it ran.
    Stopped,
}

impl WorkflowState {
    pub fn is_final(self) -> bool {
        !matches!(self, WorkflowState::Pending | WorkflowState::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Pending => "PENDING",
            WorkflowState::Running => "RUNNING",
            WorkflowState::Completed => "COMPLETED",
            WorkflowState::Failed => "FAILED",
            WorkflowState::Canceled => "CANCELED",
            WorkflowState::Stopped => "STOPPED",
        }
    }
}

impl fmt::Display for WorkflowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
