//! Exports for the PCIe link (generation, width), throughput (KB/s) and replay counter.

use std::os::raw::c_uint;

use super::{call_initialized, NvmlReturn, Out};
use crate::abi::NvmlDevice;
use crate::queries::pcie;

scalar_query!(
    nvmlDeviceGetCurrPcieLinkGeneration,
    c_uint,
    pcie::link_gen_current
);
scalar_query!(
    nvmlDeviceGetMaxPcieLinkGeneration,
    c_uint,
    pcie::link_gen_max
);
scalar_query!(
    nvmlDeviceGetCurrPcieLinkWidth,
    c_uint,
    pcie::link_width_current
);
scalar_query!(nvmlDeviceGetMaxPcieLinkWidth, c_uint, pcie::link_width_max);
scalar_query!(nvmlDeviceGetPcieReplayCounter, c_uint, pcie::replay_counter);

/// # Safety
/// `value` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: NvmlDevice,
    counter: c_uint,
    value: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(value) }?;
        out.put(pcie::throughput_kbps(device, counter)?);
        Ok(())
    })
}
