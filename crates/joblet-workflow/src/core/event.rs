//! What happens to a workflow run, and what the core asks the daemon to do.

use joblet_core::{JobId, UnixMillis};

use super::phase::WorkflowState;
use super::reason::{CancelReason, Outcome};
use crate::need::EndState;

/// One event. Jobs are named as in the file; an event about a job the
/// workflow does not have, or about an attempt other than the job's
/// current one, changes nothing (a late or repeated report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Run the workflow: the jobs whose requirements hold (those without
    /// any) are submitted.
    Started,
    /// The daemon created `attempt` of `job` as `job_id` (queued).
    JobSubmitted {
        job: String,
        attempt: u32,
        job_id: JobId,
    },
    /// The attempt started running.
    JobRunning {
        job: String,
        attempt: u32,
        job_id: JobId,
    },
    /// The attempt ended at `at`.
    JobEnded {
        job: String,
        attempt: u32,
        job_id: JobId,
        state: EndState,
        at: UnixMillis,
    },
    /// `rnx workflow stop`: stop what runs, cancel the rest.
    Stop,
    /// Time passed (retries wait for it); the time is `handle`'s `now`.
    Tick,
    /// The daemon restarted and rebuilt the core from its snapshot
    /// ([`super::WorkflowCore::restore`]); `found` is what the store
    /// records of the workflow's jobs: the latest attempt of each job that
    /// has one.
    Restored { found: Vec<Found> },
}

/// The latest attempt of a job as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub job: String,
    pub attempt: u32,
    pub job_id: JobId,
    pub state: FoundState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundState {
    Queued,
    Running,
    Ended { state: EndState, at: UnixMillis },
}

/// One thing the daemon must do. Every action must be carried out (they
/// are `#[must_use]`), in order; results come back as events.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "every action must be carried out"]
pub enum Action {
    /// Create `attempt` of `job` from its request
    /// ([`crate::Job::request`]), recording (workflow, job, attempt) with
    /// the job in one commit, then report [`Event::JobSubmitted`].
    Submit { job: String, attempt: u32 },
    /// Stop the job (the workflow is stopping).
    StopJob { job: String, job_id: JobId },
    /// The job will never run (again): record and report why.
    Cancel { job: String, reason: CancelReason },
    /// The run is over.
    Finished {
        state: WorkflowState,
        outcome: Outcome,
    },
}
