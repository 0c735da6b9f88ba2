//! The binary's one-shot commands beside `joblet server`: `joblet cert
//! issue` ([`cert`]), `joblet discover` ([`discover`]), `joblet doctor`
//! ([`doctor`]) and `joblet cdi generate` ([`cdi`]). Each reads the
//! daemon's config and does its work once, without a daemon.

pub mod cdi;
pub mod cert;
pub mod discover;
pub mod doctor;

use std::time::{Duration, Instant};

use anyhow::Context;
use joblet_gpu::discover::DiscoveryOptions;
use joblet_gpu::NodeInventory;

use crate::config::{Config, GpuConfig};
use crate::gpu::simulate::{self, Simulation};

/// One discovery with the config's GPU settings, as the daemon would run
/// it, and how long it took.
struct OneShot {
    sim: Option<Simulation>,
    opts: DiscoveryOptions,
    inventory: NodeInventory,
    elapsed: Duration,
}

/// Discovers the GPUs once. Unlike the server, this looks at them even
/// when `gpu.enabled` is false.
fn discover_once(cfg: &Config) -> anyhow::Result<OneShot> {
    let probe = GpuConfig {
        enabled: true,
        ..cfg.gpu.clone()
    };
    let sim = simulate::prepare(&probe)?;
    let opts = crate::gpu::discovery_options(&cfg.gpu, sim.as_ref());
    let t0 = Instant::now();
    let inventory = joblet_gpu::discover::discover(&opts).context("GPU discovery")?;
    Ok(OneShot {
        sim,
        opts,
        inventory,
        elapsed: t0.elapsed(),
    })
}
