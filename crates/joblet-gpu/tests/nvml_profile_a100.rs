//! NVML backend against the fake serving NVIDIA's DGX A100 mock profile
//! (`fixtures/nvml-profiles/mock-nvml-config-a100.yaml`). Expected values
//! are copied from that file.

mod nvml_common;

use joblet_gpu::model::{ComputeCapability, CudaVersion, MigInfo};
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, open};

/// `devices:` — (pci.bus_id normalised, minor_number), index = position.
const GPUS: [(&str, u32); 8] = [
    ("0000:07:00.0", 0),
    ("0000:0f:00.0", 1),
    ("0000:47:00.0", 2),
    ("0000:4e:00.0", 3),
    ("0000:87:00.0", 4),
    ("0000:90:00.0", 5),
    ("0000:b7:00.0", 6),
    ("0000:bd:00.0", 7),
];

#[test]
fn a100_profile_matches_the_fixture() {
    let inv = open(&fixture("nvml-profiles/mock-nvml-config-a100.yaml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("550.163.01"));
    assert_eq!(report.nvml_version.as_deref(), Some("12.550.163.01"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 12,
            minor: 4
        })
    );
    assert_eq!(report.gpus.len(), 8);
    for (i, gpu) in report.gpus.iter().enumerate() {
        let (bus, minor) = GPUS[i];
        assert_eq!(gpu.index, i as u32);
        assert_eq!(gpu.pci_bus_id, bus, "GPU {i}");
        assert_eq!(gpu.minor, minor, "GPU {i}");
        assert_eq!(
            gpu.uuid,
            format!("GPU-12345678-1234-1234-1234-12345678000{i}")
        );
        assert_eq!(gpu.name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(gpu.memory_total_bytes, Some(42_949_672_960));
        assert!(gpu.memory_used_bytes.is_some_and(|u| u < 42_949_672_960));
        assert_eq!(
            gpu.compute_capability,
            Some(ComputeCapability { major: 8, minor: 0 })
        );
        // thermal: temperature_gpu_c 33, slowdown 87, shutdown 92.
        assert_eq!(gpu.thermal.current_c, Some(33));
        assert_eq!(gpu.thermal.slowdown_c, Some(87));
        assert_eq!(gpu.thermal.shutdown_c, Some(92));
        assert_eq!(gpu.utilization_gpu_pct, Some(0));
        assert_eq!(gpu.utilization_memory_pct, Some(0));
        // ecc: mode_current enabled, every counter 0, no retired pages,
        // remapped rows 0 / not pending / no failure.
        assert_eq!(gpu.ecc.enabled, Some(true));
        assert_eq!(gpu.ecc.volatile_corrected, Some(0));
        assert_eq!(gpu.ecc.volatile_uncorrected, Some(0));
        assert_eq!(gpu.ecc.aggregate_corrected, Some(0));
        assert_eq!(gpu.ecc.aggregate_uncorrected, Some(0));
        assert_eq!(gpu.ecc.retired_pages, Some(0));
        assert_eq!(gpu.ecc.retired_pages_pending, Some(false));
        assert_eq!(gpu.ecc.remapped_rows_uncorrectable, Some(0));
        assert_eq!(gpu.ecc.remapped_rows_pending, Some(false));
        assert_eq!(gpu.ecc.remapped_rows_failure, Some(false));
        // mig: mode_current / mode_pending disabled.
        assert_eq!(gpu.mig, Some(MigInfo::default()));
        assert!(gpu.processes.is_empty());
        assert!(!gpu.lost);
        // pcie_topology: first root complex (numa 0) holds GPUs 0-3.
        assert_eq!(gpu.numa_node, Some(if i < 4 { 0 } else { 1 }), "GPU {i}");
        // nvlink: NV12 all-to-all through six NVSwitches.
        let others: Vec<String> = GPUS
            .iter()
            .filter(|(b, _)| *b != bus)
            .map(|(b, _)| b.to_string())
            .collect();
        assert_eq!(gpu.nvlink_peers, others, "GPU {i}");
    }
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}
