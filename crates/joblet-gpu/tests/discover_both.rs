//! Discovery with both backends: the fake NVML serving the DGX A100
//! profile and a temp-dir procfs/sysfs describing the same GPUs. NVML
//! wins; procfs fills what NVML could not say (a lost GPU's minor and
//! UUID, local CPUs); disagreements are warnings.

mod discover_common;
mod nvml_common;

use discover_common::{options, write_proc, write_sys, ProcGpu};
use joblet_gpu::discover::discover;
use joblet_gpu::model::Backend;
use nvml_common::{fake_library, fixture, use_fixture, write_state};
use serde_json::json;

/// The profile's `devices:` bus ids; `pcie_topology` puts 0-3 on NUMA 0.
const BUS: [&str; 8] = [
    "0000:07:00.0",
    "0000:0f:00.0",
    "0000:47:00.0",
    "0000:4e:00.0",
    "0000:87:00.0",
    "0000:90:00.0",
    "0000:b7:00.0",
    "0000:bd:00.0",
];

#[test]
fn procfs_fills_what_nvml_lacks_and_disagreements_warn() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = (dir.path().join("proc"), dir.path().join("sys"));
    let uuids: Vec<String> = (0..8)
        .map(|i| format!("GPU-12345678-1234-1234-1234-12345678000{i}"))
        .collect();
    let proc_gpus: Vec<ProcGpu<'_>> = (0..8)
        .map(|i| ProcGpu {
            bus: BUS[i],
            model: "NVIDIA A100-SXM4-40GB",
            uuid: &uuids[i],
            // GPU 2: the driver's procfs disagrees with NVML's minor 2.
            minor: if i == 2 { 12 } else { i as u32 },
        })
        .collect();
    write_proc(&proc_root, "550.163.01", &proc_gpus);
    let sys_gpus: Vec<(&str, u32, &str)> = (0..8)
        .map(|i| {
            if i < 4 {
                (BUS[i], 0, "0-15")
            } else {
                (BUS[i], 1, "16-31")
            }
        })
        .collect();
    write_sys(&sys_root, &sys_gpus);

    // GPU 5 has fallen off the bus: NVML knows nothing but its index.
    let state = dir.path().join("state.json");
    write_state(&state, &json!({"gpus": {"5": {"lost": true}}}));
    use_fixture(
        &fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        Some(&state),
    );

    let inv = discover(&options(Some(fake_library()), &proc_root, &sys_root)).expect("discover");
    assert_eq!(inv.backends, [Backend::Nvml, Backend::Procfs]);
    assert_eq!(inv.driver_version.as_deref(), Some("550.163.01"));
    assert_eq!(inv.nvml_version.as_deref(), Some("12.550.163.01"));
    assert_eq!(inv.gpus.len(), 8, "{:#?}", inv.gpus);
    for (i, gpu) in inv.gpus.iter().enumerate() {
        assert_eq!(gpu.index, i as u32);
        assert_eq!(gpu.pci_bus_id, BUS[i]);
        assert_eq!(gpu.uuid, uuids[i]);
        assert_eq!(gpu.numa_node, Some(if i < 4 { 0 } else { 1 }), "GPU {i}");
        assert_eq!(
            gpu.local_cpus.as_deref(),
            Some(if i < 4 { "0-15" } else { "16-31" }),
            "GPU {i}: from sysfs"
        );
    }
    // NVML's minor wins over procfs's 12, with a warning naming both.
    assert_eq!(inv.gpus[2].minor, 2);
    assert!(
        inv.warnings.iter().any(|w| w.contains("0000:47:00.0")
            && w.contains("minor 2 (NVML)")
            && w.contains("12 (procfs)")),
        "{:?}",
        inv.warnings
    );
    // The lost GPU: identity and minor from procfs, still flagged lost.
    let lost = &inv.gpus[5];
    assert!(lost.lost);
    assert_eq!(lost.minor, 5);
    assert_eq!(lost.name, "NVIDIA A100-SXM4-40GB");
    assert_eq!(lost.memory_total_bytes, None);
    // Memory comes from NVML only.
    assert_eq!(inv.gpus[0].memory_total_bytes, Some(42_949_672_960));
    assert_eq!(inv.device_majors.nvidia, Some(195));
    assert_eq!(inv.device_majors.nvidia_uvm, Some(508));
    assert!(
        !inv.warnings.iter().any(|w| w.contains("backend only")),
        "every GPU matched: {:?}",
        inv.warnings
    );
}
