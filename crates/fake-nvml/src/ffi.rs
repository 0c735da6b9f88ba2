//! The exported NVML C functions: argument checking and pointer writes around the safe queries.
//!
//! Order of checks, like the driver: `NVML_ERROR_UNINITIALIZED` before
//! anything else, then NULL pointers and bad handles
//! (`NVML_ERROR_INVALID_ARGUMENT`), then the query itself. Buffers that are
//! too small get `NVML_ERROR_INSUFFICIENT_SIZE` with the needed count
//! written back where the API has a count parameter. A panic never crosses
//! the boundary: it becomes `NVML_ERROR_UNKNOWN`.
//!
//! Every function's contract is NVML's: each non-NULL pointer argument must
//! be valid for the reads/writes `nvml.h` documents for it (a `char` buffer
//! of the given length, an array of `*count` elements, one struct).

#![allow(non_snake_case)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_ulonglong};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::{self, NvmlDevice, NvmlEventSet, Status};
use crate::{events, queries, runtime};

type NvmlReturn = c_uint;

/// Run one exported call, mapping its result (or a panic) to a return code.
fn call(f: impl FnOnce() -> Result<(), Status>) -> NvmlReturn {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => abi::NVML_SUCCESS,
        Ok(Err(status)) => status as NvmlReturn,
        Err(_) => Status::Unknown as NvmlReturn,
    }
}

/// Like [`call`] for functions that need `nvmlInit` first.
fn call_initialized(f: impl FnOnce() -> Result<(), Status>) -> NvmlReturn {
    call(|| {
        if !runtime::is_initialized() {
            return Err(Status::Uninitialized);
        }
        f()
    })
}

/// A non-NULL out pointer to one `T`.
struct Out<T>(*mut T);

impl<T> Out<T> {
    /// # Safety
    /// `ptr` must be NULL or valid for writing one `T`.
    unsafe fn new(ptr: *mut T) -> Result<Self, Status> {
        if ptr.is_null() {
            Err(Status::InvalidArgument)
        } else {
            Ok(Self(ptr))
        }
    }

    fn put(self, value: T) {
        // SAFETY: non-NULL, and `new`'s caller vouched it is writable for one T.
        unsafe { self.0.write_unaligned(value) }
    }
}

/// A non-NULL out array of `len` elements.
struct OutSlice<T> {
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> OutSlice<T> {
    /// # Safety
    /// `ptr` must be NULL or valid for writing `len` elements of `T`.
    unsafe fn new(ptr: *mut T, len: usize) -> Result<Self, Status> {
        if ptr.is_null() {
            Err(Status::InvalidArgument)
        } else {
            Ok(Self { ptr, len })
        }
    }

    fn fill(&self, items: &[T]) {
        for (i, item) in items.iter().take(self.len).enumerate() {
            // SAFETY: i < len, and `new`'s caller vouched for `len` writable elements.
            unsafe { self.ptr.add(i).write_unaligned(*item) }
        }
    }
}

/// Write `s` NUL-terminated into a caller buffer of `len` bytes.
///
/// # Safety
/// `buf` must be NULL or valid for writing `len` bytes.
unsafe fn write_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), Status> {
    // SAFETY: forwarded from this function's contract.
    let out = unsafe { OutSlice::new(buf, len as usize) }?;
    let bytes = s.as_bytes();
    if bytes.len() >= len as usize {
        return Err(Status::InsufficientSize);
    }
    let mut with_nul: Vec<c_char> = bytes.iter().map(|b| *b as c_char).collect();
    with_nul.push(0);
    out.fill(&with_nul);
    Ok(())
}

/// Read a caller's NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
unsafe fn read_str(p: *const c_char) -> Result<String, Status> {
    if p.is_null() {
        return Err(Status::InvalidArgument);
    }
    // SAFETY: non-NULL and NUL-terminated per this function's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_string)
        .map_err(|_| Status::InvalidArgument)
}

// ---------------------------------------------------------------- init

/// Initialise from `MOCK_NVML_CONFIG` (see the crate docs).
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    call(|| runtime::init("nvmlInit_v2"))
}

/// Same as [`nvmlInit_v2`] (pre-R319 name).
#[no_mangle]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    call(|| runtime::init("nvmlInit"))
}

/// Same as [`nvmlInit_v2`]; the flags (`NO_GPUS`, `NO_ATTACH`) change nothing
/// here: a node with no visible GPU initialises anyway.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    call(|| runtime::init("nvmlInitWithFlags"))
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    call(runtime::shutdown)
}

/// Static text for a return code.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    abi::error_string(result).as_ptr().cast()
}

// ---------------------------------------------------------------- system

/// # Safety
/// `version` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = queries::driver_version()?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(version, length, &v) }
    })
}

/// # Safety
/// `version` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = queries::nvml_version()?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(version, length, &v) }
    })
}

/// # Safety
/// `version` must be NULL or writable for one `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(version) }?;
        out.put(queries::cuda_driver_version()?);
        Ok(())
    })
}

/// # Safety
/// `version` must be NULL or writable for one `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    // SAFETY: same contract as the v1 function.
    unsafe { nvmlSystemGetCudaDriverVersion(version) }
}

// ---------------------------------------------------------------- enumeration

/// # Safety
/// `count` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(count) }?;
        out.put(queries::device_count()?);
        Ok(())
    })
}

/// # Safety
/// `count` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> NvmlReturn {
    // SAFETY: same contract as the v2 function.
    unsafe { nvmlDeviceGetCount_v2(count) }
}

/// # Safety
/// `device` must be NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(device) }?;
        out.put(queries::handle_by_index(index)?);
        Ok(())
    })
}

/// # Safety
/// `device` must be NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    // SAFETY: same contract as the v2 function.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, device) }
}

/// # Safety
/// `uuid` must be NULL or a NUL-terminated string; `device` NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's string contract.
        let uuid = unsafe { read_str(uuid) }?;
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(device) }?;
        out.put(queries::handle_by_uuid(&uuid)?);
        Ok(())
    })
}

/// # Safety
/// `bus_id` must be NULL or a NUL-terminated string; `device` NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's string contract.
        let bus_id = unsafe { read_str(bus_id) }?;
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(device) }?;
        out.put(queries::handle_by_pci_bus_id(&bus_id)?);
        Ok(())
    })
}

/// # Safety
/// As [`nvmlDeviceGetHandleByPciBusId_v2`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId(
    bus_id: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    // SAFETY: same contract as the v2 function.
    unsafe { nvmlDeviceGetHandleByPciBusId_v2(bus_id, device) }
}

// ---------------------------------------------------------------- identity

/// Generates an export that writes one scalar query result.
macro_rules! scalar_query {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $query:expr) => {
        $(#[$doc])*
        /// # Safety
        /// `out` must be NULL or writable for one value.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: NvmlDevice, out: *mut $ty) -> NvmlReturn {
            call_initialized(|| {
                // SAFETY: the caller's pointer contract.
                let out = unsafe { Out::new(out) }?;
                out.put($query(device)?);
                Ok(())
            })
        }
    };
}

/// Generates an export that writes one string query result into a caller buffer.
macro_rules! string_query {
    ($(#[$doc:meta])* $name:ident, $query:expr) => {
        $(#[$doc])*
        /// # Safety
        /// `buf` must be NULL or writable for `length` bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            buf: *mut c_char,
            length: c_uint,
        ) -> NvmlReturn {
            call_initialized(|| {
                let v = $query(device)?;
                // SAFETY: the caller's buffer contract, forwarded.
                unsafe { write_str(buf, length, &v) }
            })
        }
    };
}

scalar_query!(nvmlDeviceGetIndex, c_uint, queries::index);
scalar_query!(nvmlDeviceGetMinorNumber, c_uint, queries::minor_number);
scalar_query!(nvmlDeviceGetNumaNodeId, c_uint, queries::numa_node);
scalar_query!(
    nvmlDeviceGetMaxMigDeviceCount,
    c_uint,
    queries::max_mig_device_count
);
scalar_query!(nvmlDeviceGetGpuInstanceId, c_uint, queries::gpu_instance_id);
scalar_query!(
    nvmlDeviceGetComputeInstanceId,
    c_uint,
    queries::compute_instance_id
);
scalar_query!(nvmlDeviceIsMigDeviceHandle, c_uint, |d| {
    queries::is_mig_device_handle(d).map(c_uint::from)
});
scalar_query!(
    nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
    NvmlDevice,
    queries::mig_parent
);
scalar_query!(nvmlDeviceGetPciInfo_v3, abi::PciInfo, queries::pci_info);
scalar_query!(
    nvmlDeviceGetUtilizationRates,
    abi::Utilization,
    queries::utilization
);
scalar_query!(
    nvmlDeviceGetAttributes_v2,
    abi::DeviceAttributes,
    queries::attributes
);
scalar_query!(
    nvmlDeviceGetSupportedEventTypes,
    c_ulonglong,
    queries::supported_event_types
);
scalar_query!(nvmlDeviceGetRetiredPagesPendingStatus, c_uint, |d| {
    queries::retired_pages_pending(d).map(feature)
});
scalar_query!(
    /// `nvmlMemory_t` (v1): `used` includes reserved memory.
    nvmlDeviceGetMemoryInfo,
    abi::MemoryV1,
    |d| queries::memory(d).map(|m| abi::MemoryV1 {
        total: m.total,
        free: m.free(),
        used: m.total - m.free(),
    })
);

pub(crate) fn feature(on: bool) -> c_uint {
    if on {
        abi::NVML_FEATURE_ENABLED
    } else {
        abi::NVML_FEATURE_DISABLED
    }
}

/// # Safety
/// `name` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = queries::name(device)?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(name, length, &v) }
    })
}

/// # Safety
/// `uuid` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = queries::uuid(device)?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(uuid, length, &v) }
    })
}

/// `nvmlMemory_v2_t`; the caller sets `version` to `nvmlMemory_v2`.
///
/// # Safety
/// `memory` must be NULL or readable and writable for one `nvmlMemory_v2_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut abi::MemoryV2,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(memory) }?;
        // SAFETY: non-NULL (checked by `Out::new`) and readable per the contract.
        let version = unsafe { std::ptr::addr_of!((*memory).version).read_unaligned() };
        let m = queries::memory(device)?;
        if version != abi::MEMORY_V2_VERSION {
            return Err(Status::ArgumentVersionMismatch);
        }
        out.put(abi::MemoryV2 {
            version,
            total: m.total,
            reserved: m.reserved,
            free: m.free(),
            used: m.used,
        });
        Ok(())
    })
}

/// # Safety
/// `major` and `minor` must be NULL or writable for one `int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: NvmlDevice,
    major: *mut c_int,
    minor: *mut c_int,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let (ma, mi) = unsafe { (Out::new(major)?, Out::new(minor)?) };
        let (a, b) = queries::compute_capability(device)?;
        ma.put(a);
        mi.put(b);
        Ok(())
    })
}

// ---------------------------------------------------------------- thermal

/// # Safety
/// `temp` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(temp) }?;
        out.put(queries::temperature(device, sensor)?);
        Ok(())
    })
}

/// # Safety
/// `temp` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: NvmlDevice,
    kind: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(temp) }?;
        out.put(queries::temperature_threshold(device, kind)?);
        Ok(())
    })
}

// ---------------------------------------------------------------- ECC and memory health

/// # Safety
/// `current` and `pending` must be NULL or writable for one `nvmlEnableState_t` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let (c, p) = unsafe { (Out::new(current)?, Out::new(pending)?) };
        let (cur, pend) = queries::ecc_mode(device)?;
        c.put(feature(cur));
        p.put(feature(pend));
        Ok(())
    })
}

/// # Safety
/// `count` must be NULL or writable for one `unsigned long long`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: NvmlDevice,
    error_type: c_uint,
    counter_type: c_uint,
    count: *mut c_ulonglong,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(count) }?;
        out.put(queries::total_ecc_errors(device, error_type, counter_type)?);
        Ok(())
    })
}

/// Shared body of the two retired-pages functions.
///
/// # Safety
/// `count` NULL or readable/writable for one `unsigned int`; `addresses`
/// (and `timestamps` if non-NULL) writable for `*count` elements.
unsafe fn retired_pages(
    device: NvmlDevice,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> Result<(), Status> {
    if count.is_null() {
        return Err(Status::InvalidArgument);
    }
    // SAFETY: non-NULL and readable per the contract.
    let capacity = unsafe { count.read_unaligned() };
    let pages = queries::retired_pages(device, cause)?;
    let needed = c_uint::try_from(pages.len()).map_err(|_| Status::Unknown)?;
    // SAFETY: non-NULL and writable per the contract.
    let count_out = unsafe { Out::new(count) }?;
    if capacity < needed {
        count_out.put(needed);
        return Err(Status::InsufficientSize);
    }
    if needed > 0 {
        // SAFETY: the caller's array contract (`capacity` elements).
        let out = unsafe { OutSlice::new(addresses, capacity as usize) }?;
        out.fill(&pages);
        if !timestamps.is_null() {
            // SAFETY: the caller's array contract (`capacity` elements).
            let ts = unsafe { OutSlice::new(timestamps, capacity as usize) }?;
            ts.fill(&vec![0; pages.len()]);
        }
    }
    count_out.put(needed);
    Ok(())
}

/// # Safety
/// See `nvml.h`: `pageCount` in/out, `addresses` an array of `*pageCount`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: NvmlDevice,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's contract, forwarded.
        unsafe { retired_pages(device, cause, page_count, addresses, std::ptr::null_mut()) }
    })
}

/// # Safety
/// See `nvml.h`: `pageCount` in/out, `addresses` and `timestamps` arrays of `*pageCount`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: NvmlDevice,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's contract, forwarded.
        unsafe { retired_pages(device, cause, page_count, addresses, timestamps) }
    })
}

/// # Safety
/// Every pointer must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: NvmlDevice,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let outs = unsafe {
            (
                Out::new(corr_rows)?,
                Out::new(unc_rows)?,
                Out::new(is_pending)?,
                Out::new(failure_occurred)?,
            )
        };
        let (c, u, p, f) = queries::remapped_rows(device)?;
        outs.0.put(c);
        outs.1.put(u);
        outs.2.put(c_uint::from(p));
        outs.3.put(c_uint::from(f));
        Ok(())
    })
}

// ---------------------------------------------------------------- MIG

/// # Safety
/// `current` and `pending` must be NULL or writable for one `unsigned int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let (c, p) = unsafe { (Out::new(current)?, Out::new(pending)?) };
        let (cur, pend) = queries::mig_mode(device)?;
        c.put(cur);
        p.put(pend);
        Ok(())
    })
}

/// # Safety
/// `mig_device` must be NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: NvmlDevice,
    index: c_uint,
    mig_device: *mut NvmlDevice,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(mig_device) }?;
        out.put(queries::mig_device_handle(device, index)?);
        Ok(())
    })
}

// ---------------------------------------------------------------- NVLink

/// # Safety
/// `is_active` must be NULL or writable for one `nvmlEnableState_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: NvmlDevice,
    link: c_uint,
    is_active: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(is_active) }?;
        out.put(feature(queries::nvlink_state(device, link)?));
        Ok(())
    })
}

/// # Safety
/// `pci` must be NULL or writable for one `nvmlPciInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: NvmlDevice,
    link: c_uint,
    pci: *mut abi::PciInfo,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(pci) }?;
        out.put(queries::nvlink_remote_pci(device, link)?);
        Ok(())
    })
}

// ---------------------------------------------------------------- events

/// # Safety
/// `set` must be NULL or writable for one handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut NvmlEventSet) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(set) }?;
        out.put(events::create()?);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: NvmlDevice,
    event_types: c_ulonglong,
    set: NvmlEventSet,
) -> NvmlReturn {
    call_initialized(|| events::register(device, event_types, set))
}

/// # Safety
/// `data` must be NULL or writable for one `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: NvmlEventSet,
    data: *mut abi::EventData,
    timeout_ms: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(data) }?;
        out.put(events::wait(set, timeout_ms)?);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn nvmlEventSetFree(set: NvmlEventSet) -> NvmlReturn {
    call_initialized(|| events::free(set))
}

// ---------------------------------------------------------------- by area
// Declared last so the macros above are in scope in them.

mod board;
mod clocks;
mod fields;
mod pcie;
mod power;
mod processes;
