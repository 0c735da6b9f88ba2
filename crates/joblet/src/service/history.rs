//! What the node remembers over time, for the web console's charts and
//! its history page, transport-neutral: a GPU's readings over the last
//! hour, day or week (the store's downsampled GPU history, fed by the
//! health monitor), GPU-hours by owner or by day (the GPU audit log),
//! queue waits by day and failures by reason (the job records). Every
//! role may read them ([`Access::Read`]); they are aggregates, no job's
//! details.

mod stats;

use std::sync::Arc;

use joblet_core::{FieldError, UnixMillis};
use joblet_store::downsample::tier_for;
use joblet_store::Store;

pub use stats::{FailureGroup, GpuHoursRow, GroupBy, QueueWaitDay};

use super::{store_error, Access, ApiError, Caller};
use crate::gpu::resolve::{gpu_info, resolve_gpu};
use crate::gpu::SharedGpus;

/// How many days the job aggregates look back by default, and at most.
pub const DEFAULT_DAYS: u32 = 7;
pub const MAX_DAYS: u32 = 90;

/// A chart's time span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Hour,
    Day,
    Week,
}

impl Window {
    /// `1h`, `1d` or `7d`; `field` names the parameter in the refusal.
    pub fn parse(field: &str, s: &str) -> Result<Window, FieldError> {
        match s {
            "1h" => Ok(Window::Hour),
            "1d" => Ok(Window::Day),
            "7d" => Ok(Window::Week),
            other => Err(FieldError::new(
                field,
                format!(
                    "{:?} is not a window: expected 1h, 1d or 7d",
                    joblet_core::text::clip(other)
                ),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Window::Hour => "1h",
            Window::Day => "1d",
            Window::Week => "7d",
        }
    }

    pub fn millis(self) -> i64 {
        match self {
            Window::Hour => 3_600_000,
            Window::Day => stats::DAY_MS,
            Window::Week => 7 * stats::DAY_MS,
        }
    }
}

/// One GPU's readings over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuHistory {
    pub index: u32,
    pub uuid: String,
    pub window: Window,
    /// Each point is the mean over this many milliseconds from its time.
    pub step_ms: i64,
    pub memory_total_mb: Option<u64>,
    /// Oldest first; none where the monitor had no sample.
    pub points: Vec<HistoryPoint>,
}

/// Means over one step; `None` where no sample had the reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryPoint {
    pub at_ms: UnixMillis,
    pub utilization_pct: Option<f64>,
    pub memory_used_mb: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
}

/// The history reads of one node.
pub struct History {
    store: Arc<Store>,
    /// `None` when the node runs with `gpu.enabled: false`.
    gpus: Option<SharedGpus>,
    clock: fn() -> UnixMillis,
}

impl History {
    pub fn new(store: Arc<Store>, gpus: Option<SharedGpus>, clock: fn() -> UnixMillis) -> History {
        History { store, gpus, clock }
    }

    /// The readings of the GPU `gpu` names (index, UUID or unique UUID
    /// prefix) over the last `window`.
    pub fn gpu(&self, caller: &Caller, gpu: &str, window: Window) -> Result<GpuHistory, ApiError> {
        caller.check(Access::Read)?;
        let shared = self.gpus.as_ref().ok_or(ApiError::GpusDisabled)?;
        let (uuid, index, memory_total_mb) = {
            let node = shared.lock();
            let uuid = resolve_gpu(&node, gpu)?;
            let info = gpu_info(&node, &uuid)?;
            (
                uuid.clone(),
                info.index,
                info.memory_total_bytes.map(|b| b >> 20),
            )
        };
        let tier = tier_for(window.millis()).ok_or_else(|| {
            ApiError::Internal(format!("no GPU history tier keeps {}", window.as_str()))
        })?;
        let since = (self.clock)() - window.millis();
        let points = self
            .store
            .gpu_samples(&uuid, tier, since)
            .map_err(store_error)?
            .into_iter()
            .map(|p| HistoryPoint {
                at_ms: p.at_ms,
                utilization_pct: p.readings.utilization_pct.value(),
                memory_used_mb: p.readings.memory_used_mb.value(),
                temperature_c: p.readings.temperature_c.value(),
                power_w: p.readings.power_w.value(),
            })
            .collect();
        Ok(GpuHistory {
            index,
            uuid,
            window,
            step_ms: tier.step_ms,
            memory_total_mb,
            points,
        })
    }

    /// GPU-hours over the last `days` days, by owner or by day.
    pub fn gpu_hours(
        &self,
        caller: &Caller,
        by: GroupBy,
        days: u32,
    ) -> Result<Vec<GpuHoursRow>, ApiError> {
        caller.check(Access::Read)?;
        let (from, now) = self.window(days)?;
        let records = self
            .store
            .audit_query(Some(from), None)
            .map_err(store_error)?;
        Ok(stats::gpu_hours(&records, by, from, now))
    }

    /// Queue waits of the jobs that started in the last `days` days, by
    /// day.
    pub fn queue_wait(&self, caller: &Caller, days: u32) -> Result<Vec<QueueWaitDay>, ApiError> {
        caller.check(Access::Read)?;
        let (from, _) = self.window(days)?;
        let waits = self.store.job_waits(from).map_err(store_error)?;
        Ok(stats::queue_waits(&waits))
    }

    /// Jobs that failed in the last `days` days, by kind of reason.
    pub fn failures(&self, caller: &Caller, days: u32) -> Result<Vec<FailureGroup>, ApiError> {
        caller.check(Access::Read)?;
        let (from, _) = self.window(days)?;
        let rows = self.store.job_failures(from).map_err(store_error)?;
        Ok(stats::failures(&rows))
    }

    /// `[now - days, now]`, `days` checked.
    fn window(&self, days: u32) -> Result<(UnixMillis, UnixMillis), ApiError> {
        if days == 0 || days > MAX_DAYS {
            return Err(FieldError::new(
                "days",
                format!("{days} is out of range: look back 1 to {MAX_DAYS} days"),
            )
            .into());
        }
        let now = (self.clock)();
        Ok((now - i64::from(days) * stats::DAY_MS, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_pki::Role;

    fn viewer() -> Caller {
        Caller {
            name: "vera".into(),
            role: Role::Viewer,
        }
    }

    fn history() -> (tempfile::TempDir, History) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("db"), &dir.path().join("key")).unwrap());
        (dir, History::new(store, None, || 30 * stats::DAY_MS))
    }

    #[test]
    fn windows_parse_and_refuse_by_name() {
        assert_eq!(Window::parse("window", "1d"), Ok(Window::Day));
        let e = Window::parse("window", "2h").unwrap_err();
        assert_eq!(e.field, "window");
        assert!(e.problem.contains("1h, 1d or 7d"), "{e}");
    }

    #[test]
    fn viewers_read_aggregates_and_days_are_bounded() {
        let (_d, h) = history();
        assert!(h
            .gpu_hours(&viewer(), GroupBy::Owner, 7)
            .unwrap()
            .is_empty());
        assert!(h.queue_wait(&viewer(), 1).unwrap().is_empty());
        assert!(h.failures(&viewer(), MAX_DAYS).unwrap().is_empty());
        for days in [0, MAX_DAYS + 1] {
            let e = h.failures(&viewer(), days).unwrap_err();
            assert!(
                matches!(&e, ApiError::InvalidField(f) if f.field == "days"),
                "{e}"
            );
        }
    }

    #[test]
    fn gpu_history_needs_gpu_support() {
        let (_d, h) = history();
        assert!(matches!(
            h.gpu(&viewer(), "0", Window::Hour),
            Err(ApiError::GpusDisabled)
        ));
    }
}
