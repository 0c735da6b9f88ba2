//! Why `ClusterState::allocate` refused a placement.

use std::fmt;

use joblet_core::gpu::GpuState;

use crate::model::{GpuRef, JobKey, NodeId, WorkloadClass};

impl fmt::Display for GpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mig {
            Some(m) => write!(f, "node {} GPU {} MIG {}", self.node, self.index, m),
            None => write!(f, "node {} GPU {}", self.node, self.index),
        }
    }
}

/// A placement `allocate` refused; nothing of it was allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("job {job} already holds GPUs")]
    DuplicateJob { job: JobKey },
    #[error("job {job}: {unit} does not exist")]
    NoSuchUnit { job: JobKey, unit: GpuRef },
    #[error("job {job}: node {node} does not exist")]
    NoSuchNode { job: JobKey, node: NodeId },
    #[error("job {job}: node {node} has {left} {what} left but {asked} were asked")]
    HostFull {
        job: JobKey,
        node: NodeId,
        what: &'static str,
        asked: u64,
        left: u64,
    },
    #[error("job {job}: {unit} appears twice in the placement")]
    DuplicateUnit { job: JobKey, unit: GpuRef },
    #[error("job {job}: {unit} takes no new jobs (state {state}, paused {paused})")]
    NotPlaceable {
        job: JobKey,
        unit: GpuRef,
        state: GpuState,
        paused: bool,
    },
    #[error("job {job}: {unit} is held by job {holder}")]
    Busy {
        job: JobKey,
        unit: GpuRef,
        holder: JobKey,
    },
    #[error("job {job}: {unit} has {free_mb} MiB unreserved but {asked_mb} MiB were asked")]
    OutOfMemory {
        job: JobKey,
        unit: GpuRef,
        asked_mb: u64,
        free_mb: u64,
    },
    #[error("job {job}: {unit} has {free_milli} milli of compute unaccounted but {asked_milli} were asked")]
    OutOfCompute {
        job: JobKey,
        unit: GpuRef,
        asked_milli: u32,
        free_milli: u32,
    },
    #[error("job {job} ({class:?}): {unit} is shared with job {holder} of a class it may not share with")]
    ClassConflict {
        job: JobKey,
        unit: GpuRef,
        class: WorkloadClass,
        holder: JobKey,
    },
}
