//! The node's side of a GPU allocation. The engine decides which units
//! (whole GPUs or MIG slices) a job gets; here they are resolved to the
//! node's devices ([`JobGpu`]s in PCI bus order, CUDA's order inside the
//! job), reserved in the GPU pool (AVAILABLE → ALLOCATED), handed to the
//! monitor (memory attribution, quotas, the idle baseline the release
//! check compares against), and described by the audit record the start
//! opens; MPS jobs get their GPU's control daemon. At the job's end the
//! release gives the GPUs back to the pool or quarantines those that did
//! not come back clean.
//!
//! Pool changes are saved by the caller's `commit` while the pool is
//! locked, so what the store says and what the pool holds never part.

use std::collections::{BTreeMap, BTreeSet};

use joblet_core::gpu::{GpuEntry, GpuUpdate};
use joblet_core::UnixMillis;
use joblet_engine::DirtyGpu;
use joblet_gpu::exec::{JobGpu, SharingMode};
use joblet_sched::model::{GpuHealth, JobRequest, Placement, Sharing};
use joblet_store::{AuditRecord, GpuGrantRecords, StoreError};

use super::mig::{self, MigGone};
use super::mps::{MpsDaemons, MpsError};
use super::node_spec::{mib, Offer};
use super::quota::JobUse;
use super::scrub::ScrubTarget;
use super::settings::GpuSettings;
use super::SharedGpus;
use crate::config::GpuConfig;

/// Why a placement's GPUs could not be given to its job.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("could not allocate its GPUs: GPU {index} vanished")]
    Vanished { index: u32 },
    #[error("could not allocate its GPUs: {0}")]
    Mig(#[from] MigGone),
    #[error("could not allocate its GPUs: GPU {uuid}: {source}")]
    Pool {
        uuid: String,
        source: joblet_core::gpu::AllocError,
    },
    #[error("could not allocate its GPUs: cannot record the GPU allocation: {0}")]
    Store(#[from] StoreError),
    #[error("MPS control daemon for GPU {index} ({uuid}) could not be started: {source}")]
    Mps {
        index: u32,
        uuid: String,
        source: Box<MpsError>,
    },
}

/// What a GPU job was given.
#[derive(Debug, Clone)]
pub struct GpuGrant {
    /// Its GPUs in PCI bus order (CUDA's order inside the job).
    pub gpus: Vec<JobGpu>,
    /// Per-GPU memory quota the monitor enforces (shared and MPS modes).
    pub quota_mb: Option<u64>,
}

/// The node's GPUs as jobs get them.
pub struct NodeGpus {
    pub shared: SharedGpus,
    pub settings: GpuSettings,
    /// Whole GPUs and MIG slices, for submission messages.
    pub(crate) offer: Offer,
    /// With `gpu.sharing: mps`: the control daemons.
    mps: Option<MpsDaemons>,
}

impl std::fmt::Debug for NodeGpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeGpus")
            .field("sharing", &self.settings.sharing)
            .field("offer", &self.offer)
            .finish()
    }
}

impl NodeGpus {
    /// The node's GPUs for jobs, and the GPUs as the scheduler sees them.
    pub fn new(
        shared: SharedGpus,
        cfg: &GpuConfig,
    ) -> anyhow::Result<(NodeGpus, Vec<joblet_sched::model::GpuSpec>)> {
        let (settings, specs) = GpuSettings::new(&shared, cfg)?;
        let offer = Offer::of_gpus(&specs);
        let gpus = NodeGpus {
            shared,
            settings,
            offer,
            mps: (cfg.sharing == SharingMode::Mps).then(|| MpsDaemons::new(cfg)),
        };
        Ok((gpus, specs))
    }

    /// Resolves the placement's units to the node's GPUs, reserves them in
    /// the pool and opens the job's audit record, and has `commit` save
    /// that (with whatever else the start saves) while the pool is locked.
    /// On any error the pool is as it was.
    pub fn grant(
        &mut self,
        p: &Placement,
        req: &JobRequest,
        now: UnixMillis,
        commit: impl FnOnce(GpuGrantRecords<'_>) -> Result<(), StoreError>,
    ) -> Result<GpuGrant, GrantError> {
        let mut node = self.shared.lock();
        let mut gpus = Vec::new();
        for unit in &p.units {
            let Some(g) = node.inventory.gpus.iter().find(|g| g.index == unit.index) else {
                return Err(GrantError::Vanished { index: unit.index });
            };
            gpus.push(mig::job_gpu(g, unit.mig)?);
        }
        let gpus = joblet_gpu::exec::visible::job_order(&gpus);
        let mig = gpus.iter().any(|g| g.mig.is_some());
        // The physical GPUs (a slice's parent), each once: the pool, the
        // monitor and the release check work on those.
        let parents = parents(&gpus);
        let mut updates = Vec::new();
        for (i, uuid) in parents.iter().enumerate() {
            match node.pool.allocate(uuid, &p.job, now) {
                Ok(u) => updates.extend(u),
                Err(source) => {
                    // The pool and the scheduler disagree (a health change
                    // in flight): give back what was taken.
                    for done in &parents[..i] {
                        let _ = node.pool.release(done, &p.job, now);
                    }
                    return Err(GrantError::Pool {
                        uuid: uuid.clone(),
                        source,
                    });
                }
            }
        }
        let quota_mb =
            (p.sharing == Sharing::Shared && req.gpu_memory_mb > 0).then_some(req.gpu_memory_mb);
        let audit = AuditRecord {
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
        // Only the records of the GPUs this changed (none when it joined a
        // shared GPU already allocated): it is on the job's start path.
        let saved = {
            let entries: Vec<&GpuEntry> = node
                .pool
                .entries()
                .into_iter()
                .filter(|e| updates.iter().any(|u| u.uuid() == e.uuid))
                .collect();
            commit(GpuGrantRecords {
                entries: &entries,
                updates: &updates,
                audit: &audit,
            })
        };
        if let Err(e) = saved {
            for uuid in &parents {
                let _ = node.pool.release(uuid, &p.job, now);
            }
            return Err(e.into());
        }
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
        drop(node);
        self.shared.announce(&updates);
        tracing::debug!(job = %p.job, gpus = ?audit.gpu_uuids, "GPUs granted");
        Ok(GpuGrant { gpus, quota_mb })
    }

    /// Starts (or joins) the MPS control daemons of an MPS job's GPUs.
    /// Fails closed: an MPS job never runs outside MPS.
    pub fn start_mps(&mut self, job: &str, grant: &GpuGrant) -> Result<(), GrantError> {
        let (Some(mps), Some(_)) = (self.mps.as_mut(), grant.quota_mb) else {
            return Ok(());
        };
        for (uuid, g) in parents(&grant.gpus).iter().zip(&grant.gpus) {
            if let Err(source) = mps.acquire(job, uuid) {
                tracing::error!(%job, gpu = %uuid, error = %source, "MPS control daemon");
                return Err(GrantError::Mps {
                    index: g.index,
                    uuid: uuid.clone(),
                    source: Box::new(source),
                });
            }
        }
        Ok(())
    }

    /// A running job the daemon reattached to after a restart: the monitor
    /// attributes and enforces its memory again, its MPS control daemon is
    /// taken over.
    pub fn adopt(&mut self, job: &str, p: &Placement, req: &JobRequest) {
        let mut node = self.shared.lock();
        let mut gpus: Vec<String> = Vec::new();
        for u in &p.units {
            if let Some(g) = node.inventory.gpus.iter().find(|g| g.index == u.index) {
                if !gpus.contains(&g.uuid) {
                    gpus.push(g.uuid.clone());
                }
            }
        }
        let quota_mb =
            (p.sharing == Sharing::Shared && req.gpu_memory_mb > 0).then_some(req.gpu_memory_mb);
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
            for uuid in &gpus {
                if let Err(e) = mps.adopt(job, uuid) {
                    tracing::error!(%job, gpu = %uuid, error = %e, "cannot restart the MPS control daemon of a running job's GPU");
                }
            }
        }
    }

    /// Recovery is done and `held` are the jobs the ledger says hold GPUs:
    /// the pool forgets every other job it lists (a release saved in the
    /// ledger but not in the pool's records, by an older daemon), and what
    /// an earlier run left that no job uses is stopped (MPS control
    /// daemons).
    pub fn recovered(&mut self, held: &BTreeSet<String>, now: UnixMillis) {
        let mut node = self.shared.lock();
        let stale: Vec<(String, String)> = node
            .pool
            .entries()
            .into_iter()
            .flat_map(|e| {
                e.jobs
                    .iter()
                    .filter(|j| !held.contains(*j))
                    .map(|j| (e.uuid.clone(), j.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut updates = Vec::new();
        for (uuid, job) in stale {
            tracing::warn!(gpu = %uuid, %job, "the GPU pool lists a job that holds no allocation; released");
            if let Ok(u) = node.pool.release(&uuid, &job, now) {
                updates.extend(u);
            }
        }
        self.shared.commit(&node, &updates, now);
        drop(node);
        if let Some(mps) = self.mps.as_mut() {
            mps.finish_recovery();
        }
    }

    /// The health of each GPU a batch of pool updates touched, by index.
    pub fn health_of(&self, updates: &[GpuUpdate]) -> Vec<(u32, GpuHealth)> {
        let mut seen: Vec<&str> = Vec::new();
        for u in updates {
            match u {
                GpuUpdate::Transition { uuid, .. }
                | GpuUpdate::Paused { uuid, .. }
                | GpuUpdate::Resumed { uuid, .. }
                    if !seen.contains(&uuid.as_str()) =>
                {
                    seen.push(uuid);
                }
                _ => {}
            }
        }
        let node = self.shared.lock();
        seen.iter()
            .filter_map(|uuid| health_in(&node, uuid))
            .collect()
    }

    /// Every GPU's health now, by index.
    pub fn health_now(&self) -> Vec<(u32, GpuHealth)> {
        health_now(&self.shared)
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

    /// Gives a finished job's GPUs back to the pool, quarantining the
    /// `dirty` ones (DEGRADED with the reason), and has `commit` save the
    /// pool's changed records with the release while the pool is locked.
    /// A job the pool does not list (it never got its GPUs) changes
    /// nothing.
    pub fn release(
        &mut self,
        job: &str,
        p: &Placement,
        dirty: &[DirtyGpu],
        now: UnixMillis,
        commit: impl FnOnce(&[&GpuEntry], &[GpuUpdate]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut node = self.shared.lock();
        let mut uuids = node.jobs.remove(job).map(|u| u.gpus).unwrap_or_default();
        // A job reattached without its usage record still named its GPUs.
        for u in &p.units {
            if let Some(g) = node.inventory.gpus.iter().find(|g| g.index == u.index) {
                if !uuids.contains(&g.uuid) {
                    uuids.push(g.uuid.clone());
                }
            }
        }
        let mut updates = Vec::new();
        for uuid in &uuids {
            let held = node.pool.get(uuid).is_some_and(|e| e.jobs.contains(job));
            if held {
                match node.pool.release(uuid, job, now) {
                    Ok(u) => updates.extend(u),
                    Err(e) => tracing::warn!(%job, %uuid, error = %e, "GPU release"),
                }
            }
            if let Some(d) = dirty.iter().find(|d| &d.uuid == uuid) {
                tracing::error!(%job, gpu = %uuid, why = %d.why, "GPU did not come back clean; quarantined");
                updates.extend(node.pool.quarantine(uuid, &d.why, now));
            }
        }
        let saved = {
            let entries: Vec<&GpuEntry> = node
                .pool
                .entries()
                .into_iter()
                .filter(|e| updates.iter().any(|u| u.uuid() == e.uuid))
                .collect();
            commit(&entries, &updates)
        };
        drop(node);
        // The pool changed whether or not the store took it (a failed
        // commit is logged by the caller; the next change saves it).
        self.shared.announce(&updates);
        if let Some(mps) = self.mps.as_mut() {
            mps.release(job);
        }
        saved
    }
}

/// The physical GPUs of a job's units (a slice's parent), each once.
fn parents(gpus: &[JobGpu]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in gpus {
        let uuid = g.mig.as_ref().map_or(&g.uuid, |m| &m.parent_uuid);
        if !out.contains(uuid) {
            out.push(uuid.clone());
        }
    }
    out
}

/// Every GPU's health as the scheduler sees it now (by index).
pub fn health_now(shared: &SharedGpus) -> Vec<(u32, GpuHealth)> {
    let node = shared.lock();
    node.pool
        .entries()
        .iter()
        .filter_map(|e| health_in(&node, &e.uuid))
        .collect()
}

fn health_in(node: &super::GpuNode, uuid: &str) -> Option<(u32, GpuHealth)> {
    let e = node.pool.get(uuid)?;
    let temp = node
        .inventory
        .gpus
        .iter()
        .find(|g| g.uuid == uuid)
        .and_then(|g| g.thermal.current_c);
    Some((
        e.index,
        GpuHealth {
            state: e.state,
            paused: e.paused.is_some(),
            temperature_c: temp,
        },
    ))
}
