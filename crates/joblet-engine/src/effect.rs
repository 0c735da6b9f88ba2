//! What the core asks the daemon to do. Every effect must be carried out
//! (they are `#[must_use]`), in the order returned; results come back as
//! events.

use joblet_core::{JobId, JobState, UnixMillis};
use joblet_sched::model::{JobRequest, Placement};
use serde::{Deserialize, Serialize};

use crate::outcome::Final;

/// Names a request (stop, kill, delete) until it is answered. The daemon
/// chooses them; the core answers each exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ticket(pub u64);

/// How to end a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopHow {
    /// SIGTERM, then SIGKILL after the grace period.
    Stop { grace_ms: u64 },
    /// SIGKILL at once.
    Kill,
}

/// A job placed by the scheduler, as the node agent that runs it gets it:
/// everything it needs, by value, serialisable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchOrder {
    pub job: JobId,
    /// What the job asked for (the allocation ledger keeps it beside the
    /// placement).
    pub request: JobRequest,
    /// Where it runs: node, GPU units, CPU and memory charged.
    pub placement: Placement,
    /// Its wall-clock limit, from its start.
    pub wall_limit_ms: Option<u64>,
    /// How long a stop waits between SIGTERM and SIGKILL.
    pub stop_grace_ms: u64,
    /// When the core decided the start.
    pub at: UnixMillis,
}

/// A GPU that did not come back clean after a job: quarantined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirtyGpu {
    pub index: u32,
    pub uuid: String,
    pub why: String,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Stop or kill of a job that has ended.
    Finished { state: JobState },
    /// Delete of a job that is starting or running.
    Running,
    /// The job is not finished, yet the engine does not know it (it is
    /// being recovered or was never recorded).
    Unknown,
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Done (a queued job was taken off the queue, a running one was
    /// signalled, or it ended meanwhile): answer with the job's record.
    Done,
    Refused(Refusal),
}

/// One thing the daemon must do.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "every effect must be carried out"]
pub enum Effect {
    /// Record the job QUEUED again: it was PENDING or PREEMPTED when the
    /// daemon restarted, or RUNNING without ever having run (then through
    /// PREEMPTED, the state machine's way back to the queue).
    Requeue { job: JobId, at: UnixMillis },
    /// Record the job RUNNING with its allocation (the ledger entry: one
    /// commit), then have the node agent launch it. The result comes back
    /// as [`crate::Event::Started`] or [`crate::Event::StartFailed`].
    Launch(Box<LaunchOrder>),
    /// End a running job through its shim. With a ticket, answer it (with
    /// the job's record) once the shim has the request, or the job has
    /// ended.
    Signal {
        job: JobId,
        how: StopHow,
        ticket: Option<Ticket>,
    },
    /// Record the job's final state and tell whoever follows it. With
    /// `release`, the job's allocation leaves the ledger in the same
    /// commit (a job that held no GPUs).
    Finish {
        job: JobId,
        fin: Final,
        at: UnixMillis,
        release: Option<Placement>,
    },
    /// Check that the GPUs of a job that ended (at `ended_at`) are clean;
    /// the result comes back as [`crate::Event::ReleaseChecked`]. They stay
    /// held meanwhile.
    CheckRelease {
        job: JobId,
        placement: Placement,
        ended_at: UnixMillis,
    },
    /// Give the job's GPUs back: the ledger entry goes, dirty GPUs are
    /// quarantined, the others return to service, the GPU audit record is
    /// closed with `ended` (`None`: the job's record was deleted), all in
    /// one commit.
    Release {
        job: JobId,
        placement: Placement,
        dirty: Vec<DirtyGpu>,
        ended: Option<(Final, UnixMillis)>,
    },
    /// Kill whatever is left of a job whose shim is gone, and remove its
    /// cgroups.
    ReapLost { job: JobId },
    /// Delete the job's record and files, then answer the ticket.
    Delete { job: JobId, ticket: Ticket },
    /// Answer a request.
    Answer { ticket: Ticket, answer: Answer },
}
