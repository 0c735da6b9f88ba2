//! The built `libnvidia_ml.so` at run time: state-file injection, events,
//! device-node awareness, loud init failures and raw error codes.

mod nvml_wrapper_common;

use std::os::raw::{c_char, c_uint};
use std::path::Path;
use std::time::{Duration, Instant};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings as sys;

use nvml_wrapper_common::*;

#[test]
fn state_file_injects_load_and_faults() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let nvml = open(Some(&fixture(A100_PROFILE)), Some(&state), None).unwrap();
    let g3 = nvml.device_by_index(3).unwrap();
    let g2 = nvml.device_by_index(2).unwrap();
    assert_eq!(
        g3.temperature(TemperatureSensor::Gpu).unwrap(),
        33,
        "no file = no overrides"
    );

    write_state(
        &state,
        r#"{ "gpus": { "3": { "temperature_c": 95, "utilization_gpu_pct": 80, "utilization_memory_pct": 10,
        "memory_used_bytes": 1234567,
        "ecc": {"volatile_corrected": 5, "volatile_uncorrected": 1, "aggregate_corrected": 7, "aggregate_uncorrected": 2,
                "retired_pages_single": 2, "retired_pages_double": 1, "retired_pending": true,
                "remapped_correctable": 3, "remapped_uncorrectable": 1, "remapped_pending": true, "remapped_failure": false},
        "processes": [{"pid": 123, "used_memory_bytes": 1000000}, {"pid": 124}] } } }"#,
    );
    assert_eq!(g3.temperature(TemperatureSensor::Gpu).unwrap(), 95);
    assert_eq!(g2.temperature(TemperatureSensor::Gpu).unwrap(), 33);
    let u = g3.utilization_rates().unwrap();
    assert_eq!((u.gpu, u.memory), (80, 10));
    let mem = g3.memory_info().unwrap();
    assert_eq!(mem.used, 1_234_567);
    assert_eq!(mem.free, 42_949_672_960 - 611_319_808 - 1_234_567);
    assert_eq!(
        g3.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .unwrap(),
        5
    );
    assert_eq!(
        g3.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .unwrap(),
        1
    );
    assert_eq!(
        g3.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate)
            .unwrap(),
        7
    );
    assert_eq!(
        g3.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
            .unwrap(),
        2
    );
    assert_eq!(
        g3.retired_pages(RetirementCause::MultipleSingleBitEccErrors)
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        g3.retired_pages(RetirementCause::DoubleBitEccError)
            .unwrap()
            .len(),
        1
    );
    assert!(g3.are_pages_pending_retired().unwrap());
    assert_eq!(remapped_rows(&nvml, &g3).unwrap(), [3, 1, 1, 0]);
    let procs = g3.running_compute_processes().unwrap();
    assert_eq!(g3.running_compute_processes_count().unwrap(), 2);
    assert_eq!(procs[0].pid, 123);
    assert_eq!(procs[0].used_gpu_memory, UsedGpuMemory::Used(1_000_000));
    assert_eq!(procs[0].gpu_instance_id, None);
    assert_eq!(procs[1].used_gpu_memory, UsedGpuMemory::Unavailable);
    assert!(g2.running_compute_processes().unwrap().is_empty());

    // A malformed file keeps the last good state.
    write_state(&state, r#"{ "gpus": { "3": { "temperature": 20 } } }"#);
    assert_eq!(g3.temperature(TemperatureSensor::Gpu).unwrap(), 95);

    // Lost GPU: every query on it fails, the others answer.
    write_state(&state, r#"{ "gpus": { "3": { "lost": true } } }"#);
    assert!(matches!(
        g3.temperature(TemperatureSensor::Gpu),
        Err(NvmlError::GpuLost)
    ));
    assert!(matches!(g3.uuid(), Err(NvmlError::GpuLost)));
    assert!(matches!(g3.memory_info(), Err(NvmlError::GpuLost)));
    assert!(matches!(
        g3.running_compute_processes(),
        Err(NvmlError::GpuLost)
    ));
    assert_eq!(g2.temperature(TemperatureSensor::Gpu).unwrap(), 33);

    // Removing the file removes the overrides.
    std::fs::remove_file(&state).unwrap();
    assert_eq!(g3.temperature(TemperatureSensor::Gpu).unwrap(), 33);
}

#[test]
fn events_are_delivered_once_in_order() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let nvml = open(Some(&fixture(A100_PROFILE)), Some(&state), None).unwrap();
    let g3 = nvml.device_by_index(3).unwrap();
    let g0 = nvml.device_by_index(0).unwrap();
    let wanted = EventTypes::CRITICAL_XID_ERROR
        | EventTypes::SINGLE_BIT_ECC_ERROR
        | EventTypes::DOUBLE_BIT_ECC_ERROR;
    let set = nvml.create_event_set().unwrap();
    let set = g3.register_events(wanted, set).unwrap();
    let set = g0
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();

    let started = Instant::now();
    assert!(matches!(set.wait(100), Err(NvmlError::Timeout)));
    assert!(started.elapsed() >= Duration::from_millis(100));

    // GPU 5 is not registered, GPU 0 only for XIDs: both skipped.
    write_state(
        &state,
        r#"{ "events": [ {"gpu": 5, "type": "xid", "data": 48}, {"gpu": 0, "type": "double_bit_ecc"},
        {"gpu": 3, "type": "xid", "data": 79} ] }"#,
    );
    let e = set.wait(2000).unwrap();
    assert_eq!(e.device.uuid().unwrap(), g3.uuid().unwrap());
    assert_eq!(e.event_type, EventTypes::CRITICAL_XID_ERROR);
    assert!(matches!(e.event_data, Some(XidError::Value(79))));
    assert!(
        matches!(set.wait(50), Err(NvmlError::Timeout)),
        "delivered once"
    );

    // An event appended while a caller waits wakes it; MIG ids travel.
    let writer = {
        let state = state.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            write_state(
                &state,
                r#"{ "events": [ {"gpu": 5, "type": "xid", "data": 48}, {"gpu": 0, "type": "double_bit_ecc"},
                {"gpu": 3, "type": "xid", "data": 79}, {"gpu": 3, "type": "double_bit_ecc"},
                {"gpu": 0, "type": "xid", "data": 31, "gpu_instance_id": 1, "compute_instance_id": 0} ] }"#,
            );
        })
    };
    let mut data: sys::nvmlEventData_t = sys::nvmlEventData_t {
        device: std::ptr::null_mut(),
        eventType: 0,
        eventData: 0,
        gpuInstanceId: 0,
        computeInstanceId: 0,
    };
    // SAFETY: the set handle comes from this Nvml; `data` is a live local.
    let rc = unsafe {
        nvml.lib()
            .nvmlEventSetWait_v2(set.handle(), &mut data, 3000)
    };
    writer.join().unwrap();
    assert_eq!(rc, sys::nvmlReturn_enum_NVML_SUCCESS);
    assert_eq!(
        data.eventType,
        u64::from(sys::nvmlEventTypeDoubleBitEccError)
    );
    // SAFETY: as above.
    assert_eq!(data.device, unsafe { g3.handle() });
    assert_eq!(
        (data.gpuInstanceId, data.computeInstanceId),
        (u32::MAX, u32::MAX)
    );
    // SAFETY: as above.
    let rc = unsafe {
        nvml.lib()
            .nvmlEventSetWait_v2(set.handle(), &mut data, 1000)
    };
    assert_eq!(rc, sys::nvmlReturn_enum_NVML_SUCCESS);
    assert_eq!(
        (data.eventData, data.gpuInstanceId, data.computeInstanceId),
        (31, 1, 0)
    );
    // SAFETY: as above.
    assert_eq!(data.device, unsafe { g0.handle() });
    assert!(matches!(set.wait(0), Err(NvmlError::Timeout)));

    // A set created later sees only what happens after it, like the real
    // driver: the XID 79 above is history to it.
    let other = g3
        .register_events(
            EventTypes::CRITICAL_XID_ERROR,
            nvml.create_event_set().unwrap(),
        )
        .unwrap();
    assert!(matches!(other.wait(30), Err(NvmlError::Timeout)));
    write_state(
        &state,
        r#"{ "events": [ {"gpu": 5, "type": "xid", "data": 48}, {"gpu": 0, "type": "double_bit_ecc"},
        {"gpu": 3, "type": "xid", "data": 79}, {"gpu": 3, "type": "double_bit_ecc"},
        {"gpu": 0, "type": "xid", "data": 31, "gpu_instance_id": 1, "compute_instance_id": 0},
        {"gpu": 3, "type": "xid", "data": 94} ] }"#,
    );
    assert!(matches!(
        other.wait(1000).unwrap().event_data,
        Some(XidError::Value(94))
    ));
    other.release_events().unwrap();
    set.release_events().unwrap();

    // ECC events are not offered where ECC is off (the A5000s).
    drop(nvml);
    let nvml = open(Some(&fixture(A5000_XML)), None, None).unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert!(!d
        .supported_event_types()
        .unwrap()
        .contains(EventTypes::SINGLE_BIT_ECC_ERROR));
    let err = d
        .register_events(
            EventTypes::SINGLE_BIT_ECC_ERROR,
            nvml.create_event_set().unwrap(),
        )
        .unwrap_err();
    assert!(matches!(err.error, NvmlError::NotSupported));
}

/// `mknod <path> c 195 <minor>`; falls back to a regular file (also
/// openable) where mknod is not permitted.
fn node(dir: &Path, name: &str, minor: u32) {
    let path = dir.join(name);
    let ok = std::process::Command::new("mknod")
        .arg(&path)
        .args(["c", "195", &minor.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        std::fs::write(&path, b"").unwrap();
    }
}

#[test]
fn only_openable_device_nodes_are_enumerated() {
    let _g = lock();
    let config = fixture(A5000_XML);
    let dev = tempfile::tempdir().unwrap();

    // No nvidiactl: a GPU-less host simulating a node sees everything.
    let nvml = open(Some(&config), None, Some(dev.path())).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 2);
    drop(nvml);

    // nvidiactl + nvidia1 only: the GPU with minor 1 (file index 0).
    node(dev.path(), "nvidiactl", 255);
    node(dev.path(), "nvidia1", 1);
    let nvml = open(Some(&config), None, Some(dev.path())).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 1);
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(
        d.uuid().unwrap(),
        "GPU-12345678-aaaa-bbbb-cccc-0123456789ab"
    );
    assert_eq!(d.minor_number().unwrap(), 1);
    assert!(matches!(
        nvml.device_by_uuid("GPU-12345678-aaaa-bbbb-cccc-0123456789cd"),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(
        nvml.device_by_pci_bus_id("0000:C1:00.0"),
        Err(NvmlError::NotFound)
    ));
    drop(nvml);

    // Only nvidia0: the other GPU, re-indexed to 0.
    std::fs::remove_file(dev.path().join("nvidia1")).unwrap();
    node(dev.path(), "nvidia0", 0);
    let nvml = open(Some(&config), None, Some(dev.path())).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 1);
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(
        d.uuid().unwrap(),
        "GPU-12345678-aaaa-bbbb-cccc-0123456789cd"
    );
    assert_eq!(d.index().unwrap(), 0);
    drop(nvml);

    // nvidiactl but no GPU node: initialises, sees nothing.
    std::fs::remove_file(dev.path().join("nvidia0")).unwrap();
    let nvml = open(Some(&config), None, Some(dev.path())).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 0);
}

#[test]
fn init_fails_loudly_without_a_usable_config() {
    let _g = lock();
    assert!(matches!(
        open(None, None, None),
        Err(NvmlError::LibraryNotFound)
    ));
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        open(Some(&dir.path().join("missing.yaml")), None, None),
        Err(NvmlError::LibraryNotFound)
    ));
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<nvidia_smi_log><gpu>").unwrap();
    assert!(matches!(
        open(Some(&bad), None, None),
        Err(NvmlError::LibraryNotFound)
    ));
}

#[test]
fn raw_abi_error_codes() {
    let _g = lock();
    set_env("MOCK_NVML_CONFIG", Some(&fixture(T4_XML)));
    set_env("MOCK_NVML_STATE", None);
    set_env("MOCK_NVML_DEV_DIR", Some(&std::env::temp_dir()));
    // SAFETY: loading the library runs no code but its initialisers.
    let lib = unsafe { sys::NvmlLib::new(lib_path()) }.unwrap();
    let mut count: c_uint = 0;
    let mut dev: sys::nvmlDevice_t = std::ptr::null_mut();
    // SAFETY: in all calls below, pointers are live locals or NULL on
    // purpose, and handles come from this library.
    unsafe {
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED
        );
        assert_eq!(
            lib.nvmlShutdown(),
            sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED
        );
        assert_eq!(lib.nvmlInit_v2(), sys::nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlInit_v2(),
            sys::nvmlReturn_enum_NVML_SUCCESS,
            "reference counted"
        );
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(std::ptr::null_mut()),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!(count, 1);
        assert_eq!(
            lib.nvmlDeviceGetHandleByIndex_v2(0, &mut dev),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        let mut name = [0 as c_char; 4];
        assert_eq!(
            lib.nvmlDeviceGetName(dev, name.as_mut_ptr(), 4),
            sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        );
        assert_eq!(
            lib.nvmlDeviceGetName(dev, std::ptr::null_mut(), 96),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        let mut temp: c_uint = 0;
        assert_eq!(
            lib.nvmlDeviceGetTemperature(std::ptr::null_mut(), 0, &mut temp),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetTemperature(0x1234 as sys::nvmlDevice_t, 0, &mut temp),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetTemperature(dev, 7, &mut temp),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        // The T4 runs one compute process: a zero-sized buffer is too small.
        let mut n: c_uint = 0;
        assert_eq!(
            lib.nvmlDeviceGetComputeRunningProcesses_v3(dev, &mut n, std::ptr::null_mut()),
            sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        );
        assert_eq!(n, 1);
        let mut mem: sys::nvmlMemory_v2_t = std::mem::zeroed();
        assert_eq!(
            lib.nvmlDeviceGetMemoryInfo_v2(dev, &mut mem),
            sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        );
        let mut v1: sys::nvmlMemory_t = std::mem::zeroed();
        assert_eq!(
            lib.nvmlDeviceGetMemoryInfo(dev, &mut v1),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!((v1.total, v1.used), (15360 * MIB, (388 + 1032) * MIB));
        let mut ver = [0 as c_char; 80];
        assert_eq!(
            lib.nvmlSystemGetDriverVersion(ver.as_mut_ptr(), 5),
            sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        );
        let mut cuda = 0;
        assert_eq!(
            lib.nvmlSystemGetCudaDriverVersion(&mut cuda),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!(cuda, 11070);
        let msg = std::ffi::CStr::from_ptr(
            lib.nvmlErrorString(sys::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST),
        );
        assert_eq!(msg.to_str().unwrap(), "GPU is lost");
        let mut set: sys::nvmlEventSet_t = std::ptr::null_mut();
        assert_eq!(
            lib.nvmlEventSetCreate(&mut set),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!(
            lib.nvmlDeviceRegisterEvents(dev, 8, std::ptr::null_mut()),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(lib.nvmlEventSetFree(set), sys::nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlEventSetFree(set),
            sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT,
            "double free"
        );
        assert_eq!(lib.nvmlShutdown(), sys::nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            sys::nvmlReturn_enum_NVML_SUCCESS,
            "still one reference"
        );
        assert_eq!(lib.nvmlShutdown(), sys::nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED
        );
        // NO_GPUS | NO_ATTACH: same as a plain init.
        assert_eq!(lib.nvmlInitWithFlags(3), sys::nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            sys::nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!(lib.nvmlShutdown(), sys::nvmlReturn_enum_NVML_SUCCESS);
    }
}
