//! The NVML backend's only unsafe code: the raw calls nvml-wrapper 0.13
//! does not wrap (MIG GPU/compute instance ids, remapped rows, an event
//! wait that keeps the event's GPU/compute instance ids).
//!
//! Each function resolves its symbol through nvml-wrapper's own loaded
//! library (`Nvml::lib`), so a driver without the symbol yields
//! `FailedToLoadSymbol` (treated as "not supported" by the callers).

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, EventSet, Nvml};
use nvml_wrapper_sys::bindings::nvmlEventData_t;

/// A device handle as a plain number, to match the handle an event
/// carries against the GPUs registered for events.
pub(crate) fn device_key(device: &Device<'_>) -> usize {
    // SAFETY: the raw handle is only copied out and compared as an
    // address; it is never dereferenced, freed, or wrapped in a second
    // `Device`, so nvml-wrapper's ownership rules are untouched.
    let handle = unsafe { device.handle() };
    handle as usize
}

/// `nvmlDeviceGetGpuInstanceId` of a MIG device handle.
pub(crate) fn gpu_instance_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id: u32 = 0;
    // SAFETY: `sym` is `nvmlReturn_t (nvmlDevice_t, unsigned int *)`
    // resolved from the library `nvml` keeps loaded; the handle belongs to
    // a live `Device` of that library and `id` is a valid out-pointer for
    // the duration of the call.
    nvml_try(unsafe { sym(device.handle(), &mut id) })?;
    Ok(id)
}

/// `nvmlDeviceGetComputeInstanceId` of a MIG device handle.
pub(crate) fn compute_instance_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetComputeInstanceId.as_ref())?;
    let mut id: u32 = 0;
    // SAFETY: as in `gpu_instance_id`: same signature, live handle, valid
    // out-pointer.
    nvml_try(unsafe { sym(device.handle(), &mut id) })?;
    Ok(id)
}

/// What `nvmlDeviceGetRemappedRows` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    pub pending: bool,
    pub failure: bool,
}

/// `nvmlDeviceGetRemappedRows` (Ampere and later).
pub(crate) fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<RemappedRows, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: `sym` is `nvmlReturn_t (nvmlDevice_t, unsigned int *,
    // unsigned int *, unsigned int *, unsigned int *)` from the loaded
    // library; the handle is live and the four out-pointers are distinct
    // locals valid for the call.
    nvml_try(unsafe {
        sym(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failure,
        )
    })?;
    Ok(RemappedRows {
        correctable: corr,
        uncorrectable: unc,
        pending: pending != 0,
        failure: failure != 0,
    })
}

/// One event as `nvmlEventSetWait_v2` returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEvent {
    /// The event's device handle, comparable with [`device_key`].
    pub device_key: usize,
    /// `nvmlEventType*` bits.
    pub event_type: u64,
    /// The XID for `nvmlEventTypeXidCriticalError`.
    pub data: u64,
    /// `0xFFFFFFFF` = the whole GPU.
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// `nvmlEventSetWait_v2` with the MIG instance ids nvml-wrapper's
/// `EventSet::wait` drops.
pub(crate) fn wait_event(
    nvml: &Nvml,
    set: &EventSet<'_>,
    timeout_ms: u32,
) -> Result<RawEvent, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlEventSetWait_v2.as_ref())?;
    let mut data = nvmlEventData_t {
        device: std::ptr::null_mut(),
        eventType: 0,
        eventData: 0,
        gpuInstanceId: 0,
        computeInstanceId: 0,
    };
    // SAFETY: `sym` is `nvmlReturn_t (nvmlEventSet_t, nvmlEventData_t *,
    // unsigned int)` from the loaded library; the set handle stays valid
    // while `set` is borrowed, and `data` is a properly laid out
    // `#[repr(C)]` out-parameter valid for the call.
    nvml_try(unsafe { sym(set.handle(), &mut data, timeout_ms) })?;
    Ok(RawEvent {
        device_key: data.device as usize,
        event_type: data.eventType,
        data: data.eventData,
        gpu_instance_id: data.gpuInstanceId,
        compute_instance_id: data.computeInstanceId,
    })
}

/// The device an event names, when it is not one of the registered GPUs
/// (looked up by [`device_key`] first). `None` for a null handle.
pub(crate) fn event_device<'nvml>(nvml: &'nvml Nvml, event: &RawEvent) -> Option<Device<'nvml>> {
    if event.device_key == 0 {
        return None;
    }
    let handle = event.device_key as nvml_wrapper_sys::bindings::nvmlDevice_t;
    // SAFETY: the handle was just returned by `nvmlEventSetWait_v2` of this
    // `nvml` for a device registered in its event set, so it is a valid
    // device handle for as long as `nvml` stays initialised, which the
    // `'nvml` borrow guarantees; device handles need no freeing.
    Some(unsafe { Device::new(handle, nvml) })
}
