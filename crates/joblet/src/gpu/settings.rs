//! What the node's GPU jobs get, fixed at start-up: the driver's files by
//! capability, CUDA toolkits, device majors, sharing mode, release-check
//! policy, MPS and simulation settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use joblet_gpu::exec::{
    find_driver_files, parse_ld_cache, DriverCapabilities, DriverFiles, LdCacheEntry, SharingMode,
};
use joblet_gpu::{CudaToolkit, DeviceMajors};
use joblet_sched::model::GpuSpec;

use super::mps::MpsClient;
use super::node_spec::{gpu_specs, partition, Partition};
use super::simulate::Simulation;
use super::SharedGpus;
use crate::config::{GpuConfig, ScrubPolicy};

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

impl GpuSettings {
    /// The settings from `gpu.*` and what discovery found; with the node's
    /// GPUs as the scheduler sees them (usable GPUs and MIG slices).
    pub fn new(
        shared: &SharedGpus,
        cfg: &GpuConfig,
    ) -> anyhow::Result<(GpuSettings, Vec<GpuSpec>)> {
        let (spec, majors, toolkits, driver_max, simulation, can_verify) = {
            let node = shared.lock();
            let inv = &node.inventory;
            for g in &inv.gpus {
                if let Partition::Unusable(why) = partition(g) {
                    tracing::warn!(gpu = g.index, uuid = %g.uuid, %why, "GPU takes no jobs");
                }
            }
            (
                gpu_specs(&inv.gpus),
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
        Ok((settings, spec))
    }
}
