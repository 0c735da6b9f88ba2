//! The scheduler's vocabulary: what the cluster is, what a job asks for,
//! where it was placed, and the events and actions of `handle`.

use joblet_core::gpu::GpuState;
use joblet_core::UnixMillis;
use serde::{Deserialize, Serialize};

/// A node of the cluster (the daemon has one; the simulator many).
pub type NodeId = u32;

/// A job, as the scheduler knows it (the daemon's job id string; the
/// simulator's trace row number as a string).
pub type JobKey = String;

/// One GPU of a node, as placement needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Index on its node (NVML index).
    pub index: u32,
    pub uuid: String,
    pub memory_mb: u64,
    /// NUMA node the GPU hangs off.
    pub numa: u32,
    /// CPU package (socket) of that NUMA node.
    pub socket: u32,
    /// GPUs with the same group id are all connected over NVLink (an
    /// NVSwitch domain or a fully linked set); `None` = PCIe only.
    pub nvlink_group: Option<u32>,
    /// e.g. (8, 0).
    pub compute_capability: (u32, u32),
    /// MIG slices this GPU is partitioned into (empty = whole GPU only).
    /// A GPU with slices is placed slice by slice, never whole.
    pub mig: Vec<MigSlice>,
}

/// A MIG GPU instance: an allocatable unit of its parent GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigSlice {
    /// GPU instance id on the parent.
    pub id: u32,
    /// e.g. `1g.10gb`.
    pub profile: String,
    pub memory_mb: u64,
}

/// A node: its GPUs and what it offers jobs besides them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub id: NodeId,
    pub gpus: Vec<GpuSpec>,
    /// CPU, memory and job slots for jobs (default: none tracked).
    #[serde(default)]
    pub capacity: NodeCapacity,
}

/// What a node offers its jobs besides GPUs. Every job placed on the node
/// (CPU-only or with GPUs there) takes one job slot and its declared CPU
/// and memory; a dimension that is `None` is not tracked (unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeCapacity {
    /// CPU the node offers to jobs, in millicores (1000 = one CPU); None = not tracked (unlimited).
    pub cpu_millis: Option<u64>,
    /// Host memory the node offers to jobs, in MiB; None = not tracked.
    pub memory_mb: Option<u64>,
    /// Most jobs running on the node at once (`jobs.max_running`); None = unlimited.
    pub max_jobs: Option<u32>,
}

/// Health of one GPU as the scheduler sees it (from the GPU pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuHealth {
    pub state: GpuState,
    /// Placements paused (temperature).
    pub paused: bool,
    pub temperature_c: Option<u32>,
}

/// How a job uses its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sharing {
    /// The GPUs are the job's alone.
    Exclusive,
    /// Other shared jobs may use the same GPUs; each job's
    /// `gpu_memory_mb` is reserved and the sum never exceeds a GPU's memory.
    Shared,
}

/// What kind of work; training and inference never share a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadClass {
    Training,
    Inference,
    Interactive,
}

/// Everything a job asks of the scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    pub job: JobKey,
    pub owner: String,
    pub queue: String,
    /// GPUs (or MIG slices) wanted, all or none (gang). 0 = CPU-only job:
    /// it waits and is placed like the others, on a node with room for its
    /// CPU, memory and a job slot.
    pub gpu_count: u32,
    /// Minimum free memory per GPU in MiB (shared mode: the amount reserved).
    /// 0 = any.
    pub gpu_memory_mb: u64,
    pub sharing: Sharing,
    /// Only MIG slices of this profile (e.g. `1g.10gb`).
    pub mig_profile: Option<String>,
    pub min_compute_capability: Option<(u32, u32)>,
    pub class: WorkloadClass,
    /// Higher runs first.
    pub priority: i32,
    /// May span NUMA nodes on one node.
    pub allow_cross_numa: bool,
    /// May span nodes.
    pub allow_cross_node: bool,
    /// Lower-priority work may be stopped (PREEMPTED, requeued) for it, or
    /// it may be stopped for higher-priority work.
    pub preemptible: bool,
    /// Declared run-time limit (backfill uses it); `None` = unknown.
    pub time_limit_ms: Option<u64>,
    /// How often the job checkpoints (ms of run time after its start or
    /// restore): a preemption loses the work since its last checkpoint.
    /// `None` = [`SchedConfig::checkpoint_interval_ms`].
    #[serde(default)]
    pub checkpoint_interval_ms: Option<u64>,
    /// CPU the job takes on every node it runs on, in millicores; 0 =
    /// none declared (it takes only a job slot).
    #[serde(default)]
    pub cpu_millis: u64,
    /// Host memory the job takes on every node it runs on, in MiB; 0 =
    /// none declared.
    #[serde(default)]
    pub host_memory_mb: u64,
    /// Share of one GPU's compute in thousandths: 0 (or 1000) = a whole
    /// GPU's compute; 1..=999 = that fraction of one GPU, shared with
    /// other jobs (only with `gpu_count == 1`, `Sharing::Shared` and no
    /// MIG profile; see [`GPU_MILLI_WHOLE`]). Fractional jobs on one GPU
    /// never sum to more than 1000.
    #[serde(default)]
    pub gpu_milli: u32,
}

/// A whole GPU's compute, in the unit of [`JobRequest::gpu_milli`].
pub const GPU_MILLI_WHOLE: u32 = 1000;

impl JobRequest {
    /// Whether it asks for a fraction (1..=999 milli) of one GPU.
    #[inline]
    pub fn is_fractional(&self) -> bool {
        self.gpu_milli > 0 && self.gpu_milli < GPU_MILLI_WHOLE
    }

    /// Why `gpu_milli` does not fit the rest of the request, if it does
    /// not: above 1000, or a fraction without exactly one shared,
    /// non-MIG GPU.
    pub fn gpu_milli_error(&self) -> Option<Unplaceable> {
        let bad = self.gpu_milli > GPU_MILLI_WHOLE
            || (self.is_fractional()
                && (self.gpu_count != 1
                    || self.sharing != Sharing::Shared
                    || self.mig_profile.is_some()));
        bad.then(|| Unplaceable::BadGpuMilli {
            gpu_milli: self.gpu_milli,
            gpu_count: self.gpu_count,
            sharing: self.sharing,
            mig: self.mig_profile.is_some(),
        })
    }
}

/// One allocated unit: a whole GPU or one MIG slice of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GpuRef {
    pub node: NodeId,
    pub index: u32,
    /// MIG GPU instance id, when the unit is a slice.
    pub mig: Option<u32>,
}

/// Where a job runs: its node, every unit it holds and the memory reserved
/// on each, and the CPU and host memory it takes.
///
/// The placement charges every node it touches ([`Placement::nodes`]: its
/// units' nodes, or `node` when it has no units) one job slot,
/// `cpu_millis` and `host_memory_mb` (a job spanning nodes runs a process
/// tree with the job's limits on each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub job: JobKey,
    /// The node a CPU-only job runs on; for a job with GPUs, the node of
    /// its first unit.
    #[serde(default)]
    pub node: NodeId,
    /// Sorted; empty for a CPU-only job.
    pub units: Vec<GpuRef>,
    /// MiB reserved per unit (shared mode: the request's memory; exclusive:
    /// the unit's whole memory).
    pub memory_mb: u64,
    /// Millicores taken on each node it touches.
    #[serde(default)]
    pub cpu_millis: u64,
    /// Host memory (MiB) taken on each node it touches.
    #[serde(default)]
    pub host_memory_mb: u64,
    /// The request's `gpu_milli`: a fraction (1..=999) of its one unit's
    /// compute, or 0 / 1000 for whole units (see
    /// [`Placement::compute_milli`]).
    #[serde(default)]
    pub gpu_milli: u32,
    pub sharing: Sharing,
    pub class: WorkloadClass,
}

impl Placement {
    /// The nodes the placement charges, ascending, once each: its units'
    /// nodes, or `node` for a CPU-only placement.
    #[inline]
    pub fn nodes(&self) -> NodeIds {
        NodeIds::of(self.node, &self.units)
    }

    /// Compute share (milli) the placement takes on each unit it holds:
    /// exclusive, or shared reserving the whole unit's memory
    /// (`memory_mb` 0 without a fraction), or asking 1000: the whole
    /// unit (1000); a fraction: `gpu_milli`; shared with memory and no
    /// `gpu_milli`: none (memory-only sharing, whose compute is not
    /// accounted).
    #[inline]
    pub fn compute_milli(&self) -> u32 {
        compute_milli(self.sharing, self.gpu_milli, self.memory_mb)
    }
}

/// [`Placement::compute_milli`] of a placement or request with these
/// fields.
#[inline]
pub fn compute_milli(sharing: Sharing, gpu_milli: u32, memory_mb: u64) -> u32 {
    match sharing {
        Sharing::Exclusive => GPU_MILLI_WHOLE,
        Sharing::Shared if gpu_milli > 0 => gpu_milli.min(GPU_MILLI_WHOLE),
        Sharing::Shared if memory_mb == 0 => GPU_MILLI_WHOLE,
        Sharing::Shared => 0,
    }
}

/// [`Placement::nodes`]: no allocation for the usual one-node placement.
#[derive(Debug, Clone)]
pub struct NodeIds(NodeIdsInner);

#[derive(Debug, Clone)]
enum NodeIdsInner {
    One(std::option::IntoIter<NodeId>),
    Many(std::vec::IntoIter<NodeId>),
}

impl NodeIds {
    /// The nodes charged by a placement on `node` holding `units`.
    #[inline]
    pub(crate) fn of(node: NodeId, units: &[GpuRef]) -> NodeIds {
        let Some(first) = units.first().map(|u| u.node) else {
            return NodeIds(NodeIdsInner::One(Some(node).into_iter()));
        };
        if units.iter().all(|u| u.node == first) {
            return NodeIds(NodeIdsInner::One(Some(first).into_iter()));
        }
        let mut nodes: Vec<NodeId> = units.iter().map(|u| u.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        NodeIds(NodeIdsInner::Many(nodes.into_iter()))
    }
}

impl Iterator for NodeIds {
    type Item = NodeId;

    #[inline]
    fn next(&mut self) -> Option<NodeId> {
        match &mut self.0 {
            NodeIdsInner::One(it) => it.next(),
            NodeIdsInner::Many(it) => it.next(),
        }
    }
}

/// What happens to the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A job was recorded and waits to be placed.
    Submit(Box<JobRequest>),
    /// The job was cancelled (queued or running).
    Cancel(JobKey),
    /// A running (or preempted-and-stopping) job's processes are gone; its
    /// GPUs, CPU, memory and job slots are free.
    Exited(JobKey),
    /// A GPU's health changed.
    GpuChanged {
        node: NodeId,
        index: u32,
        health: GpuHealth,
    },
    NodeAdded(NodeSpec),
    /// The node takes no new jobs (`true`) or takes them again; what runs
    /// there keeps running.
    NodeDrained {
        node: NodeId,
        drained: bool,
    },
    /// The node's jobs are lost; they get `Reject`/requeue per policy.
    NodeRemoved(NodeId),
    /// Time passed (aging, rate limits, LAS quanta, backfill windows).
    Tick,
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start the job on this placement (persist the allocation first).
    Start { placement: Placement },
    /// Stop the job and requeue it (PREEMPTED → QUEUED); what it holds
    /// (GPUs, CPU, memory, job slots) is free once its `Exited` arrives.
    Preempt { job: JobKey, reason: String },
    /// The job can never run here (or broke a rule): fail it with `reason`.
    Reject { job: JobKey, reason: String },
}

/// How to choose among GPUs that fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Fill the busiest node / NUMA node first (keeps whole nodes free).
    Pack,
    /// Use the emptiest first (spreads heat and load).
    Spread,
    /// The place whose free capacity after placing is smallest.
    BestFit,
    /// Same NVLink group → same NUMA node → same socket → cross-node
    /// (seed 002), ties broken by pack, then by temperature (coolest).
    Topology,
    /// Fragmentation gradient descent (Weng et al., ATC '23): the place
    /// that least increases the nodes' expected GPU fragmentation for the
    /// workload's observed mix of request shapes (see
    /// [`crate::place::fgd`]).
    Fgd,
}

/// Which waiting job goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Strict priority then FIFO: nothing passes a waiting head job.
    Fifo,
    /// FIFO plus EASY backfill: later jobs start when they do not delay the
    /// head job's reservation (computed from time limits).
    Backfill,
    /// Tiresias-style discretised two-dimensional least-attained-service
    /// (GPUs × time): jobs that have had little service go first, long
    /// jobs sink to lower queues; preemptible jobs in lower queues are
    /// preempted for waiting ones. Needs no durations.
    Las,
    /// Gittins index over attained service (GPUs × time), with the
    /// distribution of job sizes learned online from completed jobs (per
    /// queue, log-bucketed), discretised into a few classes: short-looking
    /// jobs go first where sizes are heavy-tailed (like LAS), and jobs run
    /// in FIFO order where they are alike. Preempts only where the gain in
    /// index outweighs the victim's lost work and restore; FIFO order until
    /// enough jobs have completed; seniority-based aging against
    /// starvation. Needs no durations. See [`crate::policy::gittins`].
    Gittins,
}

/// The daemon's default policy (`gpu.policy`), which `joblet simulate
/// --policy default` names too.
pub const DEFAULT_POLICY: Policy = Policy::Backfill;

/// Limits per owner or per queue, on GPU units only (CPU-only jobs count
/// nothing against a quota).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    /// Most GPUs (units) held at once.
    pub max_gpus: u32,
}

/// Token bucket for GPU allocations per owner (seed 000); CPU-only jobs
/// take no token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Allocations (starts) per second, refilled continuously.
    pub per_second: f64,
    /// Bucket size.
    pub burst: u32,
}

/// The scheduler's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedConfig {
    pub policy: Policy,
    pub strategy: Strategy,
    /// How shared requests (fractions of a GPU, or GPUs shared by memory)
    /// are placed; `None` = `strategy`. The daemon sets `Fgd`: sharing
    /// is where fragmentation arises.
    #[serde(default)]
    pub shared_strategy: Option<Strategy>,
    /// Per-owner quotas (owner → quota); owners not listed are unlimited.
    pub owner_quotas: Vec<(String, Quota)>,
    /// Per-queue quotas.
    pub queue_quotas: Vec<(String, Quota)>,
    /// Per-owner allocation rate limit; `None` = unlimited.
    pub owner_rate: Option<RateLimit>,
    /// A waiting job gains one priority level per this many ms (aging, so
    /// nothing starves); 0 = no aging.
    pub aging_ms: u64,
    /// How many waiting jobs one decision may look at past the head
    /// (backfill / LAS): bounds the cost of a decision.
    pub lookahead: usize,
    /// LAS: attained-service thresholds (GPU·ms) between its queues,
    /// ascending; a job above threshold i sinks to queue i+1.
    pub las_thresholds_gpu_ms: Vec<u64>,
    /// How often a job checkpoints when its request does not say
    /// (ms of run time after a start or restore); a preemption loses the
    /// work since the last one, and no job is preempted before its first
    /// checkpoint of a run. 0 = jobs lose nothing when preempted.
    #[serde(default = "default_checkpoint_interval_ms")]
    pub checkpoint_interval_ms: u64,
    /// What a preempted job pays when it starts again (restoring its
    /// checkpoint), ms of run time before it makes progress.
    #[serde(default = "default_restore_cost_ms")]
    pub restore_cost_ms: u64,
    /// Gittins: completed jobs of a queue needed before its own size
    /// distribution is used (before that, all queues' together; with
    /// fewer than this overall, FIFO order).
    #[serde(default = "default_gittins_min_samples")]
    pub gittins_min_samples: u32,
    /// Gittins: its queue order is `first submission + class × this` when
    /// `aging_ms` is 0 (starvation protection: a job is passed only by
    /// jobs of a higher class submitted less than this many ms later per
    /// class of difference); 0 = strict class order.
    #[serde(default = "default_gittins_aging_ms")]
    pub gittins_aging_ms: u64,
    /// Gittins: preempt only where the waiting job's index, charged with
    /// the victim's lost work and restore, still exceeds the victim's
    /// index (the exchange test). Off by default: victims are judged by
    /// class and seniority alone, as under LAS (still never before their
    /// first checkpoint of the run, least lost work first); see
    /// bench/history/scheduler.md, 2026-12-07.
    #[serde(default)]
    pub gittins_exchange_test: bool,
}

/// 30 minutes.
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 30 * 60_000;
/// 2 minutes.
pub const DEFAULT_RESTORE_COST_MS: u64 = 2 * 60_000;
/// Two weeks per class (see `bench/history/scheduler.md`, 2026-12-07).
pub const DEFAULT_GITTINS_AGING_MS: u64 = 14 * 24 * 3_600_000;

fn default_checkpoint_interval_ms() -> u64 {
    DEFAULT_CHECKPOINT_INTERVAL_MS
}

fn default_restore_cost_ms() -> u64 {
    DEFAULT_RESTORE_COST_MS
}

fn default_gittins_min_samples() -> u32 {
    32
}

fn default_gittins_aging_ms() -> u64 {
    DEFAULT_GITTINS_AGING_MS
}

impl SchedConfig {
    /// The strategy that places `req`: `shared_strategy` for a shared
    /// request where set, else `strategy`.
    #[inline]
    pub fn strategy_for(&self, req: &JobRequest) -> Strategy {
        match (req.sharing, self.shared_strategy) {
            (Sharing::Shared, Some(s)) => s,
            _ => self.strategy,
        }
    }
}

impl Default for SchedConfig {
    fn default() -> SchedConfig {
        SchedConfig {
            policy: Policy::Las,
            strategy: Strategy::Topology,
            shared_strategy: None,
            owner_quotas: Vec::new(),
            queue_quotas: Vec::new(),
            owner_rate: None,
            aging_ms: 0,
            lookahead: 256,
            // Tiresias' defaults scaled: 1 GPU-hour, 10 GPU-hours.
            las_thresholds_gpu_ms: vec![3_600_000, 36_000_000],
            checkpoint_interval_ms: DEFAULT_CHECKPOINT_INTERVAL_MS,
            restore_cost_ms: DEFAULT_RESTORE_COST_MS,
            gittins_min_samples: default_gittins_min_samples(),
            gittins_aging_ms: default_gittins_aging_ms(),
            gittins_exchange_test: false,
        }
    }
}

/// Why a request can never be placed on this cluster as it is built
/// (as opposed to "not now"): the simulator's "rejected" reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unplaceable {
    #[error(
        "asks for {asked} GPUs but the largest node has {largest}, and the job may not span nodes"
    )]
    LargerThanNode { asked: u32, largest: u32 },
    #[error("asks for {asked} GPUs but the largest NUMA node has {largest}, and the job may not span NUMA nodes")]
    LargerThanNuma { asked: u32, largest: u32 },
    #[error("asks for {asked} GPUs but the cluster has {total}")]
    LargerThanCluster { asked: u32, total: u32 },
    #[error("asks for {asked_mb} MiB per GPU but the largest GPU has {largest_mb} MiB")]
    TooMuchMemory { asked_mb: u64, largest_mb: u64 },
    #[error(
        "asks for {asked_millis} millicores of CPU but the largest node offers {largest_millis}"
    )]
    TooManyCpus {
        asked_millis: u64,
        largest_millis: u64,
    },
    #[error("asks for {asked_mb} MiB of memory but the largest node offers {largest_mb} MiB")]
    TooMuchHostMemory { asked_mb: u64, largest_mb: u64 },
    #[error("can run on no node: every node's limit of running jobs is 0")]
    NoJobSlots,
    #[error("asks for {gpus} GPUs, {cpu_millis} millicores of CPU and {memory_mb} MiB of memory on a node, which no node offers together")]
    NoNodeOffersAll {
        gpus: u32,
        cpu_millis: u64,
        memory_mb: u64,
    },
    #[error("gpu_milli {gpu_milli} does not fit a request of {gpu_count} GPUs ({sharing:?}{}): gpu_milli must be 0 or 1000 (whole GPUs) or 1..=999 (a share of one GPU, only with gpu_count 1, shared, no MIG profile)", if *mig { ", MIG" } else { "" })]
    BadGpuMilli {
        gpu_milli: u32,
        gpu_count: u32,
        sharing: Sharing,
        mig: bool,
    },
    #[error("asks for MIG profile {0} which no GPU offers")]
    NoSuchMigProfile(String),
    #[error("needs compute capability {}.{} but the best GPU has {}.{}", need.0, need.1, best.0, best.1)]
    ComputeCapability { need: (u32, u32), best: (u32, u32) },
    #[error("asks for {asked} GPUs but the owner's quota is {quota}")]
    OverQuota { asked: u32, quota: u32 },
    #[error("asks for {asked} GPUs but queue {queue}'s quota is {quota}")]
    OverQueueQuota {
        queue: String,
        asked: u32,
        quota: u32,
    },
}

/// Convenience: `now` plus a duration.
pub fn after(now: UnixMillis, ms: u64) -> UnixMillis {
    now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))
}
