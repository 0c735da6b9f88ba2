//! NVML backend against the fake serving NVIDIA's HGX H100 mock profile
//! (`fixtures/nvml-profiles/mock-nvml-config-h100.yaml`). Expected values
//! are copied from that file.

mod nvml_common;

use joblet_gpu::model::{ComputeCapability, CudaVersion, MigInfo};
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, open};

/// `devices:` — pci.bus_id normalised; minor_number = index here.
const BUS_IDS: [&str; 8] = [
    "0000:1a:00.0",
    "0000:1b:00.0",
    "0000:4a:00.0",
    "0000:4b:00.0",
    "0000:8a:00.0",
    "0000:8b:00.0",
    "0000:ca:00.0",
    "0000:cb:00.0",
];

#[test]
fn h100_profile_matches_the_fixture() {
    let inv = open(&fixture("nvml-profiles/mock-nvml-config-h100.yaml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("550.163.01"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 12,
            minor: 4
        })
    );
    assert_eq!(report.gpus.len(), 8);
    for (i, gpu) in report.gpus.iter().enumerate() {
        assert_eq!(gpu.index, i as u32);
        assert_eq!(gpu.pci_bus_id, BUS_IDS[i]);
        assert_eq!(gpu.minor, i as u32);
        assert_eq!(
            gpu.uuid,
            format!("GPU-01000100-0000-0000-0000-00000000000{i}")
        );
        assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(gpu.memory_total_bytes, Some(85_899_345_920));
        assert_eq!(
            gpu.compute_capability,
            Some(ComputeCapability { major: 9, minor: 0 })
        );
        assert_eq!(gpu.thermal.current_c, Some(34));
        assert_eq!(gpu.thermal.slowdown_c, Some(87));
        assert_eq!(gpu.thermal.shutdown_c, Some(92));
        assert_eq!(gpu.ecc.enabled, Some(true));
        assert_eq!(gpu.mig, Some(MigInfo::default()));
        assert_eq!(gpu.numa_node, Some(if i < 4 { 0 } else { 1 }), "GPU {i}");
        assert_eq!(gpu.nvlink_peers.len(), 7, "GPU {i}: NV18 all-to-all");
        assert!(!gpu.lost);
    }
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}
