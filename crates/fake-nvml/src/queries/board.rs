//! Board identity strings, mode switches, fans, encoder/decoder utilisation and BAR1.

use std::os::raw::c_uint;

use super::{available, with_gpu, Handle};
use crate::abi::{self, Status};
use crate::diag;
use crate::model::Board;
use crate::values;

fn text(
    h: Handle,
    function: &str,
    f: impl FnOnce(&Board) -> Option<&String>,
) -> Result<String, Status> {
    with_gpu(h, function, |d| available(f(&d.gpu.board).cloned()))
}

pub fn serial(h: Handle) -> Result<String, Status> {
    text(h, "nvmlDeviceGetSerial", |b| b.serial.as_ref())
}

pub fn board_part_number(h: Handle) -> Result<String, Status> {
    text(h, "nvmlDeviceGetBoardPartNumber", |b| {
        b.board_part_number.as_ref()
    })
}

pub fn vbios_version(h: Handle) -> Result<String, Status> {
    text(h, "nvmlDeviceGetVbiosVersion", |b| b.vbios_version.as_ref())
}

pub fn inforom_image_version(h: Handle) -> Result<String, Status> {
    text(h, "nvmlDeviceGetInforomImageVersion", |b| {
        b.inforom.image.as_ref()
    })
}

/// `nvmlDeviceGetInforomVersion(object)`: OEM, ECC or power object.
pub fn inforom_version(h: Handle, object: c_uint) -> Result<String, Status> {
    const F: &str = "nvmlDeviceGetInforomVersion";
    text(h, F, |b| match object {
        abi::NVML_INFOROM_OEM => b.inforom.oem.as_ref(),
        abi::NVML_INFOROM_ECC => b.inforom.ecc.as_ref(),
        abi::NVML_INFOROM_POWER => b.inforom.power.as_ref(),
        other => {
            diag::unmodelled(F, &format!("InfoROM object {other}"));
            None
        }
    })
}

/// `nvmlBrandType_t`; a brand text NVML has no value for is
/// `NVML_BRAND_UNKNOWN`.
pub fn brand(h: Handle) -> Result<c_uint, Status> {
    const F: &str = "nvmlDeviceGetBrand";
    with_gpu(h, F, |d| {
        let text = available(d.gpu.board.brand.as_deref())?;
        Ok(values::brand(text).unwrap_or_else(|| {
            diag::unmodelled(
                F,
                &format!("brand `{text}` (reported as NVML_BRAND_UNKNOWN)"),
            );
            0
        }))
    })
}

fn mode(h: Handle, function: &str, f: impl FnOnce(&Board) -> Option<bool>) -> Result<bool, Status> {
    with_gpu(h, function, |d| available(f(&d.gpu.board)))
}

pub fn display_mode(h: Handle) -> Result<bool, Status> {
    mode(h, "nvmlDeviceGetDisplayMode", |b| b.display_mode)
}

pub fn display_active(h: Handle) -> Result<bool, Status> {
    mode(h, "nvmlDeviceGetDisplayActive", |b| b.display_active)
}

pub fn persistence_mode(h: Handle) -> Result<bool, Status> {
    mode(h, "nvmlDeviceGetPersistenceMode", |b| b.persistence_mode)
}

pub fn compute_mode(h: Handle) -> Result<c_uint, Status> {
    with_gpu(h, "nvmlDeviceGetComputeMode", |d| {
        available(d.gpu.board.compute_mode)
    })
}

/// `(current, pending)`; Windows only, so `NOT_SUPPORTED` for every Linux capture.
pub fn driver_model(h: Handle) -> Result<(c_uint, c_uint), Status> {
    with_gpu(h, "nvmlDeviceGetDriverModel", |d| {
        let m = available(d.gpu.board.driver_model)?;
        Ok((m, m))
    })
}

pub fn fan_count(h: Handle) -> Result<c_uint, Status> {
    with_gpu(h, "nvmlDeviceGetNumFans", |d| {
        Ok(d.gpu.fan.map_or(0, |f| f.count))
    })
}

/// Speed of fan `fan` in percent; every fan of a board runs at the one
/// speed the description gives. No fan: `NOT_SUPPORTED`.
pub fn fan_speed(h: Handle, fan: c_uint) -> Result<c_uint, Status> {
    with_gpu(h, "nvmlDeviceGetFanSpeed", |d| {
        let f = available(d.gpu.fan)?;
        if fan >= f.count {
            return Err(Status::InvalidArgument);
        }
        available(f.speed_pct)
    })
}

/// Sampling period the fake reports with encoder/decoder utilisation, µs.
pub const CODEC_SAMPLING_PERIOD_US: c_uint = 1_000_000;

pub fn encoder_utilization(h: Handle) -> Result<c_uint, Status> {
    with_gpu(h, "nvmlDeviceGetEncoderUtilization", |d| {
        available(d.gpu.utilization.encoder)
    })
}

pub fn decoder_utilization(h: Handle) -> Result<c_uint, Status> {
    with_gpu(h, "nvmlDeviceGetDecoderUtilization", |d| {
        available(d.gpu.utilization.decoder)
    })
}

pub fn bar1(h: Handle) -> Result<abi::Bar1Memory, Status> {
    with_gpu(h, "nvmlDeviceGetBAR1MemoryInfo", |d| {
        let b = available(d.gpu.bar1)?;
        Ok(abi::Bar1Memory {
            bar1_total: b.total,
            bar1_free: b.total.saturating_sub(b.used),
            bar1_used: b.used,
        })
    })
}
