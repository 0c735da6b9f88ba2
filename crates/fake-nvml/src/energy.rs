//! The energy counter (`nvmlDeviceGetTotalEnergyConsumption`, `NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION`): power draw integrated over monotonic time.
//!
//! Model: at `nvmlInit` each GPU's counter starts at the description's
//! energy value (`power.total_energy_consumption_mj` of a profile) or at 0
//! when the description has none (an `nvidia-smi` capture never does: the
//! simulated driver was "loaded" at `nvmlInit`). From then on it grows by
//! the power draw in force (the state file's `power_mw`, else the
//! description's draw) times the elapsed `Instant` time. The runtime
//! advances every counter with the old draw just before it re-reads the
//! state file, so a changed `power_mw` counts from the moment this library
//! sees it. The counter never decreases while the library stays
//! initialised; it restarts from its base after the last `nvmlShutdown`.

use std::time::Instant;

use crate::model::Gpu;
use crate::state::GpuOverride;

/// Power draw in milliwatts in force for a GPU.
pub(crate) fn power_mw(gpu: &Gpu, ov: Option<&GpuOverride>) -> Option<u32> {
    ov.and_then(|o| o.power_mw).or(gpu.power.draw_mw)
}

/// One GPU's energy counter.
#[derive(Debug, Clone)]
pub(crate) struct EnergyMeter {
    base_mj: u64,
    /// Energy added since the base, in picojoules (mW × ns).
    added_pj: u128,
    last: Instant,
}

impl EnergyMeter {
    pub fn new(base_mj: u64, now: Instant) -> Self {
        Self {
            base_mj,
            added_pj: 0,
            last: now,
        }
    }

    /// Account for `power_mw` drawn from the last advance until `now`
    /// (nothing is added when the draw is unknown; time still moves on).
    pub fn advance(&mut self, power_mw: Option<u32>, now: Instant) {
        let elapsed_ns = now.saturating_duration_since(self.last).as_nanos();
        if let Some(mw) = power_mw {
            self.added_pj = self
                .added_pj
                .saturating_add(u128::from(mw).saturating_mul(elapsed_ns));
        }
        self.last = self.last.max(now);
    }

    /// Total energy in millijoules.
    pub fn total_mj(&self) -> u64 {
        let added = u64::try_from(self.added_pj / 1_000_000_000).unwrap_or(u64::MAX);
        self.base_mj.saturating_add(added)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn integrates_power_over_time_and_never_goes_back() {
        let t0 = Instant::now();
        let mut m = EnergyMeter::new(600_000, t0);
        assert_eq!(m.total_mj(), 600_000);
        // 72 W for 2 s = 144 J = 144 000 mJ.
        m.advance(Some(72_000), t0 + Duration::from_secs(2));
        assert_eq!(m.total_mj(), 744_000);
        // An earlier instant adds nothing.
        m.advance(Some(72_000), t0 + Duration::from_secs(1));
        assert_eq!(m.total_mj(), 744_000);
        // Unknown draw: time passes, no energy.
        m.advance(None, t0 + Duration::from_secs(3));
        assert_eq!(m.total_mj(), 744_000);
        // 250 W for 500 ms = 125 J.
        m.advance(Some(250_000), t0 + Duration::from_millis(3500));
        assert_eq!(m.total_mj(), 869_000);
    }
}
