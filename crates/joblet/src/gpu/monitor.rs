//! The GPU health monitor: a sampling thread (every `gpu.health_interval`)
//! and an NVML event thread (XIDs, ECC), both feeding the pool.
//!
//! Both are plain threads: NVML calls block, and they must not stall the
//! async runtime. Each observation is applied under the node lock, then
//! persisted, logged and handed to the engine ([`SharedGpus::commit`]).
//! Each sample also attributes GPU memory to jobs and ends those over
//! their quota ([`super::quota`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use joblet_core::gpu::{GpuObservation, GpuUpdate, Observed};
use joblet_gpu::nvml::NvmlInventory;
use joblet_gpu::{BackendReport, GpuEvent, GpuEventKind, GpuInfo, GpuInventory};

use super::{GpuNode, SharedGpus};
use crate::clock::now_ms;
use crate::config::GpuConfig;

/// The running monitor threads; [`Monitor::stop`] ends them.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl Monitor {
    /// Starts sampling and event watching when the node's GPUs came from
    /// NVML (procfs has no readings and no events to watch).
    pub fn start(
        shared: SharedGpus,
        cfg: &GpuConfig,
        nvml: Option<Arc<NvmlInventory>>,
    ) -> anyhow::Result<Monitor> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let Some(nvml) = nvml else {
            tracing::info!(
                "GPU health monitor off: no NVML on this node (procfs has no readings or events)"
            );
            return Ok(Monitor { stop, threads });
        };
        let (tx, rx) = mpsc::channel();
        threads.push(
            joblet_gpu::nvml::events::spawn_event_thread(&nvml, tx, stop.clone())
                .context("starting the NVML event thread")?,
        );
        {
            let (shared, stop) = (shared.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("gpu-events".into())
                    .spawn(move || event_loop(&shared, &rx, &stop))
                    .context("starting the GPU event handler")?,
            );
        }
        if !cfg.health_interval.is_zero() {
            let (stop2, interval) = (stop.clone(), cfg.health_interval);
            threads.push(
                std::thread::Builder::new()
                    .name("gpu-monitor".into())
                    .spawn(move || sample_loop(&shared, nvml.as_ref(), interval, &stop2))
                    .context("starting the GPU monitor")?,
            );
        }
        Ok(Monitor { stop, threads })
    }

    /// Stops the threads and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn sample_loop(shared: &SharedGpus, inv: &NvmlInventory, interval: Duration, stop: &AtomicBool) {
    let mut failing = false;
    let mut readings = joblet_gpu::nvml::ReadingsSampler::new();
    let mut history = super::history::HistoryFeed::new();
    while shared.wait_for_sample_time(interval, stop) {
        let t0 = Instant::now();
        match inv.discover() {
            Ok(report) => {
                if failing {
                    tracing::info!("GPU sampling works again");
                    failing = false;
                }
                apply_sample(shared, report);
                // The exporter's readings (power, clocks, processes, ...).
                let sampled = readings.sample(inv);
                shared.lock().readings = sampled;
                history.sampled(shared);
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "GPU sampling failed; readings are stale until it works again");
                    failing = true;
                }
            }
        }
        tracing::trace!(elapsed_us = t0.elapsed().as_micros() as u64, "GPU sample");
    }
}

/// Refreshes the inventory's readings and lets the pool judge each GPU.
pub fn apply_sample(shared: &SharedGpus, report: BackendReport) -> Vec<GpuUpdate> {
    let now = now_ms();
    let mut node = shared.lock();
    let mut updates = Vec::new();
    let mut report = report;
    for fresh in report.gpus.iter_mut().filter(|g| g.lost) {
        // A lost GPU answers nothing, maybe not even its UUID: it is the
        // GPU discovery saw at that bus id (or index), with what was known.
        if let Some(old) = node.inventory.gpus.iter().find(|g| {
            (!fresh.pci_bus_id.is_empty() && g.pci_bus_id == fresh.pci_bus_id)
                || (fresh.pci_bus_id.is_empty() && g.index == fresh.index)
        }) {
            *fresh = GpuInfo {
                lost: true,
                ..old.clone()
            };
        }
    }
    let present: Vec<(String, u32)> = report
        .gpus
        .iter()
        .map(|g| (g.uuid.clone(), g.index))
        .collect();
    updates.extend(node.pool.sync(&present, now));
    for fresh in report.gpus {
        let obs = observation(&fresh);
        let uuid = fresh.uuid.clone();
        refresh(&mut node, fresh);
        updates.extend(node.pool.observe(&uuid, Observed::Sample(obs), now));
    }
    node.sampled_at = now;
    updates.extend(super::quota::attribute(&mut node, shared.store(), now));
    shared.commit(&node, &updates, now);
    updates
}

/// Replaces a GPU's record with a fresh reading, keeping what only
/// discovery knew (procfs/topology facts NVML may not give).
fn refresh(node: &mut GpuNode, mut fresh: GpuInfo) {
    match node
        .inventory
        .gpus
        .iter_mut()
        .find(|g| g.pci_bus_id == fresh.pci_bus_id)
    {
        Some(old) => {
            fresh.numa_node = fresh.numa_node.or(old.numa_node);
            fresh.local_cpus = fresh.local_cpus.take().or(old.local_cpus.take());
            *old = fresh;
        }
        None => {
            node.inventory.gpus.push(fresh);
            node.inventory.gpus.sort_by_key(|g| g.index);
        }
    }
}

/// The health-relevant part of a reading.
pub fn observation(g: &GpuInfo) -> GpuObservation {
    GpuObservation {
        temperature_c: g.thermal.current_c,
        slowdown_c: g.thermal.slowdown_c,
        volatile_uncorrected: g.ecc.volatile_uncorrected,
        retired_pages_pending: g.ecc.retired_pages_pending,
        remapped_rows_pending: g.ecc.remapped_rows_pending,
        remapped_rows_failure: g.ecc.remapped_rows_failure,
        lost: g.lost,
    }
}

fn event_loop(shared: &SharedGpus, rx: &mpsc::Receiver<GpuEvent>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(ev) => {
                apply_event(shared, &ev);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if !stop.load(Ordering::SeqCst) {
                    tracing::error!(
                        "the NVML event thread ended: XID and ECC events are no longer watched"
                    );
                }
                return;
            }
        }
    }
}

/// Applies one NVML event to the GPU it names (all GPUs for a failed wait).
pub fn apply_event(shared: &SharedGpus, ev: &GpuEvent) -> Vec<GpuUpdate> {
    let now = now_ms();
    let mut node = shared.lock();
    let targets: Vec<String> = match &ev.kind {
        GpuEventKind::WaitFailed(_) => node.inventory.gpus.iter().map(|g| g.uuid.clone()).collect(),
        _ => node
            .inventory
            .gpus
            .iter()
            .filter(|g| g.pci_bus_id == ev.pci_bus_id || ev.uuid.as_deref() == Some(&g.uuid))
            .map(|g| g.uuid.clone())
            .take(1)
            .collect(),
    };
    if targets.is_empty() {
        tracing::warn!(bus_id = %ev.pci_bus_id, kind = ?ev.kind, "GPU event for a GPU this node does not know");
    }
    let observed = match &ev.kind {
        GpuEventKind::Xid(x) => Observed::Xid(*x),
        GpuEventKind::SingleBitEcc => Observed::SingleBitEcc,
        GpuEventKind::DoubleBitEcc => Observed::DoubleBitEcc,
        GpuEventKind::WaitFailed(why) => Observed::WaitFailed(why.clone()),
    };
    let mut updates = Vec::new();
    for uuid in targets {
        if let GpuEventKind::Xid(x) = &ev.kind {
            node.last_xid.insert(uuid.clone(), *x);
        }
        updates.extend(node.pool.observe(&uuid, observed.clone(), now));
    }
    shared.commit(&node, &updates, now);
    updates
}
