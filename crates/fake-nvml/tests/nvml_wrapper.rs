//! The built `libnvidia_ml.so` driven through nvml-wrapper, as the NVML backend uses it: every fixture, state-file injection, events, device nodes and error codes.
//!
//! NVML state is process-global and the environment is read at init, so
//! every test holds `LOCK` while it sets the environment and uses the library.

use std::ffi::OsStr;
use std::os::raw::{c_char, c_uint};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cdylib cargo built for this test run. `cargo test` rebuilds
/// `target/<profile>/deps/libnvidia_ml.so` (this binary's directory) but only
/// `cargo build` refreshes the uplifted `target/<profile>/libnvidia_ml.so`, so
/// the copy in `deps/` is the one that matches the sources.
fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = deps.join("libnvidia_ml.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

const A100_PROFILE: &str = "nvml-profiles/mock-nvml-config-a100.yaml";
const H100_PROFILE: &str = "nvml-profiles/mock-nvml-config-h100.yaml";
const A100_XML: &str = "nvidia-smi-xml/a100-sxm4-v12.xml";
const A5000_XML: &str = "nvidia-smi-xml/dual_a5000-v13.xml";
const RTX3090_XML: &str = "nvidia-smi-xml/rtx-3090-v12.xml";
const T4_XML: &str = "nvidia-smi-xml/tesla-t4.xml";
const MIB: u64 = 1 << 20;

fn set_env(name: &str, value: Option<&Path>) {
    match value {
        Some(v) => std::env::set_var(name, v),
        None => std::env::remove_var(name),
    }
}

/// Initialise the fake from `config`, with an optional state file and device dir.
fn open(
    config: Option<&Path>,
    state: Option<&Path>,
    dev_dir: Option<&Path>,
) -> Result<Nvml, NvmlError> {
    set_env("MOCK_NVML_CONFIG", config);
    set_env("MOCK_NVML_STATE", state);
    // A directory without nvidiactl: every GPU is visible.
    let empty = std::env::temp_dir();
    set_env("MOCK_NVML_DEV_DIR", Some(dev_dir.unwrap_or(&empty)));
    let lib = lib_path();
    Nvml::builder().lib_path(OsStr::new(&lib)).init()
}

/// Replace the state file atomically.
fn write_state(path: &Path, json: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Gpu {
    name: &'static str,
    uuid: String,
    minor: u32,
    bus_id: String,
    total: u64,
    used: u64,
    cc: Option<(i32, i32)>,
    numa: Option<u32>,
    temp: u32,
    slowdown: u32,
    shutdown: u32,
    gpu_max: u32,
    ecc: Option<bool>,
    processes: Vec<(u32, u64)>,
    mig: Option<bool>,
    nvlinks: u32,
}

struct System {
    driver: &'static str,
    nvml: &'static str,
    cuda: i32,
}

fn remapped_rows(nvml: &Nvml, d: &Device) -> Result<[c_uint; 4], NvmlError> {
    let mut v = [0 as c_uint; 4];
    let [a, b, c, e] = &mut v;
    // SAFETY: the handle comes from this Nvml; the four pointers are live locals.
    let rc = unsafe { nvml.lib().nvmlDeviceGetRemappedRows(d.handle(), a, b, c, e) };
    nvml_wrapper::error::nvml_try(rc).map(|_| v)
}

fn instance_ids(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let (mut gi, mut ci) = (0, 0);
    // SAFETY: handle from this Nvml; out pointers are live locals.
    nvml_wrapper::error::nvml_try(unsafe {
        nvml.lib().nvmlDeviceGetGpuInstanceId(d.handle(), &mut gi)
    })?;
    // SAFETY: as above.
    nvml_wrapper::error::nvml_try(unsafe {
        nvml.lib()
            .nvmlDeviceGetComputeInstanceId(d.handle(), &mut ci)
    })?;
    Ok((gi, ci))
}

/// Call every method the NVML backend uses on every GPU and compare with
/// what the fixture file says.
fn check_node(file: &str, sys: System, gpus: &[Gpu]) {
    let _g = lock();
    let nvml = open(Some(&fixture(file)), None, None).unwrap();
    assert_eq!(nvml.sys_driver_version().unwrap(), sys.driver);
    assert_eq!(nvml.sys_nvml_version().unwrap(), sys.nvml);
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), sys.cuda);
    assert_eq!(nvml.device_count().unwrap(), gpus.len() as u32);
    for (i, want) in gpus.iter().enumerate() {
        let d = nvml.device_by_index(i as u32).unwrap();
        assert_eq!(d.index().unwrap(), i as u32);
        assert_eq!(d.name().unwrap(), want.name);
        assert_eq!(d.uuid().unwrap(), want.uuid);
        assert_eq!(d.minor_number().unwrap(), want.minor);
        let pci = d.pci_info().unwrap();
        assert_eq!(pci.bus_id, want.bus_id);
        assert_eq!(
            nvml.device_by_uuid(want.uuid.as_str())
                .unwrap()
                .index()
                .unwrap(),
            i as u32
        );
        assert_eq!(
            nvml.device_by_pci_bus_id(want.bus_id.as_str())
                .unwrap()
                .index()
                .unwrap(),
            i as u32
        );
        let legacy = &want.bus_id[4..];
        assert_eq!(
            nvml.device_by_pci_bus_id(legacy).unwrap().index().unwrap(),
            i as u32
        );
        let mem = d.memory_info().unwrap();
        assert_eq!((mem.total, mem.used), (want.total, want.used));
        assert_eq!(mem.free + mem.used + mem.reserved, mem.total);
        match want.cc {
            Some((major, minor)) => {
                let cc = d.cuda_compute_capability().unwrap();
                assert_eq!((cc.major, cc.minor), (major, minor));
            }
            None => assert!(matches!(
                d.cuda_compute_capability(),
                Err(NvmlError::NotSupported)
            )),
        }
        match want.numa {
            Some(n) => assert_eq!(d.numa_node_id().unwrap(), n),
            None => assert!(matches!(d.numa_node_id(), Err(NvmlError::NotSupported))),
        }
        assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), want.temp);
        assert_eq!(
            d.temperature_threshold(TemperatureThreshold::Slowdown)
                .unwrap(),
            want.slowdown
        );
        assert_eq!(
            d.temperature_threshold(TemperatureThreshold::Shutdown)
                .unwrap(),
            want.shutdown
        );
        assert_eq!(
            d.temperature_threshold(TemperatureThreshold::GpuMax)
                .unwrap(),
            want.gpu_max
        );
        assert!(matches!(
            d.temperature_threshold(TemperatureThreshold::AcousticMin),
            Err(NvmlError::NotSupported)
        ));
        // Utilization: N/A in MIG mode (the A100 capture), a number elsewhere.
        match d.utilization_rates() {
            Ok(u) => assert!(u.gpu <= 100 && u.memory <= 100),
            Err(e) => assert!(matches!(e, NvmlError::NotSupported) && want.mig == Some(true)),
        }
        match want.ecc {
            Some(on) => assert_eq!(d.is_ecc_enabled().unwrap().currently_enabled, on),
            None => assert!(matches!(d.is_ecc_enabled(), Err(NvmlError::NotSupported))),
        }
        for e in [MemoryError::Corrected, MemoryError::Uncorrected] {
            for c in [EccCounter::Volatile, EccCounter::Aggregate] {
                match d.total_ecc_errors(e, c) {
                    Ok(n) => assert_eq!(n, 0),
                    Err(NvmlError::NotSupported) => assert_ne!(want.ecc, Some(true)),
                    Err(other) => panic!("{file} GPU {i}: total_ecc_errors: {other}"),
                }
            }
        }
        for cause in [
            RetirementCause::MultipleSingleBitEccErrors,
            RetirementCause::DoubleBitEccError,
        ] {
            match d.retired_pages(cause) {
                Ok(pages) => assert!(pages.is_empty()),
                Err(e) => assert!(matches!(e, NvmlError::NotSupported), "{e}"),
            }
        }
        match d.are_pages_pending_retired() {
            Ok(p) => assert!(!p),
            Err(e) => assert!(matches!(e, NvmlError::NotSupported), "{e}"),
        }
        match remapped_rows(&nvml, &d) {
            Ok(rows) => assert_eq!(rows, [0, 0, 0, 0]),
            Err(e) => assert!(matches!(e, NvmlError::NotSupported), "{e}"),
        }
        let procs = d.running_compute_processes().unwrap();
        assert_eq!(
            d.running_compute_processes_count().unwrap() as usize,
            procs.len()
        );
        let got: Vec<(u32, u64)> = procs
            .iter()
            .map(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => (p.pid, b),
                UsedGpuMemory::Unavailable => (p.pid, u64::MAX),
            })
            .collect();
        assert_eq!(got, want.processes);
        match want.mig {
            Some(enabled) => {
                assert_eq!(d.mig_mode().unwrap().current, u32::from(enabled));
                d.mig_device_count().unwrap();
            }
            None => {
                assert!(matches!(d.mig_mode(), Err(NvmlError::NotSupported)));
                assert!(matches!(d.mig_device_count(), Err(NvmlError::NotSupported)));
            }
        }
        assert!(!d.mig_is_mig_device_handle().unwrap());
        assert!(matches!(d.mig_parent_device(), Err(NvmlError::InvalidArg)));
        for link in 0..sys::NVML_NVLINK_MAX_LINKS {
            let l = d.link_wrapper_for(link);
            match (l.is_active(), want.nvlinks) {
                (Ok(active), n) if link < n => {
                    assert!(active);
                    assert!(l
                        .remote_pci_info()
                        .unwrap()
                        .bus_id
                        .starts_with("00000000:0"));
                }
                (Err(NvmlError::InvalidArg), n) if n > 0 => assert!(link >= n),
                (Err(NvmlError::NotSupported), 0) => {}
                (other, n) => panic!("{file} GPU {i} link {link} of {n}: {other:?}"),
            }
        }
        let ev = d.supported_event_types().unwrap();
        assert!(ev.contains(EventTypes::CRITICAL_XID_ERROR));
        assert_eq!(
            ev.contains(EventTypes::DOUBLE_BIT_ECC_ERROR),
            want.ecc == Some(true)
        );
    }
    assert!(matches!(
        nvml.device_by_index(gpus.len() as u32),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(
        nvml.device_by_uuid("GPU-not-here"),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(
        nvml.device_by_pci_bus_id("0000:ff:1f.0"),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(
        nvml.device_by_pci_bus_id("not a bus"),
        Err(NvmlError::InvalidArg)
    ));
}

fn profile_gpus(
    name: &'static str,
    uuid: &str,
    buses: &[&str],
    total: u64,
    cc: (i32, i32),
    temp: u32,
    links: u32,
) -> Vec<Gpu> {
    buses
        .iter()
        .enumerate()
        .map(|(i, b)| Gpu {
            name,
            uuid: format!("{uuid}{i}"),
            minor: i as u32,
            bus_id: format!("00000000:{b}:00.0"),
            total,
            used: 0,
            cc: Some(cc),
            numa: Some(u32::from(i >= 4)),
            temp,
            slowdown: 87,
            shutdown: 92,
            gpu_max: 83,
            ecc: Some(true),
            processes: vec![],
            mig: Some(false),
            nvlinks: links,
        })
        .collect()
}

#[test]
fn a100_profile_through_nvml_wrapper() {
    let gpus = profile_gpus(
        "NVIDIA A100-SXM4-40GB",
        "GPU-12345678-1234-1234-1234-12345678000",
        &["07", "0F", "47", "4E", "87", "90", "B7", "BD"],
        42_949_672_960,
        (8, 0),
        33,
        12,
    );
    check_node(
        A100_PROFILE,
        System {
            driver: "550.163.01",
            nvml: "12.550.163.01",
            cuda: 12040,
        },
        &gpus,
    );
}

#[test]
fn h100_profile_through_nvml_wrapper() {
    let gpus = profile_gpus(
        "NVIDIA H100 80GB HBM3",
        "GPU-01000100-0000-0000-0000-00000000000",
        &["1A", "1B", "4A", "4B", "8A", "8B", "CA", "CB"],
        85_899_345_920,
        (9, 0),
        34,
        18,
    );
    check_node(
        H100_PROFILE,
        System {
            driver: "550.163.01",
            nvml: "12.550.163.01",
            cuda: 12040,
        },
        &gpus,
    );
}

#[allow(clippy::too_many_arguments)]
fn xml_gpu(
    name: &'static str,
    uuid: &str,
    minor: u32,
    bus: &str,
    total: u64,
    used: u64,
    cc: (i32, i32),
    temps: (u32, u32, u32, u32),
    ecc: Option<bool>,
    processes: Vec<(u32, u64)>,
    mig: Option<bool>,
) -> Gpu {
    Gpu {
        name,
        uuid: uuid.into(),
        minor,
        bus_id: bus.into(),
        total: total * MIB,
        used: used * MIB,
        cc: Some(cc),
        numa: None,
        temp: temps.0,
        slowdown: temps.1,
        shutdown: temps.2,
        gpu_max: temps.3,
        ecc,
        processes,
        mig,
        nvlinks: 0,
    }
}

#[test]
fn a100_capture_through_nvml_wrapper() {
    let gpu = xml_gpu(
        "NVIDIA A100-SXM4-80GB",
        "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        1,
        "00000000:01:00.0",
        81920,
        50,
        (8, 0),
        (27, 89, 92, 85),
        Some(true),
        vec![],
        Some(true),
    );
    check_node(
        A100_XML,
        System {
            driver: "535.54.03",
            nvml: "12.535.54.03",
            cuda: 12020,
        },
        &[gpu],
    );
}

#[test]
fn dual_a5000_capture_through_nvml_wrapper() {
    let a = xml_gpu(
        "NVIDIA RTX A5000",
        "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
        1,
        "00000000:81:00.0",
        24564,
        22437,
        (8, 6),
        (13, 95, 98, 90),
        Some(false),
        vec![(100477, 22430 * MIB)],
        None,
    );
    let b = xml_gpu(
        "NVIDIA RTX A5000",
        "GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
        0,
        "00000000:C1:00.0",
        24564,
        17253,
        (8, 6),
        (15, 95, 98, 90),
        Some(false),
        vec![(100477, 17246 * MIB)],
        None,
    );
    check_node(
        A5000_XML,
        System {
            driver: "590.44.01",
            nvml: "13.590.44.01",
            cuda: 13010,
        },
        &[a, b],
    );
}

#[test]
fn rtx_3090_capture_through_nvml_wrapper() {
    let g = xml_gpu(
        "NVIDIA GeForce RTX 3090",
        "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
        0,
        "00000000:00:10.0",
        24576,
        1,
        (8, 6),
        (37, 95, 98, 93),
        None,
        vec![],
        None,
    );
    check_node(
        RTX3090_XML,
        System {
            driver: "525.147.05",
            nvml: "12.525.147.05",
            cuda: 12000,
        },
        &[g],
    );
}

#[test]
fn tesla_t4_capture_through_nvml_wrapper() {
    let g = xml_gpu(
        "Tesla T4",
        "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
        0,
        "00000000:00:1E.0",
        15360,
        1032,
        (7, 5),
        (40, 93, 96, 85),
        Some(true),
        vec![(5762, 1005 * MIB)],
        None,
    );
    check_node(
        T4_XML,
        System {
            driver: "515.105.01",
            nvml: "11.515.105.01",
            cuda: 11070,
        },
        &[g],
    );
}

#[test]
fn a100_capture_mig_devices() {
    let _g = lock();
    let nvml = open(Some(&fixture(A100_XML)), None, None).unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    let parent_uuid = gpu.uuid().unwrap();
    assert_eq!(gpu.mig_device_count().unwrap(), 4);
    let mut uuids = Vec::new();
    for i in 0..4 {
        let m = gpu.mig_device_by_index(i).unwrap();
        assert!(m.mig_is_mig_device_handle().unwrap());
        assert_eq!(m.name().unwrap(), "NVIDIA A100-SXM4-80GB MIG 1g.20gb");
        let uuid = m.uuid().unwrap();
        assert!(uuid.starts_with("MIG-"), "{uuid}");
        let mem = m.memory_info().unwrap();
        assert_eq!((mem.total, mem.used), (19968 * MIB, 12 * MIB));
        assert_eq!(instance_ids(&nvml, &m).unwrap(), (3 + i, 0));
        let a = m.attributes().unwrap();
        assert_eq!(a.multiprocessor_count, 14);
        assert_eq!(a.shared_copy_engine_count, 1);
        assert_eq!(a.shared_decoder_count, 1);
        assert_eq!(a.gpu_instance_slice_count, 1);
        assert_eq!(a.memory_size_mb, 19968);
        assert_eq!(m.mig_parent_device().unwrap().uuid().unwrap(), parent_uuid);
        assert_eq!(m.cuda_compute_capability().unwrap().major, 8);
        let again = nvml.device_by_uuid(uuid.as_str()).unwrap();
        assert_eq!(instance_ids(&nvml, &again).unwrap(), (3 + i, 0));
        // Whole-GPU queries are not simulated on a MIG handle.
        assert!(matches!(
            m.temperature(TemperatureSensor::Gpu),
            Err(NvmlError::NotSupported)
        ));
        uuids.push(uuid);
    }
    uuids.dedup();
    assert_eq!(uuids.len(), 4);
    assert!(matches!(
        gpu.mig_device_by_index(4),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(
        instance_ids(&nvml, &gpu),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(gpu.attributes(), Err(NvmlError::NotSupported)));

    // MIG disabled on the profile: slots exist, devices do not.
    drop(nvml);
    let nvml = open(Some(&fixture(A100_PROFILE)), None, None).unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu.mig_device_count().unwrap(), 7);
    assert!(matches!(
        gpu.mig_device_by_index(0),
        Err(NvmlError::NotFound)
    ));
}

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
