//! Exports for clocks in MHz (`nvmlClockType_t` graphics/SM/memory/video).

use std::os::raw::c_uint;

use super::{call_initialized, NvmlReturn, Out};
use crate::abi::{self, NvmlDevice};
use crate::queries::clocks;

/// Generates an export `(device, clockType, *mhz)` for one clock id.
macro_rules! clock_export {
    ($name:ident, $id:expr) => {
        /// # Safety
        /// `clock` must be NULL or writable for one `unsigned int`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            clock_type: c_uint,
            clock: *mut c_uint,
        ) -> NvmlReturn {
            call_initialized(|| {
                // SAFETY: the caller's pointer contract.
                let out = unsafe { Out::new(clock) }?;
                out.put(clocks::clock(device, clock_type, $id, stringify!($name))?);
                Ok(())
            })
        }
    };
}

clock_export!(nvmlDeviceGetClockInfo, abi::NVML_CLOCK_ID_CURRENT);
clock_export!(
    nvmlDeviceGetApplicationsClock,
    abi::NVML_CLOCK_ID_APP_CLOCK_TARGET
);
clock_export!(
    nvmlDeviceGetDefaultApplicationsClock,
    abi::NVML_CLOCK_ID_APP_CLOCK_DEFAULT
);
clock_export!(
    nvmlDeviceGetMaxCustomerBoostClock,
    abi::NVML_CLOCK_ID_CUSTOMER_BOOST_MAX
);

/// # Safety
/// `clock` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: NvmlDevice,
    clock_type: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(clock) }?;
        out.put(clocks::max_clock(device, clock_type)?);
        Ok(())
    })
}

/// # Safety
/// `clock_mhz` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClock(
    device: NvmlDevice,
    clock_type: c_uint,
    clock_id: c_uint,
    clock_mhz: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(clock_mhz) }?;
        out.put(clocks::clock(
            device,
            clock_type,
            clock_id,
            "nvmlDeviceGetClock",
        )?);
        Ok(())
    })
}
