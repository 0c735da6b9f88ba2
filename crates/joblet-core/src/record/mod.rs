//! What the node records and reports about a job: its stored record
//! ([`JobRecord`], with [`JobProgress`] and its [`TransitionRecord`]s), the
//! GPUs it holds ([`JobGpus`]), the GPU audit log's [`AuditRecord`]s, and
//! one line of a GPU's health history ([`GpuEventRecord`]).
//!
//! Plain data: `joblet-store` reads and writes these, the daemon's service
//! layer answers with them, and `joblet-proto` converts them to and from
//! the wire. None of them knows how it is stored or sent.

mod audit;
mod gpu_event;
mod job;

pub use audit::AuditRecord;
pub use gpu_event::GpuEventRecord;
pub use job::{ClusterPlace, JobDetails, JobGpus, JobProgress, JobRecord, TransitionRecord};
