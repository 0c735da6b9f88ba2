//! A simulated node: the fake NVML serving the HGX H100 profile on a host
//! without the NVIDIA driver. A missing procfs tree is normal there (no
//! warning); local CPUs come from the (temp-dir) sysfs topology.

mod discover_common;
mod nvml_common;

use discover_common::{options, write_devices, write_sys};
use joblet_gpu::discover::{discover, discover_keeping_nvml};
use joblet_gpu::model::{Backend, CudaVersion, DeviceMajors};
use nvml_common::{fake_library, fixture, use_fixture};

#[test]
fn nvml_alone_with_topology_from_sysfs() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = (dir.path().join("proc"), dir.path().join("sys"));
    // A GPU-less host: /proc/devices without NVIDIA majors, no driver tree.
    std::fs::create_dir_all(&proc_root).unwrap();
    std::fs::write(
        proc_root.join("devices"),
        "Character devices:\n  1 mem\n\nBlock devices:\n  8 sd\n",
    )
    .unwrap();
    // sysfs knows the locality of two of the eight GPUs.
    write_sys(
        &sys_root,
        &[("0000:1a:00.0", 0, "0-15"), ("0000:cb:00.0", 1, "16-31")],
    );
    use_fixture(&fixture("nvml-profiles/mock-nvml-config-h100.yaml"), None);

    let (inv, nvml) = discover_keeping_nvml(&options(Some(fake_library()), &proc_root, &sys_root))
        .expect("discover");
    assert!(nvml.is_some(), "the open NVML is handed back");
    assert_eq!(inv.backends, [Backend::Nvml]);
    assert!(inv.warnings.is_empty(), "{:?}", inv.warnings);
    assert_eq!(
        inv.cuda_driver_version,
        Some(CudaVersion {
            major: 12,
            minor: 4
        })
    );
    assert_eq!(inv.gpus.len(), 8);
    assert_eq!(inv.gpus[0].local_cpus.as_deref(), Some("0-15"));
    assert_eq!(inv.gpus[7].local_cpus.as_deref(), Some("16-31"));
    assert!(inv.gpus[1..7].iter().all(|g| g.local_cpus.is_none()));
    assert_eq!(inv.device_majors, DeviceMajors::default());
    assert_eq!(inv.topology.as_ref().map(|t| t.gpu_numa.len()), Some(2));

    // Without any /proc/devices, GPUs found: the missing majors are a warning.
    std::fs::remove_file(proc_root.join("devices")).unwrap();
    let inv = discover(&options(Some(fake_library()), &proc_root, &sys_root)).expect("discover");
    assert!(
        inv.warnings
            .iter()
            .any(|w| w.contains("device majors unknown")),
        "{:?}",
        inv.warnings
    );
    // And back: majors read again.
    write_devices(&proc_root);
    let inv = discover(&options(Some(fake_library()), &proc_root, &sys_root)).expect("discover");
    assert_eq!(inv.device_majors.nvidia, Some(195));
}
