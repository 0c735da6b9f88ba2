//! Everything NVML says about one physical GPU, as a [`GpuInfo`].

use super::query::Answers;
use super::{ecc, mig, nvlink};
use crate::inventory::InventoryError;
use crate::model::{normalize_bus_id, ComputeCapability, GpuInfo, GpuProcess, Thermal};
use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// One GPU as read, before the node-wide NVLink pass.
#[derive(Debug)]
pub(crate) struct GpuReading {
    pub info: GpuInfo,
    /// Far ends of its active NVLinks (see [`nvlink::peers`]).
    pub link_endpoints: Vec<String>,
    pub warnings: Vec<String>,
}

/// What reading one GPU gave.
#[derive(Debug)]
pub(crate) enum Handle {
    Read(Box<GpuReading>),
    /// NVML would not hand out the GPU at all (e.g. `NO_PERMISSION`):
    /// the warning to show.
    Refused(String),
}

/// Read GPU `index`. A GPU NVML calls lost is still returned, flagged
/// `lost`, with whatever was read before. Fails only when NVML, for a GPU
/// it can talk to, will not say its device minor: without it
/// `/dev/nvidiaN` cannot be found, and the procfs backend should answer
/// instead.
pub(crate) fn read_gpu(nvml: &Nvml, index: u32) -> Result<Handle, InventoryError> {
    let mut answers = Answers::new(index);
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(NvmlError::GpuLost) => {
            answers.note("nvmlDeviceGetHandleByIndex_v2", &NvmlError::GpuLost);
            return Ok(Handle::Read(Box::new(lost_reading(index, answers))));
        }
        Err(e) => {
            tracing::warn!(gpu = index, error = %e, "NVML gives no handle for the GPU");
            return Ok(Handle::Refused(format!(
                "GPU {index}: NVML gives no handle ({e}); the GPU is not reported"
            )));
        }
    };
    let uuid = answers.get_always("nvmlDeviceGetUUID", || device.uuid());
    let name = answers.get_always("nvmlDeviceGetName", || device.name());
    let pci_bus_id = answers
        .get_always("nvmlDeviceGetPciInfo_v3", || device.pci_info())
        .map(|pci| bus_id(&pci.bus_id, &mut answers))
        .unwrap_or_default();
    let minor = match device.minor_number() {
        Ok(minor) => Some(minor),
        Err(NvmlError::GpuLost) => {
            if !answers.lost {
                answers.note("nvmlDeviceGetMinorNumber", &NvmlError::GpuLost);
            }
            None
        }
        Err(e) if !answers.lost => {
            return Err(InventoryError::Nvml {
                call: "nvmlDeviceGetMinorNumber",
                gpu: Some(index),
                reason: e.to_string(),
            })
        }
        Err(_) => None,
    };
    let memory = answers.get("nvmlDeviceGetMemoryInfo_v2", || device.memory_info());
    let compute_capability = answers
        .get("nvmlDeviceGetCudaComputeCapability", || {
            device.cuda_compute_capability()
        })
        .and_then(|cc| {
            Some(ComputeCapability {
                major: u32::try_from(cc.major).ok()?,
                minor: u32::try_from(cc.minor).ok()?,
            })
        });
    let numa_node = answers.get("nvmlDeviceGetNumaNodeId", || device.numa_node_id());
    let thermal = read_thermal(&device, &mut answers);
    let utilization = answers.get("nvmlDeviceGetUtilizationRates", || {
        device.utilization_rates()
    });
    let ecc = ecc::read_ecc(nvml, &device, &mut answers);
    let processes = read_processes(&device, &mut answers);
    let mig = mig::read_mig(nvml, &device, &mut answers);
    let link_endpoints = nvlink::read_link_endpoints(&device, &mut answers);

    let info = GpuInfo {
        index,
        uuid: uuid.unwrap_or_default(),
        name: name.unwrap_or_default(),
        minor: minor.unwrap_or_default(),
        pci_bus_id,
        memory_total_bytes: memory.as_ref().map(|m| m.total),
        memory_used_bytes: memory.as_ref().map(|m| m.used),
        compute_capability,
        numa_node,
        local_cpus: None,
        nvlink_peers: Vec::new(),
        mig,
        thermal,
        ecc,
        utilization_gpu_pct: utilization.as_ref().map(|u| u.gpu),
        utilization_memory_pct: utilization.as_ref().map(|u| u.memory),
        processes,
        lost: answers.lost,
    };
    let mut warnings = answers.warnings;
    if info.lost {
        warnings.push(lost_warning(&info));
    }
    Ok(Handle::Read(Box::new(GpuReading {
        info,
        link_endpoints,
        warnings,
    })))
}

/// A GPU whose handle NVML refused with `GPU_IS_LOST`.
fn lost_reading(index: u32, answers: Answers) -> GpuReading {
    let info = GpuInfo {
        index,
        lost: true,
        ..GpuInfo::default()
    };
    let mut warnings = answers.warnings;
    warnings.push(lost_warning(&info));
    GpuReading {
        info,
        link_endpoints: Vec::new(),
        warnings,
    }
}

fn lost_warning(info: &GpuInfo) -> String {
    let bus = if info.pci_bus_id.is_empty() {
        "bus id unknown"
    } else {
        info.pci_bus_id.as_str()
    };
    format!(
        "GPU {} ({bus}) is lost (NVML: GPU_IS_LOST, fallen off the bus?); it is listed but must not be used until it is reset or the node rebooted",
        info.index
    )
}

/// Normalise NVML's `00000000:07:00.0`; keep the raw text (with a
/// warning) if it does not look like a bus id at all.
fn bus_id(raw: &str, answers: &mut Answers) -> String {
    normalize_bus_id(raw).unwrap_or_else(|| {
        answers.warnings.push(format!(
            "GPU {}: NVML PCI bus id {raw:?} is not a bus id; kept as is",
            answers.gpu
        ));
        raw.trim().to_ascii_lowercase()
    })
}

fn read_thermal(device: &Device<'_>, answers: &mut Answers) -> Thermal {
    Thermal {
        current_c: answers.get("nvmlDeviceGetTemperature", || {
            device.temperature(TemperatureSensor::Gpu)
        }),
        slowdown_c: answers.get("nvmlDeviceGetTemperatureThreshold(slowdown)", || {
            device.temperature_threshold(TemperatureThreshold::Slowdown)
        }),
        shutdown_c: answers.get("nvmlDeviceGetTemperatureThreshold(shutdown)", || {
            device.temperature_threshold(TemperatureThreshold::Shutdown)
        }),
    }
}

fn read_processes(device: &Device<'_>, answers: &mut Answers) -> Vec<GpuProcess> {
    let mut processes: Vec<GpuProcess> = answers
        .get("nvmlDeviceGetComputeRunningProcesses_v3", || {
            device.running_compute_processes()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            used_memory_bytes: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            },
        })
        .collect();
    processes.sort_by_key(|p| p.pid);
    processes
}
