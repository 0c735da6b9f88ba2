//! The monitoring surface of the built `libnvidia_ml.so` through nvml-wrapper,
//! as an exporter uses it: power and limits (mW), energy (mJ, growing with
//! the draw), clocks (MHz), PCIe, fans, board identity, field values,
//! process lists in every struct version and per-process utilisation —
//! values from a profile and from captures, `NOT_SUPPORTED` where the
//! description says N/A, and state-file overrides.

mod nvml_wrapper_common;

use std::os::raw::c_uint;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{
    Brand, Clock, ClockId, PcieUtilCounter, PerformanceState,
};
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{self as sys, field_id as fi};

use nvml_wrapper_common::*;

fn field(d: &Device, id: u32) -> Result<SampleValue, NvmlError> {
    let mut v = d.field_values_for(&[FieldId(id)]).unwrap();
    assert_eq!(v.len(), 1);
    // The per-field nvmlReturn arrives as the sample's `value` error.
    let s = v
        .remove(0)
        .unwrap_or_else(|e| panic!("field {id}: bad sample: {e}"));
    assert_eq!(s.field, FieldId(id));
    assert!(s.timestamp > 0, "field timestamps are Unix µs");
    s.value
}

#[test]
fn profile_power_clocks_pcie_and_board() {
    let _g = lock();
    let nvml = open(Some(&fixture(A100_PROFILE)), None, None).unwrap();
    let d = nvml.device_by_index(5).unwrap();

    assert_eq!(d.power_usage().unwrap(), 72_000);
    assert_eq!(d.power_management_limit().unwrap(), 400_000);
    assert_eq!(d.power_management_limit_default().unwrap(), 400_000);
    assert_eq!(d.enforced_power_limit().unwrap(), 400_000);
    let c = d.power_management_limit_constraints().unwrap();
    assert_eq!((c.min_limit, c.max_limit), (100_000, 400_000));
    assert_eq!(d.performance_state().unwrap(), PerformanceState::Zero);

    assert_eq!(d.clock_info(Clock::SM).unwrap(), 210);
    assert_eq!(d.clock_info(Clock::Graphics).unwrap(), 210);
    assert_eq!(d.clock_info(Clock::Memory).unwrap(), 1215);
    assert_eq!(d.clock_info(Clock::Video).unwrap(), 585);
    assert_eq!(d.max_clock_info(Clock::SM).unwrap(), 1410);
    assert_eq!(d.max_clock_info(Clock::Video).unwrap(), 1290);
    assert_eq!(d.clock(Clock::Memory, ClockId::Current).unwrap(), 1215);
    assert_eq!(
        d.clock(Clock::Graphics, ClockId::TargetAppClock).unwrap(),
        1410
    );
    assert_eq!(d.clock(Clock::SM, ClockId::DefaultAppClock).unwrap(), 1410);
    assert_eq!(d.applications_clock(Clock::Memory).unwrap(), 1215);
    assert_eq!(d.default_applications_clock(Clock::Graphics).unwrap(), 1410);
    assert!(matches!(
        d.clock(Clock::Video, ClockId::TargetAppClock),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        d.max_customer_boost_clock(Clock::Graphics),
        Err(NvmlError::NotSupported)
    ));

    assert_eq!(d.current_pcie_link_gen().unwrap(), 4);
    assert_eq!(d.max_pcie_link_gen().unwrap(), 4);
    assert_eq!(d.current_pcie_link_width().unwrap(), 16);
    assert_eq!(d.max_pcie_link_width().unwrap(), 16);
    assert_eq!(d.pcie_replay_counter().unwrap(), 0);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 0);

    // SXM: no fan.
    assert_eq!(d.num_fans().unwrap(), 0);
    assert!(matches!(d.fan_speed(0), Err(NvmlError::NotSupported)));

    assert_eq!(d.serial().unwrap(), "1324821083805");
    assert_eq!(d.board_part_number().unwrap(), "692-2G506-0200-002");
    assert_eq!(d.vbios_version().unwrap(), "92.00.45.00.03");
    assert_eq!(d.info_rom_image_version().unwrap(), "G506.0200.00.04");
    assert!(!d.is_display_connected().unwrap());
    assert!(!d.is_display_active().unwrap());
    let bar1 = d.bar1_memory_info().unwrap();
    assert_eq!((bar1.total, bar1.used, bar1.free), (64 << 30, 0, 64 << 30));
    let enc = d.encoder_utilization().unwrap();
    assert_eq!(enc.utilization, 0);
    assert!(enc.sampling_period > 0);

    let mem = d.memory_info().unwrap();
    assert_eq!(mem.reserved, 611_319_808);

    // Field values: exporters' ids answered, unknown ones NOT_SUPPORTED
    // inside the per-field result.
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_MEMORY_TEMP).unwrap(),
        SampleValue::U32(31)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_PCIE_REPLAY_COUNTER).unwrap(),
        SampleValue::U64(0)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_REMAPPED_COR).unwrap(),
        SampleValue::U32(0)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_REMAPPED_UNC).unwrap(),
        SampleValue::U32(0)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_REMAPPED_FAILURE).unwrap(),
        SampleValue::U32(0)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_ECC_CURRENT).unwrap(),
        SampleValue::U32(1)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_NVLINK_LINK_COUNT).unwrap(),
        SampleValue::U32(12)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_POWER_INSTANT).unwrap(),
        SampleValue::U32(72_000)
    );
    assert!(matches!(
        field(&d, fi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION).unwrap(),
        SampleValue::U64(_)
    ));
    assert!(matches!(
        field(&d, fi::NVML_FI_DEV_PERF_POLICY_THERMAL),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(field(&d, 100_000), Err(NvmlError::NotSupported)));
}

#[test]
fn energy_integrates_the_draw_from_the_profile_base() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    // The H100 profile gives a counter value: the count starts there.
    let nvml = open(Some(&fixture(H100_PROFILE)), Some(&state), None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.power_usage().unwrap(), 95_000);

    let t0 = Instant::now();
    let e0 = d.total_energy_consumption().unwrap();
    assert!(e0 >= 600_000, "{e0}");
    std::thread::sleep(Duration::from_millis(300));
    let e1 = d.total_energy_consumption().unwrap();
    let dt = t0.elapsed().as_secs_f64();
    // 95 W for at least 0.3 s: at least 28.5 J, at most 95 W × the wall time.
    let grown = (e1 - e0) as f64;
    assert!(
        grown >= 28_500.0 && grown <= 95_000.0 * dt + 1.0,
        "{grown} mJ in {dt} s"
    );

    // A higher draw from the state file makes it grow faster from now on.
    write_state(&state, r#"{"gpus": {"0": {"power_mw": 700000}}}"#);
    assert_eq!(d.power_usage().unwrap(), 700_000);
    let t1 = Instant::now();
    let e2 = d.total_energy_consumption().unwrap();
    assert!(e2 >= e1);
    std::thread::sleep(Duration::from_millis(300));
    let e3 = d.total_energy_consumption().unwrap();
    let dt = t1.elapsed().as_secs_f64();
    let grown = (e3 - e2) as f64;
    assert!(
        grown >= 210_000.0 && grown <= 700_000.0 * dt + 1.0,
        "{grown} mJ in {dt} s"
    );
    match field(&d, fi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION).unwrap() {
        SampleValue::U64(v) => assert!(v >= e3),
        other => panic!("{other:?}"),
    }

    // Never backwards, reading after reading.
    let mut last = 0;
    for _ in 0..50 {
        let e = d.total_energy_consumption().unwrap();
        assert!(e >= last);
        last = e;
    }
}

#[test]
fn captures_give_their_values_and_not_supported_for_na() {
    let _g = lock();
    // A100 SXM4 (R535 layout): requested/current limits, memory temperature,
    // no fan.
    let nvml = open(Some(&fixture(A100_XML)), None, None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.power_usage().unwrap(), 67_030);
    assert_eq!(d.power_management_limit().unwrap(), 500_000);
    assert_eq!(d.enforced_power_limit().unwrap(), 500_000);
    let c = d.power_management_limit_constraints().unwrap();
    assert_eq!((c.min_limit, c.max_limit), (100_000, 500_000));
    assert!(d.total_energy_consumption().is_ok());
    assert_eq!(d.clock_info(Clock::SM).unwrap(), 1275);
    assert_eq!(d.clock_info(Clock::Memory).unwrap(), 1593);
    assert_eq!(d.max_clock_info(Clock::Graphics).unwrap(), 1410);
    assert_eq!(d.max_customer_boost_clock(Clock::Graphics).unwrap(), 1410);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 4000);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Receive).unwrap(), 0);
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_MEMORY_TEMP).unwrap(),
        SampleValue::U32(44)
    );
    // <remapped_rows>N/A</remapped_rows>
    assert!(matches!(
        field(&d, fi::NVML_FI_DEV_REMAPPED_COR),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(d.fan_speed(0), Err(NvmlError::NotSupported)));
    assert_eq!(d.serial().unwrap(), "1650522003820");
    assert!(d.is_display_connected().unwrap(), "<display_mode>Enabled");
    // <utilization> all N/A on a MIG-enabled GPU.
    assert!(matches!(
        d.encoder_utilization(),
        Err(NvmlError::NotSupported)
    ));
    drop(nvml);

    // Dual A5000 (R550 layout): average draw, a fan, P8, deprecated display mode.
    let nvml = open(Some(&fixture(A5000_XML)), None, None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.power_usage().unwrap(), 6_410);
    assert_eq!(d.enforced_power_limit().unwrap(), 230_000);
    assert_eq!(d.num_fans().unwrap(), 1);
    assert_eq!(d.fan_speed(0).unwrap(), 30);
    assert!(matches!(d.fan_speed(1), Err(NvmlError::InvalidArg)));
    assert_eq!(d.performance_state().unwrap(), PerformanceState::Eight);
    assert_eq!(d.current_pcie_link_gen().unwrap(), 1);
    assert_eq!(d.max_pcie_link_gen().unwrap(), 4);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 488);
    assert!(matches!(
        d.is_display_connected(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        field(&d, fi::NVML_FI_DEV_MEMORY_TEMP),
        Err(NvmlError::NotSupported)
    ));
    assert_eq!(d.clock_info(Clock::Memory).unwrap(), 405);
    assert!(matches!(
        d.applications_clock(Clock::Graphics),
        Err(NvmlError::NotSupported)
    ));
    drop(nvml);

    // RTX 3090 (pre-R530 layout): management limit below the default.
    let nvml = open(Some(&fixture(RTX3090_XML)), None, None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.power_usage().unwrap(), 27_230);
    assert_eq!(d.power_management_limit().unwrap(), 200_000);
    assert_eq!(d.power_management_limit_default().unwrap(), 350_000);
    assert_eq!(d.enforced_power_limit().unwrap(), 200_000);
    assert_eq!(d.brand().unwrap(), Brand::GeForce);
    assert!(matches!(d.serial(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        d.info_rom_image_version(),
        Err(NvmlError::NotSupported)
    ));
    assert_eq!(d.fan_speed(0).unwrap(), 0);
    drop(nvml);

    // Tesla T4: Xorg is a graphics process, python a compute one.
    let nvml = open(Some(&fixture(T4_XML)), None, None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    let graphics = d.running_graphics_processes().unwrap();
    let compute = d.running_compute_processes().unwrap();
    assert_eq!(graphics.len(), 1);
    assert_eq!(graphics[0].used_gpu_memory, UsedGpuMemory::Used(22 * MIB));
    assert_eq!(compute.len(), 1);
    assert_eq!(compute[0].used_gpu_memory, UsedGpuMemory::Used(1005 * MIB));
    assert_ne!(graphics[0].pid, compute[0].pid);
    assert!(d.mps_running_compute_processes().unwrap().is_empty());
    assert_eq!(d.current_pcie_link_width().unwrap(), 8);
    assert_eq!(d.max_pcie_link_width().unwrap(), 16);
}

#[test]
fn state_file_overrides_monitoring_values() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let nvml = open(Some(&fixture(A100_PROFILE)), Some(&state), None).unwrap();
    let d = nvml.device_by_index(1).unwrap();
    write_state(
        &state,
        r#"{"gpus": {"1": {"power_mw": 312345, "sm_clock_mhz": 1395, "mem_clock_mhz": 1200,
            "graphics_clock_mhz": 1390, "pcie_replay_counter": 17, "memory_temperature_c": 77,
            "memory_reserved_bytes": 1073741824, "memory_used_bytes": 2147483648}}}"#,
    );
    assert_eq!(d.power_usage().unwrap(), 312_345);
    assert_eq!(d.clock_info(Clock::SM).unwrap(), 1395);
    assert_eq!(d.clock_info(Clock::Memory).unwrap(), 1200);
    assert_eq!(d.clock_info(Clock::Graphics).unwrap(), 1390);
    assert_eq!(d.clock(Clock::SM, ClockId::Current).unwrap(), 1395);
    assert_eq!(
        d.max_clock_info(Clock::SM).unwrap(),
        1410,
        "max is not overridden"
    );
    assert_eq!(d.pcie_replay_counter().unwrap(), 17);
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_PCIE_REPLAY_COUNTER).unwrap(),
        SampleValue::U64(17)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_MEMORY_TEMP).unwrap(),
        SampleValue::U32(77)
    );
    assert_eq!(
        field(&d, fi::NVML_FI_DEV_POWER_AVERAGE).unwrap(),
        SampleValue::U32(312_345)
    );
    let mem = d.memory_info().unwrap();
    assert_eq!((mem.reserved, mem.used), (1 << 30, 2 << 30));
    assert_eq!(mem.free, 40 * (1 << 30) - (3 << 30));
    // Other GPUs keep the profile's values.
    let other = nvml.device_by_index(0).unwrap();
    assert_eq!(other.power_usage().unwrap(), 72_000);
    assert_eq!(other.memory_info().unwrap().reserved, 611_319_808);
    // A lost GPU fails the whole field-values call.
    write_state(&state, r#"{"gpus": {"1": {"lost": true}}}"#);
    assert!(matches!(
        d.field_values_for(&[FieldId(fi::NVML_FI_DEV_MEMORY_TEMP)]),
        Err(NvmlError::GpuLost)
    ));
    assert!(matches!(d.power_usage(), Err(NvmlError::GpuLost)));
    assert!(matches!(
        d.total_energy_consumption(),
        Err(NvmlError::GpuLost)
    ));
}

type ListFn<T> = unsafe extern "C" fn(sys::nvmlDevice_t, *mut c_uint, *mut T) -> sys::nvmlReturn_t;

/// A process-list function of the library nvml-wrapper loaded, by name
/// (nvml-wrapper binds only the `_v3` names).
fn list_fn<T>(name: &str) -> ListFn<T> {
    let path = std::ffi::CString::new(lib_path().into_os_string().into_encoded_bytes()).unwrap();
    let sym = std::ffi::CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated; the library is already
    // loaded (by nvml-wrapper), so this only takes another reference.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    assert!(!lib.is_null(), "dlopen {}", path.to_string_lossy());
    // SAFETY: `lib` is a live handle, `sym` NUL-terminated.
    let f = unsafe { libc::dlsym(lib, sym.as_ptr()) };
    assert!(!f.is_null(), "{name} is not exported");
    // SAFETY: the symbol is an NVML process-list function with this
    // signature (`nvml.h`); T is the struct version it takes.
    unsafe { std::mem::transmute::<*mut libc::c_void, ListFn<T>>(f) }
}

/// Raw call of a process-list function with a caller array of `cap`.
fn raw_list<T: Copy>(
    f: ListFn<T>,
    d: &Device,
    cap: usize,
    zero: T,
) -> (sys::nvmlReturn_t, c_uint, Vec<T>) {
    let mut buf = vec![zero; cap];
    let mut count = cap as c_uint;
    let ptr = if cap == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr()
    };
    // SAFETY: handle from a live Nvml; `buf` holds `cap` elements.
    let rc = unsafe { f(d.handle(), &mut count, ptr) };
    (rc, count, buf)
}

#[test]
fn process_lists_in_every_struct_version_and_utilisation() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let nvml = open(Some(&fixture(A100_PROFILE)), Some(&state), None).unwrap();
    let d = nvml.device_by_index(4).unwrap();
    assert!(matches!(
        d.process_utilization_stats(None),
        Err(NvmlError::NotFound)
    ));
    write_state(
        &state,
        r#"{"gpus": {"4": {
            "processes": [{"pid": 101, "used_memory_bytes": 1000, "sm_util_pct": 80, "mem_util_pct": 20},
                          {"pid": 102, "used_memory_bytes": 2000}],
            "graphics_processes": [{"pid": 201, "used_memory_bytes": 3000, "sm_util_pct": 5}],
            "mps_processes": [{"pid": 301}]}}}"#,
    );
    let v1_zero = sys::nvmlProcessInfo_v1_t {
        pid: 0,
        usedGpuMemory: 0,
    };
    let v2_zero = sys::nvmlProcessInfo_t {
        pid: 0,
        usedGpuMemory: 0,
        gpuInstanceId: 0,
        computeInstanceId: 0,
    };

    // v1 struct (16 bytes each): the second element lands where a v1
    // caller expects it.
    let f = list_fn("nvmlDeviceGetComputeRunningProcesses");
    let (rc, count, _) = raw_list(f, &d, 0, v1_zero);
    assert_eq!(
        (rc, count),
        (sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, 2)
    );
    let (rc, count, buf) = raw_list(f, &d, 3, v1_zero);
    assert_eq!((rc, count), (sys::nvmlReturn_enum_NVML_SUCCESS, 2));
    assert_eq!((buf[0].pid, buf[0].usedGpuMemory), (101, 1000));
    assert_eq!((buf[1].pid, buf[1].usedGpuMemory), (102, 2000));
    assert_eq!(buf[2].pid, 0, "untouched past count");

    for f in [
        list_fn("nvmlDeviceGetComputeRunningProcesses_v2"),
        list_fn("nvmlDeviceGetComputeRunningProcesses_v3"),
    ] {
        let (rc, count, buf) = raw_list(f, &d, 2, v2_zero);
        assert_eq!((rc, count), (sys::nvmlReturn_enum_NVML_SUCCESS, 2));
        assert_eq!((buf[1].pid, buf[1].usedGpuMemory), (102, 2000));
        assert_eq!(buf[1].gpuInstanceId, 0xFFFF_FFFF);
        let (rc, count, _) = raw_list(f, &d, 1, v2_zero);
        assert_eq!(
            (rc, count),
            (sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, 2)
        );
    }
    let f = list_fn("nvmlDeviceGetGraphicsRunningProcesses");
    let (rc, count, buf) = raw_list(f, &d, 1, v1_zero);
    assert_eq!(
        (rc, count, buf[0].pid),
        (sys::nvmlReturn_enum_NVML_SUCCESS, 1, 201)
    );
    for f in [
        list_fn("nvmlDeviceGetGraphicsRunningProcesses_v2"),
        list_fn("nvmlDeviceGetGraphicsRunningProcesses_v3"),
        list_fn("nvmlDeviceGetMPSComputeRunningProcesses_v3"),
    ] {
        let (rc, count, _) = raw_list(f, &d, 4, v2_zero);
        assert_eq!((rc, count), (sys::nvmlReturn_enum_NVML_SUCCESS, 1));
    }
    let f = list_fn("nvmlDeviceGetMPSComputeRunningProcesses");
    let (rc, count, buf) = raw_list(f, &d, 1, v1_zero);
    assert_eq!(
        (rc, count, buf[0].pid),
        (sys::nvmlReturn_enum_NVML_SUCCESS, 1, 301)
    );
    assert_eq!(buf[0].usedGpuMemory, u64::MAX, "NVML_VALUE_NOT_AVAILABLE");

    // Through nvml-wrapper, as the exporter reads them.
    let graphics = d.running_graphics_processes().unwrap();
    assert_eq!(graphics[0].pid, 201);
    assert_eq!(graphics[0].used_gpu_memory, UsedGpuMemory::Used(3000));
    let mps = d.mps_running_compute_processes().unwrap();
    assert_eq!(mps[0].used_gpu_memory, UsedGpuMemory::Unavailable);
    assert_eq!(d.running_compute_processes().unwrap().len(), 2);

    // One sample per process with injected utilisation, any kind.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let samples = d.process_utilization_stats(None).unwrap();
    assert_eq!(samples.len(), 2, "{samples:?}");
    assert_eq!(
        (samples[0].pid, samples[0].sm_util, samples[0].mem_util),
        (101, 80, 20)
    );
    assert_eq!(
        (samples[1].pid, samples[1].sm_util, samples[1].mem_util),
        (201, 5, 0)
    );
    assert!(samples[0].timestamp >= before);
    // Nothing newer than a timestamp in the future.
    assert!(matches!(
        d.process_utilization_stats(samples[0].timestamp + 3_600_000_000),
        Err(NvmlError::NotFound)
    ));
    // Other GPUs have no processes and no samples.
    let other = nvml.device_by_index(0).unwrap();
    assert!(other.running_graphics_processes().unwrap().is_empty());
    assert!(matches!(
        other.process_utilization_stats(None),
        Err(NvmlError::NotFound)
    ));
}
