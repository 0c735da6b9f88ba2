//! The one model of a node's GPUs that every backend fills and every
//! consumer (daemon, `joblet discover`, `rnx gpu`, the scheduler) reads.
//!
//! Optional fields are `None` when the backend could not know them (the
//! procfs backend has no memory sizes; an `nvidia-smi` capture says `N/A`).
//! Never invent a value to fill a gap.

use serde::{Deserialize, Serialize};

/// Which backend produced a fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// NVIDIA Management Library through nvml-wrapper.
    Nvml,
    /// `/proc/driver/nvidia` and `/sys/bus/pci`.
    Procfs,
}

/// Everything discovery learned about one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeInventory {
    /// Backends whose facts are in this inventory, first = primary.
    pub backends: Vec<Backend>,
    /// Driver version, e.g. `550.163.01`.
    pub driver_version: Option<String>,
    /// NVML library version, e.g. `12.550.163.01`.
    pub nvml_version: Option<String>,
    /// Highest CUDA version the driver supports.
    pub cuda_driver_version: Option<CudaVersion>,
    /// Character-device majors from `/proc/devices`.
    pub device_majors: DeviceMajors,
    /// GPUs sorted by `index`.
    pub gpus: Vec<GpuInfo>,
    /// CUDA toolkits found under `gpu.cuda_paths`.
    pub cuda_toolkits: Vec<CudaToolkit>,
    /// NUMA topology (hwloc or sysfs), if known.
    pub topology: Option<Topology>,
    /// Things discovery noticed but could work around (a backend missing,
    /// a field that disagreed between backends, ...). Shown to the user.
    pub warnings: Vec<String>,
}

/// A CUDA version as NVML encodes it (`12040` = 12.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

impl CudaVersion {
    /// From NVML's integer form: `major * 1000 + minor * 10`.
    pub fn from_nvml(v: i32) -> Option<CudaVersion> {
        (v > 0).then_some(CudaVersion {
            major: (v / 1000) as u32,
            minor: ((v % 1000) / 10) as u32,
        })
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Majors of the NVIDIA character devices (`/proc/devices`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMajors {
    /// `nvidia` or `nvidia-frontend` (195 on every driver so far).
    pub nvidia: Option<u32>,
    /// `nvidia-uvm` (dynamic).
    pub nvidia_uvm: Option<u32>,
    /// `nvidia-caps` (dynamic; MIG access capabilities).
    pub nvidia_caps: Option<u32>,
}

/// One physical GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// NVML / CUDA (PCI bus order) index.
    pub index: u32,
    /// `GPU-xxxxxxxx-...`.
    pub uuid: String,
    /// Marketing name, e.g. `NVIDIA A100-SXM4-40GB`.
    pub name: String,
    /// Device minor: `/dev/nvidia<minor>` is this GPU. Not the index.
    pub minor: u32,
    /// PCI bus id, normalised: lower-case, 4-digit domain
    /// (`0000:07:00.0`). Use [`normalize_bus_id`].
    pub pci_bus_id: String,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub compute_capability: Option<ComputeCapability>,
    pub numa_node: Option<u32>,
    /// Local CPUs as a cpulist (`0-19,40-59`).
    pub local_cpus: Option<String>,
    /// PCI bus ids (normalised) of GPUs reachable over an active NVLink.
    pub nvlink_peers: Vec<String>,
    pub mig: Option<MigInfo>,
    pub thermal: Thermal,
    pub ecc: Ecc,
    /// GPU utilisation, percent.
    pub utilization_gpu_pct: Option<u32>,
    /// Memory-controller utilisation, percent.
    pub utilization_memory_pct: Option<u32>,
    /// Compute processes now on the GPU.
    pub processes: Vec<GpuProcess>,
    /// NVML answered `GPU_IS_LOST` (fallen off the bus): the GPU is
    /// listed with what was known, but must not be scheduled on.
    #[serde(default)]
    pub lost: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Temperatures in °C.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thermal {
    pub current_c: Option<u32>,
    /// Above this the GPU throttles; the health monitor pauses placements.
    pub slowdown_c: Option<u32>,
    pub shutdown_c: Option<u32>,
}

/// ECC state and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ecc {
    /// Current ECC mode; `None` when the GPU has no ECC.
    pub enabled: Option<bool>,
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
    /// Pages retired for single- plus double-bit errors (pre-Ampere).
    pub retired_pages: Option<u64>,
    /// A page retirement waits for a reboot/reset.
    pub retired_pages_pending: Option<bool>,
    /// Rows remapped for uncorrectable errors (Ampere and later).
    pub remapped_rows_uncorrectable: Option<u64>,
    /// A row remapping waits for a GPU reset.
    pub remapped_rows_pending: Option<bool>,
    /// A row remapping failed: the GPU should be replaced.
    pub remapped_rows_failure: Option<bool>,
}

/// A compute process using the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// `None` when the driver does not say (`N/A`, e.g. under MIG).
    pub used_memory_bytes: Option<u64>,
}

/// MIG state of a GPU that supports MIG.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInfo {
    /// Current MIG mode.
    pub enabled: bool,
    /// Mode after the next reset.
    pub pending: bool,
    pub gpu_instances: Vec<MigGpuInstance>,
}

/// A MIG GPU instance (with its single compute instance, as
/// `nvidia-smi` and `nvidia-mig-parted` create them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigGpuInstance {
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    /// Profile, e.g. `1g.5gb`, `3g.20gb`.
    pub profile: String,
    /// UUID of the MIG device (`MIG-...`), when known.
    pub uuid: Option<String>,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    /// Streaming multiprocessors of the slice.
    pub multiprocessors: Option<u32>,
}

/// A CUDA toolkit on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaToolkit {
    /// Directory as found (symlinks not resolved, e.g. `/usr/local/cuda`).
    pub path: String,
    /// Full version, e.g. `12.2.140`.
    pub version: String,
    /// Which file said so: `version.json` or `version.txt`.
    pub source: String,
}

/// NUMA topology of the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// `hwloc`, `hwloc-xml:<file>` or `sysfs`.
    pub source: String,
    pub numa_nodes: Vec<NumaNode>,
    /// Packages (sockets) and the NUMA nodes they hold.
    pub packages: Vec<Package>,
    /// PCI bus id (normalised) → NUMA node, for every NVIDIA PCI device
    /// the topology source knows (vendor 0x10de, class display/3D).
    pub gpu_numa: Vec<GpuLocality>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub os_index: u32,
    /// cpulist, e.g. `0-23,48-71`.
    pub cpus: String,
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub os_index: u32,
    pub numa_nodes: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuLocality {
    pub pci_bus_id: String,
    pub numa_node: Option<u32>,
    pub local_cpus: Option<String>,
}

/// Normalise a PCI bus id: lower-case hex, 4-digit domain
/// (`00000000:07:00.0` from NVML and nvidia-smi → `0000:07:00.0`).
/// Returns `None` for anything that is not `[domain:]bus:device.function`.
pub fn normalize_bus_id(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let (rest, func) = raw.rsplit_once('.')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let (domain, bus, dev) = match parts.as_slice() {
        [d, b, v] => (*d, *b, *v),
        [b, v] => ("0", *b, *v),
        _ => return None,
    };
    let hex = |s: &str, max_len: usize| -> Option<u64> {
        if s.is_empty() || s.len() > max_len || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(s, 16).ok()
    };
    let domain = hex(domain, 8)?;
    let bus = hex(bus, 2)?;
    let dev = hex(dev, 2)?;
    let func = hex(func, 1)?;
    if domain > 0xffff || dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise() {
        assert_eq!(
            normalize_bus_id("00000000:07:00.0").as_deref(),
            Some("0000:07:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:BD:00.0").as_deref(),
            Some("0000:bd:00.0")
        );
        assert_eq!(normalize_bus_id("3b:00.0").as_deref(), Some("0000:3b:00.0"));
        for bad in [
            "",
            "07:00",
            "zz:00.0",
            "0000:07:00.9",
            "0000:07:20.0",
            "1:2:3:4.0",
        ] {
            assert_eq!(normalize_bus_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn cuda_versions_from_nvml() {
        assert_eq!(
            CudaVersion::from_nvml(12040),
            Some(CudaVersion {
                major: 12,
                minor: 4
            })
        );
        assert_eq!(CudaVersion::from_nvml(0), None);
    }
}
