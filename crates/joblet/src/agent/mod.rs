//! The node agent: what carries the engine's decisions out on a node.
//!
//! The engine decides *where* a job runs (a [`LaunchOrder`]: its node, GPU
//! units, CPU and memory); a [`NodeAgent`] makes it so. It reserves the
//! job's GPUs in the node's pool and resolves them to devices, assembles
//! the job's sandbox edits (device nodes, mounts, environment), starts the
//! job's shim (in a warm sandbox when one is ready), watches it, signals
//! it, checks and releases its GPUs, and cleans up after jobs whose shim
//! vanished. What it learns later comes back as [`AgentReport`]s.
//!
//! The seam speaks in data: orders, job records and reports are plain
//! serialisable values, so an agent on another node can take the same
//! messages. The one thing [`LocalAgent`] shares with the engine is the
//! store: it saves the engine's record of a start (RUNNING and the
//! allocation) in the same commit as its own (the GPU pool's records, the
//! audit record), through the `persist` callback of [`NodeAgent::start`].

pub mod capacity;
mod local;
pub mod mounts;
mod recover;
mod release;
mod retention;
mod signal;
mod start;
pub(crate) mod warm;

use std::collections::BTreeMap;
use std::future::Future;

use joblet_core::{JobId, JobSpec, UnixMillis};
use joblet_engine::{DirtyGpu, Exit, LaunchOrder, ShimFact, StopHow, Ticket};
use joblet_sched::model::{GpuHealth, JobRequest, Placement, Unplaceable};
use joblet_store::{GpuGrantRecords, JobRecord, StoreError};
use serde::{Deserialize, Serialize};

use crate::gpu::admission::Refused;
pub use local::{AgentConfig, LocalAgent};

/// What an agent reports, later, about the jobs it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AgentReport {
    /// A job's process ended.
    Exited { job: JobId, exit: Exit },
    /// The release check of a job's GPUs is done; `dirty` did not come
    /// back clean.
    ReleaseChecked { job: JobId, dirty: Vec<DirtyGpu> },
    /// A stop or kill reached the job's shim, or the job had ended
    /// meanwhile; `failed`: why it could not be delivered.
    Signalled {
        job: JobId,
        ticket: Option<Ticket>,
        failed: Option<String>,
    },
    /// The node's GPUs changed health (by index).
    GpuHealth(Vec<(u32, GpuHealth)>),
    /// The node ends these jobs (their GPU failed, their GPU memory quota
    /// was exceeded, an admin took their GPU offline).
    EndJobs {
        jobs: Vec<JobId>,
        reason: String,
        failed: bool,
    },
}

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("No GPUs available: GPU jobs are off on this node")]
    NoGpus,
    #[error(transparent)]
    Grant(Box<crate::gpu::allocation::GrantError>),
    #[error("cannot record the job's start: {0}")]
    Persist(StoreError),
    #[error("cannot unseal the job's secret env: {0}")]
    Secrets(StoreError),
    #[error("cannot create job directory {path}: {source}")]
    JobDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot give {path} to uid {uid}: {source}")]
    Chown {
        path: std::path::PathBuf,
        uid: u32,
        source: std::io::Error,
    },
    /// The GPU part of the job's sandbox edits (device nodes, driver
    /// files, params overlay, MPS).
    #[error(transparent)]
    GpuEdits(#[from] crate::gpu::edits::EditsError),
    #[error("cannot encode the sandbox settings: {0}")]
    Encode(serde_json::Error),
    #[error("could not start the job's shim: {0}")]
    Shim(joblet_shim::ShimError),
    /// Its runtime or a volume (see [`mounts`]).
    #[error(transparent)]
    Mounts(#[from] mounts::MountError),
    /// Its executor cannot run it (see [`crate::executor`]).
    #[error(transparent)]
    Executor(#[from] crate::executor::ExecutorStartError),
}

impl From<crate::gpu::allocation::GrantError> for StartError {
    fn from(e: crate::gpu::allocation::GrantError) -> StartError {
        StartError::Grant(Box::new(e))
    }
}

impl StartError {
    /// Whether the job's start was recorded (RUNNING, its allocation)
    /// before this went wrong: then what it holds must be released.
    pub fn recorded(&self) -> bool {
        use crate::gpu::allocation::GrantError;
        match self {
            StartError::NoGpus | StartError::Persist(_) => false,
            StartError::Grant(e) => matches!(**e, GrantError::Mps { .. }),
            _ => true,
        }
    }
}

/// Saves a job's start (with the node's part of it, for a GPU job).
pub type Persist<'a> = &'a mut dyn FnMut(Option<GpuGrantRecords<'_>>) -> Result<(), StoreError>;

/// Unseals a job's secret environment (it can be taken once).
pub type Secrets<'a> = &'a mut dyn FnMut() -> Result<BTreeMap<String, String>, StoreError>;

/// Saves a GPU release: the pool's changed records and their history.
pub type PersistRelease<'a> = &'a mut dyn FnMut(
    &[&joblet_core::gpu::GpuEntry],
    &[joblet_core::gpu::GpuUpdate],
) -> Result<(), StoreError>;

/// Carries the engine's decisions out on one node.
pub trait NodeAgent: Send + 'static {
    /// The node's GPUs as the scheduler sees them, and its capacity.
    fn node(&self) -> joblet_sched::model::NodeSpec;

    /// A job id for the next job, `spec`: a warm sandbox's that fits it
    /// (GPU-ready for a GPU job, on its runtime's tree for a job in a
    /// runtime), so that the job starts in it; `None` when none is ready.
    fn reserve_id(&mut self, spec: &JobSpec) -> Option<JobId>;

    /// A submission that got `id` was not recorded after all: its warm
    /// sandbox and uploads go.
    fn abandon(&mut self, id: &JobId);

    /// A recorded job ended (or will never start here): what was kept
    /// for it goes — a warm sandbox it did not use at once, its work
    /// directory after the node's retention; its log and record stay.
    fn ended(&mut self, id: &JobId);

    /// Refuses at submission what this node could never run (GPU
    /// requests it cannot serve). `never`: why the scheduler could never
    /// place it, if so.
    fn admit(
        &self,
        req: &JobRequest,
        spec: &JobSpec,
        never: Option<Unplaceable>,
    ) -> Result<(), Refused>;

    /// Starts `order`'s job (`job`: its record): reserves what it needs on
    /// the node, has `persist` save the start, then starts its process;
    /// the end is reported as [`AgentReport::Exited`]. An error before
    /// `persist` leaves nothing reserved; after it, the engine ends the
    /// job and releases what it holds.
    fn start(
        &mut self,
        order: &LaunchOrder,
        job: &JobRecord,
        persist: Persist<'_>,
        secrets: Secrets<'_>,
    ) -> Result<(), StartError>;

    /// Stops or kills a running job; reported as [`AgentReport::Signalled`].
    fn signal(&mut self, job: &JobId, how: StopHow, ticket: Option<Ticket>);

    /// Checks that a finished job's GPUs are clean; reported as
    /// [`AgentReport::ReleaseChecked`]. `ended_at`: when the job ended.
    fn check_release(&mut self, job: &JobId, placement: &Placement, ended_at: UnixMillis);

    /// Gives a finished job's GPUs back (quarantining `dirty`), with
    /// `persist` saving it in the release's commit.
    fn release(
        &mut self,
        job: &JobId,
        placement: &Placement,
        dirty: &[DirtyGpu],
        now: UnixMillis,
        persist: PersistRelease<'_>,
    ) -> Result<(), StoreError>;

    /// Kills what is left of a job whose shim is gone.
    fn reap_lost(&mut self, job: &JobId);

    /// Recovery: before anything else, waits for what an earlier daemon
    /// left running for jobs that have not started (a warm sandbox tearing
    /// itself down), so those jobs start clean. `not_started`: their ids.
    fn settle(&mut self, not_started: &[JobId]) -> impl Future<Output = ()> + Send;

    /// Recovery: what became of a RUNNING job's shim; a live one is
    /// watched again (its end is reported).
    fn probe(&mut self, job: &JobId) -> ShimFact;

    /// Recovery: a live job holds `placement` (its GPUs are watched and
    /// quota-checked again).
    fn adopt(&mut self, job: &JobId, placement: &Placement, request: &JobRequest);

    /// Recovery is done; `keep` are the jobs the engine tracks: whatever an
    /// earlier run left that belongs to none of them (empty job cgroups,
    /// GPU pool entries, MPS daemons) goes.
    fn recovered(&mut self, keep: &std::collections::BTreeSet<String>, now: UnixMillis);

    /// Every GPU's health now (by index).
    fn gpu_health(&self) -> Vec<(u32, GpuHealth)>;

    /// A job started or ended (the warm pool refills after a quiet spell).
    fn job_event(&mut self) {}

    /// The next report; meanwhile the agent does its own housekeeping.
    /// `None` once the agent is closed.
    fn next_report(&mut self) -> impl Future<Output = Option<AgentReport>> + Send;

    /// The daemon is stopping: what the agent runs for itself (warm
    /// sandboxes) goes; jobs keep running.
    fn close(&mut self) -> impl Future<Output = ()> + Send;
}
