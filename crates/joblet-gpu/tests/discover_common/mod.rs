//! Builds temp-dir `/proc` and `/sys` trees the way the NVIDIA driver and
//! the kernel lay them out, for the discovery tests.

#![allow(dead_code)]

use joblet_gpu::discover::DiscoveryOptions;
use std::fs;
use std::path::{Path, PathBuf};

/// One GPU as `/proc/driver/nvidia/gpus/<bdf>/information` shows it.
pub struct ProcGpu<'a> {
    pub bus: &'a str,
    pub model: &'a str,
    pub uuid: &'a str,
    pub minor: u32,
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// `<proc>/driver/nvidia/{version,gpus/*/information}` and `<proc>/devices`.
pub fn write_proc(proc_root: &Path, driver: &str, gpus: &[ProcGpu<'_>]) {
    write(
        &proc_root.join("driver/nvidia/version"),
        &format!(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
        ),
    );
    for gpu in gpus {
        write(
            &proc_root.join(format!("driver/nvidia/gpus/{}/information", gpu.bus)),
            &format!(
                "Model: \t\t {}\nIRQ:   \t\t 0\nGPU UUID: \t {}\nVideo BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {}\nDevice Minor: \t {}\nGPU Excluded:\t No\n",
                gpu.model, gpu.uuid, gpu.bus, gpu.minor
            ),
        );
    }
    write_devices(proc_root);
}

/// `<proc>/devices` with the NVIDIA majors 195, 508, 509.
pub fn write_devices(proc_root: &Path) {
    write(
        &proc_root.join("devices"),
        "Character devices:\n  1 mem\n  4 /dev/vc/0\n195 nvidia\n508 nvidia-uvm\n509 nvidia-caps\n\nBlock devices:\n  8 sd\n259 blkext\n",
    );
}

/// Two NUMA nodes (CPUs 0-15, 16-31) and NVIDIA PCI devices with their
/// locality: `(bus id, numa node, local cpulist)`.
pub fn write_sys(sys_root: &Path, gpus: &[(&str, u32, &str)]) {
    write(&sys_root.join("devices/system/cpu/online"), "0-31\n");
    write(
        &sys_root.join("devices/system/node/node0/cpulist"),
        "0-15\n",
    );
    write(
        &sys_root.join("devices/system/node/node1/cpulist"),
        "16-31\n",
    );
    for (bus, numa, cpus) in gpus {
        let dev = sys_root.join("bus/pci/devices").join(bus);
        write(&dev.join("vendor"), "0x10de\n");
        write(&dev.join("class"), "0x030200\n");
        write(&dev.join("numa_node"), &format!("{numa}\n"));
        write(&dev.join("local_cpulist"), &format!("{cpus}\n"));
    }
}

/// Options reading only the given roots: no hwloc, no CUDA paths.
pub fn options(
    nvml_library: Option<PathBuf>,
    proc_root: &Path,
    sys_root: &Path,
) -> DiscoveryOptions {
    DiscoveryOptions {
        use_nvml: nvml_library.is_some(),
        nvml_library,
        use_procfs: true,
        proc_root: proc_root.to_path_buf(),
        sys_root: sys_root.to_path_buf(),
        cuda_paths: Vec::new(),
        hwloc: false,
        hwloc_xml: None,
    }
}
