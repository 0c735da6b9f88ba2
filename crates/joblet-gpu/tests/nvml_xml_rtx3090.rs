//! NVML backend against the fake serving a real GeForce RTX 3090 capture
//! (`fixtures/nvidia-smi-xml/rtx-3090-v12.xml`): a consumer GPU without
//! ECC or MIG, whose N/A fields must come back as `None`.

mod nvml_common;

use joblet_gpu::model::CudaVersion;
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, mib, open};

#[test]
fn rtx3090_capture_matches_the_fixture() {
    let inv = open(&fixture("nvidia-smi-xml/rtx-3090-v12.xml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("525.147.05"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 12,
            minor: 0
        })
    );
    assert_eq!(report.gpus.len(), 1);
    let gpu = &report.gpus[0];
    assert_eq!(gpu.name, "NVIDIA GeForce RTX 3090");
    assert_eq!(gpu.pci_bus_id, "0000:00:10.0");
    assert_eq!(gpu.minor, 0);
    assert_eq!(gpu.uuid, "GPU-12345678-aaaa-bbbb-cccc-0123456789ab");
    assert_eq!(gpu.memory_total_bytes, mib(24576));
    assert_eq!(gpu.memory_used_bytes, mib(1));
    assert_eq!(gpu.thermal.current_c, Some(37));
    assert_eq!(gpu.thermal.slowdown_c, Some(95));
    assert_eq!(gpu.thermal.shutdown_c, Some(98));
    // <current_ecc>N/A, every counter N/A, <remapped_rows>N/A.
    assert_eq!(gpu.ecc.enabled, None);
    assert_eq!(gpu.ecc.volatile_corrected, None);
    assert_eq!(gpu.ecc.aggregate_uncorrected, None);
    assert_eq!(gpu.ecc.retired_pages, None);
    assert_eq!(gpu.ecc.remapped_rows_uncorrectable, None);
    assert_eq!(gpu.mig, None);
    assert!(gpu.processes.is_empty());
    assert!(gpu.nvlink_peers.is_empty());
    assert!(!gpu.lost);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}
