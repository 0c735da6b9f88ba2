//! NVML backend against the fake serving a real Tesla T4 capture
//! (`fixtures/nvidia-smi-xml/tesla-t4.xml`): ECC on with retired-page
//! counts, a graphics and a compute process.

mod nvml_common;

use joblet_gpu::model::{CudaVersion, GpuProcess};
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, mib, open};

#[test]
fn tesla_t4_capture_matches_the_fixture() {
    let inv = open(&fixture("nvidia-smi-xml/tesla-t4.xml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("515.105.01"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 11,
            minor: 7
        })
    );
    assert_eq!(report.gpus.len(), 1);
    let gpu = &report.gpus[0];
    assert_eq!(gpu.name, "Tesla T4");
    assert_eq!(gpu.pci_bus_id, "0000:00:1e.0");
    assert_eq!(gpu.minor, 0);
    assert_eq!(gpu.uuid, "GPU-d37e67a5-91dd-3774-a5cb-99096249601a");
    assert_eq!(gpu.memory_total_bytes, mib(15360));
    assert_eq!(gpu.memory_used_bytes, mib(1032));
    assert_eq!(gpu.thermal.current_c, Some(40));
    assert_eq!(gpu.thermal.slowdown_c, Some(93));
    assert_eq!(gpu.thermal.shutdown_c, Some(96));
    assert_eq!(gpu.ecc.enabled, Some(true));
    assert_eq!(gpu.ecc.volatile_corrected, Some(0));
    assert_eq!(gpu.ecc.volatile_uncorrected, Some(0));
    assert_eq!(gpu.ecc.aggregate_corrected, Some(0));
    assert_eq!(gpu.ecc.aggregate_uncorrected, Some(0));
    // Two <retired_count>0</retired_count>, <pending_retirement>No.
    assert_eq!(gpu.ecc.retired_pages, Some(0));
    assert_eq!(gpu.ecc.retired_pages_pending, Some(false));
    assert_eq!(gpu.ecc.remapped_rows_uncorrectable, None);
    assert_eq!(gpu.mig, None);
    // pid 675 is type G (graphics): not a compute process.
    assert_eq!(
        gpu.processes,
        [GpuProcess {
            pid: 5762,
            used_memory_bytes: mib(1005)
        }]
    );
}
