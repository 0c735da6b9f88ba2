//! What one scrape shows, as plain data: the node's GPUs with their
//! readings and the jobs on them, the live jobs with their cgroup usage and
//! per-GPU use attributed from processes, the queue and the audit totals.
//! [`super::collect`] fills it (all the IO); [`super::dcgm`] and
//! [`super::joblet`] turn it into metric families (pure), so tests build
//! one by hand.

use std::collections::BTreeMap;

use joblet_gpu::nvml::GpuReadings;
use joblet_gpu::GpuInfo;

/// Everything a scrape encodes except the engine's own counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The node's host name (dcgm-exporter's `Hostname` label).
    pub hostname: String,
    /// NVIDIA driver version (dcgm's `DCGM_FI_DRIVER_VERSION` label).
    pub driver_version: String,
    /// The GPU scheduling policy (`gpu.policy`), a label of the queue.
    pub policy: String,
    pub gpus: Vec<GpuSample>,
    /// Jobs not in a final state, oldest first.
    pub jobs: Vec<JobSample>,
    /// GPU-seconds held per owner since the audit log began (closed
    /// records plus the running part of open ones).
    pub gpu_seconds_by_owner: BTreeMap<String, f64>,
    /// This node's scheduler-leader counters, in cluster mode.
    pub cluster: Option<LeaderCounts>,
}

/// What this node did as the cluster's scheduler leader since it started
/// (all zero on a node that never led).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaderCounts {
    /// Terms it led.
    pub terms: u64,
    /// Plans (fenced etcd transactions) it committed.
    pub plans: u64,
    /// Plans etcd rejected (a compare failed: another writer or a lost
    /// term), each followed by a re-read.
    pub rejected: u64,
    /// Placements its committed plans made.
    pub placements: u64,
}

/// One physical GPU at the last monitor sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuSample {
    pub info: GpuInfo,
    /// Readings beyond the inventory; `None` when NVML gave none.
    pub readings: Option<GpuReadings>,
    /// The last XID NVML reported for it since the daemon started.
    pub last_xid: Option<u64>,
    /// Its state in the pool (`AVAILABLE`, `IN_USE`, ...), when known.
    pub state: Option<String>,
    /// Placements paused for temperature.
    pub paused: bool,
    /// Jobs holding it (the GPU or one of its MIG slices), by id.
    pub jobs: Vec<String>,
    /// Jobs holding each of its MIG slices, by the slice's UUID.
    pub mig_jobs: BTreeMap<String, Vec<String>>,
}

/// A job that has not reached a final state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSample {
    pub id: String,
    pub owner: String,
    /// `QUEUED`, `RUNNING`, ...
    pub state: String,
    /// Its cgroup's usage, for a running sandboxed job.
    pub usage: Option<JobUsage>,
    /// What its processes use on each GPU, attributed per process.
    pub gpus: Vec<JobGpuUse>,
}

/// A job's cgroup counters; `None` where the controller does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobUsage {
    pub cpu_seconds: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub io_read_bytes: Option<u64>,
    pub io_write_bytes: Option<u64>,
}

/// A job's use of one GPU: the sum over its processes NVML lists there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobGpuUse {
    pub index: u32,
    pub uuid: String,
    /// Its processes' memory (compute and graphics, each process once).
    pub memory_bytes: u64,
    /// Its processes' SM utilisation, percent, summed; `None` when the
    /// driver gave no per-process utilisation for the GPU.
    pub sm_pct: Option<u32>,
    pub processes: u32,
}
