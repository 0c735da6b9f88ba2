//! The built `libnvidia_ml.so` driven through nvml-wrapper, as the NVML
//! backend uses it, on every fixture: both mock profiles and the four
//! `nvidia-smi` captures (MIG devices on the A100 capture).

mod nvml_wrapper_common;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings as sys;

use nvml_wrapper_common::*;

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
