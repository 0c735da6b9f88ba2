//! The one internal model of a simulated node that both parsers fill and the NVML functions read.

use crate::pci::PciAddress;

/// Which kind of file described the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// NVIDIA k8s-test-infra mock-NVML profile (YAML).
    Profile,
    /// `nvidia-smi -q -x` capture (XML).
    SmiXml,
}

/// A whole node: system versions and its GPUs in NVML index order.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub source: Source,
    pub driver_version: String,
    /// `nvmlSystemGetNVMLVersion`; `None` when it cannot be known.
    pub nvml_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion` encoding (`major * 1000 + minor * 10`).
    pub cuda_driver_version: Option<i32>,
    pub gpus: Vec<Gpu>,
}

/// One physical GPU. `None` always means "not available" (`N/A` in a
/// capture, absent in a profile) and is served as `NVML_ERROR_NOT_SUPPORTED`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub name: String,
    pub uuid: String,
    pub minor_number: Option<u32>,
    pub pci: PciAddress,
    pub pci_device_id: Option<u32>,
    pub pci_subsystem_id: Option<u32>,
    pub memory: Option<Memory>,
    pub compute_capability: Option<(i32, i32)>,
    pub numa_node: Option<u32>,
    pub temperature_c: Option<u32>,
    pub thresholds: Thresholds,
    pub utilization: Utilization,
    pub ecc_mode: Option<EccMode>,
    pub ecc_counts: EccCounts,
    pub retired_pages: RetiredPages,
    pub remapped_rows: RemappedRows,
    /// Compute processes (`nvmlDeviceGetComputeRunningProcesses*`).
    pub processes: Vec<Process>,
    /// Graphics processes (`nvmlDeviceGetGraphicsRunningProcesses*`).
    pub graphics_processes: Vec<Process>,
    /// MPS clients (`nvmlDeviceGetMPSComputeRunningProcesses*`).
    pub mps_processes: Vec<Process>,
    /// Board identity and modes (brand, serial, VBIOS, persistence, ...).
    pub board: Board,
    pub power: Power,
    pub clocks: Clocks,
    pub pcie: Pcie,
    /// `None`: the board has no fan (SXM, passively cooled boards).
    pub fan: Option<Fan>,
    /// `nvmlPstates_t` value: 0 for `P0` .. 15 for `P15`.
    pub performance_state: Option<u32>,
    /// HBM/GDDR temperature in °C (`NVML_FI_DEV_MEMORY_TEMP`).
    pub memory_temperature_c: Option<u32>,
    /// BAR1 aperture in bytes.
    pub bar1: Option<Bar1>,
    /// `None`: the GPU is not MIG capable.
    pub mig: Option<Mig>,
    /// `None`: NVLink not supported / not described.
    pub nvlink: Option<Vec<NvLink>>,
}

/// Frame-buffer memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub reserved: u64,
    pub used: u64,
}

impl Memory {
    /// Free memory as NVML reports it: total minus reserved minus used.
    pub fn free(&self) -> u64 {
        self.total
            .saturating_sub(self.reserved)
            .saturating_sub(self.used)
    }
}

/// Temperature thresholds in °C.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Thresholds {
    pub shutdown: Option<u32>,
    pub slowdown: Option<u32>,
    /// `NVML_TEMPERATURE_THRESHOLD_GPU_MAX` (nvidia-smi "GPU Max Operating Temp").
    pub gpu_max: Option<u32>,
    /// `NVML_TEMPERATURE_THRESHOLD_MEM_MAX`.
    pub mem_max: Option<u32>,
}

/// Utilization in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Utilization {
    pub gpu: Option<u32>,
    pub memory: Option<u32>,
    pub encoder: Option<u32>,
    pub decoder: Option<u32>,
}

/// Identity strings and mode switches of a board.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Board {
    /// Brand text as the source spells it (`NVIDIA`, `GeForce`, `tesla`).
    pub brand: Option<String>,
    pub serial: Option<String>,
    pub board_part_number: Option<String>,
    pub vbios_version: Option<String>,
    pub inforom: InfoRom,
    pub display_mode: Option<bool>,
    pub display_active: Option<bool>,
    pub persistence_mode: Option<bool>,
    /// `nvmlComputeMode_t` value.
    pub compute_mode: Option<u32>,
    /// `nvmlDriverModel_t` value (Windows only: `None` on Linux).
    pub driver_model: Option<u32>,
}

/// InfoROM versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InfoRom {
    pub image: Option<String>,
    pub oem: Option<String>,
    pub ecc: Option<String>,
    pub power: Option<String>,
}

/// Power readings and limits in milliwatts, energy in millijoules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Power {
    /// `nvmlDeviceGetPowerUsage`.
    pub draw_mw: Option<u32>,
    /// `nvmlDeviceGetPowerManagementLimit` (the limit the operator asked for).
    pub management_limit_mw: Option<u32>,
    /// `nvmlDeviceGetEnforcedPowerLimit`.
    pub enforced_limit_mw: Option<u32>,
    pub default_limit_mw: Option<u32>,
    pub min_limit_mw: Option<u32>,
    pub max_limit_mw: Option<u32>,
    /// Energy counter at the moment the description was taken; `None`
    /// when it does not say (the counter then starts at 0 at `nvmlInit`).
    pub energy_mj: Option<u64>,
}

/// One clock reading per domain, in MHz.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockSet {
    pub graphics: Option<u32>,
    pub sm: Option<u32>,
    pub memory: Option<u32>,
    pub video: Option<u32>,
}

/// Clocks in MHz.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clocks {
    pub current: ClockSet,
    pub max: ClockSet,
    /// Application clock targets (graphics and memory only, as in NVML).
    pub applications: ClockSet,
    pub default_applications: ClockSet,
    /// `NVML_CLOCK_ID_CUSTOMER_BOOST_MAX`.
    pub customer_boost_max: ClockSet,
}

/// PCIe link state and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pcie {
    pub gen_current: Option<u32>,
    pub gen_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
    pub replay_counter: Option<u32>,
    /// Throughput in KB/s over the last sampling period.
    pub tx_kbps: Option<u32>,
    pub rx_kbps: Option<u32>,
}

/// Fans of a board that has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fan {
    pub count: u32,
    /// Percent of maximum speed; `None` when the source does not say.
    pub speed_pct: Option<u32>,
}

/// BAR1 memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar1 {
    pub total: u64,
    pub used: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EccMode {
    pub current: bool,
    pub pending: bool,
}

/// Total ECC error counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EccCounts {
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
}

/// Retired pages per cause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetiredPages {
    /// Cause "multiple single-bit ECC errors".
    pub single_bit: Option<PageList>,
    pub double_bit: Option<PageList>,
    pub pending: Option<bool>,
}

/// Retired pages of one cause: a count and the addresses the source listed
/// (possibly fewer than `count`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageList {
    pub count: u32,
    pub addresses: Vec<u64>,
}

/// Row-remapper counters (Ampere and later).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemappedRows {
    pub correctable: Option<u32>,
    pub uncorrectable: Option<u32>,
    pub pending: Option<bool>,
    pub failure: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// Bytes; `None` is reported as `NVML_VALUE_NOT_AVAILABLE`.
    pub used_memory: Option<u64>,
    /// MIG instance the process runs in; `None` for the whole GPU.
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
}

/// MIG state of a MIG-capable GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Mig {
    pub current_enabled: bool,
    pub pending_enabled: bool,
    /// `nvmlDeviceGetMaxMigDeviceCount`.
    pub max_devices: u32,
    pub devices: Vec<MigDevice>,
}

/// One MIG device (a compute instance inside a GPU instance).
#[derive(Debug, Clone, PartialEq)]
pub struct MigDevice {
    /// Slot for `nvmlDeviceGetMigDeviceHandleByIndex`.
    pub index: u32,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub uuid: String,
    /// Profile such as `1g.10gb`; `None` when it cannot be derived honestly.
    pub profile: Option<String>,
    pub memory: Option<Memory>,
    pub attributes: MigAttributes,
}

/// `nvmlDeviceAttributes_t` of a MIG device; `None` fields make the whole
/// query `NOT_SUPPORTED`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MigAttributes {
    pub multiprocessor_count: Option<u32>,
    pub copy_engine_count: Option<u32>,
    pub decoder_count: Option<u32>,
    pub encoder_count: Option<u32>,
    pub jpeg_count: Option<u32>,
    pub ofa_count: Option<u32>,
    pub gpu_instance_slices: Option<u32>,
    pub compute_instance_slices: Option<u32>,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvLink {
    pub active: bool,
    /// PCI address of the far end (GPU or NVSwitch); `None` if unknown.
    pub remote: Option<PciAddress>,
}
