//! Joblet's pure domain core.
//!
//! What a job is ([`spec`]), which states it may move between ([`state`]),
//! what the node records and reports about it ([`record`]), a GPU's states
//! and the health policy ([`gpu`]), how job ids are abbreviated ([`id`]),
//! how a job's output is framed on disk ([`joblog`]) and how much of a
//! user's value a message echoes ([`text`]). Which job runs
//! where is decided by `joblet-engine` with `joblet-sched`.
//!
//! This crate does no IO: no files, no clocks, no randomness, no async
//! runtime. Time and ids are inputs, so every decision is a plain function
//! that tests call directly. It must not depend on tokio, nix, std::fs or NVML.

pub mod executor;
pub mod gpu;
pub mod id;
pub mod joblog;
pub mod parse;
pub mod record;
pub mod spec;
pub mod state;
pub mod stdio;
pub mod text;
pub mod upload;

pub use id::{JobId, PrefixError};
pub use spec::{
    is_name, split_runtime_ref, ClusterRun, FieldError, GangRank, JobRequest, JobSpec, Network,
    NodeCapabilities, Resources, Unsupported, VolumeMount, WorkflowJobRef,
};
pub use state::{JobState, TransitionError};
pub use stdio::{Stdio, TermSize};
pub use upload::{UploadEntry, UploadKind};

/// Milliseconds since the Unix epoch: the core's only notion of time.
pub type UnixMillis = i64;
