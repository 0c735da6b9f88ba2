//! Why a job was canceled, and why a run ended the way it did: data, so
//! the daemon stores and reports them, with the sentence users read.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::need::{EndState, Need};

/// Why a job will never run (again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum CancelReason {
    /// Job `requires` ended `ended`, which the requirement (`need`) does
    /// not accept.
    Unmet {
        requires: String,
        need: Need,
        ended: EndState,
    },
    /// Job `requires` was canceled, and the requirement (`need`) does not
    /// accept that; the chain of cancellations began when `origin` ended
    /// `ended`.
    Upstream {
        requires: String,
        need: Need,
        origin: String,
        ended: EndState,
    },
    /// The workflow was stopped while it ran.
    Stopped,
    /// The workflow was stopped before it started.
    NeverStarted,
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelReason::Unmet {
                requires,
                need,
                ended,
            } => write!(f, "{requires} ended {ended}, needed {need}"),
            CancelReason::Upstream {
                requires,
                need,
                origin,
                ended,
            } => write!(
                f,
                "{requires} was canceled, needed {need} (because {origin} ended {ended})"
            ),
            CancelReason::Stopped => f.write_str("the workflow was stopped"),
            CancelReason::NeverStarted => f.write_str("the workflow was stopped before it started"),
        }
    }
}

/// Why a run ended in its final state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every job finished, and every FAILED or STOPPED end was accepted by
    /// a job that then ran.
    Completed {
        completed: usize,
        canceled: usize,
        handled: usize,
    },
    /// `job` (the first in file order of `unhandled` such jobs) ended
    /// `state`, and no job that accepts that state ran.
    Failed {
        job: String,
        state: EndState,
        unhandled: usize,
    },
    /// Stopped while it ran.
    Stopped,
    /// Stopped before it started.
    Canceled,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Completed {
                completed,
                canceled,
                handled,
            } => {
                write!(f, "every job finished: {completed} COMPLETED")?;
                if *handled > 0 {
                    write!(
                        f,
                        ", {handled} FAILED or STOPPED and handled by a job that required it"
                    )?;
                }
                if *canceled > 0 {
                    write!(
                        f,
                        ", {canceled} CANCELED as their requirements could not hold"
                    )?;
                }
                Ok(())
            }
            Outcome::Failed {
                job,
                state,
                unhandled,
            } => {
                write!(f, "{job} ended {state} and no job that accepts {state} ran")?;
                if *unhandled > 1 {
                    write!(f, " ({unhandled} jobs ended so)")?;
                }
                Ok(())
            }
            Outcome::Stopped => f.write_str("stopped by request"),
            Outcome::Canceled => f.write_str("stopped before it started"),
        }
    }
}
