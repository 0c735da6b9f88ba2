//! What happens to the engine.

use joblet_core::{JobId, JobState, UnixMillis};
use joblet_sched::model::{GpuHealth, JobRequest, Placement};

use crate::effect::{DirtyGpu, StopHow, Ticket};
use crate::outcome::{Exit, Final};
use crate::request::Submission;

/// One event. Requests carry a [`Ticket`] the core answers exactly once.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The daemon started: what the store and the job directories say.
    /// Handled once, first.
    Recovered(Box<Recovery>),
    /// A job was recorded QUEUED.
    Submitted(Box<Submission>),
    /// Stop or kill asked for. `stored`: the job's state as recorded (the
    /// answer for a job the core no longer tracks).
    Stop {
        job: JobId,
        how: StopHow,
        stored: JobState,
        ticket: Ticket,
    },
    /// Delete asked for (`stored` as for stop).
    Delete {
        job: JobId,
        stored: JobState,
        ticket: Ticket,
    },
    /// The node agent launched the job (recorded RUNNING, its process
    /// started).
    Started { job: JobId },
    /// The job could not be started: `reason`. `recorded`: its start
    /// (RUNNING, its allocation) was recorded before it failed, so what it
    /// holds must be released; otherwise nothing of it was.
    StartFailed {
        job: JobId,
        reason: String,
        recorded: bool,
    },
    /// The job's process ended.
    Exited { job: JobId, exit: Exit },
    /// The node ends these jobs for a reason of its own (their GPU failed,
    /// their GPU memory quota was exceeded, an admin forced their GPU
    /// offline): killed when `failed`, stopped with the grace period
    /// otherwise; recorded with `reason` whatever their process reports.
    EndJobs {
        jobs: Vec<JobId>,
        reason: String,
        failed: bool,
    },
    /// A GPU's health as the node's GPU pool now sees it.
    GpuChanged { index: u32, health: GpuHealth },
    /// The release check of a job's GPUs is done; `dirty` are quarantined.
    ReleaseChecked { job: JobId, dirty: Vec<DirtyGpu> },
    /// Time passed (rate limits refill, backfill windows move).
    Tick,
}

/// What a restarted daemon finds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recovery {
    /// Every unfinished job, and every finished job the ledger still has
    /// an allocation for, in submission order.
    pub jobs: Vec<RecoveredJob>,
    /// The allocation ledger: request, placement and start time of every
    /// job that held resources when the last daemon stopped.
    pub ledger: Vec<(JobRequest, Placement, UnixMillis)>,
    /// The GPUs' health now.
    pub gpus: Vec<(u32, GpuHealth)>,
}

/// One job as recovery finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredJob {
    pub submission: Submission,
    /// Its state as recorded.
    pub state: JobState,
    pub submitted_at: UnixMillis,
    /// A finished job's end as recorded (with when).
    pub ended: Option<(Final, UnixMillis)>,
    /// What became of its shim (meaningful for RUNNING jobs).
    pub shim: ShimFact,
}

/// A RUNNING job's shim after a restart.
#[derive(Debug, Clone, PartialEq)]
pub enum ShimFact {
    /// The job never started (it is not RUNNING).
    NotStarted,
    /// Its shim is alive; the daemon watches it again.
    Alive,
    /// Its shim ended while the daemon was down and recorded how.
    Exited(Exit),
    /// Its shim is gone without a record.
    Gone,
    /// Its job directory is gone (removed while it ran): nothing of the
    /// job can be known; what may be left of it is reaped.
    Vanished,
    /// No shim ever had the job: the daemon died between recording its
    /// start and handing it over. Nothing of it ran; it is queued again.
    NeverStarted,
}
