//! Exports for the process lists (compute, graphics, MPS; every struct version), per-process utilisation and process names.

use std::os::raw::{c_char, c_uint, c_ulonglong};
use std::path::Path;

use super::{call_initialized, write_str, NvmlReturn, Out, OutSlice};
use crate::abi::{self, NvmlDevice, Status};
use crate::queries::processes::{self, Kind};

/// Write `list` into a caller array of `*count` elements, NVML style: a
/// too-small array gets `INSUFFICIENT_SIZE` and the needed count.
///
/// # Safety
/// `count` NULL or readable/writable for one `unsigned int`; `out` NULL or
/// writable for `*count` elements.
unsafe fn write_list<T: Copy>(count: *mut c_uint, out: *mut T, list: &[T]) -> Result<(), Status> {
    if count.is_null() {
        return Err(Status::InvalidArgument);
    }
    // SAFETY: non-NULL and readable per the contract.
    let capacity = unsafe { count.read_unaligned() };
    let needed = c_uint::try_from(list.len()).map_err(|_| Status::Unknown)?;
    // SAFETY: non-NULL and writable per the contract.
    let count_out = unsafe { Out::new(count) }?;
    if capacity < needed {
        count_out.put(needed);
        return Err(Status::InsufficientSize);
    }
    if needed > 0 {
        // SAFETY: the caller's array contract (`capacity` elements).
        let slice = unsafe { OutSlice::new(out, capacity as usize) }?;
        slice.fill(list);
    }
    count_out.put(needed);
    Ok(())
}

/// Generates the process-list exports of one kind: the suffix-less
/// function with `nvmlProcessInfo_v1_t`, `_v2` and `_v3` with
/// `nvmlProcessInfo_t` (the two share the struct, as in `nvml.h`).
macro_rules! process_exports {
    ($kind:expr, $v1:ident, $v2:ident, $v3:ident) => {
        /// # Safety
        /// `info_count` in/out; `infos` NULL or an array of `*info_count` `nvmlProcessInfo_v1_t`.
        #[no_mangle]
        pub unsafe extern "C" fn $v1(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut abi::ProcessInfoV1,
        ) -> NvmlReturn {
            call_initialized(|| {
                let list: Vec<abi::ProcessInfoV1> = processes::processes(device, $kind)?
                    .into_iter()
                    .map(abi::ProcessInfoV1::from)
                    .collect();
                // SAFETY: the caller's contract, forwarded.
                unsafe { write_list(info_count, infos, &list) }
            })
        }

        /// # Safety
        /// `info_count` in/out; `infos` NULL or an array of `*info_count` `nvmlProcessInfo_t`.
        #[no_mangle]
        pub unsafe extern "C" fn $v3(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut abi::ProcessInfo,
        ) -> NvmlReturn {
            call_initialized(|| {
                let list = processes::processes(device, $kind)?;
                // SAFETY: the caller's contract, forwarded.
                unsafe { write_list(info_count, infos, &list) }
            })
        }

        /// Same struct and behaviour as `_v3`.
        ///
        /// # Safety
        /// As the `_v3` function.
        #[no_mangle]
        pub unsafe extern "C" fn $v2(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut abi::ProcessInfo,
        ) -> NvmlReturn {
            // SAFETY: same contract as `_v3`.
            unsafe { $v3(device, info_count, infos) }
        }
    };
}

process_exports!(
    Kind::Compute,
    nvmlDeviceGetComputeRunningProcesses,
    nvmlDeviceGetComputeRunningProcesses_v2,
    nvmlDeviceGetComputeRunningProcesses_v3
);
process_exports!(
    Kind::Graphics,
    nvmlDeviceGetGraphicsRunningProcesses,
    nvmlDeviceGetGraphicsRunningProcesses_v2,
    nvmlDeviceGetGraphicsRunningProcesses_v3
);
process_exports!(
    Kind::Mps,
    nvmlDeviceGetMPSComputeRunningProcesses,
    nvmlDeviceGetMPSComputeRunningProcesses_v2,
    nvmlDeviceGetMPSComputeRunningProcesses_v3
);

/// Per-process utilisation samples newer than `last_seen_us`. With a NULL
/// `utilization` the needed count is written and `INSUFFICIENT_SIZE`
/// returned; no sample at all is `NVML_ERROR_NOT_FOUND` (the driver's
/// answer too).
///
/// # Safety
/// `sample_count` NULL or readable/writable for one `unsigned int`;
/// `utilization` NULL or writable for `*sample_count` samples.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: NvmlDevice,
    utilization: *mut abi::ProcessUtilizationSample,
    sample_count: *mut c_uint,
    last_seen_us: c_ulonglong,
) -> NvmlReturn {
    call_initialized(|| {
        if sample_count.is_null() {
            return Err(Status::InvalidArgument);
        }
        let samples = processes::utilization_samples(device, last_seen_us)?;
        if utilization.is_null() {
            // SAFETY: non-NULL and writable per the contract.
            let out = unsafe { Out::new(sample_count) }?;
            out.put(c_uint::try_from(samples.len()).map_err(|_| Status::Unknown)?);
            return Err(Status::InsufficientSize);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { write_list(sample_count, utilization, &samples) }
    })
}

/// # Safety
/// `name` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = processes::process_name(Path::new("/proc"), pid)?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(name, length, &v) }
    })
}
