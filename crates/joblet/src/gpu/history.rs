//! Feeds the health monitor's samples into the store's GPU history
//! (`joblet_store::downsample`), which the web console charts.
//!
//! The monitor's sampling thread calls [`HistoryFeed::sampled`] after each
//! sample. Readings are kept here and written in one transaction every
//! [`FLUSH_EVERY`], not one per sample: the store's connection is shared
//! with job starts, which should not wait behind a chart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use joblet_core::UnixMillis;
use joblet_gpu::GpuInfo;
use joblet_store::downsample::{GpuPoint, Mean, Readings};
use joblet_store::GpuSamples;

use super::SharedGpus;

/// How often buffered samples are written to the store: the 1-hour chart
/// lags by at most this.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// Samples not yet written, by GPU UUID.
#[derive(Debug)]
pub struct HistoryFeed {
    pending: BTreeMap<String, Vec<GpuPoint>>,
    last_flush: Instant,
    /// The last write failed (logged once until one works again).
    failing: bool,
}

impl Default for HistoryFeed {
    fn default() -> HistoryFeed {
        HistoryFeed::new()
    }
}

impl HistoryFeed {
    pub fn new() -> HistoryFeed {
        HistoryFeed {
            pending: BTreeMap::new(),
            last_flush: Instant::now(),
            failing: false,
        }
    }

    /// Takes the readings the monitor has just applied to the node (its
    /// inventory, and the power draw among the exporter's readings), and
    /// writes what is buffered when [`FLUSH_EVERY`] has passed since the
    /// last write.
    pub fn sampled(&mut self, shared: &SharedGpus) {
        {
            let node = shared.lock();
            let power = |uuid: &str| {
                node.readings
                    .iter()
                    .find(|r| r.uuid == uuid)
                    .and_then(|r| r.power_mw)
                    .map(|mw| f64::from(mw) / 1000.0)
            };
            self.add(&node.inventory.gpus, power, node.sampled_at);
        }
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush(shared, crate::clock::now_ms());
        }
    }

    /// Buffers one sample of `gpus` taken at `at_ms`, with each one's
    /// power draw in W (by UUID) when known; lost GPUs have no readings and
    /// are skipped.
    fn add(&mut self, gpus: &[GpuInfo], power_w: impl Fn(&str) -> Option<f64>, at_ms: UnixMillis) {
        for g in gpus.iter().filter(|g| !g.lost) {
            self.pending
                .entry(g.uuid.clone())
                .or_default()
                .push(point(g, power_w(&g.uuid), at_ms));
        }
    }

    /// Writes the buffered samples. On failure they are dropped (the
    /// history has a gap; the monitor goes on) and the error logged once.
    fn flush(&mut self, shared: &SharedGpus, now: UnixMillis) {
        self.last_flush = Instant::now();
        let batch: Vec<GpuSamples> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(uuid, points)| GpuSamples { uuid, points })
            .collect();
        match shared.store().record_gpu_samples(&batch, now) {
            Ok(()) => {
                if self.failing {
                    tracing::info!("GPU history is written again");
                    self.failing = false;
                }
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(error = %e, "could not write the GPU history; the console's charts will have a gap");
                    self.failing = true;
                }
            }
        }
    }
}

/// The readings the history keeps, from one GPU's sample and its power
/// draw (W).
pub fn point(g: &GpuInfo, power_w: Option<f64>, at_ms: UnixMillis) -> GpuPoint {
    const MIB: f64 = 1024.0 * 1024.0;
    GpuPoint {
        at_ms,
        readings: Readings {
            utilization_pct: Mean::of(g.utilization_gpu_pct.map(f64::from)),
            memory_used_mb: Mean::of(g.memory_used_bytes.map(|b| b as f64 / MIB)),
            temperature_c: Mean::of(g.thermal.current_c.map(f64::from)),
            power_w: Mean::of(power_w),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, util: Option<u32>, lost: bool) -> GpuInfo {
        let mut g = GpuInfo {
            uuid: uuid.into(),
            memory_used_bytes: Some(3 << 30),
            ..GpuInfo::default()
        };
        g.thermal.current_c = Some(41);
        g.utilization_gpu_pct = util;
        g.lost = lost;
        g
    }

    #[test]
    fn a_sample_becomes_a_point_of_what_is_known() {
        let p = point(&gpu("GPU-a", Some(75), false), None, 1_000);
        assert_eq!(p.at_ms, 1_000);
        assert_eq!(p.readings.utilization_pct.value(), Some(75.0));
        assert_eq!(p.readings.memory_used_mb.value(), Some(3072.0));
        assert_eq!(p.readings.temperature_c.value(), Some(41.0));
        assert_eq!(p.readings.power_w.value(), None);
        let p = point(&gpu("GPU-a", None, false), Some(212.5), 1_000);
        assert_eq!(p.readings.utilization_pct.n, 0);
        assert_eq!(p.readings.power_w.value(), Some(212.5));
    }

    #[test]
    fn lost_gpus_are_not_buffered() {
        let mut feed = HistoryFeed::new();
        let watts = |uuid: &str| (uuid == "GPU-a").then_some(90.0);
        feed.add(
            &[gpu("GPU-a", Some(1), false), gpu("GPU-b", Some(2), true)],
            watts,
            5,
        );
        feed.add(&[gpu("GPU-a", Some(3), false)], watts, 6);
        assert_eq!(feed.pending.keys().collect::<Vec<_>>(), ["GPU-a"]);
        assert_eq!(feed.pending["GPU-a"].len(), 2);
        assert_eq!(
            feed.pending["GPU-a"][1].readings.power_w.value(),
            Some(90.0)
        );
    }
}
