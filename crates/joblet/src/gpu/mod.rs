//! The node's GPUs inside the daemon, by layer:
//! - inventory and state: discovery at start ([`start`]), the shared
//!   [`GpuNode`] (inventory, pool), the health monitor ([`monitor`]) with
//!   per-job memory attribution and quotas ([`quota`]) and the readings'
//!   history the console charts ([`history`]);
//! - what the scheduler sees ([`node_spec`], MIG slices in [`mig`]) and
//!   what a job may ask for ([`admission`]);
//! - allocation on the node ([`allocation`]: a placement's GPUs reserved,
//!   released, quarantined), release checks ([`scrub`]), the [`audit`] log;
//! - a job's edits: the GPU part of its sandbox edits ([`edits`]: device
//!   rules and nodes, binds, masks, `/dev/shm`, environment) built with
//!   the node's [`settings`], MPS control daemons ([`mps`]);
//! - the `gpu.*` config checks ([`config_check`]) and GPU id resolution
//!   ([`resolve`]). What the API does with them is the service layer's
//!   (`crate::service::Gpus`); the one-shot `joblet discover` / `joblet
//!   doctor` are `crate::commands`.
//!
//! The decisions (states, XID classes, thermal pauses, admin rules) are
//! `joblet_core::gpu::GpuPool`'s; this module feeds it what NVML says,
//! persists what comes out, and logs it. Which job gets which GPU is the
//! engine's (`joblet-engine`); nothing here imports the engine.

pub mod admission;
pub mod allocation;
pub mod audit;
pub mod config_check;
pub mod edits;
pub mod history;
pub mod mig;
pub mod monitor;
pub mod mps;
pub mod node_spec;
pub mod quota;
pub mod resolve;
pub mod scrub;
pub mod settings;
pub mod simulate;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::{bail, Context};
use joblet_core::gpu::{GpuPool, GpuUpdate};
use joblet_core::UnixMillis;
use joblet_gpu::discover::DiscoveryOptions;
use joblet_gpu::NodeInventory;
use joblet_store::Store;

use crate::clock::now_ms;
use crate::config::GpuConfig;
use simulate::Simulation;

/// What the daemon knows about its GPUs now.
#[derive(Debug)]
pub struct GpuNode {
    /// Discovery at start, with the dynamic fields refreshed by the monitor.
    pub inventory: NodeInventory,
    pub pool: GpuPool,
    pub sampled_at: UnixMillis,
    pub simulation: Option<Simulation>,
    /// Running GPU jobs, for memory attribution and quotas.
    pub jobs: BTreeMap<String, quota::JobUse>,
    /// The sandbox's cgroup base: a process in `/<base>/<job id>` belongs to
    /// that job. `None`: jobs are not sandboxed, so not attributable.
    pub cgroup_base: Option<String>,
    /// The monitor's latest readings for the exporter (power, clocks,
    /// graphics processes, per-process utilisation, ...), by GPU.
    pub readings: Vec<joblet_gpu::nvml::GpuReadings>,
    /// The last XID NVML reported for each GPU (by UUID) since start.
    pub last_xid: BTreeMap<String, u64>,
}

/// Receives every batch of pool updates (the engine: health changes for
/// its scheduler, jobs to end).
pub type UpdateSink = tokio::sync::mpsc::UnboundedSender<Vec<GpuUpdate>>;

/// The GPU state shared by the monitor, the engine and the API.
#[derive(Debug, Clone)]
pub struct SharedGpus {
    node: Arc<Mutex<GpuNode>>,
    store: Arc<Store>,
    notify: UpdateSink,
    /// Set to ask the monitor for a sample now (release checks).
    kick: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl SharedGpus {
    pub fn lock(&self) -> MutexGuard<'_, GpuNode> {
        // A panic elsewhere must not take GPU reporting down with it; the
        // pool's updates are applied whole or not at all.
        self.node.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Asks the monitor for a fresh sample now rather than at its next
    /// period (a release check waits for one).
    pub fn sample_now(&self) {
        let (flag, cv) = &*self.kick;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }

    /// Sleeps up to `d`, returning early when a sample is asked for or
    /// `stop` is set; false once `stop` is set.
    pub fn wait_for_sample_time(
        &self,
        d: std::time::Duration,
        stop: &std::sync::atomic::AtomicBool,
    ) -> bool {
        let deadline = std::time::Instant::now() + d;
        let (flag, cv) = &*self.kick;
        let mut kicked = flag.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            if *kicked {
                *kicked = false;
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return true;
            }
            let step = (deadline - now).min(std::time::Duration::from_millis(50));
            kicked = cv
                .wait_timeout(kicked, step)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Logs what the pool decided and tells the engine, for changes the
    /// caller has saved itself (with an allocation or a release).
    pub fn announce(&self, updates: &[GpuUpdate]) {
        for u in updates {
            log_update(u);
        }
        if !updates.is_empty() {
            // The engine is gone only while the daemon shuts down.
            let _ = self.notify.send(updates.to_vec());
        }
    }

    /// Persists and logs what the pool decided, then tells the engine. A
    /// store failure is logged (the in-memory state is still right; the
    /// next change saves it again).
    pub fn commit(&self, node: &GpuNode, updates: &[GpuUpdate], now: UnixMillis) {
        if updates.is_empty() {
            return;
        }
        if let Err(e) = self.store.record_gpus(&node.pool.entries(), updates, now) {
            tracing::error!(error = %e, "could not persist GPU state changes");
        }
        self.announce(updates);
    }
}

fn log_update(u: &GpuUpdate) {
    match u {
        GpuUpdate::Transition {
            uuid,
            index,
            from,
            to,
            cause,
        } => {
            if to.is_healthy() {
                tracing::info!(gpu = index, %uuid, %from, %to, %cause, "GPU state changed");
            } else {
                tracing::warn!(gpu = index, %uuid, %from, %to, %cause, "GPU state changed");
            }
        }
        GpuUpdate::Paused { uuid, index, cause } => {
            tracing::warn!(gpu = index, %uuid, %cause, "GPU placements paused")
        }
        GpuUpdate::Resumed { uuid, index, cause } => {
            tracing::info!(gpu = index, %uuid, %cause, "GPU placements resumed")
        }
        GpuUpdate::Noted {
            uuid,
            index,
            message,
        } => tracing::info!(gpu = index, %uuid, %message, "GPU event"),
        GpuUpdate::EndJobs {
            uuid, jobs, reason, ..
        } => tracing::warn!(%uuid, ?jobs, %reason, "GPU jobs must end"),
    }
}

/// Discovery options from the config (real host roots).
pub fn discovery_options(cfg: &GpuConfig, sim: Option<&Simulation>) -> DiscoveryOptions {
    let mut opts = DiscoveryOptions {
        nvml_library: sim
            .map(|s| s.library.clone())
            .or_else(|| cfg.nvml_library.clone()),
        cuda_paths: cfg.cuda_paths.clone(),
        hwloc: cfg.hwloc,
        proc_root: cfg.proc_dir.clone(),
        ..DiscoveryOptions::default()
    };
    // Simulated GPUs must not be mixed with a real driver's (if this host
    // has one).
    opts.use_procfs = sim.is_none();
    opts
}

/// Discovers the GPUs, restores their states from the store, reconciles
/// the two, and starts the monitor. Fails when `gpu.required` and no GPU
/// was found.
pub fn start(
    cfg: &GpuConfig,
    sim: Option<Simulation>,
    store: Arc<Store>,
    cgroup_base: Option<String>,
    notify: UpdateSink,
) -> anyhow::Result<(SharedGpus, monitor::Monitor)> {
    let opts = discovery_options(cfg, sim.as_ref());
    let (inventory, nvml) =
        joblet_gpu::discover::discover_keeping_nvml(&opts).context("GPU discovery")?;
    for w in &inventory.warnings {
        tracing::warn!(warning = %w, "GPU discovery");
    }
    if inventory.gpus.is_empty() {
        let why = if inventory.warnings.is_empty() {
            "no GPU found".to_string()
        } else {
            inventory.warnings.join("; ")
        };
        if cfg.required {
            bail!("gpu.enabled is true but this node has no usable GPU ({why}); install the NVIDIA driver, set gpu.simulate to simulate GPUs, or set gpu.required: false to run CPU-only");
        }
        tracing::warn!(%why, "gpu.enabled is true but no usable GPU was found: running CPU-only (gpu.required: false)");
    }
    let restored = store.gpus().context("reading GPU states")?;
    let mut pool = GpuPool::restore(restored);
    let now = now_ms();
    let present: Vec<(String, u32)> = inventory
        .gpus
        .iter()
        .map(|g| (g.uuid.clone(), g.index))
        .collect();
    let updates = pool.sync(&present, now);
    tracing::info!(
        gpus = inventory.gpus.len(),
        backends = ?inventory.backends,
        driver = inventory.driver_version.as_deref().unwrap_or("-"),
        simulated = sim.is_some(),
        "GPU discovery done"
    );
    let shared = SharedGpus {
        node: Arc::new(Mutex::new(GpuNode {
            inventory,
            pool,
            sampled_at: now,
            simulation: sim,
            jobs: BTreeMap::new(),
            cgroup_base,
            readings: Vec::new(),
            last_xid: BTreeMap::new(),
        })),
        store,
        notify,
        kick: Arc::new((Mutex::new(false), std::sync::Condvar::new())),
    };
    {
        let node = shared.lock();
        shared.commit(&node, &updates, now);
    }
    let nvml = nvml.map(Arc::new);
    let monitor = monitor::Monitor::start(shared.clone(), cfg, nvml)?;
    Ok((shared, monitor))
}
