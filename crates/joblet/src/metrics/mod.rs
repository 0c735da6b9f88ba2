//! Prometheus `/metrics` for the node (docs/observability.md).
//!
//! - [`snapshot`]: what one scrape shows, as plain data;
//! - [`collect`]: the IO that fills it (store, the GPU node the monitor
//!   keeps, the jobs' cgroup counters [`usage_cache`] samples at the
//!   monitor's period from the files [`cgroup_usage`] found; [`cgroup_io`],
//!   [`audit`] and the per-process attribution in [`attribute`] are its
//!   pure helpers);
//! - [`dcgm`]: dcgm-exporter's `DCGM_FI_*` series, names, types, units and
//!   labels kept, plus `hpc_job`/`owner` from joblet's own allocations;
//! - [`joblet`]: joblet's own `joblet_*` series, clean under `promtool
//!   check metrics`, with the engine's counters and histograms
//!   ([`engine`], fed by the engine's loop);
//! - [`server`]: the listener (`metrics.address`, optional TLS).
//!
//! Encoding goes through the official Prometheus client
//! (`prometheus-client`, text format 0.0.4); no line is hand-formatted.
//! Collection happens at scrape time, from readings the GPU monitor already
//! took every `gpu.health_interval` (a scrape adds no NVML call) and the
//! jobs' cgroup counters read at that same period (a scrape opens no
//! cgroup file of a job the sampler already knows).

pub mod attribute;
pub mod audit;
pub mod cgroup_io;
pub mod cgroup_usage;
pub mod collect;
pub mod dcgm;
pub mod engine;
pub mod joblet;
pub mod server;
pub mod snapshot;
pub mod usage_cache;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

use joblet_sandbox::cgroup::Layout;
use joblet_store::Store;

use crate::config::Config;
use crate::gpu::SharedGpus;

pub use collect::{Collector, JobCgroups};
pub use engine::{engine, EngineMetrics};
pub use server::{bind, MetricsError, MetricsListener};
pub use snapshot::Snapshot;
pub use usage_cache::UsageCache;

/// Collects and encodes a scrape.
#[derive(Debug)]
pub struct Exporter {
    collector: Collector,
    engine: &'static EngineMetrics,
}

impl Exporter {
    pub fn new(collector: Collector) -> Exporter {
        Exporter {
            collector,
            engine: engine(),
        }
    }

    /// One scrape's body.
    pub fn scrape(&self) -> Result<String, std::fmt::Error> {
        render(
            &self.collector.snapshot(crate::clock::now_ms()),
            self.engine,
        )
    }
}

/// The exposition of `snap`: dcgm-compatible series, then joblet's own.
pub fn render(snap: &Snapshot, engine: &EngineMetrics) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(64 * 1024);
    dcgm::encode(snap, &mut out)?;
    joblet::encode(snap, engine, &mut out)?;
    Ok(out)
}

/// Starts serving `/metrics` on `listener` for this node (its store, its
/// GPUs when it has them, its jobs' cgroups when jobs are sandboxed);
/// returns the address for `server.json`. The jobs' cgroup counters are
/// sampled at the GPU monitor's period (`gpu.health_interval`).
pub fn start(
    listener: MetricsListener,
    cfg: &Config,
    store: Arc<Store>,
    gpus: Option<SharedGpus>,
    cluster: Option<Arc<crate::cluster::LeaderCounters>>,
) -> String {
    let usage = if cfg.sandbox.enabled {
        match Layout::detect(Path::new("/proc/self/mountinfo")) {
            Ok(layout) => {
                let cgroups = JobCgroups {
                    layout,
                    base: cfg.sandbox.cgroup_base.clone(),
                };
                let cache = Arc::new(UsageCache::new(cgroups, cfg.gpu.health_interval));
                if let Some(Err(e)) = usage_cache::spawn_sampler(&cache) {
                    tracing::warn!(error = %e, "metrics: no sampler thread, each scrape reads the jobs' cgroups");
                }
                Some(cache)
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics: no cgroup layout, jobs' CPU, memory and IO are not shown");
                None
            }
        }
    } else {
        None
    };
    let hostname = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let policy = format!("{:?}", cfg.gpu.policy).to_ascii_lowercase();
    let mut collector = Collector::new(store, gpus, usage, hostname, policy);
    collector.cluster = cluster;
    let exporter = Exporter::new(collector);
    let address = listener.local_addr();
    tracing::info!(%address, tls = listener.is_tls(), "serving /metrics");
    listener.serve(Arc::new(exporter));
    address.to_string()
}
