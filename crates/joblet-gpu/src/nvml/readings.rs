//! The readings a metrics exporter needs beyond inventory and health:
//! power and energy, clocks, PCIe replays, memory temperature (an NVML
//! field value), reserved framebuffer, graphics processes and per-process
//! SM utilisation, and both remapped-row counts.
//!
//! Each reading is optional. "Not supported", "no data" and a symbol the
//! library does not export (an older driver, or a fake NVML without it) are
//! `None` / empty, silently: the exporter omits that series for that GPU.
//! A GPU NVML calls lost gets no readings at all. Any other failure is
//! `None` plus a debug line (the health monitor already warns about GPUs
//! that misbehave; a warning every sample period would only be noise).

use std::collections::BTreeMap;

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_MEMORY_TEMP;
use nvml_wrapper::Device;
use serde::{Deserialize, Serialize};

use super::query::is_absent;
use super::{ffi, NvmlInventory};
use crate::model::GpuProcess;

/// One GPU's readings at one sample; `None` = NVML does not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReadings {
    /// NVML index (as in the inventory).
    pub index: u32,
    pub uuid: String,
    /// Board power draw, milliwatts (`nvmlDeviceGetPowerUsage`).
    pub power_mw: Option<u32>,
    /// Energy since the driver was loaded, millijoules
    /// (`nvmlDeviceGetTotalEnergyConsumption`).
    pub energy_mj: Option<u64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<u32>,
    /// PCIe replays since the driver was loaded.
    pub pcie_replays: Option<u32>,
    /// HBM temperature, °C (field `NVML_FI_DEV_MEMORY_TEMP`).
    pub memory_temp_c: Option<u32>,
    /// Framebuffer free, bytes (`nvmlDeviceGetMemoryInfo_v2`).
    pub fb_free_bytes: Option<u64>,
    /// Framebuffer the driver reserves, bytes (`_v2` only).
    pub fb_reserved_bytes: Option<u64>,
    /// Rows remapped for correctable / uncorrectable errors, and whether a
    /// remapping failed (`nvmlDeviceGetRemappedRows`, Ampere and later).
    pub remapped_correctable: Option<u64>,
    pub remapped_uncorrectable: Option<u64>,
    pub remap_failure: Option<bool>,
    /// Graphics processes (a compute process may be listed in both lists).
    pub graphics_processes: Vec<GpuProcess>,
    /// Latest SM and memory utilisation per process, percent, over the
    /// samples the driver took since the previous reading.
    pub process_utilization: Vec<ProcessUtilization>,
}

/// One process's share of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessUtilization {
    pub pid: u32,
    pub sm_pct: u32,
    pub memory_pct: u32,
}

/// Reads [`GpuReadings`] for every GPU, remembering per GPU the driver's
/// timestamp of the last process-utilisation sample it returned, so each
/// reading covers the time since the previous one.
#[derive(Debug, Default)]
pub struct ReadingsSampler {
    last_seen_us: BTreeMap<String, u64>,
}

impl ReadingsSampler {
    pub fn new() -> ReadingsSampler {
        ReadingsSampler::default()
    }

    /// Readings of every GPU NVML hands out and does not call lost.
    pub fn sample(&mut self, inv: &NvmlInventory) -> Vec<GpuReadings> {
        let nvml = inv.nvml();
        let Ok(count) = nvml.device_count() else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(count as usize);
        for index in 0..count {
            let Ok(device) = nvml.device_by_index(index) else {
                continue;
            };
            let Ok(uuid) = device.uuid() else {
                continue;
            };
            if let Some(r) = self.read(nvml, &device, index, uuid) {
                out.push(r);
            }
        }
        out
    }

    fn read(
        &mut self,
        nvml: &nvml_wrapper::Nvml,
        device: &Device<'_>,
        index: u32,
        uuid: String,
    ) -> Option<GpuReadings> {
        let mut lost = false;
        let mut get = Getter {
            gpu: index,
            lost: &mut lost,
        };
        let power_mw = get.ok("nvmlDeviceGetPowerUsage", device.power_usage());
        let energy_mj = get.ok(
            "nvmlDeviceGetTotalEnergyConsumption",
            device.total_energy_consumption(),
        );
        let sm_clock_mhz = get.ok("nvmlDeviceGetClockInfo(SM)", device.clock_info(Clock::SM));
        let mem_clock_mhz = get.ok(
            "nvmlDeviceGetClockInfo(MEM)",
            device.clock_info(Clock::Memory),
        );
        let pcie_replays = get.ok(
            "nvmlDeviceGetPcieReplayCounter",
            device.pcie_replay_counter(),
        );
        let memory_temp_c = get
            .ok(
                "nvmlDeviceGetFieldValues",
                device.field_values_for(&[FieldId(NVML_FI_DEV_MEMORY_TEMP)]),
            )
            .and_then(|values| values.into_iter().next())
            .and_then(|sample| sample.ok())
            .and_then(|sample| sample.value.ok())
            .and_then(field_as_u32);
        let memory = get.ok("nvmlDeviceGetMemoryInfo_v2", device.memory_info());
        let remapped = get.ok(
            "nvmlDeviceGetRemappedRows",
            ffi::remapped_rows(nvml, device),
        );
        let graphics = get
            .ok(
                "nvmlDeviceGetGraphicsRunningProcesses_v3",
                device.running_graphics_processes(),
            )
            .unwrap_or_default();
        let since = self.last_seen_us.get(&uuid).copied();
        let samples = get
            .ok(
                "nvmlDeviceGetProcessUtilization",
                device.process_utilization_stats(since),
            )
            .unwrap_or_default();
        if lost {
            return None;
        }
        if let Some(newest) = samples.iter().map(|s| s.timestamp).max() {
            self.last_seen_us.insert(uuid.clone(), newest);
        }
        // The newest sample of each process.
        let mut latest: BTreeMap<u32, (u64, ProcessUtilization)> = BTreeMap::new();
        for s in samples {
            let u = ProcessUtilization {
                pid: s.pid,
                sm_pct: s.sm_util,
                memory_pct: s.mem_util,
            };
            match latest.get(&s.pid) {
                Some((at, _)) if *at > s.timestamp => {}
                _ => {
                    latest.insert(s.pid, (s.timestamp, u));
                }
            }
        }
        Some(GpuReadings {
            index,
            uuid,
            power_mw,
            energy_mj,
            sm_clock_mhz,
            mem_clock_mhz,
            pcie_replays,
            memory_temp_c,
            fb_free_bytes: memory.as_ref().map(|m| m.free),
            // `_v1` has no reserved field: nvml-wrapper leaves it 0 only
            // when the driver says 0, since it always calls `_v2`.
            fb_reserved_bytes: memory.as_ref().map(|m| m.reserved),
            remapped_correctable: remapped.map(|r| u64::from(r.correctable)),
            remapped_uncorrectable: remapped.map(|r| u64::from(r.uncorrectable)),
            remap_failure: remapped.map(|r| r.failure),
            graphics_processes: processes(graphics),
            process_utilization: latest.into_values().map(|(_, u)| u).collect(),
        })
    }
}

/// Sorts one NVML answer: absent is `None` silently, lost is remembered.
struct Getter<'a> {
    gpu: u32,
    lost: &'a mut bool,
}

impl Getter<'_> {
    fn ok<T>(&mut self, call: &'static str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(NvmlError::GpuLost) => {
                *self.lost = true;
                None
            }
            Err(e) if is_absent(&e) => None,
            Err(e) => {
                tracing::debug!(gpu = self.gpu, call, error = %e, "NVML reading failed");
                None
            }
        }
    }
}

fn processes(list: Vec<ProcessInfo>) -> Vec<GpuProcess> {
    let mut out: Vec<GpuProcess> = list
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            used_memory_bytes: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            },
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// A temperature field value as whole degrees (NVML returns it as an
/// unsigned or signed integer depending on the driver).
fn field_as_u32(v: SampleValue) -> Option<u32> {
    match v {
        SampleValue::U32(x) => Some(x),
        SampleValue::U64(x) => u32::try_from(x).ok(),
        SampleValue::I64(x) => u32::try_from(x).ok(),
        SampleValue::F64(x) if x.is_finite() && x >= 0.0 => Some(x.round() as u32),
        SampleValue::F64(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_values_of_any_integer_type_are_degrees() {
        assert_eq!(field_as_u32(SampleValue::U32(45)), Some(45));
        assert_eq!(field_as_u32(SampleValue::I64(50)), Some(50));
        assert_eq!(field_as_u32(SampleValue::I64(-1)), None);
        assert_eq!(field_as_u32(SampleValue::F64(41.6)), Some(42));
        assert_eq!(field_as_u32(SampleValue::F64(f64::NAN)), None);
    }
}
