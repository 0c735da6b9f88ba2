//! A scrape's IO: reads the store (live jobs, the GPU audit log), the GPU
//! node the monitor keeps (inventory, readings, pool, running GPU jobs)
//! and the running jobs' cgroup counters (kept in memory at the monitor's
//! period, [`super::usage_cache`]) into a [`Snapshot`].
//!
//! A process is charged to the job the monitor's quota attribution already
//! found for its pid (`crate::gpu::quota`, the pids each job was seen
//! with); a pid it has not seen yet is looked up the same way
//! ([`crate::gpu::quota::job_of_pid`]). In cluster mode it also reads the
//! scheduler-leader counters ([`crate::cluster::LeaderCounters`]). Nothing
//! here writes anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use joblet_core::{JobState, UnixMillis};
use joblet_sandbox::cgroup::Layout;
use joblet_store::Store;

use super::attribute;
use super::audit::AuditTotals;
use super::snapshot::{GpuSample, JobSample, LeaderCounts, Snapshot};
use super::usage_cache::UsageCache;
use crate::cluster::LeaderCounters;
use crate::gpu::SharedGpus;

/// Where the node's jobs' cgroups are.
#[derive(Debug, Clone)]
pub struct JobCgroups {
    pub layout: Layout,
    pub base: String,
}

/// What a scrape reads.
pub struct Collector {
    pub store: Arc<Store>,
    pub gpus: Option<SharedGpus>,
    /// The running jobs' cgroup counters, when jobs run in cgroups.
    pub usage: Option<Arc<UsageCache>>,
    pub hostname: String,
    pub policy: String,
    /// The host's procfs (for pids the monitor has not attributed yet).
    pub proc_root: PathBuf,
    /// The scheduler-leader counters, in cluster mode.
    pub cluster: Option<Arc<LeaderCounters>>,
    audit: Mutex<AuditTotals>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("gpus", &self.gpus.is_some())
            .field("usage", &self.usage)
            .field("hostname", &self.hostname)
            .finish_non_exhaustive()
    }
}

impl Collector {
    pub fn new(
        store: Arc<Store>,
        gpus: Option<SharedGpus>,
        usage: Option<Arc<UsageCache>>,
        hostname: String,
        policy: String,
    ) -> Collector {
        Collector {
            store,
            gpus,
            usage,
            hostname,
            policy,
            proc_root: PathBuf::from("/proc"),
            cluster: None,
            audit: Mutex::new(AuditTotals::default()),
        }
    }

    /// Everything a scrape shows, read now.
    pub fn snapshot(&self, now: UnixMillis) -> Snapshot {
        let mut snap = Snapshot {
            hostname: self.hostname.clone(),
            policy: self.policy.clone(),
            ..Snapshot::default()
        };
        let records = self.store.unfinished().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "metrics: cannot read the live jobs");
            Vec::new()
        });
        snap.jobs = records
            .iter()
            .map(|r| JobSample {
                id: r.id.to_string(),
                owner: r.owner.clone(),
                state: r.state.as_str().to_owned(),
                ..JobSample::default()
            })
            .collect();
        let mut gpu_use = BTreeMap::new();
        if let Some(shared) = &self.gpus {
            let (gpus, seen, base, driver) = gpu_samples(shared);
            snap.driver_version = driver;
            gpu_use = attribute::by_job(&gpus, |pid| {
                seen.get(&pid).cloned().or_else(|| {
                    let base = base.as_deref()?;
                    crate::gpu::quota::job_of_pid(&self.proc_root, pid, base)
                })
            });
            snap.gpus = gpus;
        }
        let mut usage = match &self.usage {
            Some(cache) => {
                let running: Vec<&str> = snap
                    .jobs
                    .iter()
                    .filter(|j| j.state == JobState::Running.as_str())
                    .map(|j| j.id.as_str())
                    .collect();
                cache.usage(&running)
            }
            None => BTreeMap::new(),
        };
        for job in &mut snap.jobs {
            job.gpus = gpu_use.remove(&job.id).unwrap_or_default();
            job.usage = usage.remove(&job.id);
        }
        snap.gpu_seconds_by_owner = self.gpu_seconds(now);
        snap.cluster = self.cluster.as_deref().map(|c| LeaderCounts {
            terms: c.terms.load(Ordering::Relaxed),
            plans: c.plans.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            placements: c.placements.load(Ordering::Relaxed),
        });
        snap
    }

    fn gpu_seconds(&self, now: UnixMillis) -> BTreeMap<String, f64> {
        let mut totals = self.audit.lock().unwrap_or_else(|p| p.into_inner());
        match self.store.audit_query(totals.since(), None) {
            Ok(records) => totals.update(&records, now),
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot read the GPU audit log");
                totals.update(&[], now)
            }
        }
    }
}

/// The GPUs as the monitor last saw them, the pids it attributed to each
/// job, the cgroup base and the driver version; the node's lock is held
/// only while copying.
fn gpu_samples(
    shared: &SharedGpus,
) -> (
    Vec<GpuSample>,
    BTreeMap<u32, String>,
    Option<String>,
    String,
) {
    let node = shared.lock();
    let mut seen = BTreeMap::new();
    for (job, usage) in &node.jobs {
        for pid in &usage.pids {
            seen.insert(*pid, job.clone());
        }
    }
    let gpus = node
        .inventory
        .gpus
        .iter()
        .map(|info| {
            let entry = node.pool.get(&info.uuid);
            let slices: BTreeSet<&str> = info
                .mig
                .iter()
                .flat_map(|m| &m.gpu_instances)
                .filter_map(|gi| gi.uuid.as_deref())
                .collect();
            let mut jobs: BTreeSet<String> = entry.map(|e| e.jobs.clone()).unwrap_or_default();
            let mut mig_jobs: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (job, usage) in &node.jobs {
                for uuid in &usage.gpus {
                    if *uuid == info.uuid {
                        jobs.insert(job.clone());
                    } else if slices.contains(uuid.as_str()) {
                        jobs.insert(job.clone());
                        mig_jobs.entry(uuid.clone()).or_default().push(job.clone());
                    }
                }
            }
            GpuSample {
                info: info.clone(),
                readings: node.readings.iter().find(|r| r.uuid == info.uuid).cloned(),
                last_xid: node.last_xid.get(&info.uuid).copied(),
                state: entry.map(|e| e.state.as_str().to_owned()),
                paused: entry.is_some_and(|e| e.paused.is_some()),
                jobs: jobs.into_iter().collect(),
                mig_jobs,
            }
        })
        .collect();
    let driver = node.inventory.driver_version.clone().unwrap_or_default();
    (gpus, seen, node.cgroup_base.clone(), driver)
}
