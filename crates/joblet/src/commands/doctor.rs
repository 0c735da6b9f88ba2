//! `joblet doctor`: seed 003's node health check. Is the driver there, does
//! NVML load, are the device nodes present with the right majors, which CUDA
//! toolkits exist and does the driver support them; then a verdict that
//! follows `gpu.enabled` / `gpu.required`.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use joblet_gpu::nvml::NvmlInventory;
use joblet_gpu::{CudaVersion, GpuInventory, NodeInventory};
use serde::Serialize;

use super::discover_once;
use crate::config::{Config, GpuConfig};

/// Runs the checks on this node and prints them, as JSON with `json`.
/// True when the node is usable as configured.
pub fn run(cfg: &Config, json: bool) -> anyhow::Result<bool> {
    let found = discover_once(cfg)?;
    let mut d = diagnose(
        &cfg.gpu,
        &found.inventory,
        found.opts.nvml_library.as_deref(),
        found.sim.is_some(),
        &Roots::default(),
    );
    d.checks
        .push(state_disk(&cfg.server.state_dir, cfg.jobs.min_free_disk_mb));
    if json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render(&d));
    }
    Ok(d.healthy)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Diagnosis {
    pub checks: Vec<Check>,
    /// Usable GPUs found.
    pub gpus: usize,
    /// The node can run as configured.
    pub healthy: bool,
    pub verdict: String,
}

/// Host roots the checks read (parameters for tests).
#[derive(Debug, Clone)]
pub struct Roots {
    pub proc_root: PathBuf,
    pub dev_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            proc_root: "/proc".into(),
            dev_root: "/dev".into(),
        }
    }
}

/// The state disk: how much is free, against `jobs.min_free_disk_mb`.
fn state_disk(dir: &Path, min_free_mb: u64) -> Check {
    // The state dir may not exist before the first start: its parent's disk.
    let at = dir.ancestors().find(|p| p.exists()).unwrap_or(dir);
    match crate::disk::space(at) {
        Ok(space) => {
            let (free, total) = (space.free >> 20, space.total >> 20);
            let status = if free < min_free_mb {
                Status::Warn
            } else {
                Status::Ok
            };
            let mut detail = format!("{free} MiB free of {total} MiB at {}", dir.display());
            if status == Status::Warn {
                detail.push_str(&format!(
                    "; below jobs.min_free_disk_mb ({min_free_mb} MiB): new jobs are refused until space is freed"
                ));
            }
            check("state disk", status, detail)
        }
        Err(e) => check(
            "state disk",
            Status::Warn,
            format!("cannot read the free space of {}: {e}", dir.display()),
        ),
    }
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
    }
}

/// Runs every check. `inv` is what discovery found with the same config;
/// `simulated` says the GPUs come from fake-nvml.
pub fn diagnose(
    cfg: &GpuConfig,
    inv: &NodeInventory,
    nvml_library: Option<&Path>,
    simulated: bool,
    roots: &Roots,
) -> Diagnosis {
    let mut checks = Vec::new();
    let gpu_status = |fail: bool| match (fail, cfg.enabled && cfg.required) {
        (false, _) => Status::Ok,
        (true, true) => Status::Fail,
        (true, false) => Status::Warn,
    };

    // Driver.
    let version_file = roots.proc_root.join("driver/nvidia/version");
    if simulated {
        checks.push(check(
            "driver",
            Status::Info,
            "simulated node: no NVIDIA kernel driver expected",
        ));
    } else {
        match std::fs::read_to_string(&version_file) {
            Ok(text) => checks.push(check(
                "driver",
                Status::Ok,
                format!(
                    "NVIDIA kernel module loaded: {}",
                    text.lines().next().unwrap_or("").trim()
                ),
            )),
            Err(_) => checks.push(check(
                "driver",
                gpu_status(true),
                format!("{} is missing: the NVIDIA kernel driver is not loaded (install it, then `modprobe nvidia`)", version_file.display()),
            )),
        }
    }

    // NVML.
    let lib = nvml_library
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "libnvidia-ml.so.1".into());
    match NvmlInventory::open(nvml_library) {
        Ok(nvml) => match nvml.discover() {
            Ok(r) => checks.push(check(
                "nvml",
                Status::Ok,
                format!(
                    "{lib} loads: NVML {}, driver {}, {} GPU(s)",
                    r.nvml_version.as_deref().unwrap_or("?"),
                    r.driver_version.as_deref().unwrap_or("?"),
                    r.gpus.len()
                ),
            )),
            Err(e) => checks.push(check(
                "nvml",
                gpu_status(true),
                format!("{lib} loads but cannot list GPUs: {e}"),
            )),
        },
        Err(e) => checks.push(check("nvml", gpu_status(true), e.to_string())),
    }

    // Device nodes.
    if simulated {
        checks.push(check(
            "device nodes",
            Status::Info,
            "simulated node: no /dev/nvidia* expected",
        ));
    } else {
        let majors = &inv.device_majors;
        let mut problems = Vec::new();
        let mut expect = |name: String, major: Option<u32>| {
            let path = roots.dev_root.join(&name);
            match std::fs::metadata(&path) {
                Ok(m) if m.file_type().is_char_device() => {
                    let got = nix::sys::stat::major(m.rdev()) as u32;
                    if let Some(want) = major {
                        if got != want {
                            problems.push(format!(
                                "{} has major {got}, /proc/devices says {want}",
                                path.display()
                            ));
                        }
                    }
                }
                Ok(_) => problems.push(format!("{} is not a character device", path.display())),
                Err(_) => problems.push(format!("{} is missing", path.display())),
            }
        };
        if !inv.gpus.is_empty() {
            expect("nvidiactl".into(), majors.nvidia);
            expect("nvidia-uvm".into(), majors.nvidia_uvm);
            for g in &inv.gpus {
                expect(format!("nvidia{}", g.minor), majors.nvidia);
            }
        }
        if inv.gpus.is_empty() {
            checks.push(check(
                "device nodes",
                gpu_status(true),
                "no GPU found, so no device node to check",
            ));
        } else if problems.is_empty() {
            checks.push(check(
                "device nodes",
                Status::Ok,
                format!(
                    "nvidiactl, nvidia-uvm and {} GPU node(s) present with the driver's majors",
                    inv.gpus.len()
                ),
            ));
        } else {
            checks.push(check(
                "device nodes",
                gpu_status(true),
                format!(
                    "{} (run `nvidia-modprobe -u -c=0`, or load nvidia-uvm)",
                    problems.join("; ")
                ),
            ));
        }
    }

    // CUDA toolkits against the driver.
    let max = inv.cuda_driver_version;
    if inv.cuda_toolkits.is_empty() {
        checks.push(check(
            "cuda",
            Status::Warn,
            format!(
                "no CUDA toolkit under {} (jobs must bring their own CUDA runtime)",
                cfg.cuda_paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    for t in &inv.cuda_toolkits {
        let v = toolkit_version(&t.version);
        match (v, max) {
            (Some(v), Some(max)) if v > max => checks.push(check(
                "cuda",
                Status::Warn,
                format!("{} ({}) is newer than the driver supports (CUDA {max}): upgrade the driver to use it", t.path, t.version),
            )),
            _ => checks.push(check(
                "cuda",
                Status::Ok,
                format!("{} ({}){}", t.path, t.version, max.map(|m| format!(", driver supports up to {m}")).unwrap_or_default()),
            )),
        }
    }

    let gpus = inv.gpus.len();
    let (healthy, verdict) = match (cfg.enabled, gpus, cfg.required) {
        (false, _, _) => (true, format!("GPU support is off (gpu.enabled: false): CPU jobs only; {gpus} GPU(s) would be available")),
        (true, 0, true) => (false, "gpu.enabled is true and no usable GPU was found: joblet will refuse to start (fix the checks above, or set gpu.required: false for CPU-only operation)".into()),
        (true, 0, false) => (true, "warning: no usable GPU: joblet runs CPU-only (gpu.required: false)".into()),
        (true, n, _) => (true, format!("{n} GPU(s) ready{}", if simulated { " (SIMULATED)" } else { "" })),
    };
    Diagnosis {
        checks,
        gpus,
        healthy,
        verdict,
    }
}

/// `12.2.140` → 12.2.
fn toolkit_version(v: &str) -> Option<CudaVersion> {
    let mut it = v.split('.');
    Some(CudaVersion {
        major: it.next()?.parse().ok()?,
        minor: it.next()?.parse().ok()?,
    })
}

/// The human form.
pub fn render(d: &Diagnosis) -> String {
    let mut out = String::new();
    for c in &d.checks {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("[{tag}] {:<13} {}\n", c.name, c.detail));
    }
    out.push_str(&d.verdict);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_gpu::{CudaToolkit, DeviceMajors, GpuInfo};

    fn roots(dir: &Path) -> Roots {
        Roots {
            proc_root: dir.join("proc"),
            dev_root: dir.join("dev"),
        }
    }

    #[test]
    fn the_state_disk_warns_below_the_free_floor() {
        let dir = tempfile::tempdir().unwrap();
        let ok = state_disk(&dir.path().join("not-made-yet"), 0);
        assert_eq!(ok.status, Status::Ok, "{}", ok.detail);
        assert!(ok.detail.contains("MiB free of"), "{}", ok.detail);
        let low = state_disk(dir.path(), u64::MAX >> 20);
        assert_eq!(low.status, Status::Warn);
        assert!(
            low.detail.contains("new jobs are refused"),
            "{}",
            low.detail
        );
    }

    #[test]
    fn no_gpu_fails_only_when_required() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = GpuConfig {
            enabled: true,
            nvml_library: Some(dir.path().join("missing.so")),
            ..GpuConfig::default()
        };
        let lib = cfg.nvml_library.clone();
        let d = diagnose(
            &cfg,
            &NodeInventory::default(),
            lib.as_deref(),
            false,
            &roots(dir.path()),
        );
        assert!(!d.healthy);
        assert!(d
            .checks
            .iter()
            .any(|c| c.name == "driver" && c.status == Status::Fail));
        assert!(d.checks.iter().any(|c| c.name == "nvml"
            && c.status == Status::Fail
            && c.detail.contains("missing.so")));
        cfg.required = false;
        let d = diagnose(
            &cfg,
            &NodeInventory::default(),
            lib.as_deref(),
            false,
            &roots(dir.path()),
        );
        assert!(d.healthy);
        assert!(d.verdict.contains("CPU-only"), "{}", d.verdict);
        assert!(d.checks.iter().all(|c| c.status != Status::Fail));
        cfg.enabled = false;
        let d = diagnose(
            &cfg,
            &NodeInventory::default(),
            lib.as_deref(),
            false,
            &roots(dir.path()),
        );
        assert!(d.healthy && d.verdict.contains("gpu.enabled: false"));
    }

    #[test]
    fn device_nodes_and_cuda_are_checked_against_the_driver() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(dir.path().join("proc/driver/nvidia")).unwrap();
        std::fs::write(
            dir.path().join("proc/driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n",
        )
        .unwrap();
        // nvidiactl present as a regular file (not a device), GPU node absent.
        std::fs::write(dev.join("nvidiactl"), "").unwrap();
        let inv = NodeInventory {
            gpus: vec![GpuInfo {
                minor: 3,
                ..GpuInfo::default()
            }],
            device_majors: DeviceMajors {
                nvidia: Some(195),
                nvidia_uvm: Some(509),
                nvidia_caps: None,
            },
            cuda_driver_version: Some(CudaVersion {
                major: 12,
                minor: 4,
            }),
            cuda_toolkits: vec![
                CudaToolkit {
                    path: "/usr/local/cuda-12.2".into(),
                    version: "12.2.140".into(),
                    source: "version.json".into(),
                },
                CudaToolkit {
                    path: "/usr/local/cuda-12.6".into(),
                    version: "12.6.20".into(),
                    source: "version.json".into(),
                },
            ],
            ..NodeInventory::default()
        };
        let cfg = GpuConfig {
            enabled: true,
            ..GpuConfig::default()
        };
        let d = diagnose(
            &cfg,
            &inv,
            Some(&dir.path().join("none.so")),
            false,
            &roots(dir.path()),
        );
        let nodes = d.checks.iter().find(|c| c.name == "device nodes").unwrap();
        assert_eq!(nodes.status, Status::Fail);
        assert!(
            nodes.detail.contains("nvidiactl is not a character device"),
            "{}",
            nodes.detail
        );
        assert!(
            nodes.detail.contains("nvidia3 is missing"),
            "{}",
            nodes.detail
        );
        assert!(d.checks.iter().any(|c| c.name == "driver"
            && c.status == Status::Ok
            && c.detail.contains("550.54.15")));
        let cuda: Vec<_> = d.checks.iter().filter(|c| c.name == "cuda").collect();
        assert_eq!(cuda[0].status, Status::Ok);
        assert_eq!(cuda[1].status, Status::Warn);
        assert!(cuda[1].detail.contains("newer than the driver supports"));
        assert!(render(&d).contains("[FAIL] device nodes"));
    }
}
