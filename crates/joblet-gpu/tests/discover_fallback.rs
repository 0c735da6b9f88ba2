//! Discovery without NVML: a library that will not load falls back to the
//! procfs/sysfs backend with a warning; no backend at all is not an error.

mod discover_common;

use discover_common::{options, write_proc, write_sys, ProcGpu};
use joblet_gpu::discover::discover;
use joblet_gpu::model::{Backend, DeviceMajors};

const MISSING: &str = "/nonexistent/joblet-test/libnvidia-ml.so.1";

fn two_gpus(proc_root: &std::path::Path, sys_root: &std::path::Path) {
    // Minors deliberately not in index (bus) order.
    write_proc(
        proc_root,
        "550.54.15",
        &[
            ProcGpu {
                bus: "0000:c1:00.0",
                model: "NVIDIA RTX A5000",
                uuid: "GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
                minor: 0,
            },
            ProcGpu {
                bus: "0000:81:00.0",
                model: "NVIDIA RTX A5000",
                uuid: "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
                minor: 1,
            },
        ],
    );
    write_sys(
        sys_root,
        &[("0000:81:00.0", 1, "16-31"), ("0000:c1:00.0", 1, "16-31")],
    );
}

#[test]
fn a_missing_nvml_library_falls_back_to_procfs_with_a_warning() {
    let (proc_dir, sys_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    two_gpus(proc_dir.path(), sys_dir.path());
    let inv = discover(&options(
        Some(MISSING.into()),
        proc_dir.path(),
        sys_dir.path(),
    ))
    .expect("discover");

    assert_eq!(inv.backends, [Backend::Procfs]);
    assert!(
        inv.warnings
            .iter()
            .any(|w| w.contains("NVML unavailable") && w.contains(MISSING) && w.contains("procfs")),
        "{:?}",
        inv.warnings
    );
    assert_eq!(inv.driver_version.as_deref(), Some("550.54.15"));
    assert_eq!(inv.nvml_version, None);
    assert_eq!(inv.gpus.len(), 2);
    assert_eq!(inv.gpus[0].pci_bus_id, "0000:81:00.0");
    assert_eq!(inv.gpus[0].minor, 1);
    assert_eq!(inv.gpus[1].pci_bus_id, "0000:c1:00.0");
    assert_eq!(inv.gpus[1].minor, 0);
    for gpu in &inv.gpus {
        assert_eq!(gpu.numa_node, Some(1));
        assert_eq!(gpu.local_cpus.as_deref(), Some("16-31"));
        assert_eq!(gpu.memory_total_bytes, None, "procfs has no memory sizes");
    }
    assert_eq!(
        inv.device_majors,
        DeviceMajors {
            nvidia: Some(195),
            nvidia_uvm: Some(508),
            nvidia_caps: Some(509)
        }
    );
    let topology = inv.topology.expect("sysfs topology");
    assert_eq!(topology.source, "sysfs");
    assert_eq!(topology.numa_nodes.len(), 2);
}

#[test]
fn nvml_switched_off_is_not_a_warning() {
    let (proc_dir, sys_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    two_gpus(proc_dir.path(), sys_dir.path());
    let inv = discover(&options(None, proc_dir.path(), sys_dir.path())).expect("discover");
    assert_eq!(inv.backends, [Backend::Procfs]);
    assert_eq!(inv.gpus.len(), 2);
    assert!(inv.warnings.is_empty(), "{:?}", inv.warnings);
}

#[test]
fn no_backend_at_all_is_zero_gpus_and_warnings_not_an_error() {
    let (proc_dir, sys_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_sys(sys_dir.path(), &[]);
    let inv = discover(&options(
        Some(MISSING.into()),
        proc_dir.path(),
        sys_dir.path(),
    ))
    .expect("no GPUs is the daemon's call, not an error");
    assert!(inv.gpus.is_empty());
    assert!(inv.backends.is_empty());
    assert_eq!(inv.device_majors, DeviceMajors::default());
    let all = inv.warnings.join("\n");
    assert!(all.contains("NVML unavailable"), "{all}");
    assert!(all.contains("no NVIDIA driver found"), "{all}");
    assert!(all.contains("no GPU backend works"), "{all}");
    assert!(
        !all.contains("device majors"),
        "no GPUs: missing majors are expected\n{all}"
    );
}
