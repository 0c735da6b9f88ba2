//! NVML backend against the fake serving a real A100-SXM4-80GB capture
//! with MIG enabled (`fixtures/nvidia-smi-xml/a100-sxm4-v12.xml`).
//! Expected values are copied from that file.

mod nvml_common;

use joblet_gpu::model::CudaVersion;
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, mib, open};

#[test]
fn a100_capture_with_mig_matches_the_fixture() {
    let inv = open(&fixture("nvidia-smi-xml/a100-sxm4-v12.xml"), None);
    let report = inv.discover().expect("discover");

    assert_eq!(report.driver_version.as_deref(), Some("535.54.03"));
    assert_eq!(
        report.cuda_driver_version,
        Some(CudaVersion {
            major: 12,
            minor: 2
        })
    );
    // `attached_gpus` says 4 but the capture holds one <gpu> element.
    assert_eq!(report.gpus.len(), 1);
    let gpu = &report.gpus[0];
    assert_eq!(gpu.index, 0);
    assert_eq!(gpu.name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpu.uuid, "GPU-513536b6-7d19-9063-b049-1e69664bb298");
    assert_eq!(
        gpu.minor, 1,
        "<minor_number>1</minor_number>, not the index"
    );
    assert_eq!(gpu.pci_bus_id, "0000:01:00.0");
    assert_eq!(gpu.memory_total_bytes, mib(81920));
    assert_eq!(gpu.memory_used_bytes, mib(50));
    assert_eq!(gpu.thermal.current_c, Some(27));
    assert_eq!(gpu.thermal.slowdown_c, Some(89));
    assert_eq!(gpu.thermal.shutdown_c, Some(92));
    // <gpu_util>N/A</gpu_util>, <remapped_rows>N/A</remapped_rows>,
    // <retired_count>N/A</retired_count>: unknown, not zero.
    assert_eq!(gpu.utilization_gpu_pct, None);
    assert_eq!(gpu.utilization_memory_pct, None);
    assert_eq!(gpu.ecc.remapped_rows_uncorrectable, None);
    assert_eq!(gpu.ecc.retired_pages, None);
    assert_eq!(gpu.ecc.enabled, Some(true));
    assert_eq!(gpu.ecc.volatile_corrected, Some(0));
    assert_eq!(gpu.ecc.aggregate_uncorrected, Some(0));
    assert!(gpu.processes.is_empty());

    let mig = gpu.mig.as_ref().expect("MIG state");
    assert!(mig.enabled && mig.pending);
    let ids: Vec<(u32, u32)> = mig
        .gpu_instances
        .iter()
        .map(|i| (i.gpu_instance_id, i.compute_instance_id))
        .collect();
    assert_eq!(ids, [(3, 0), (4, 0), (5, 0), (6, 0)]);
    for instance in &mig.gpu_instances {
        assert_eq!(instance.memory_total_bytes, mib(19968));
        assert_eq!(instance.memory_used_bytes, mib(12));
        assert_eq!(instance.multiprocessors, Some(14));
        assert!(
            instance
                .uuid
                .as_deref()
                .is_some_and(|u| u.starts_with("MIG-")),
            "{:?}",
            instance.uuid
        );
        // 14 of the A100's 98 SMs and ~20 GB: the 1g.20gb profile.
        assert_eq!(instance.profile, "1g.20gb");
    }
    let uuids: std::collections::BTreeSet<_> =
        mig.gpu_instances.iter().map(|i| i.uuid.clone()).collect();
    assert_eq!(uuids.len(), 4, "MIG UUIDs are distinct");
}
