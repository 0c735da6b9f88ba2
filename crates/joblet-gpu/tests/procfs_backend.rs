//! The procfs/sysfs backend and the /proc/devices majors against temp-dir
//! /proc + /sys trees and hwloc's POWER9 snapshot.

mod topology_fixtures;

use joblet_gpu::majors::read_device_majors;
use joblet_gpu::procfs::ProcfsInventory;
use joblet_gpu::{Backend, DeviceMajors, GpuInventory, InventoryError};
use std::path::Path;

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

const VERSION: &str = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";

fn information(model: &str, uuid: &str, bus: &str, minor: u32, excluded: &str) -> String {
    format!(
        "Model: \t\t {model}\nIRQ:   \t\t 165\nGPU UUID: \t {uuid}\nVideo BIOS: \t 92.00.19.00.10\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t {excluded}\n"
    )
}

/// Driver 550.54.15 with two A100s: the one at the higher bus address
/// has the lower device minor (minor ≠ index).
fn two_gpu_node(root: &Path) {
    write(root, "proc/driver/nvidia/version", VERSION);
    write(
        root,
        "proc/driver/nvidia/gpus/0000:b7:00.0/information",
        &information(
            "NVIDIA A100-SXM4-40GB",
            "GPU-b7b7b7b7-0000-1111-2222-333333333333",
            "0000:b7:00.0",
            0,
            "No",
        ),
    );
    write(
        root,
        "proc/driver/nvidia/gpus/0000:07:00.0/information",
        &information(
            "NVIDIA A100-SXM4-40GB",
            "GPU-07070707-0000-1111-2222-333333333333",
            "0000:07:00.0",
            2,
            "No",
        ),
    );
    write(root, "sys/bus/pci/devices/0000:07:00.0/numa_node", "0\n");
    write(
        root,
        "sys/bus/pci/devices/0000:07:00.0/local_cpulist",
        "0-3\n",
    );
    write(root, "sys/bus/pci/devices/0000:b7:00.0/numa_node", "-1\n");
    write(
        root,
        "sys/bus/pci/devices/0000:b7:00.0/local_cpulist",
        "4-7\n",
    );
}

/// (index, bus id, minor, UUID, NUMA node, local CPUs) of one GPU.
type Row<'a> = (u32, &'a str, u32, &'a str, Option<u32>, Option<&'a str>);
/// (index, bus id, minor, local CPUs, NUMA node) of one GPU.
type P9Row<'a> = (u32, &'a str, u32, Option<&'a str>, Option<u32>);

fn inventory(root: &Path) -> ProcfsInventory {
    ProcfsInventory::new(root.join("proc"), root.join("sys"))
}

#[test]
fn two_gpus_in_pci_bus_order() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    let inv = inventory(dir.path());
    assert_eq!(inv.backend(), Backend::Procfs);
    let report = inv.discover().unwrap();
    assert_eq!(report.driver_version.as_deref(), Some("550.54.15"));
    assert_eq!(report.nvml_version, None);
    assert_eq!(report.cuda_driver_version, None);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    let summary: Vec<Row> = report
        .gpus
        .iter()
        .map(|g| {
            (
                g.index,
                g.pci_bus_id.as_str(),
                g.minor,
                g.uuid.as_str(),
                g.numa_node,
                g.local_cpus.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                0,
                "0000:07:00.0",
                2,
                "GPU-07070707-0000-1111-2222-333333333333",
                Some(0),
                Some("0-3")
            ),
            (
                1,
                "0000:b7:00.0",
                0,
                "GPU-b7b7b7b7-0000-1111-2222-333333333333",
                None,
                Some("4-7")
            ),
        ]
    );
    for gpu in &report.gpus {
        assert_eq!(gpu.name, "NVIDIA A100-SXM4-40GB");
        // procfs knows nothing of memory, temperature, utilisation, MIG.
        assert_eq!(gpu.memory_total_bytes, None);
        assert_eq!(gpu.memory_used_bytes, None);
        assert_eq!(gpu.compute_capability, None);
        assert_eq!(gpu.thermal.current_c, None);
        assert_eq!(gpu.utilization_gpu_pct, None);
        assert!(gpu.mig.is_none());
    }
    // discover is repeatable.
    assert_eq!(inv.discover().unwrap(), report);
}

#[test]
fn excluded_gpu_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    write(
        dir.path(),
        "proc/driver/nvidia/gpus/0000:07:00.0/information",
        &information(
            "NVIDIA A100-SXM4-40GB",
            "GPU-07070707-0000-1111-2222-333333333333",
            "0000:07:00.0",
            2,
            "Yes",
        ),
    );
    let report = inventory(dir.path()).discover().unwrap();
    assert_eq!(report.gpus.len(), 1);
    assert_eq!(report.gpus[0].index, 0, "the excluded GPU takes no index");
    assert_eq!(report.gpus[0].pci_bus_id, "0000:b7:00.0");
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].contains("0000:07:00.0"),
        "{:?}",
        report.warnings
    );
    assert!(
        report.warnings[0].contains("excluded"),
        "{:?}",
        report.warnings
    );
}

#[test]
fn uninitialised_uuid_and_missing_version_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    std::fs::remove_file(dir.path().join("proc/driver/nvidia/version")).unwrap();
    write(
        dir.path(),
        "proc/driver/nvidia/gpus/0000:b7:00.0/information",
        &information(
            "Tesla T4",
            "GPU-????????-????-????-????-????????????",
            "0000:b7:00.0",
            0,
            "No",
        ),
    );
    // No sysfs entry at all for this GPU: locality simply unknown.
    std::fs::remove_dir_all(dir.path().join("sys/bus/pci/devices/0000:b7:00.0")).unwrap();
    let report = inventory(dir.path()).discover().unwrap();
    assert_eq!(report.driver_version, None);
    assert_eq!(report.gpus[1].uuid, "");
    assert_eq!(report.gpus[1].name, "Tesla T4");
    assert_eq!(report.gpus[1].numa_node, None);
    assert_eq!(report.gpus[1].local_cpus, None);
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    assert!(report.warnings.iter().any(|w| w.contains("version")));
    assert!(report.warnings.iter().any(|w| w.contains("UUID")));
}

#[test]
fn garbled_sysfs_locality_is_a_warning_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    write(
        dir.path(),
        "sys/bus/pci/devices/0000:07:00.0/numa_node",
        "zero\n",
    );
    let report = inventory(dir.path()).discover().unwrap();
    assert_eq!(report.gpus.len(), 2);
    assert_eq!(report.gpus[0].numa_node, None);
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].contains("numa_node"),
        "{:?}",
        report.warnings
    );
}

#[test]
fn missing_driver_is_no_driver() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc/driver")).unwrap();
    match inventory(dir.path()).discover() {
        Err(InventoryError::NoDriver { path }) => {
            assert_eq!(path, dir.path().join("proc/driver/nvidia"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn driver_without_gpus_reports_none() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "proc/driver/nvidia/version", VERSION);
    std::fs::create_dir_all(dir.path().join("proc/driver/nvidia/gpus")).unwrap();
    let report = inventory(dir.path()).discover().unwrap();
    assert!(report.gpus.is_empty());
    assert_eq!(report.driver_version.as_deref(), Some("550.54.15"));
}

#[test]
fn malformed_information_names_the_file_and_the_line() {
    let good = information(
        "NVIDIA A100-SXM4-40GB",
        "GPU-07070707-0000-1111-2222-333333333333",
        "0000:07:00.0",
        2,
        "No",
    );
    let cases: Vec<(String, &str)> = vec![
        (good.replace("IRQ:   \t\t 165", "IRQ 165"), "line 2"),
        (
            good.replace("Device Minor: \t 2", "Device Minor: \t two"),
            "line 9",
        ),
        (good.replace("0000:07:00.0", "07-00-0"), "line 8"),
        (
            good.replace("GPU Excluded:\t No", "GPU Excluded:\t Maybe"),
            "line 10",
        ),
        (
            good.replace("GPU UUID: \t GPU-", "GPU UUID: \t XPU-"),
            "line 3",
        ),
        (
            good.replace("Model: \t\t NVIDIA A100-SXM4-40GB\n", ""),
            "Model",
        ),
        (good.replace("Device Minor: \t 2\n", ""), "Device Minor"),
        (
            good.lines().take(4).collect::<Vec<_>>().join("\n"),
            "Bus Location",
        ),
        (String::new(), "GPU UUID"),
    ];
    for (content, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        two_gpu_node(dir.path());
        let file = dir
            .path()
            .join("proc/driver/nvidia/gpus/0000:07:00.0/information");
        std::fs::write(&file, &content).unwrap();
        match inventory(dir.path()).discover() {
            Err(err @ InventoryError::Parse { .. }) => {
                let msg = err.to_string();
                assert!(msg.contains(&file.display().to_string()), "{msg}");
                assert!(msg.contains(needle), "{needle}: {msg}");
            }
            other => panic!("{needle}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn garbled_version_file_is_a_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    for content in [
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  Tue Mar  5\n",
        "GCC version:  gcc version 12.2.0\n",
        "",
    ] {
        write(dir.path(), "proc/driver/nvidia/version", content);
        assert!(
            matches!(inventory(dir.path()).discover(), Err(InventoryError::Parse { ref path, .. }) if path.ends_with("version")),
            "{content:?}"
        );
    }
    // The open kernel module's longer line.
    write(
        dir.path(),
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Wed Feb 26 00:29:25 UTC 2025\n",
    );
    let report = inventory(dir.path()).discover().unwrap();
    assert_eq!(report.driver_version.as_deref(), Some("570.124.06"));
}

#[test]
fn missing_information_file_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    two_gpu_node(dir.path());
    std::fs::remove_file(
        dir.path()
            .join("proc/driver/nvidia/gpus/0000:07:00.0/information"),
    )
    .unwrap();
    assert!(matches!(
        inventory(dir.path()).discover(),
        Err(InventoryError::Read { path, .. }) if path.ends_with("0000:07:00.0/information")
    ));
}

#[test]
fn power9_snapshot() {
    let (_dir, root) = topology_fixtures::power9_fsroot();
    let inv = ProcfsInventory::new(root.join("proc"), root.join("sys"));
    // hwloc's snapshot keeps only numa_status under each GPU directory:
    // the backend names the first information file it misses.
    match inv.discover() {
        Err(InventoryError::Read { path, .. }) => {
            assert!(path.starts_with(root.join("proc/driver/nvidia/gpus")));
            assert!(path.ends_with("information"));
        }
        other => panic!("{other:?}"),
    }
    // With the information files the driver would write, the six V100s
    // come out in bus order, located by the snapshot's local_cpus masks.
    let buses = [
        "0004:05:00.0",
        "0004:06:00.0",
        "0006:00:00.0",
        "0007:00:00.0",
        "0035:04:00.0",
        "0035:05:00.0",
    ];
    for (i, bus) in buses.iter().enumerate().rev() {
        write(
            &root,
            &format!("proc/driver/nvidia/gpus/{bus}/information"),
            &information(
                "Tesla V100-SXM2-16GB",
                &format!("GPU-{i:08x}-0000-0000-0000-000000000000"),
                bus,
                5 - i as u32,
                "No",
            ),
        );
    }
    let report = inv.discover().unwrap();
    let got: Vec<P9Row> = report
        .gpus
        .iter()
        .map(|g| {
            (
                g.index,
                g.pci_bus_id.as_str(),
                g.minor,
                g.local_cpus.as_deref(),
                g.numa_node,
            )
        })
        .collect();
    let expected: Vec<P9Row> = buses
        .iter()
        .enumerate()
        .map(|(i, bus)| {
            (
                i as u32,
                *bus,
                5 - i as u32,
                Some(if i < 3 { "0-15" } else { "88-103" }),
                None,
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert!(report
        .warnings
        .iter()
        .any(|w| w.contains("version") && w.contains("missing")));
}

#[test]
fn device_majors_new_and_old_driver_names() {
    let dir = tempfile::tempdir().unwrap();
    let new = "Character devices:\n  1 mem\n  4 /dev/vc/0\n195 nvidia\n195 nvidia-modeset\n236 nvidia-nvlink\n237 nvidia-caps-imex-channels\n238 nvidia-caps\n239 nvidia-uvm\n254 ndctl\n\nBlock devices:\n  7 loop\n259 blkext\n";
    write(dir.path(), "devices", new);
    assert_eq!(
        read_device_majors(dir.path()).unwrap(),
        DeviceMajors {
            nvidia: Some(195),
            nvidia_uvm: Some(239),
            nvidia_caps: Some(238)
        }
    );
    // Drivers before 550.40 call the GPU major nvidia-frontend; names in
    // the block section are not character devices.
    let old = "Character devices:\n  1 mem\n195 nvidia-frontend\n241 nvidia-uvm\n\nBlock devices:\n  9 nvidia-caps\n";
    write(dir.path(), "devices", old);
    assert_eq!(
        read_device_majors(dir.path()).unwrap(),
        DeviceMajors {
            nvidia: Some(195),
            nvidia_uvm: Some(241),
            nvidia_caps: None
        }
    );
    // This machine: no NVIDIA driver.
    assert_eq!(
        read_device_majors(Path::new("/proc")).unwrap(),
        DeviceMajors::default()
    );
}

#[test]
fn device_majors_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_device_majors(dir.path()),
        Err(InventoryError::Read { path, .. }) if path == dir.path().join("devices")
    ));
    for (content, needle) in [
        ("Character devices:\n  1 mem\nxyz nvidia\n", "line 3"),
        ("Character devices:\n  1\n", "line 2"),
        ("  1 mem\nCharacter devices:\n", "line 1"),
        ("Block devices:\n  7 loop\n", "Character devices"),
        ("", "Character devices"),
    ] {
        write(dir.path(), "devices", content);
        match read_device_majors(dir.path()) {
            Err(err @ InventoryError::Parse { .. }) => {
                let msg = err.to_string();
                assert!(msg.contains("devices"), "{msg}");
                assert!(msg.contains(needle), "{needle}: {msg}");
            }
            other => panic!("{content:?}: {other:?}"),
        }
    }
}
