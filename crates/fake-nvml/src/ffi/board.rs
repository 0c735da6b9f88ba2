//! Exports for board identity strings, mode switches, fans, encoder/decoder utilisation and BAR1 memory.

use std::os::raw::{c_char, c_uint};

use super::{call_initialized, feature, write_str, NvmlReturn, Out};
use crate::abi::{self, NvmlDevice};
use crate::queries::board;

string_query!(nvmlDeviceGetSerial, board::serial);
string_query!(nvmlDeviceGetBoardPartNumber, board::board_part_number);
string_query!(nvmlDeviceGetVbiosVersion, board::vbios_version);
string_query!(
    nvmlDeviceGetInforomImageVersion,
    board::inforom_image_version
);

scalar_query!(
    /// `nvmlBrandType_t`.
    nvmlDeviceGetBrand,
    c_uint,
    board::brand
);
scalar_query!(nvmlDeviceGetDisplayMode, c_uint, |d| {
    board::display_mode(d).map(feature)
});
scalar_query!(nvmlDeviceGetDisplayActive, c_uint, |d| {
    board::display_active(d).map(feature)
});
scalar_query!(nvmlDeviceGetPersistenceMode, c_uint, |d| {
    board::persistence_mode(d).map(feature)
});
scalar_query!(
    /// `nvmlComputeMode_t`.
    nvmlDeviceGetComputeMode,
    c_uint,
    board::compute_mode
);
scalar_query!(nvmlDeviceGetNumFans, c_uint, board::fan_count);
scalar_query!(
    /// Speed of fan 0 in percent.
    nvmlDeviceGetFanSpeed,
    c_uint,
    |d| board::fan_speed(d, 0)
);
scalar_query!(nvmlDeviceGetBAR1MemoryInfo, abi::Bar1Memory, board::bar1);

/// # Safety
/// `version` must be NULL or writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetInforomVersion(
    device: NvmlDevice,
    object: c_uint,
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        let v = board::inforom_version(device, object)?;
        // SAFETY: the caller's buffer contract, forwarded.
        unsafe { write_str(version, length, &v) }
    })
}

/// # Safety
/// `speed` must be NULL or writable for one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: NvmlDevice,
    fan: c_uint,
    speed: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let out = unsafe { Out::new(speed) }?;
        out.put(board::fan_speed(device, fan)?);
        Ok(())
    })
}

/// # Safety
/// `current` and `pending` must be NULL or writable for one `nvmlDriverModel_t` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDriverModel(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract.
        let (c, p) = unsafe { (Out::new(current)?, Out::new(pending)?) };
        let (cur, pend) = board::driver_model(device)?;
        c.put(cur);
        p.put(pend);
        Ok(())
    })
}

/// Shared body of the encoder and decoder utilisation exports.
///
/// # Safety
/// `util` and `period_us` must be NULL or writable for one `unsigned int` each.
unsafe fn codec_utilization(
    util: *mut c_uint,
    period_us: *mut c_uint,
    query: impl FnOnce() -> Result<c_uint, abi::Status>,
) -> NvmlReturn {
    call_initialized(|| {
        // SAFETY: the caller's pointer contract, forwarded.
        let (u, p) = unsafe { (Out::new(util)?, Out::new(period_us)?) };
        u.put(query()?);
        p.put(board::CODEC_SAMPLING_PERIOD_US);
        Ok(())
    })
}

/// # Safety
/// `util` and `period_us` must be NULL or writable for one `unsigned int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: NvmlDevice,
    util: *mut c_uint,
    period_us: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { codec_utilization(util, period_us, || board::encoder_utilization(device)) }
}

/// # Safety
/// `util` and `period_us` must be NULL or writable for one `unsigned int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: NvmlDevice,
    util: *mut c_uint,
    period_us: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { codec_utilization(util, period_us, || board::decoder_utilization(device)) }
}

/// Same as [`nvmlDeviceGetDriverModel`] (R580 name; `nvmlDriverModel_t`
/// gained MCDM).
///
/// # Safety
/// As [`nvmlDeviceGetDriverModel`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDriverModel_v2(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: same contract as the v1 function.
    unsafe { nvmlDeviceGetDriverModel(device, current, pending) }
}
