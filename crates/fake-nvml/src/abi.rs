//! NVML's C ABI: return codes, enum values and `repr(C)` structs, laid out as in `nvml.h` (checked against nvml-wrapper-sys in tests).

use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_ulonglong, c_void};

/// `nvmlReturn_t` values the fake returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Status {
    Uninitialized = 1,
    InvalidArgument = 2,
    NotSupported = 3,
    NoPermission = 4,
    NotFound = 6,
    InsufficientSize = 7,
    Timeout = 10,
    LibraryNotFound = 12,
    GpuIsLost = 15,
    ArgumentVersionMismatch = 25,
    Unknown = 999,
}

pub const NVML_SUCCESS: c_uint = 0;

/// `nvmlErrorString` text of every return code (the driver's wording).
pub fn error_string(code: c_uint) -> &'static [u8] {
    match code {
        0 => b"Success\0",
        1 => b"Uninitialized\0",
        2 => b"Invalid Argument\0",
        3 => b"Not Supported\0",
        4 => b"Insufficient Permissions\0",
        5 => b"Already Initialized\0",
        6 => b"Not Found\0",
        7 => b"Insufficient Size\0",
        8 => b"Insufficient External Power\0",
        9 => b"Driver Not Loaded\0",
        10 => b"Timeout\0",
        11 => b"Interrupt request issue\0",
        12 => b"NVML Shared Library Not Found\0",
        13 => b"Function Not Found\0",
        14 => b"Corrupted infoROM\0",
        15 => b"GPU is lost\0",
        16 => b"GPU requires restart\0",
        17 => b"The operating system has blocked the request.\0",
        18 => b"RM has detected an NVML/RM version mismatch.\0",
        19 => b"In use by another client\0",
        20 => b"Insufficient Memory\0",
        21 => b"No data\0",
        22 => b"The requested vgpu operation is not available on target device, becasue ECC is enabled\0",
        23 => b"Insufficient resources\0",
        24 => b"Frequency not supported\0",
        25 => b"Argument version mismatch\0",
        26 => b"Deprecated\0",
        27 => b"Not Ready\0",
        28 => b"GPU not found\0",
        29 => b"Invalid state\0",
        _ => b"Unknown Error\0",
    }
}

pub const NVML_FEATURE_DISABLED: c_uint = 0;
pub const NVML_FEATURE_ENABLED: c_uint = 1;

pub const NVML_TEMPERATURE_GPU: c_uint = 0;

pub const NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: c_uint = 0;
pub const NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: c_uint = 1;
pub const NVML_TEMPERATURE_THRESHOLD_MEM_MAX: c_uint = 2;
pub const NVML_TEMPERATURE_THRESHOLD_GPU_MAX: c_uint = 3;

pub const NVML_MEMORY_ERROR_TYPE_CORRECTED: c_uint = 0;
pub const NVML_MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
pub const NVML_VOLATILE_ECC: c_uint = 0;
pub const NVML_AGGREGATE_ECC: c_uint = 1;

pub const NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: c_uint = 0;
pub const NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: c_uint = 1;

pub const EVENT_SINGLE_BIT_ECC: u64 = 1;
pub const EVENT_DOUBLE_BIT_ECC: u64 = 2;
pub const EVENT_XID_CRITICAL: u64 = 8;

pub const NVML_CLOCK_GRAPHICS: c_uint = 0;
pub const NVML_CLOCK_SM: c_uint = 1;
pub const NVML_CLOCK_MEM: c_uint = 2;
pub const NVML_CLOCK_VIDEO: c_uint = 3;

pub const NVML_CLOCK_ID_CURRENT: c_uint = 0;
pub const NVML_CLOCK_ID_APP_CLOCK_TARGET: c_uint = 1;
pub const NVML_CLOCK_ID_APP_CLOCK_DEFAULT: c_uint = 2;
pub const NVML_CLOCK_ID_CUSTOMER_BOOST_MAX: c_uint = 3;

pub const NVML_PCIE_UTIL_TX_BYTES: c_uint = 0;
pub const NVML_PCIE_UTIL_RX_BYTES: c_uint = 1;

pub const NVML_INFOROM_OEM: c_uint = 0;
pub const NVML_INFOROM_ECC: c_uint = 1;
pub const NVML_INFOROM_POWER: c_uint = 2;

/// `nvmlValueType_t` values the fake writes into field values.
pub const NVML_VALUE_TYPE_UNSIGNED_INT: c_uint = 1;
pub const NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: c_uint = 3;

/// `NVML_FI_DEV_*` field ids the fake answers (`nvml.h` numbering, which
/// R580.82's renumbering leaves unchanged below 251).
pub mod field {
    pub const ECC_CURRENT: u32 = 1;
    pub const ECC_PENDING: u32 = 2;
    pub const ECC_SBE_VOL_TOTAL: u32 = 3;
    pub const ECC_DBE_VOL_TOTAL: u32 = 4;
    pub const ECC_SBE_AGG_TOTAL: u32 = 5;
    pub const ECC_DBE_AGG_TOTAL: u32 = 6;
    pub const RETIRED_SBE: u32 = 29;
    pub const RETIRED_DBE: u32 = 30;
    pub const RETIRED_PENDING: u32 = 31;
    pub const MEMORY_TEMP: u32 = 82;
    pub const TOTAL_ENERGY_CONSUMPTION: u32 = 83;
    pub const NVLINK_LINK_COUNT: u32 = 91;
    pub const PCIE_REPLAY_COUNTER: u32 = 94;
    pub const REMAPPED_COR: u32 = 142;
    pub const REMAPPED_UNC: u32 = 143;
    pub const REMAPPED_PENDING: u32 = 144;
    pub const REMAPPED_FAILURE: u32 = 145;
    pub const POWER_AVERAGE: u32 = 185;
    pub const POWER_INSTANT: u32 = 186;
    pub const POWER_MIN_LIMIT: u32 = 187;
    pub const POWER_MAX_LIMIT: u32 = 188;
    pub const POWER_DEFAULT_LIMIT: u32 = 189;
    pub const POWER_CURRENT_LIMIT: u32 = 190;
    pub const ENERGY: u32 = 191;
    pub const POWER_REQUESTED_LIMIT: u32 = 192;
}

/// `NVML_POWER_SCOPE_GPU`, the scope id of the power fields for the GPU itself.
pub const NVML_POWER_SCOPE_GPU: c_uint = 0;

/// `NVML_VALUE_NOT_AVAILABLE` for unsigned long long fields.
pub const VALUE_NOT_AVAILABLE_U64: u64 = u64::MAX;
/// Instance id of "the whole GPU" in event and process data.
pub const WHOLE_GPU_INSTANCE: c_uint = 0xFFFF_FFFF;

pub type NvmlDevice = *mut c_void;
pub type NvmlEventSet = *mut c_void;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// `nvmlMemory_t` (v1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemoryV1 {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2` version tag: struct size | (2 << 24).
pub const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<MemoryV2>() as c_uint) | (2 << 24);

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlProcessInfo_t` (= `nvmlProcessInfo_v2_t`), used by the `_v2` and `_v3` process queries.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// `nvmlProcessInfo_v1_t`, used by the suffix-less process queries.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
}

impl From<ProcessInfo> for ProcessInfoV1 {
    fn from(p: ProcessInfo) -> Self {
        Self {
            pid: p.pid,
            used_gpu_memory: p.used_gpu_memory,
        }
    }
}

/// `nvmlBAR1Memory_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Bar1Memory {
    pub bar1_total: c_ulonglong,
    pub bar1_free: c_ulonglong,
    pub bar1_used: c_ulonglong,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: c_ulonglong,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlValue_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union Value {
    pub d_val: f64,
    pub ui_val: c_uint,
    pub ul_val: c_ulong,
    pub ull_val: c_ulonglong,
    pub sll_val: i64,
    pub si_val: c_int,
    pub us_val: u16,
}

/// `nvmlFieldValue_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FieldValue {
    pub field_id: c_uint,
    pub scope_id: c_uint,
    pub timestamp: i64,
    pub latency_usec: i64,
    pub value_type: c_uint,
    pub nvml_return: c_uint,
    pub value: Value,
}

/// `nvmlDeviceAttributes_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DeviceAttributes {
    pub multiprocessor_count: c_uint,
    pub shared_copy_engine_count: c_uint,
    pub shared_decoder_count: c_uint,
    pub shared_encoder_count: c_uint,
    pub shared_jpeg_count: c_uint,
    pub shared_ofa_count: c_uint,
    pub gpu_instance_slice_count: c_uint,
    pub compute_instance_slice_count: c_uint,
    pub memory_size_mb: c_ulonglong,
}

/// `nvmlEventData_t` (v2 layout, with instance ids).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct EventData {
    pub device: NvmlDevice,
    pub event_type: c_ulonglong,
    pub event_data: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// Copy `s` NUL-terminated into a C char array, truncating if needed.
pub fn fill_c_string<const N: usize>(dst: &mut [c_char; N], s: &str) {
    let bytes = s.as_bytes();
    let n = bytes.len().min(N.saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&bytes[..n]) {
        *d = *b as c_char;
    }
    for d in dst.iter_mut().skip(n) {
        *d = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use nvml_wrapper_sys::bindings as sys;

    use super::*;

    macro_rules! same_layout {
        ($ours:ty, $theirs:ty, $($field:ident = $tfield:ident),+) => {
            assert_eq!(size_of::<$ours>(), size_of::<$theirs>(), stringify!($ours));
            assert_eq!(align_of::<$ours>(), align_of::<$theirs>(), stringify!($ours));
            $(assert_eq!(
                offset_of!($ours, $field),
                offset_of!($theirs, $tfield),
                concat!(stringify!($ours), ".", stringify!($field))
            );)+
        };
    }

    #[test]
    fn structs_match_nvml_h() {
        same_layout!(
            PciInfo,
            sys::nvmlPciInfo_t,
            bus_id_legacy = busIdLegacy,
            domain = domain,
            bus = bus,
            device = device,
            pci_device_id = pciDeviceId,
            pci_sub_system_id = pciSubSystemId,
            bus_id = busId
        );
        same_layout!(
            MemoryV1,
            sys::nvmlMemory_t,
            total = total,
            free = free,
            used = used
        );
        same_layout!(
            MemoryV2,
            sys::nvmlMemory_v2_t,
            version = version,
            total = total,
            reserved = reserved,
            free = free,
            used = used
        );
        same_layout!(
            Utilization,
            sys::nvmlUtilization_t,
            gpu = gpu,
            memory = memory
        );
        same_layout!(
            ProcessInfo,
            sys::nvmlProcessInfo_t,
            pid = pid,
            used_gpu_memory = usedGpuMemory,
            gpu_instance_id = gpuInstanceId,
            compute_instance_id = computeInstanceId
        );
        same_layout!(
            DeviceAttributes,
            sys::nvmlDeviceAttributes_t,
            multiprocessor_count = multiprocessorCount,
            shared_copy_engine_count = sharedCopyEngineCount,
            shared_decoder_count = sharedDecoderCount,
            shared_encoder_count = sharedEncoderCount,
            shared_jpeg_count = sharedJpegCount,
            shared_ofa_count = sharedOfaCount,
            gpu_instance_slice_count = gpuInstanceSliceCount,
            compute_instance_slice_count = computeInstanceSliceCount,
            memory_size_mb = memorySizeMB
        );
        same_layout!(
            ProcessInfoV1,
            sys::nvmlProcessInfo_v1_t,
            pid = pid,
            used_gpu_memory = usedGpuMemory
        );
        same_layout!(
            Bar1Memory,
            sys::nvmlBAR1Memory_t,
            bar1_total = bar1Total,
            bar1_free = bar1Free,
            bar1_used = bar1Used
        );
        same_layout!(
            ProcessUtilizationSample,
            sys::nvmlProcessUtilizationSample_t,
            pid = pid,
            time_stamp = timeStamp,
            sm_util = smUtil,
            mem_util = memUtil,
            enc_util = encUtil,
            dec_util = decUtil
        );
        same_layout!(
            FieldValue,
            sys::nvmlFieldValue_t,
            field_id = fieldId,
            scope_id = scopeId,
            timestamp = timestamp,
            latency_usec = latencyUsec,
            value_type = valueType,
            nvml_return = nvmlReturn,
            value = value
        );
        assert_eq!(size_of::<Value>(), size_of::<sys::nvmlValue_t>());
        same_layout!(
            EventData,
            sys::nvmlEventData_t,
            device = device,
            event_type = eventType,
            event_data = eventData,
            gpu_instance_id = gpuInstanceId,
            compute_instance_id = computeInstanceId
        );
    }

    #[test]
    fn constants_match_nvml_h() {
        assert_eq!(
            Status::Uninitialized as u32,
            sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED
        );
        assert_eq!(
            Status::InvalidArgument as u32,
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            Status::NotSupported as u32,
            sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            Status::NoPermission as u32,
            sys::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION
        );
        assert_eq!(
            Status::NotFound as u32,
            sys::nvmlReturn_enum_NVML_ERROR_NOT_FOUND
        );
        assert_eq!(
            Status::InsufficientSize as u32,
            sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        );
        assert_eq!(
            Status::Timeout as u32,
            sys::nvmlReturn_enum_NVML_ERROR_TIMEOUT
        );
        assert_eq!(
            Status::LibraryNotFound as u32,
            sys::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND
        );
        assert_eq!(
            Status::GpuIsLost as u32,
            sys::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST
        );
        assert_eq!(
            Status::ArgumentVersionMismatch as u32,
            sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        );
        assert_eq!(
            Status::Unknown as u32,
            sys::nvmlReturn_enum_NVML_ERROR_UNKNOWN
        );
        assert_eq!(
            EVENT_XID_CRITICAL,
            u64::from(sys::nvmlEventTypeXidCriticalError)
        );
        assert_eq!(
            EVENT_SINGLE_BIT_ECC,
            u64::from(sys::nvmlEventTypeSingleBitEccError)
        );
        assert_eq!(
            EVENT_DOUBLE_BIT_ECC,
            u64::from(sys::nvmlEventTypeDoubleBitEccError)
        );
        assert_eq!(
            NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
            sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        );
        assert_eq!(
            NVML_TEMPERATURE_THRESHOLD_GPU_MAX,
            sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_GPU_MAX
        );
        assert_eq!(
            NVML_TEMPERATURE_THRESHOLD_MEM_MAX,
            sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_MEM_MAX
        );
        assert_eq!(
            MEMORY_V2_VERSION as usize,
            size_of::<sys::nvmlMemory_v2_t>() | (2 << 24)
        );
        assert_eq!(NVML_CLOCK_SM, sys::nvmlClockType_enum_NVML_CLOCK_SM);
        assert_eq!(NVML_CLOCK_MEM, sys::nvmlClockType_enum_NVML_CLOCK_MEM);
        assert_eq!(NVML_CLOCK_VIDEO, sys::nvmlClockType_enum_NVML_CLOCK_VIDEO);
        assert_eq!(
            NVML_CLOCK_ID_CUSTOMER_BOOST_MAX,
            sys::nvmlClockId_enum_NVML_CLOCK_ID_CUSTOMER_BOOST_MAX
        );
        assert_eq!(
            NVML_CLOCK_ID_APP_CLOCK_DEFAULT,
            sys::nvmlClockId_enum_NVML_CLOCK_ID_APP_CLOCK_DEFAULT
        );
        assert_eq!(
            NVML_PCIE_UTIL_RX_BYTES,
            sys::nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES
        );
        assert_eq!(
            NVML_INFOROM_POWER,
            sys::nvmlInforomObject_enum_NVML_INFOROM_POWER
        );
        assert_eq!(
            NVML_VALUE_TYPE_UNSIGNED_INT,
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT
        );
        assert_eq!(
            NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        );
        {
            use nvml_wrapper_sys::bindings::field_id as fi;
            assert_eq!(field::MEMORY_TEMP, fi::NVML_FI_DEV_MEMORY_TEMP);
            assert_eq!(
                field::TOTAL_ENERGY_CONSUMPTION,
                fi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
            );
            assert_eq!(
                field::PCIE_REPLAY_COUNTER,
                fi::NVML_FI_DEV_PCIE_REPLAY_COUNTER
            );
            assert_eq!(field::REMAPPED_COR, fi::NVML_FI_DEV_REMAPPED_COR);
            assert_eq!(field::REMAPPED_FAILURE, fi::NVML_FI_DEV_REMAPPED_FAILURE);
            assert_eq!(field::RETIRED_PENDING, fi::NVML_FI_DEV_RETIRED_PENDING);
            assert_eq!(field::ECC_DBE_AGG_TOTAL, fi::NVML_FI_DEV_ECC_DBE_AGG_TOTAL);
            assert_eq!(field::NVLINK_LINK_COUNT, fi::NVML_FI_DEV_NVLINK_LINK_COUNT);
            assert_eq!(field::POWER_INSTANT, fi::NVML_FI_DEV_POWER_INSTANT);
            assert_eq!(field::ENERGY, fi::NVML_FI_DEV_ENERGY);
            assert_eq!(
                field::POWER_REQUESTED_LIMIT,
                fi::NVML_FI_DEV_POWER_REQUESTED_LIMIT
            );
        }
        assert_eq!(error_string(15), b"GPU is lost\0");
        assert_eq!(error_string(12345), b"Unknown Error\0");
    }

    #[test]
    fn c_strings_are_truncated_and_terminated() {
        let mut buf = [1 as c_char; 4];
        fill_c_string(&mut buf, "abcdef");
        assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
    }
}
