//! NVML backend against the fake serving a real two-RTX-A5000 capture
//! (`fixtures/nvidia-smi-xml/dual_a5000-v13.xml`): minors that are not
//! the indices, running processes, ECC disabled.

mod nvml_common;

use joblet_gpu::model::{CudaVersion, GpuProcess};
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, mib, open};

#[test]
fn dual_a5000_capture_matches_the_fixture() {
    let inv = open(&fixture("nvidia-smi-xml/dual_a5000-v13.xml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("590.44.01"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 13,
            minor: 1
        })
    );
    assert_eq!(report.gpus.len(), 2);
    // (bus id, minor, uuid, used MiB, temp, process MiB) per <gpu>.
    let expected = [
        (
            "0000:81:00.0",
            1,
            "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
            22437,
            13,
            22430,
        ),
        (
            "0000:c1:00.0",
            0,
            "GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
            17253,
            15,
            17246,
        ),
    ];
    for (gpu, (bus, minor, uuid, used, temp, proc_mib)) in report.gpus.iter().zip(expected) {
        assert_eq!(gpu.name, "NVIDIA RTX A5000");
        assert_eq!(gpu.pci_bus_id, bus);
        assert_eq!(gpu.minor, minor, "{bus}");
        assert_eq!(gpu.uuid, uuid);
        assert_eq!(gpu.memory_total_bytes, mib(24564));
        assert_eq!(gpu.memory_used_bytes, mib(used));
        assert_eq!(gpu.thermal.current_c, Some(temp));
        assert_eq!(gpu.thermal.slowdown_c, Some(95));
        assert_eq!(gpu.thermal.shutdown_c, Some(98));
        assert_eq!(gpu.utilization_gpu_pct, Some(0));
        assert_eq!(gpu.ecc.enabled, Some(false));
        // <volatile><dram_correctable>N/A ...: unknown.
        assert_eq!(gpu.ecc.volatile_corrected, None);
        // <remapped_rows>: 0 uncorrectable, not pending, no failure.
        assert_eq!(gpu.ecc.remapped_rows_uncorrectable, Some(0));
        assert_eq!(gpu.ecc.remapped_rows_pending, Some(false));
        assert_eq!(gpu.ecc.remapped_rows_failure, Some(false));
        // <current_mig>N/A</current_mig>: no MIG on this GPU.
        assert_eq!(gpu.mig, None);
        assert_eq!(
            gpu.processes,
            [GpuProcess {
                pid: 100477,
                used_memory_bytes: mib(proc_mib)
            }]
        );
    }
    assert_eq!(report.gpus[0].index, 0);
    assert_eq!(report.gpus[1].index, 1);
}
