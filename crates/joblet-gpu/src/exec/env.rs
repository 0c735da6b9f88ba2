//! The GPU environment of a job: the variables CUDA, NVML and the ML
//! frameworks read, and the directories to put first on `PATH` and
//! `LD_LIBRARY_PATH`, all as they must be **inside** the job.
//!
//! Inside the sandbox only the job's own `/dev/nvidiaN` nodes exist (and
//! the device rules allow only those), so CUDA numbers the visible GPUs
//! `0..k-1` in PCI bus order, whatever their host indices are: the
//! variables use those numbers. (Joblet's Go original used host indices,
//! which point at GPUs that do not exist inside the job.)

use super::caps::DriverCapabilities;
use super::sharing::{MpsSettings, SharingMode};
use super::visible::JobGpu;
use crate::model::CudaToolkit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What [`gpu_env`] needs.
#[derive(Debug, Clone)]
pub struct GpuEnvInput<'a> {
    /// The GPUs the job sees, already resolved
    /// ([`super::visible::resolve_visible`]), in PCI bus order; empty for
    /// `NVIDIA_VISIBLE_DEVICES=none`. (`void` gets no GPU env at all: do
    /// not call this.)
    pub visible: &'a [JobGpu],
    pub caps: &'a DriverCapabilities,
    /// `--gpu-memory`, MB per GPU.
    pub quota_mb: Option<u64>,
    pub sharing: SharingMode,
    /// Used in [`SharingMode::Mps`] only.
    pub mps: Option<MpsSettings>,
    /// Where the driver libraries are inside the job.
    pub driver_lib_dir: &'a Path,
    /// Where the driver binaries are inside the job.
    pub driver_bin_dir: &'a Path,
    /// The CUDA toolkit mounted into the job (at the same path), if any.
    pub toolkit: Option<&'a CudaToolkit>,
}

/// The job's GPU environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEnv {
    /// Variables to set (they replace what the job's request had).
    pub vars: BTreeMap<String, String>,
    /// To put in front of `PATH`, in this order.
    pub path_prefix: Vec<PathBuf>,
    /// To put in front of `LD_LIBRARY_PATH`, in this order.
    pub ld_library_path: Vec<PathBuf>,
}

/// Build the environment. Variables:
/// - `CUDA_VISIBLE_DEVICES`, `NVIDIA_VISIBLE_DEVICES`: the job's indices
///   `0,1,...` (empty / `none` when no GPU is visible); a MIG slice is
///   named by its `MIG-...` UUID instead (CUDA numbers only whole GPUs,
///   and the slice's parent node alone would show the whole GPU);
/// - `CUDA_DEVICE_ORDER=PCI_BUS_ID` so CUDA's numbering matches
///   `nvidia-smi`'s and ours;
/// - `NVIDIA_DRIVER_CAPABILITIES`; `JOBLET_GPU_UUIDS`, the UUIDs in the
///   same order;
/// - with a quota in shared or MPS mode, framework hints so that the
///   frameworks' default of grabbing (almost) the whole GPU does not blow
///   the quota at start-up:
///   - `TF_FORCE_GPU_ALLOW_GROWTH=true`: TensorFlow maps nearly all GPU
///     memory at start unless told to grow on demand;
///   - `XLA_PYTHON_CLIENT_PREALLOCATE=false`: JAX preallocates 75% of GPU
///     memory by default;
///   - `XLA_PYTHON_CLIENT_MEM_FRACTION`: caps JAX's allocator at the
///     quota's share of the smallest visible GPU (2 decimals, rounded
///     down so it stays under the quota, at least 0.01, at most 1.00);
///   - `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: PyTorch does
///     not preallocate, but its caching allocator keeps fragmented blocks
///     reserved, and reserved memory counts against the quota in NVML;
///     expandable segments keep the reserve close to what is in use;
/// - in MPS mode `CUDA_MPS_PIPE_DIRECTORY`, `CUDA_MPS_LOG_DIRECTORY`,
///   `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (`0=4096M,1=4096M`, job indices,
///   with a quota) and `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (when set);
/// - with a toolkit, `CUDA_HOME`.
///
/// `path_prefix` is the driver's binary dir, then the toolkit's `bin`;
/// `ld_library_path` the driver's library dir, then the toolkit's
/// `lib64` (or `lib` when there is no `lib64`).
pub fn gpu_env(input: &GpuEnvInput) -> GpuEnv {
    let mut vars = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    let visible = input.visible;
    let indices: Vec<String> = visible
        .iter()
        .enumerate()
        .map(|(i, g)| match g.mig {
            Some(_) => g.uuid.clone(),
            None => i.to_string(),
        })
        .collect();
    let uuids: Vec<&str> = visible.iter().map(|g| g.uuid.as_str()).collect();
    set("CUDA_VISIBLE_DEVICES", indices.join(","));
    set(
        "NVIDIA_VISIBLE_DEVICES",
        if visible.is_empty() {
            "none".to_string()
        } else {
            indices.join(",")
        },
    );
    set("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string());
    set("NVIDIA_DRIVER_CAPABILITIES", input.caps.to_string());
    set("JOBLET_GPU_UUIDS", uuids.join(","));

    let shared = matches!(input.sharing, SharingMode::Shared | SharingMode::Mps);
    if let (Some(quota), true, false) = (input.quota_mb, shared, visible.is_empty()) {
        set("TF_FORCE_GPU_ALLOW_GROWTH", "true".to_string());
        set("XLA_PYTHON_CLIENT_PREALLOCATE", "false".to_string());
        set(
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True".to_string(),
        );
        if let Some(fraction) = mem_fraction(quota, visible) {
            set("XLA_PYTHON_CLIENT_MEM_FRACTION", fraction);
        }
    }

    if let (SharingMode::Mps, Some(mps), false) = (input.sharing, &input.mps, visible.is_empty()) {
        set(
            "CUDA_MPS_PIPE_DIRECTORY",
            mps.pipe_dir.display().to_string(),
        );
        set("CUDA_MPS_LOG_DIRECTORY", mps.log_dir.display().to_string());
        if let Some(quota) = input.quota_mb {
            let limits: Vec<String> = (0..visible.len())
                .map(|i| format!("{i}={quota}M"))
                .collect();
            set("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limits.join(","));
        }
        if let Some(pct) = mps.active_thread_percentage {
            set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct.to_string());
        }
    }

    let mut path_prefix = vec![input.driver_bin_dir.to_path_buf()];
    let mut ld_library_path = vec![input.driver_lib_dir.to_path_buf()];
    if let Some(toolkit) = input.toolkit {
        let home = PathBuf::from(&toolkit.path);
        set("CUDA_HOME", toolkit.path.clone());
        path_prefix.push(home.join("bin"));
        let lib64 = home.join("lib64");
        ld_library_path.push(if lib64.is_dir() {
            lib64
        } else {
            home.join("lib")
        });
    }
    GpuEnv {
        vars,
        path_prefix,
        ld_library_path,
    }
}

/// `quota / memory of the smallest visible GPU` as `0.xx`, rounded down,
/// clamped to `0.01..=1.00`; `None` when a GPU's memory is unknown (0).
fn mem_fraction(quota_mb: u64, visible: &[JobGpu]) -> Option<String> {
    let smallest = visible.iter().map(|g| g.memory_mb).min()?;
    if smallest == 0 {
        return None;
    }
    let hundredths = (u128::from(quota_mb) * 100 / u128::from(smallest)).clamp(1, 100);
    Some(format!("{}.{:02}", hundredths / 100, hundredths % 100))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, memory_mb: u64) -> JobGpu {
        JobGpu {
            index,
            uuid: format!("GPU-{index}"),
            minor: index,
            bus_id: format!("0000:{:02x}:00.0", index + 1),
            memory_mb,
            mig: None,
        }
    }

    fn input<'a>(visible: &'a [JobGpu], caps: &'a DriverCapabilities) -> GpuEnvInput<'a> {
        GpuEnvInput {
            visible,
            caps,
            quota_mb: None,
            sharing: SharingMode::Exclusive,
            mps: None,
            driver_lib_dir: Path::new("/run/joblet/nvidia/lib"),
            driver_bin_dir: Path::new("/run/joblet/nvidia/bin"),
            toolkit: None,
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn exclusive_two_gpus_exact_env() {
        // Host GPUs 4 and 6: inside the job they are 0 and 1 (seed 001).
        let gpus = [gpu(4, 40960), gpu(6, 40960)];
        let caps = DriverCapabilities::default();
        let mut i = input(&gpus, &caps);
        i.quota_mb = Some(8192); // exclusive: no hints
        let env = gpu_env(&i);
        assert_eq!(
            env.vars,
            map(&[
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                ("CUDA_VISIBLE_DEVICES", "0,1"),
                ("JOBLET_GPU_UUIDS", "GPU-4,GPU-6"),
                ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                ("NVIDIA_VISIBLE_DEVICES", "0,1"),
            ])
        );
        assert_eq!(env.path_prefix, [PathBuf::from("/run/joblet/nvidia/bin")]);
        assert_eq!(
            env.ld_library_path,
            [PathBuf::from("/run/joblet/nvidia/lib")]
        );
    }

    #[test]
    fn shared_quota_gets_framework_hints_from_the_smallest_gpu() {
        let gpus = [gpu(0, 24576), gpu(1, 81920)];
        let caps = DriverCapabilities::default();
        let mut i = input(&gpus, &caps);
        i.sharing = SharingMode::Shared;
        i.quota_mb = Some(8192);
        let env = gpu_env(&i);
        assert_eq!(
            env.vars,
            map(&[
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                ("CUDA_VISIBLE_DEVICES", "0,1"),
                ("JOBLET_GPU_UUIDS", "GPU-0,GPU-1"),
                ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                ("NVIDIA_VISIBLE_DEVICES", "0,1"),
                ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
                ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.33"),
                ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
            ])
        );
        // No quota: no hints.
        i.quota_mb = None;
        assert!(!gpu_env(&i).vars.contains_key("TF_FORCE_GPU_ALLOW_GROWTH"));
    }

    #[test]
    fn mem_fraction_rounds_down_and_clamps() {
        let g = [gpu(0, 40960)];
        assert_eq!(mem_fraction(8192, &g).as_deref(), Some("0.20"));
        assert_eq!(mem_fraction(40959, &g).as_deref(), Some("0.99"));
        assert_eq!(mem_fraction(40960, &g).as_deref(), Some("1.00"));
        assert_eq!(mem_fraction(u64::MAX, &g).as_deref(), Some("1.00"));
        assert_eq!(mem_fraction(1, &g).as_deref(), Some("0.01"));
        assert_eq!(mem_fraction(8192, &[gpu(0, 0)]), None);
        assert_eq!(mem_fraction(8192, &[]), None);
    }

    #[test]
    fn mps_sets_pipe_log_limits_and_threads() {
        let gpus = [gpu(2, 40960), gpu(3, 40960)];
        let caps = DriverCapabilities::default();
        let mut i = input(&gpus, &caps);
        i.sharing = SharingMode::Mps;
        i.quota_mb = Some(4096);
        i.mps = Some(MpsSettings {
            pipe_dir: "/run/joblet/mps/abc/pipe".into(),
            log_dir: "/run/joblet/mps/abc/log".into(),
            active_thread_percentage: Some(25),
        });
        let v = gpu_env(&i).vars;
        assert_eq!(v["CUDA_MPS_PIPE_DIRECTORY"], "/run/joblet/mps/abc/pipe");
        assert_eq!(v["CUDA_MPS_LOG_DIRECTORY"], "/run/joblet/mps/abc/log");
        assert_eq!(v["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=4096M,1=4096M");
        assert_eq!(v["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
        assert_eq!(v["XLA_PYTHON_CLIENT_MEM_FRACTION"], "0.10");
        // MPS settings are ignored outside MPS mode.
        i.sharing = SharingMode::Shared;
        assert!(!gpu_env(&i).vars.contains_key("CUDA_MPS_PIPE_DIRECTORY"));
        // No quota, no thread share: only the daemon's directories.
        i.sharing = SharingMode::Mps;
        i.quota_mb = None;
        i.mps.as_mut().unwrap().active_thread_percentage = None;
        let v = gpu_env(&i).vars;
        assert!(v.contains_key("CUDA_MPS_PIPE_DIRECTORY"));
        assert!(!v.contains_key("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
        assert!(!v.contains_key("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    }

    #[test]
    fn mig_slices_are_named_by_their_uuids() {
        let slice = |gi: u32| JobGpu {
            uuid: format!("MIG-{gi}"),
            mig: Some(crate::exec::MigRef {
                parent_uuid: "GPU-1".into(),
                gpu_instance_id: gi,
                compute_instance_id: 0,
            }),
            ..gpu(1, 19968)
        };
        let gpus = [slice(3), slice(5)];
        let caps = DriverCapabilities::default();
        let v = gpu_env(&input(&gpus, &caps)).vars;
        assert_eq!(v["CUDA_VISIBLE_DEVICES"], "MIG-3,MIG-5");
        assert_eq!(v["NVIDIA_VISIBLE_DEVICES"], "MIG-3,MIG-5");
        assert_eq!(v["JOBLET_GPU_UUIDS"], "MIG-3,MIG-5");
    }

    #[test]
    fn none_keeps_libraries_but_shows_no_gpu() {
        let caps = DriverCapabilities::default();
        let mut i = input(&[], &caps);
        i.sharing = SharingMode::Shared;
        i.quota_mb = Some(1024);
        let env = gpu_env(&i);
        assert_eq!(
            env.vars,
            map(&[
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                ("CUDA_VISIBLE_DEVICES", ""),
                ("JOBLET_GPU_UUIDS", ""),
                ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                ("NVIDIA_VISIBLE_DEVICES", "none"),
            ])
        );
        assert_eq!(
            env.ld_library_path,
            [PathBuf::from("/run/joblet/nvidia/lib")]
        );
    }

    #[test]
    fn toolkit_adds_home_bin_and_lib64_or_lib() {
        let dir = tempfile::tempdir().unwrap();
        let with64 = dir.path().join("cuda-12.2");
        std::fs::create_dir_all(with64.join("lib64")).unwrap();
        let without = dir.path().join("cuda-11.8");
        std::fs::create_dir_all(without.join("lib")).unwrap();
        let caps = DriverCapabilities::default();
        let gpus = [gpu(0, 16384)];
        for (home, lib) in [(&with64, "lib64"), (&without, "lib")] {
            let tk = CudaToolkit {
                path: home.display().to_string(),
                version: "12.2.140".into(),
                source: "version.json".into(),
            };
            let mut i = input(&gpus, &caps);
            i.toolkit = Some(&tk);
            let env = gpu_env(&i);
            assert_eq!(env.vars["CUDA_HOME"], tk.path);
            assert_eq!(
                env.path_prefix,
                [PathBuf::from("/run/joblet/nvidia/bin"), home.join("bin")]
            );
            assert_eq!(
                env.ld_library_path,
                [PathBuf::from("/run/joblet/nvidia/lib"), home.join(lib)]
            );
        }
    }
}
