//! GPU jobs: the engine's side of `joblet-sched`. A GPU job's request goes
//! through the scheduler core; its placement is persisted (allocation
//! ledger and audit record) and marked in the GPU pool before the job
//! starts, and released exactly once after its GPUs pass the release check
//! ([`super::scrub`]).
//!
//! The engine owns one [`GpuJobs`]; everything here runs on its loop.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use joblet_core::gpu::GpuUpdate;
use joblet_core::{JobId, UnixMillis};
use joblet_gpu::exec::{
    find_driver_files, parse_ld_cache, DriverCapabilities, DriverFiles, JobGpu, LdCacheEntry,
    SharingMode,
};
use joblet_gpu::{CudaToolkit, DeviceMajors};
use joblet_sched::model::{Action, Event, GpuHealth, JobRequest, Placement, Sharing};
use joblet_sched::scheduler::Scheduler;
use joblet_store::AuditRecord;

use super::mps::{MpsClient, MpsDaemons};
use super::node_spec::{mib, node_spec, partition, sched_config, Offer, Partition, NODE};
use super::quota::JobUse;
use super::scrub::ScrubTarget;
use super::simulate::Simulation;
use super::SharedGpus;
use crate::config::{GpuConfig, ScrubPolicy};

mod submit;

/// What the node's GPU jobs get, fixed at start-up.
#[derive(Debug, Clone)]
pub struct GpuSettings {
    pub sharing: SharingMode,
    pub scrub: ScrubPolicy,
    pub scrub_timeout: Duration,
    /// The monitor samples NVML, so releases can be verified.
    pub can_verify: bool,
    pub default_gpu_time: Option<Duration>,
    pub caps: DriverCapabilities,
    pub dev_dir: PathBuf,
    pub ld_cache: Vec<LdCacheEntry>,
    pub ld_cache_path: PathBuf,
    pub bin_dirs: Vec<PathBuf>,
    /// [`GpuSettings::driver_files`] by capabilities, found once each.
    pub driver_files_found: DriverFilesMemo,
    pub toolkits: Vec<CudaToolkit>,
    /// The newest CUDA the driver runs.
    pub driver_max: Option<(u32, u32)>,
    pub majors: DeviceMajors,
    /// `gpu.proc_dir` (MIG capability minors).
    pub proc_dir: PathBuf,
    /// With `gpu.sharing: mps`: where MPS jobs find their GPU's control
    /// daemon.
    pub mps: Option<MpsClient>,
    pub simulation: Option<Simulation>,
    /// fake-nvml's state file, for simulated jobs.
    pub simulate_state: Option<PathBuf>,
}

/// Driver files found so far, by capabilities (shared by clones).
pub type DriverFilesMemo = Arc<Mutex<HashMap<DriverCapabilities, Arc<DriverFiles>>>>;

impl GpuSettings {
    /// The driver files for `caps` (the simulated driver has only NVML).
    /// Found once per set of capabilities and kept, like the loader cache
    /// they come from (read at start-up): a CPU job's masks, a GPU job's
    /// binds and its submission check no longer scan the cache and
    /// resolve every library each time (BENCHMARKS.md, real GPU).
    pub fn driver_files(&self, caps: &DriverCapabilities) -> Arc<DriverFiles> {
        let mut found = self
            .driver_files_found
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        found
            .entry(caps.clone())
            .or_insert_with(|| Arc::new(find_driver_files(caps, &self.ld_cache, &self.bin_dirs)))
            .clone()
    }
}

/// A GPU job the scheduler placed, as the engine starts it.
#[derive(Debug, Clone)]
pub struct Allocated {
    /// The job's GPUs in PCI bus order (CUDA's order inside the job).
    pub gpus: Vec<JobGpu>,
    /// Per-GPU memory quota the monitor enforces (shared and MPS modes).
    pub quota_mb: Option<u64>,
    pub request: JobRequest,
}

/// What the engine does for a scheduler decision.
#[derive(Debug)]
pub enum GpuAction {
    Start {
        job: String,
        allocated: Allocated,
    },
    /// Recording the allocation failed: the job fails with `reason`.
    StartFailed {
        job: String,
        reason: String,
    },
    Reject {
        job: String,
        reason: String,
    },
}

pub struct GpuJobs {
    pub shared: SharedGpus,
    pub settings: GpuSettings,
    sched: Scheduler,
    /// Requests of waiting and running jobs (the ledger needs them).
    requests: HashMap<String, JobRequest>,
    /// Whole GPUs and MIG slices, for submission messages.
    offer: Offer,
    /// With `gpu.sharing: mps`: the control daemons.
    mps: Option<MpsDaemons>,
}

impl std::fmt::Debug for GpuJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuJobs")
            .field("waiting", &self.sched.waiting())
            .field("running", &self.sched.running())
            .finish()
    }
}

impl GpuJobs {
    /// Builds the scheduler from the discovered GPUs and the allocation
    /// ledger (allocations of jobs that were running when the daemon
    /// stopped). Waiting jobs are added by the engine's recovery.
    pub fn new(shared: SharedGpus, cfg: &GpuConfig) -> anyhow::Result<GpuJobs> {
        let (spec, majors, toolkits, driver_max, simulation, can_verify) = {
            let node = shared.lock();
            let inv = &node.inventory;
            for g in &inv.gpus {
                if let Partition::Unusable(why) = partition(g) {
                    tracing::warn!(gpu = g.index, uuid = %g.uuid, %why, "GPU takes no jobs");
                }
            }
            (
                node_spec(&inv.gpus),
                inv.device_majors.clone(),
                inv.cuda_toolkits.clone(),
                inv.cuda_driver_version.map(|v| (v.major, v.minor)),
                node.simulation.clone(),
                !cfg.health_interval.is_zero()
                    && inv.backends.contains(&joblet_gpu::model::Backend::Nvml),
            )
        };
        let caps = DriverCapabilities::parse(&cfg.driver_capabilities)
            .context("gpu.driver_capabilities")?;
        let ld_cache = if simulation.is_some() {
            // Simulated GPUs have no driver files; the fake library is
            // mounted instead.
            Vec::new()
        } else {
            match std::fs::read(&cfg.ld_cache) {
                Ok(bytes) => parse_ld_cache(&bytes, &cfg.ld_cache)
                    .with_context(|| format!("gpu.ld_cache: {}", cfg.ld_cache.display()))?,
                Err(e) => {
                    tracing::warn!(path = %cfg.ld_cache.display(), error = %e, "cannot read the loader cache: GPU jobs get no driver libraries");
                    Vec::new()
                }
            }
        };
        // Binds need clean absolute paths (no `..`): the job's mounts are
        // checked for that.
        let canon = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        let simulation = simulation.map(|s| Simulation {
            from: canon(&s.from),
            library: canon(&s.library),
        });
        let settings = GpuSettings {
            sharing: cfg.sharing,
            scrub: cfg.scrub_policy,
            scrub_timeout: cfg.scrub_timeout,
            can_verify,
            default_gpu_time: (!cfg.default_gpu_time.is_zero()).then_some(cfg.default_gpu_time),
            caps,
            dev_dir: cfg.dev_dir.clone(),
            ld_cache,
            ld_cache_path: cfg.ld_cache.clone(),
            bin_dirs: cfg.driver_bin_dirs.clone(),
            driver_files_found: DriverFilesMemo::default(),
            // A job gets its toolkit at the path the configured one
            // resolves to: `/usr/local/cuda` is usually a symlink to
            // `cuda-X.Y`, which the job's read-only `/usr` holds too, and a
            // bind cannot land on a symlink. `CUDA_HOME` and `PATH` follow.
            toolkits: toolkits
                .into_iter()
                .map(|mut t| {
                    t.path = canon(&PathBuf::from(&t.path)).display().to_string();
                    t
                })
                .collect(),
            driver_max,
            majors,
            proc_dir: cfg.proc_dir.clone(),
            mps: (cfg.sharing == SharingMode::Mps).then(|| MpsClient {
                root: cfg.mps_dir.clone(),
                active_thread_percentage: cfg.mps_active_thread_percentage,
            }),
            simulation,
            simulate_state: cfg.simulate_state.as_ref().map(canon),
        };
        let offer = Offer::of(&spec);
        let ledger = shared
            .store()
            .allocations()
            .context("reading GPU allocations")?;
        let mut requests = HashMap::new();
        let mut running = Vec::new();
        for (req, placement, started) in ledger {
            requests.insert(req.job.clone(), req.clone());
            running.push((req, placement, started));
        }
        let sched = match Scheduler::restore(
            sched_config(cfg),
            vec![spec.clone()],
            running,
            Vec::new(),
        ) {
            Ok(s) => s,
            Err(e) => {
                // The GPUs changed under the recorded allocations (a GPU
                // vanished). The engine's recovery releases allocations of
                // jobs that are gone; the live ones are kept off the GPUs
                // they still name through the pool.
                tracing::error!(error = %e, "recorded GPU allocations do not fit the GPUs found; scheduling from an empty ledger");
                Scheduler::new(sched_config(cfg), vec![spec])
            }
        };
        Ok(GpuJobs {
            shared,
            settings,
            sched,
            requests,
            offer,
            mps: (cfg.sharing == SharingMode::Mps).then(|| MpsDaemons::new(cfg)),
        })
    }

    /// A running job the daemon reattached to after a restart: the
    /// monitor attributes and enforces its memory again.
    pub fn reattach(&mut self, job: &str) {
        let Some(p) = self.sched.cluster().placement(job).cloned() else {
            tracing::warn!(%job, "a running GPU job has no recorded allocation");
            return;
        };
        let req = self.requests.get(job).cloned();
        let mut node = self.shared.lock();
        let mut gpus: Vec<String> = Vec::new();
        for u in &p.units {
            if let Some(g) = node.inventory.gpus.iter().find(|g| g.index == u.index) {
                if !gpus.contains(&g.uuid) {
                    gpus.push(g.uuid.clone());
                }
            }
        }
        let quota_mb = req
            .filter(|r| p.sharing == Sharing::Shared && r.gpu_memory_mb > 0)
            .map(|r| r.gpu_memory_mb);
        let mig = p.units.iter().any(|u| u.mig.is_some());
        node.jobs.insert(
            job.to_string(),
            JobUse {
                gpus: gpus.clone(),
                quota_mb,
                exclusive: p.sharing == Sharing::Exclusive && !mig,
                ..JobUse::default()
            },
        );
        drop(node);
        if let (Some(mps), Some(_)) = (self.mps.as_mut(), quota_mb) {
            // Its control daemon kept running with it; take it over.
            for uuid in &gpus {
                if let Err(e) = mps.adopt(job, uuid) {
                    tracing::error!(%job, gpu = %uuid, error = %e, "cannot restart the MPS control daemon of a running job's GPU");
                }
            }
        }
    }

    /// Every running job has been reattached: what an earlier run left
    /// that none of them uses is stopped (MPS control daemons).
    pub fn recovered(&mut self) {
        if let Some(mps) = self.mps.as_mut() {
            mps.finish_recovery();
        }
    }

    /// The jobs the ledger says hold GPUs.
    pub fn allocated_jobs(&self) -> Vec<String> {
        self.requests.keys().cloned().collect()
    }

    /// Feeds the scheduler and turns its decisions into engine actions,
    /// persisting every allocation before it is acted on.
    pub fn handle(&mut self, event: Event, now: UnixMillis) -> Vec<GpuAction> {
        if let Event::Submit(req) = &event {
            self.requests.insert(req.job.clone(), (**req).clone());
        }
        if let Event::Cancel(job) = &event {
            if self.sched.cluster().placement(job).is_none() {
                self.requests.remove(job);
            }
        }
        let actions = self.sched.handle(event, now);
        let mut out = Vec::new();
        for a in actions {
            match a {
                Action::Start { placement } => {
                    let job = placement.job.clone();
                    match self.allocate(&placement, now) {
                        Ok(allocated) => out.push(GpuAction::Start { job, allocated }),
                        Err(reason) => out.push(GpuAction::StartFailed { job, reason }),
                    }
                }
                Action::Reject { job, reason } => {
                    self.requests.remove(&job);
                    out.push(GpuAction::Reject {
                        job,
                        reason: format!("No GPUs available: {reason}"),
                    })
                }
                Action::Preempt { job, reason } => {
                    // Daemon jobs are never preemptible, so the core never
                    // asks; if it did, the job keeps running.
                    tracing::error!(%job, %reason, "the scheduler asked to preempt a job that is not preemptible; ignored");
                }
            }
        }
        out
    }

    /// Reserves the placement's GPUs in the pool and persists it (ledger
    /// entry, pool records, audit record: one commit); only then may the
    /// job start. On an error the engine fails the job, and
    /// [`GpuJobs::release`] gives back what the pool holds for it.
    fn allocate(&mut self, p: &Placement, now: UnixMillis) -> Result<Allocated, String> {
        let req = self
            .requests
            .get(&p.job)
            .cloned()
            .ok_or_else(|| format!("internal: no request recorded for job {}", p.job))?;
        let mut node = self.shared.lock();
        let mut gpus = Vec::new();
        for unit in &p.units {
            let Some(g) = node.inventory.gpus.iter().find(|g| g.index == unit.index) else {
                return Err(Self::undo(&p.job, &format!("GPU {} vanished", unit.index)));
            };
            gpus.push(super::mig::job_gpu(g, unit.mig).map_err(|e| Self::undo(&p.job, &e))?);
        }
        let gpus = joblet_gpu::exec::visible::job_order(&gpus);
        let mig = gpus.iter().any(|g| g.mig.is_some());
        // The physical GPUs (a slice's parent), each once: the pool, the
        // monitor and the release check work on those.
        let mut parents: Vec<String> = Vec::new();
        for g in &gpus {
            let uuid = g.mig.as_ref().map_or(&g.uuid, |m| &m.parent_uuid);
            if !parents.contains(uuid) {
                parents.push(uuid.clone());
            }
        }
        let mut updates = Vec::new();
        for (i, uuid) in parents.iter().enumerate() {
            match node.pool.allocate(uuid, &p.job, now) {
                Ok(u) => updates.extend(u),
                Err(e) => {
                    // The pool and the scheduler disagree (a health change
                    // in flight): give back what was taken.
                    for done in &parents[..i] {
                        if let Ok(u) = node.pool.release(done, &p.job, now) {
                            updates.extend(u);
                        }
                    }
                    self.shared.commit(&node, &updates, now);
                    drop(node);
                    return Err(Self::undo(&p.job, &e.to_string()));
                }
            }
        }
        let quota_mb =
            (p.sharing == Sharing::Shared && req.gpu_memory_mb > 0).then_some(req.gpu_memory_mb);
        let baseline: BTreeMap<String, u64> = parents
            .iter()
            .map(|uuid| {
                let used = node
                    .inventory
                    .gpus
                    .iter()
                    .find(|i| &i.uuid == uuid)
                    .map(|i| mib(i.memory_used_bytes))
                    .unwrap_or(0);
                (uuid.clone(), used)
            })
            .collect();
        node.jobs.insert(
            p.job.clone(),
            JobUse {
                gpus: parents.clone(),
                quota_mb,
                baseline_mb: baseline,
                // Other slices of a MIG GPU belong to other jobs: neither
                // its memory nor a reset is this job's.
                exclusive: p.sharing == Sharing::Exclusive && !mig,
                ..JobUse::default()
            },
        );
        let rec = AuditRecord {
            job_id: p.job.clone(),
            owner: req.owner.clone(),
            gpu_uuids: gpus.iter().map(|g| g.uuid.clone()).collect(),
            gpu_indices: gpus.iter().map(|g| g.index).collect(),
            memory_mb_per_gpu: (req.gpu_memory_mb > 0).then_some(req.gpu_memory_mb),
            sharing: match p.sharing {
                _ if mig => "mig".into(),
                Sharing::Exclusive => "exclusive".into(),
                Sharing::Shared => self.settings.sharing.to_string(),
            },
            start_ms: now,
            end_ms: None,
            peak_memory_mb: None,
            ended: None,
            reason: None,
        };
        // The ledger, the pool's records, the audit record and the job's
        // move to RUNNING (it starts at once, see `Engine::start_job`): one
        // commit.
        let job_id = JobId::parse(&p.job)
            .map_err(|e| Self::undo(&p.job, &format!("malformed job id: {e}")))?;
        let allocation = joblet_store::NewAllocation {
            request: &req,
            placement: p,
            audit: &rec,
            start: Some(&job_id),
        };
        let saved = self
            .shared
            .commit_allocation(&node, &updates, now, &allocation);
        drop(node);
        saved.map_err(|e| Self::undo(&p.job, &format!("cannot record the GPU allocation: {e}")))?;
        if let (Some(mps), Some(_)) = (self.mps.as_mut(), quota_mb) {
            // Fail closed: an MPS job never runs outside MPS. What was
            // recorded above is taken back by `release`.
            for (uuid, g) in parents.iter().zip(&gpus) {
                if let Err(e) = mps.acquire(&p.job, uuid) {
                    tracing::error!(job = %p.job, gpu = %uuid, error = %e, "MPS control daemon");
                    return Err(format!(
                        "MPS control daemon for GPU {} ({uuid}) could not be started: {e}",
                        g.index
                    ));
                }
            }
        }
        Ok(Allocated {
            gpus,
            quota_mb,
            request: req,
        })
    }

    /// Why an allocation could not be completed; the engine fails the job
    /// and [`GpuJobs::release`] takes back what was recorded.
    fn undo(job: &str, why: &str) -> String {
        tracing::error!(%job, %why, "GPU allocation failed");
        format!("could not allocate its GPUs: {why}")
    }

    /// The pool's health for each GPU a batch of updates touched, as
    /// scheduler events.
    pub fn health_events(&self, updates: &[GpuUpdate]) -> Vec<Event> {
        let node = self.shared.lock();
        let mut seen = Vec::new();
        for u in updates {
            let uuid = match u {
                GpuUpdate::Transition { uuid, .. }
                | GpuUpdate::Paused { uuid, .. }
                | GpuUpdate::Resumed { uuid, .. } => uuid,
                _ => continue,
            };
            if seen.contains(uuid) {
                continue;
            }
            seen.push(uuid.clone());
        }
        seen.iter()
            .filter_map(|uuid| {
                let e = node.pool.get(uuid)?;
                let temp = node
                    .inventory
                    .gpus
                    .iter()
                    .find(|g| &g.uuid == uuid)
                    .and_then(|g| g.thermal.current_c);
                Some(Event::GpuChanged {
                    node: NODE,
                    index: e.index,
                    health: GpuHealth {
                        state: e.state,
                        paused: e.paused.is_some(),
                        temperature_c: temp,
                    },
                })
            })
            .collect()
    }

    /// What the release check must look at for a job that ended.
    pub fn scrub_targets(&self, job: &str) -> Vec<ScrubTarget> {
        let node = self.shared.lock();
        let Some(usage) = node.jobs.get(job) else {
            return Vec::new();
        };
        usage
            .gpus
            .iter()
            .map(|uuid| ScrubTarget {
                uuid: uuid.clone(),
                index: node.pool.get(uuid).map(|e| e.index).unwrap_or(0),
                bus_id: node
                    .inventory
                    .gpus
                    .iter()
                    .find(|g| &g.uuid == uuid)
                    .map(|g| g.pci_bus_id.clone())
                    .unwrap_or_default(),
                exclusive: usage.exclusive,
                job_pids: usage.pids.clone(),
                baseline_mb: usage.baseline_mb.get(uuid).copied().unwrap_or(0),
            })
            .collect()
    }

    /// Whether the job holds (or held, until release) GPUs.
    pub fn holds(&self, job: &str) -> bool {
        self.sched.cluster().placement(job).is_some()
    }

    /// Gives a finished job's GPUs back: GPUs that failed the release
    /// check are quarantined (DEGRADED with the reason), the rest return to
    /// the pool; the ledger entry goes and the audit record is closed.
    /// Returns the closed audit record and the scheduler's next decisions.
    pub fn release(
        &mut self,
        job: &str,
        dirty: &[(String, String)],
        ended: (&str, &str, UnixMillis),
        now: UnixMillis,
    ) -> (Option<AuditRecord>, Vec<GpuAction>) {
        let store = self.shared.store();
        let released = match store.release_allocation(job) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(%job, error = %e, "cannot remove the job's GPU allocation from the ledger");
                true
            }
        };
        let updates = {
            let mut node = self.shared.lock();
            let mut updates = Vec::new();
            let uuids = node.jobs.remove(job).map(|u| u.gpus).unwrap_or_default();
            for uuid in uuids {
                match node.pool.release(&uuid, job, now) {
                    Ok(u) => updates.extend(u),
                    Err(e) => tracing::warn!(%job, %uuid, error = %e, "GPU release"),
                }
                if let Some((_, why)) = dirty.iter().find(|(u, _)| u == &uuid) {
                    updates.extend(node.pool.quarantine(&uuid, why, now));
                }
            }
            self.shared.commit(&node, &updates, now);
            updates
        };
        let audit = if released {
            match store.audit_close(job, ended.2, ended.0, ended.1) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(%job, error = %e, "cannot close the job's GPU audit record");
                    None
                }
            }
        } else {
            None
        };
        self.requests.remove(job);
        if let Some(mps) = self.mps.as_mut() {
            mps.release(job);
        }
        let mut actions = Vec::new();
        for ev in self.health_events(&updates) {
            actions.extend(self.handle(ev, now));
        }
        actions.extend(self.handle(Event::Exited(job.to_string()), now));
        (audit, actions)
    }
}
