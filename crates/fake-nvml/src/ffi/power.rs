//! Exports for power readings and limits (mW), energy (mJ) and performance state.

use std::os::raw::{c_uint, c_ulonglong};

use super::{call_initialized, feature, NvmlReturn, Out};
use crate::abi::NvmlDevice;
use crate::queries::power;

scalar_query!(
    /// Board power draw in milliwatts.
    nvmlDeviceGetPowerUsage,
    c_uint,
    power::usage_mw
);
scalar_query!(
    nvmlDeviceGetPowerManagementLimit,
    c_uint,
    power::management_limit_mw
);
scalar_query!(
    nvmlDeviceGetEnforcedPowerLimit,
    c_uint,
    power::enforced_limit_mw
);
scalar_query!(
    nvmlDeviceGetPowerManagementDefaultLimit,
    c_uint,
    power::default_limit_mw
);
scalar_query!(nvmlDeviceGetPowerManagementMode, c_uint, |d| {
    power::management_mode(d).map(feature)
});
scalar_query!(
    /// Millijoules since the simulated driver load (see the crate docs).
    nvmlDeviceGetTotalEnergyConsumption,
    c_ulonglong,
    power::total_energy_mj
);
scalar_query!(
    nvmlDeviceGetPerformanceState,
    c_uint,
    power::performance_state
);
scalar_query!(
    /// Deprecated name of [`nvmlDeviceGetPerformanceState`].
    nvmlDeviceGetPowerState,
    c_uint,
    power::performance_state
);

/// # Safety
/// `min_limit` and `max_limit` must be NULL or writable for one `unsigned int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimitConstraints(
    device: NvmlDevice,
    min_limit: *mut c_uint,
    max_limit: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let (lo, hi) = unsafe { (Out::new(min_limit)?, Out::new(max_limit)?) };
        let (min, max) = power::limit_constraints_mw(device)?;
        lo.put(min);
        hi.put(max);
        Ok(())
    })
}
