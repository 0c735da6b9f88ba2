//! NVML queries in safe Rust: each answers one NVML function from the model plus the state-file overrides.

use std::os::raw::{c_uint, c_void};

use crate::abi::{self, Status};
use crate::diag;
use crate::handles::{encode_device, Target};
use crate::model::{Memory, PageList};
use crate::pci::PciAddress;
use crate::runtime::{self, Resolved};

pub mod board;
pub mod clocks;
pub mod fields;
pub mod pcie;
pub mod power;
pub mod processes;

type Handle = *mut c_void;

fn with_device<T>(
    handle: Handle,
    f: impl FnOnce(&Resolved<'_>) -> Result<T, Status>,
) -> Result<T, Status> {
    runtime::with(|rt| f(&rt.resolve(handle)?))
}

/// Like [`with_device`] for queries the fake serves only for whole GPUs.
fn with_gpu<T>(
    handle: Handle,
    function: &str,
    f: impl FnOnce(&Resolved<'_>) -> Result<T, Status>,
) -> Result<T, Status> {
    with_device(handle, |d| {
        d.whole_gpu(function)?;
        f(d)
    })
}

fn available<T>(value: Option<T>) -> Result<T, Status> {
    value.ok_or(Status::NotSupported)
}

pub fn driver_version() -> Result<String, Status> {
    runtime::with(|rt| Ok(rt.node.driver_version.clone()))
}

pub fn nvml_version() -> Result<String, Status> {
    runtime::with(|rt| available(rt.node.nvml_version.clone()))
}

pub fn cuda_driver_version() -> Result<i32, Status> {
    runtime::with(|rt| available(rt.node.cuda_driver_version))
}

pub fn device_count() -> Result<u32, Status> {
    runtime::with(|rt| u32::try_from(rt.visible.len()).map_err(|_| Status::Unknown))
}

pub fn handle_by_index(index: c_uint) -> Result<Handle, Status> {
    runtime::with(|rt| {
        let pos = *rt
            .visible
            .get(index as usize)
            .ok_or(Status::InvalidArgument)?;
        Ok(encode_device(Target::Gpu { pos }))
    })
}

/// GPU or MIG device whose UUID is `uuid`, among the visible GPUs.
pub fn handle_by_uuid(uuid: &str) -> Result<Handle, Status> {
    runtime::with(|rt| {
        for &pos in &rt.visible {
            let gpu = &rt.node.gpus[pos];
            if gpu.uuid == uuid {
                return Ok(encode_device(Target::Gpu { pos }));
            }
            let mig = gpu.mig.iter().flat_map(|m| &m.devices);
            if let Some(d) = mig.into_iter().find(|d| d.uuid == uuid) {
                return Ok(encode_device(Target::Mig {
                    pos,
                    index: d.index,
                }));
            }
        }
        Err(Status::NotFound)
    })
}

pub fn handle_by_pci_bus_id(bus_id: &str) -> Result<Handle, Status> {
    runtime::with(|rt| {
        let wanted = PciAddress::parse(bus_id).ok_or(Status::InvalidArgument)?;
        rt.visible
            .iter()
            .find(|&&pos| rt.node.gpus[pos].pci == wanted)
            .map(|&pos| encode_device(Target::Gpu { pos }))
            .ok_or(Status::NotFound)
    })
}

pub fn index(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetIndex", |d| Ok(d.index))
}

pub fn uuid(h: Handle) -> Result<String, Status> {
    with_device(h, |d| Ok(d.mig.map_or(&d.gpu.uuid, |m| &m.uuid).clone()))
}

/// `<name>`, or for a MIG device `<parent name> MIG <profile>` as the driver names it.
pub fn name(h: Handle) -> Result<String, Status> {
    with_device(h, |d| match d.mig {
        None => Ok(d.gpu.name.clone()),
        Some(m) => match &m.profile {
            Some(p) => Ok(format!("{} MIG {p}", d.gpu.name)),
            None => {
                diag::unmodelled(
                    "nvmlDeviceGetName",
                    "MIG profile of this device cannot be derived from the description",
                );
                Err(Status::NotSupported)
            }
        },
    })
}

pub fn minor_number(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetMinorNumber", |d| {
        available(d.gpu.minor_number)
    })
}

pub fn pci_info(h: Handle) -> Result<abi::PciInfo, Status> {
    with_gpu(h, "nvmlDeviceGetPciInfo", |d| {
        Ok(pci_struct(
            &d.gpu.pci,
            d.gpu.pci_device_id,
            d.gpu.pci_subsystem_id,
        ))
    })
}

fn pci_struct(
    addr: &PciAddress,
    device_id: Option<u32>,
    subsystem_id: Option<u32>,
) -> abi::PciInfo {
    let mut info = abi::PciInfo {
        bus_id_legacy: [0; 16],
        domain: addr.domain,
        bus: c_uint::from(addr.bus),
        device: c_uint::from(addr.device),
        // A capture may redact the ids; 0 is what a caller can tell apart.
        pci_device_id: device_id.unwrap_or(0),
        pci_sub_system_id: subsystem_id.unwrap_or(0),
        bus_id: [0; 32],
    };
    abi::fill_c_string(&mut info.bus_id_legacy, &addr.legacy_bus_id());
    abi::fill_c_string(&mut info.bus_id, &addr.nvml_bus_id());
    info
}

/// Frame-buffer memory, with `memory_reserved_bytes` and `memory_used_bytes`
/// applied for whole GPUs (used is capped at total minus reserved).
pub fn memory(h: Handle) -> Result<Memory, Status> {
    with_device(h, |d| match d.mig {
        Some(m) => available(m.memory),
        None => {
            let mut mem = available(d.gpu.memory)?;
            if let Some(reserved) = d.overrides.and_then(|o| o.memory_reserved_bytes) {
                mem.reserved = reserved.min(mem.total);
            }
            let used = d
                .overrides
                .and_then(|o| o.memory_used_bytes)
                .unwrap_or(mem.used);
            mem.used = used.min(mem.total.saturating_sub(mem.reserved));
            Ok(mem)
        }
    })
}

pub fn compute_capability(h: Handle) -> Result<(i32, i32), Status> {
    // MIG devices share their parent's architecture.
    with_device(h, |d| available(d.gpu.compute_capability))
}

pub fn numa_node(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetNumaNodeId", |d| available(d.gpu.numa_node))
}

pub fn temperature(h: Handle, sensor: c_uint) -> Result<u32, Status> {
    const F: &str = "nvmlDeviceGetTemperature";
    with_gpu(h, F, |d| {
        if sensor != abi::NVML_TEMPERATURE_GPU {
            diag::unmodelled(
                F,
                &format!("sensor {sensor} (only NVML_TEMPERATURE_GPU exists)"),
            );
            return Err(Status::InvalidArgument);
        }
        available(
            d.overrides
                .and_then(|o| o.temperature_c)
                .or(d.gpu.temperature_c),
        )
    })
}

pub fn temperature_threshold(h: Handle, kind: c_uint) -> Result<u32, Status> {
    const F: &str = "nvmlDeviceGetTemperatureThreshold";
    with_gpu(h, F, |d| {
        let t = &d.gpu.thresholds;
        match kind {
            abi::NVML_TEMPERATURE_THRESHOLD_SHUTDOWN => available(t.shutdown),
            abi::NVML_TEMPERATURE_THRESHOLD_SLOWDOWN => available(t.slowdown),
            abi::NVML_TEMPERATURE_THRESHOLD_MEM_MAX => available(t.mem_max),
            abi::NVML_TEMPERATURE_THRESHOLD_GPU_MAX => available(t.gpu_max),
            other => {
                diag::unmodelled(
                    F,
                    &format!("threshold type {other} (acoustic/GPS thresholds)"),
                );
                Err(Status::NotSupported)
            }
        }
    })
}

pub fn utilization(h: Handle) -> Result<abi::Utilization, Status> {
    with_gpu(h, "nvmlDeviceGetUtilizationRates", |d| {
        let ov = d.overrides;
        let gpu = ov
            .and_then(|o| o.utilization_gpu_pct)
            .or(d.gpu.utilization.gpu);
        let memory = ov
            .and_then(|o| o.utilization_memory_pct)
            .or(d.gpu.utilization.memory);
        Ok(abi::Utilization {
            gpu: available(gpu)?,
            memory: available(memory)?,
        })
    })
}

pub fn ecc_mode(h: Handle) -> Result<(bool, bool), Status> {
    with_gpu(h, "nvmlDeviceGetEccMode", |d| {
        available(d.gpu.ecc_mode.map(|m| (m.current, m.pending)))
    })
}

pub fn total_ecc_errors(h: Handle, error_type: c_uint, counter: c_uint) -> Result<u64, Status> {
    with_gpu(h, "nvmlDeviceGetTotalEccErrors", |d| {
        let c = &d.gpu.ecc_counts;
        let ov = d.overrides.and_then(|o| o.ecc.as_ref());
        let value = match (error_type, counter) {
            (abi::NVML_MEMORY_ERROR_TYPE_CORRECTED, abi::NVML_VOLATILE_ECC) => ov
                .and_then(|o| o.volatile_corrected)
                .or(c.volatile_corrected),
            (abi::NVML_MEMORY_ERROR_TYPE_UNCORRECTED, abi::NVML_VOLATILE_ECC) => ov
                .and_then(|o| o.volatile_uncorrected)
                .or(c.volatile_uncorrected),
            (abi::NVML_MEMORY_ERROR_TYPE_CORRECTED, abi::NVML_AGGREGATE_ECC) => ov
                .and_then(|o| o.aggregate_corrected)
                .or(c.aggregate_corrected),
            (abi::NVML_MEMORY_ERROR_TYPE_UNCORRECTED, abi::NVML_AGGREGATE_ECC) => ov
                .and_then(|o| o.aggregate_uncorrected)
                .or(c.aggregate_uncorrected),
            _ => return Err(Status::InvalidArgument),
        };
        available(value)
    })
}

/// Addresses of the retired pages of `cause`. Where the state file raises
/// a count above the addresses the description lists, the extra pages get
/// placeholder addresses (page number × 4 KiB).
pub fn retired_pages(h: Handle, cause: c_uint) -> Result<Vec<u64>, Status> {
    with_gpu(h, "nvmlDeviceGetRetiredPages", |d| {
        let pages = &d.gpu.retired_pages;
        let ov = d.overrides.and_then(|o| o.ecc.as_ref());
        let (list, count): (Option<&PageList>, Option<u32>) = match cause {
            abi::NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS => (
                pages.single_bit.as_ref(),
                ov.and_then(|o| o.retired_pages_single),
            ),
            abi::NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR => (
                pages.double_bit.as_ref(),
                ov.and_then(|o| o.retired_pages_double),
            ),
            _ => return Err(Status::InvalidArgument),
        };
        let count = available(count.or(list.map(|l| l.count)))?;
        let known = list.map_or(&[][..], |l| &l.addresses[..]);
        Ok((0..count as usize)
            .map(|i| known.get(i).copied().unwrap_or((i as u64 + 1) << 12))
            .collect())
    })
}

pub fn retired_pages_pending(h: Handle) -> Result<bool, Status> {
    with_gpu(h, "nvmlDeviceGetRetiredPagesPendingStatus", |d| {
        available(
            d.overrides
                .and_then(|o| o.ecc.as_ref())
                .and_then(|e| e.retired_pending)
                .or(d.gpu.retired_pages.pending),
        )
    })
}

/// `(correctable, uncorrectable, pending, failure)`.
pub fn remapped_rows(h: Handle) -> Result<(u32, u32, bool, bool), Status> {
    with_gpu(h, "nvmlDeviceGetRemappedRows", |d| {
        let r = &d.gpu.remapped_rows;
        let ov = d.overrides.and_then(|o| o.ecc.as_ref());
        Ok((
            available(ov.and_then(|o| o.remapped_correctable).or(r.correctable))?,
            available(
                ov.and_then(|o| o.remapped_uncorrectable)
                    .or(r.uncorrectable),
            )?,
            available(ov.and_then(|o| o.remapped_pending).or(r.pending))?,
            available(ov.and_then(|o| o.remapped_failure).or(r.failure))?,
        ))
    })
}

/// `(current, pending)` as `NVML_DEVICE_MIG_ENABLE`/`_DISABLE`.
pub fn mig_mode(h: Handle) -> Result<(u32, u32), Status> {
    with_gpu(h, "nvmlDeviceGetMigMode", |d| {
        let m = available(d.gpu.mig.as_ref())?;
        Ok((u32::from(m.current_enabled), u32::from(m.pending_enabled)))
    })
}

pub fn max_mig_device_count(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetMaxMigDeviceCount", |d| {
        Ok(available(d.gpu.mig.as_ref())?.max_devices)
    })
}

pub fn mig_device_handle(h: Handle, index: c_uint) -> Result<Handle, Status> {
    with_gpu(h, "nvmlDeviceGetMigDeviceHandleByIndex", |d| {
        let m = available(d.gpu.mig.as_ref())?;
        if index >= m.max_devices {
            return Err(Status::InvalidArgument);
        }
        if !m.current_enabled {
            return Err(Status::NotFound);
        }
        m.devices
            .iter()
            .find(|dev| dev.index == index)
            .map(|dev| {
                encode_device(Target::Mig {
                    pos: d.pos,
                    index: dev.index,
                })
            })
            .ok_or(Status::NotFound)
    })
}

fn mig_only<T>(
    h: Handle,
    f: impl FnOnce(&crate::model::MigDevice) -> Result<T, Status>,
) -> Result<T, Status> {
    with_device(h, |d| f(d.mig.ok_or(Status::InvalidArgument)?))
}

pub fn gpu_instance_id(h: Handle) -> Result<u32, Status> {
    mig_only(h, |m| Ok(m.gpu_instance_id))
}

pub fn compute_instance_id(h: Handle) -> Result<u32, Status> {
    mig_only(h, |m| Ok(m.compute_instance_id))
}

pub fn attributes(h: Handle) -> Result<abi::DeviceAttributes, Status> {
    const F: &str = "nvmlDeviceGetAttributes_v2";
    with_device(h, |d| {
        let Some(m) = d.mig else {
            diag::unmodelled(
                F,
                "attributes of a whole GPU (the description gives them only for MIG devices)",
            );
            return Err(Status::NotSupported);
        };
        let a = &m.attributes;
        Ok(abi::DeviceAttributes {
            multiprocessor_count: available(a.multiprocessor_count)?,
            shared_copy_engine_count: available(a.copy_engine_count)?,
            shared_decoder_count: available(a.decoder_count)?,
            shared_encoder_count: available(a.encoder_count)?,
            shared_jpeg_count: available(a.jpeg_count)?,
            shared_ofa_count: available(a.ofa_count)?,
            gpu_instance_slice_count: available(a.gpu_instance_slices)?,
            compute_instance_slice_count: available(a.compute_instance_slices)?,
            memory_size_mb: available(m.memory)?.total >> 20,
        })
    })
}

pub fn is_mig_device_handle(h: Handle) -> Result<bool, Status> {
    with_device(h, |d| Ok(d.mig.is_some()))
}

pub fn mig_parent(h: Handle) -> Result<Handle, Status> {
    with_device(h, |d| match d.mig {
        Some(_) => Ok(encode_device(Target::Gpu { pos: d.pos })),
        None => Err(Status::InvalidArgument),
    })
}

fn nvlink(d: &Resolved<'_>, link: c_uint) -> Result<crate::model::NvLink, Status> {
    let links = available(d.gpu.nvlink.as_ref())?;
    links
        .get(link as usize)
        .copied()
        .ok_or(Status::InvalidArgument)
}

pub fn nvlink_state(h: Handle, link: c_uint) -> Result<bool, Status> {
    with_gpu(h, "nvmlDeviceGetNvLinkState", |d| {
        Ok(nvlink(d, link)?.active)
    })
}

pub fn nvlink_remote_pci(h: Handle, link: c_uint) -> Result<abi::PciInfo, Status> {
    const F: &str = "nvmlDeviceGetNvLinkRemotePciInfo_v2";
    with_gpu(h, F, |d| {
        let l = nvlink(d, link)?;
        if !l.active {
            return Err(Status::NotSupported);
        }
        let Some(remote) = l.remote else {
            diag::unmodelled(
                F,
                "NVLink far end (the profile declares links but no switches or remote bus ids)",
            );
            return Err(Status::NotSupported);
        };
        Ok(pci_struct(&remote, None, None))
    })
}

/// Event types the fake can deliver for a GPU: XIDs always, ECC events
/// when ECC is enabled.
pub(crate) fn supported_events_of(gpu: &crate::model::Gpu) -> u64 {
    let ecc = gpu.ecc_mode.is_some_and(|m| m.current);
    abi::EVENT_XID_CRITICAL
        | if ecc {
            abi::EVENT_SINGLE_BIT_ECC | abi::EVENT_DOUBLE_BIT_ECC
        } else {
            0
        }
}

pub fn supported_event_types(h: Handle) -> Result<u64, Status> {
    with_gpu(h, "nvmlDeviceGetSupportedEventTypes", |d| {
        Ok(supported_events_of(d.gpu))
    })
}
