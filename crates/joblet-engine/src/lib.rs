//! Joblet's engine core: what happens to every job, decided in one place.
//!
//! [`EngineCore::handle`] takes an [`Event`] (a job submitted, a stop or
//! delete asked for, a job's start done or failed, its process ended, a GPU's
//! health changed, a release check done, the daemon recovered, time passed)
//! and the time, and returns the [`Effect`]s the daemon must carry out
//! (launch a job on its placement, signal it, record its end, check and
//! release its GPUs, answer a request). It does no IO: no files, no store,
//! no processes, no clock, no async runtime. The daemon's engine loop
//! carries effects out, in order, and feeds their results back as events.
//!
//! One scheduler, `joblet-sched`, places every job, CPU-only or GPU: the
//! node's CPU, memory and job slots (`jobs.max_running`) and its GPUs are
//! one model, and the policy (FIFO, backfill, LAS), priorities and owner
//! quotas apply to all jobs. A placement ([`joblet_sched::model::Placement`])
//! says *where* a job runs; a node agent turns it into a running job
//! ([`LaunchOrder`] is the serialisable message it gets).
//!
//! Guarantees the tests check after every step (`tests/model.rs`): every
//! job ends exactly once; every start the core decides is launched exactly
//! once; no GPU, CPU or memory is ever oversubscribed; a GPU is held only
//! by a job that is starting, running or being released; every request
//! (stop, kill, delete) is answered exactly once.
//!
//! Must not depend on tokio, nix, std::fs, the store or NVML.

mod effect;
mod engine;
mod event;
mod outcome;
mod pinned;
mod recover;
mod request;

pub use effect::{Answer, DirtyGpu, Effect, LaunchOrder, Refusal, StopHow, Ticket};
pub use engine::{CoreConfig, EngineCore, PhaseView};
pub use event::{Event, RecoveredJob, Recovery, ShimFact};
pub use outcome::{Exit, Final};
pub use request::{JobRules, Submission};
