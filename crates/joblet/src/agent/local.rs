//! [`LocalAgent`]: the agent of the node the daemon runs on.

use std::ffi::OsString;
use std::path::PathBuf;

use joblet_core::gpu::GpuUpdate;
use joblet_core::{JobId, JobSpec, UnixMillis};
use joblet_sched::model::{GpuHealth, GpuSpec, JobRequest, NodeCapacity, NodeSpec, Unplaceable};
use tokio::sync::mpsc;

use super::warm::{self, Flavour, WarmPool, WarmReport};
use super::{AgentReport, NodeAgent};
use crate::gpu::admission::Refused;
use crate::gpu::allocation::NodeGpus;
use crate::gpu::node_spec::NODE;
use crate::sandbox::NodeSandbox;
use crate::state_dir::StateDir;

/// What the local agent is built with.
pub struct AgentConfig {
    pub dirs: StateDir,
    /// The program and arguments that start a shim for a job dir
    /// (`joblet-shim --job-dir DIR`; the dir is appended).
    pub shim_program: PathBuf,
    pub shim_args: Vec<OsString>,
    /// `None`: jobs run unisolated (`sandbox.enabled: false`).
    pub sandbox: Option<NodeSandbox>,
    /// The node's GPUs for jobs (`gpu.enabled` with a sandbox), with the
    /// GPU pool's updates and the GPUs as the scheduler sees them.
    pub gpus: Option<(
        NodeGpus,
        Vec<GpuSpec>,
        mpsc::UnboundedReceiver<Vec<GpuUpdate>>,
    )>,
    /// CPU, memory and job slots the node offers.
    pub capacity: NodeCapacity,
    /// `jobs.work_retention`: how long a finished job's work directory is
    /// kept (`None`: until the job is deleted).
    pub work_retention: Option<std::time::Duration>,
    /// `sandbox.warm_pool` and `gpu.warm_pool`: warm sandboxes to keep.
    pub warm_pool: (usize, usize),
    /// The node's runtimes and volumes (`None` without a sandbox: jobs
    /// asking for them are refused at admission).
    pub mounts: Option<std::sync::Arc<dyn super::mounts::NodeMounts>>,
    /// The executors the node offers (OCI runtimes besides the sandbox).
    pub executors: std::sync::Arc<crate::executor::NodeExecutors>,
}

/// The agent of this node.
pub struct LocalAgent {
    pub(super) dirs: StateDir,
    pub(super) shim_program: PathBuf,
    pub(super) shim_args: Vec<OsString>,
    pub(super) sandbox: Option<NodeSandbox>,
    pub(super) gpus: Option<NodeGpus>,
    gpu_specs: Vec<GpuSpec>,
    capacity: NodeCapacity,
    /// Sandboxes built ahead of their jobs.
    pub(super) warm: WarmPool,
    pub(super) reports: mpsc::UnboundedSender<AgentReport>,
    reports_rx: mpsc::UnboundedReceiver<AgentReport>,
    pub(super) warm_tx: mpsc::UnboundedSender<WarmReport>,
    pub(super) warm_rx: mpsc::UnboundedReceiver<WarmReport>,
    gpu_rx: Option<mpsc::UnboundedReceiver<Vec<GpuUpdate>>>,
    /// Reports made from one batch of GPU updates, not yet taken (the
    /// loop takes one report per call).
    gpu_pending: std::collections::VecDeque<AgentReport>,
    /// When the warm pool is refilled next (see [`warm`]).
    pub(super) refill_at: Option<tokio::time::Instant>,
    /// Finished jobs' work directories, removed after the retention.
    pub(super) work: super::retention::WorkRetention,
    pub(super) mounts: Option<std::sync::Arc<dyn super::mounts::NodeMounts>>,
    pub(super) executors: std::sync::Arc<crate::executor::NodeExecutors>,
    /// The device and inode of the hot runtime's tree (see `reserve_id`).
    hot_ino: Option<(u64, u64)>,
}

impl LocalAgent {
    pub fn new(cfg: AgentConfig) -> LocalAgent {
        let (reports, reports_rx) = mpsc::unbounded_channel();
        let (warm_tx, warm_rx) = mpsc::unbounded_channel();
        let (gpus, gpu_specs, gpu_rx) = match cfg.gpus {
            Some((g, specs, rx)) => (Some(g), specs, Some(rx)),
            None => (None, Vec::new(), None),
        };
        let (cpu_warm, gpu_warm) = cfg.warm_pool;
        let warm = match (&cfg.sandbox, &gpus) {
            (None, _) => WarmPool::new(0, 0),
            (Some(_), None) => WarmPool::new(cpu_warm, 0),
            (Some(_), Some(_)) => WarmPool::new(cpu_warm, gpu_warm),
        };
        LocalAgent {
            dirs: cfg.dirs,
            shim_program: cfg.shim_program,
            shim_args: cfg.shim_args,
            sandbox: cfg.sandbox,
            gpus,
            gpu_specs,
            capacity: cfg.capacity,
            warm,
            reports,
            reports_rx,
            warm_tx,
            warm_rx,
            gpu_rx,
            gpu_pending: std::collections::VecDeque::new(),
            refill_at: None,
            work: super::retention::WorkRetention::new(cfg.work_retention),
            mounts: cfg.mounts,
            executors: cfg.executors,
            hot_ino: None,
        }
    }

    /// What a batch of GPU pool updates means for the engine.
    pub(super) fn gpu_reports(&self, updates: Vec<GpuUpdate>) -> Vec<AgentReport> {
        let mut out = Vec::new();
        if let Some(g) = &self.gpus {
            let health = g.health_of(&updates);
            if !health.is_empty() {
                out.push(AgentReport::GpuHealth(health));
            }
        }
        for u in updates {
            if let GpuUpdate::EndJobs {
                jobs,
                reason,
                failed,
                ..
            } = u
            {
                let jobs = jobs
                    .iter()
                    .filter_map(|j| match JobId::parse(j) {
                        Ok(id) => Some(id),
                        Err(_) => {
                            tracing::error!(job = %j, "GPU record names a malformed job id");
                            None
                        }
                    })
                    .collect();
                out.push(AgentReport::EndJobs {
                    jobs,
                    reason,
                    failed,
                });
            }
        }
        out
    }
}

impl NodeAgent for LocalAgent {
    fn node(&self) -> NodeSpec {
        NodeSpec {
            id: NODE,
            gpus: self.gpu_specs.clone(),
            capacity: self.capacity,
        }
    }

    fn reserve_id(&mut self, spec: &JobSpec) -> Option<JobId> {
        self.warm.submitted(std::time::Instant::now());
        // Warm sandboxes are the native executor's; a job under an OCI
        // runtime gets a fresh shim, and the pool keeps them for the next.
        let executor = spec
            .executor
            .as_deref()
            .unwrap_or(&self.executors.catalog.default);
        if executor != joblet_core::executor::NATIVE {
            return None;
        }
        let Some(reference) = &spec.runtime else {
            let gpu = spec.resources.gpu_count > 0;
            let flavour = if gpu { Flavour::Gpu } else { Flavour::Cpu };
            return self.warm.reserve(flavour);
        };
        // Its sandbox needs the runtime's tree: a warm one built on it, or
        // none (its start then makes the runtime hot for the next).
        let tree = self
            .mounts
            .as_ref()
            .and_then(|m| m.runtime(reference).ok().flatten())
            .map(|r| r.tree)?;
        // A tree removed and built again at the same path (its digest) is
        // another directory: sandboxes built on the old one see nothing.
        let ino = std::fs::metadata(&tree).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let mut cold = Vec::new();
        if self.warm.hot() == Some(tree.as_path()) && self.hot_ino != ino {
            cold = self.warm.cool();
        }
        self.hot_ino = ino;
        let (id, more) = self.warm.reserve_runtime(&tree);
        for shim in cold.into_iter().chain(more) {
            warm::reap(shim.discard(), true);
        }
        id
    }

    fn abandon(&mut self, id: &JobId) {
        self.abandon_submit(id);
    }

    fn ended(&mut self, id: &JobId) {
        if let Some(shim) = self.warm.forget(id) {
            // It never started: its directory goes with the shim unless
            // its uploads are there (then `rnx job delete` removes it).
            reap(shim.discard(), true);
        }
        self.work.ended(id, std::time::Instant::now());
    }

    fn admit(
        &self,
        req: &JobRequest,
        spec: &JobSpec,
        never: Option<Unplaceable>,
    ) -> Result<(), Refused> {
        if req.gpu_count == 0 {
            return Ok(());
        }
        let Some(g) = &self.gpus else {
            return Err(Refused::Off);
        };
        let total = self
            .gpu_specs
            .iter()
            .map(|g| g.mig.len().max(1) as u32)
            .sum();
        g.admit(req, spec, total, never)
    }

    fn start(
        &mut self,
        order: &joblet_engine::LaunchOrder,
        job: &joblet_store::JobRecord,
        persist: super::Persist<'_>,
        secrets: super::Secrets<'_>,
    ) -> Result<(), super::StartError> {
        self.start_job(order, job, persist, secrets)
    }

    fn signal(
        &mut self,
        job: &JobId,
        how: joblet_engine::StopHow,
        ticket: Option<joblet_engine::Ticket>,
    ) {
        self.send_signal(job, how, ticket);
    }

    fn check_release(
        &mut self,
        job: &JobId,
        _placement: &joblet_sched::model::Placement,
        ended_at: UnixMillis,
    ) {
        // The GPUs' usage records name what to check.
        self.begin_release_check(job, ended_at);
    }

    fn release(
        &mut self,
        job: &JobId,
        placement: &joblet_sched::model::Placement,
        dirty: &[joblet_engine::DirtyGpu],
        now: UnixMillis,
        persist: super::PersistRelease<'_>,
    ) -> Result<(), joblet_store::StoreError> {
        self.release_gpus(job, placement, dirty, now, persist)
    }

    fn reap_lost(&mut self, job: &JobId) {
        if let Some(sb) = &self.sandbox {
            if let Err(e) = sb.destroy_job_cgroup(job) {
                tracing::error!(job = %job, error = %e, "cannot clean up the cgroup of a lost job");
            }
        }
    }

    async fn settle(&mut self, not_started: &[JobId]) {
        self.settle_orphans(not_started).await
    }

    fn probe(&mut self, job: &JobId) -> joblet_engine::ShimFact {
        self.probe_shim(job)
    }

    fn adopt(
        &mut self,
        job: &JobId,
        placement: &joblet_sched::model::Placement,
        request: &JobRequest,
    ) {
        if placement.units.is_empty() {
            return;
        }
        if let Some(g) = &mut self.gpus {
            g.adopt(job.as_str(), placement, request);
        }
    }

    fn recovered(&mut self, keep: &std::collections::BTreeSet<String>, now: UnixMillis) {
        self.finish_recovery(keep, now);
    }

    fn gpu_health(&self) -> Vec<(u32, GpuHealth)> {
        self.gpus
            .as_ref()
            .map(NodeGpus::health_now)
            .unwrap_or_default()
    }

    fn job_event(&mut self) {
        self.refill_when();
    }

    /// Cancel-safe: the engine's loop drops this future when another
    /// branch wins; what was received and not yet returned is kept in
    /// `gpu_pending`.
    async fn next_report(&mut self) -> Option<AgentReport> {
        loop {
            if let Some(r) = self.gpu_pending.pop_front() {
                return Some(r);
            }
            let refill_at = self.refill_at;
            let sweep_at = self.work.next_due();
            tokio::select! {
                r = self.reports_rx.recv() => return r,
                () = sleep_opt(sweep_at) => self.work.sweep(&self.dirs, std::time::Instant::now()),
                Some(w) = self.warm_rx.recv() => self.on_warm(w),
                Some(updates) = recv_opt(&mut self.gpu_rx) => {
                    let reports = self.gpu_reports(updates);
                    self.gpu_pending.extend(reports);
                }
                () = sleep_opt(refill_at) => {
                    self.refill_at = None;
                    self.refill_warm();
                }
            }
        }
    }

    async fn close(&mut self) {
        self.close_warm().await;
        if let Some(sb) = &self.sandbox {
            sb.close();
        }
    }
}

async fn recv_opt<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

pub(super) use warm::reap;
