//! Power readings, limits, energy and performance state (milliwatts and millijoules, as NVML reports them).

use super::{available, with_gpu, Handle};
use crate::abi::Status;
use crate::{energy, runtime};

/// `nvmlDeviceGetPowerUsage`: the state file's `power_mw`, else the description's draw.
pub fn usage_mw(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPowerUsage", |d| {
        available(energy::power_mw(d.gpu, d.overrides))
    })
}

pub fn management_limit_mw(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPowerManagementLimit", |d| {
        available(d.gpu.power.management_limit_mw)
    })
}

pub fn enforced_limit_mw(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetEnforcedPowerLimit", |d| {
        available(d.gpu.power.enforced_limit_mw)
    })
}

pub fn default_limit_mw(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPowerManagementDefaultLimit", |d| {
        available(d.gpu.power.default_limit_mw)
    })
}

/// `(min, max)` settable management limit.
pub fn limit_constraints_mw(h: Handle) -> Result<(u32, u32), Status> {
    with_gpu(h, "nvmlDeviceGetPowerManagementLimitConstraints", |d| {
        Ok((
            available(d.gpu.power.min_limit_mw)?,
            available(d.gpu.power.max_limit_mw)?,
        ))
    })
}

/// `nvmlDeviceGetPowerManagementMode`: enabled when the board has a
/// settable limit.
pub fn management_mode(h: Handle) -> Result<bool, Status> {
    with_gpu(h, "nvmlDeviceGetPowerManagementMode", |d| {
        Ok(d.gpu.power.management_limit_mw.is_some())
    })
}

/// Energy since the simulated driver load, in millijoules (see `crate::energy`).
/// Not supported where the power draw is unknown.
pub fn total_energy_mj(h: Handle) -> Result<u64, Status> {
    runtime::with(|rt| {
        let pos = {
            let d = rt.resolve(h)?;
            d.whole_gpu("nvmlDeviceGetTotalEnergyConsumption")?;
            available(energy::power_mw(d.gpu, d.overrides))?;
            d.pos
        };
        available(rt.energy_mj(pos))
    })
}

/// `nvmlPstates_t` (0 = P0).
pub fn performance_state(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPerformanceState", |d| {
        available(d.gpu.performance_state)
    })
}
