//! The GPU part of a job's sandbox edits ([`GpuEdits`], shaped like a CDI
//! `containerEdits`: device rules, device nodes, binds, masks, `/dev/shm`,
//! environment), which the sandbox applies with the rest of the job's
//! settings. A GPU job: its own device nodes
//! (`nvidiactl`, `nvidia-uvm`, `nvidiaN` by device minor; for a MIG slice
//! its parent's `nvidiaN` and the slice's GPU- and compute-instance access
//! capabilities `nvidia-caps/nvidia-cap<m>`; `nvidia-uvm-tools` only with
//! `--gpu-profiling`) and device rules allowing exactly those; an MPS
//! job its GPU's MPS pipe and log directories, and the GPU's MPS
//! shared-memory tmpfs as its `/dev/shm`; the driver's libraries and
//! binaries for its
//! `NVIDIA_DRIVER_CAPABILITIES` bound read-only into
//! [`DRIVER_LIB_DIR`]/[`DRIVER_BIN_DIR`]; the chosen CUDA toolkit
//! read-only; `/proc/driver/nvidia/params` overlaid so the driver never
//! makes nodes inside the job; and an environment that is right inside the
//! job. A CPU job: none of that, and the host's driver files masked.
//!
//! Every path comes from what discovery found; anything missing fails the
//! start (security fails closed) with an [`EditsError`].

use std::path::{Path, PathBuf};

use joblet_core::JobSpec;
use joblet_gpu::cuda::select_toolkit;
use joblet_gpu::exec::{
    gpu_env, parse_visible, resolve_visible, DriverCapabilities, GpuEnv, GpuEnvInput, JobGpu,
    VisibleRequest,
};
use joblet_gpu::model::CudaToolkit;
use joblet_sandbox::devices::DeviceRule;
use joblet_sandbox::init::Bind;

use super::settings::GpuSettings;

mod devices;
mod error;
use devices::{control_nodes, devices, mps_part};
pub use error::{DeviceError, EditsError};

/// Where a GPU job finds the driver's libraries and binaries.
pub const DRIVER_LIB_DIR: &str = "/run/nvidia/driver/lib";
pub const DRIVER_BIN_DIR: &str = "/run/nvidia/driver/bin";
/// Where a simulated job finds fake-nvml's profile and state.
pub const SIM_DIR: &str = "/run/nvidia/sim";
/// The NVIDIA GPU major (`nvidia` / `nvidia-frontend`), fixed by the driver.
pub const NVIDIA_MAJOR: u32 = 195;
pub const CTL_MINOR: u32 = 255;
const PARAMS: &str = "/proc/driver/nvidia/params";

/// The GPU part of one job's sandbox edits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuEdits {
    /// Device rules added to the job's minimal set.
    pub rules: Vec<DeviceRule>,
    /// Host device nodes bound into the job's `/dev`.
    pub devices: Vec<Bind>,
    pub binds: Vec<Bind>,
    pub masks: Vec<PathBuf>,
    /// Host directory that becomes the job's `/dev/shm` (an MPS job: its
    /// GPU's tmpfs, shared with the control daemon); `None`: a private one.
    pub dev_shm: Option<PathBuf>,
    pub env: Option<GpuEnv>,
}

/// A CPU job: no GPU nodes (the minimal rules deny 195:*), and the host's
/// driver libraries, binaries and `/proc/driver/nvidia` hidden.
pub fn cpu_job(settings: &GpuSettings) -> GpuEdits {
    let all = settings.driver_files(&DriverCapabilities::all());
    let mut masks: Vec<PathBuf> = all.libraries.iter().map(|l| l.path.clone()).collect();
    masks.extend(all.binaries.iter().cloned());
    masks.push(PathBuf::from("/proc/driver/nvidia"));
    masks.sort();
    masks.dedup();
    GpuEdits {
        masks,
        ..GpuEdits::default()
    }
}

/// The job's `NVIDIA_DRIVER_CAPABILITIES`: its own or the node default.
fn job_caps(settings: &GpuSettings, spec: &JobSpec) -> Result<DriverCapabilities, EditsError> {
    match spec.env.get("NVIDIA_DRIVER_CAPABILITIES") {
        Some(v) => Ok(DriverCapabilities::parse(v)?),
        None => Ok(settings.caps.clone()),
    }
}

/// `--cuda` against what is installed and what the driver runs (also
/// checked at submission, so the user hears it at once).
pub fn check_cuda(settings: &GpuSettings, spec: &JobSpec) -> Result<(), EditsError> {
    select_toolkit(
        &settings.toolkits,
        spec.cuda.as_deref(),
        settings.driver_max,
    )?;
    let caps = job_caps(settings, spec)?;
    if settings.simulation.is_none() && !settings.ld_cache.is_empty() {
        let files = settings.driver_files(&caps);
        if !files.missing.is_empty() {
            return Err(EditsError::LibrariesForCaps {
                missing: files.missing.clone(),
                ld_cache: settings.ld_cache_path.clone(),
                caps,
            });
        }
    }
    Ok(())
}

/// The sandbox of a GPU-ready warm sandbox (`gpu.warm_pool`): what every
/// GPU job with the node's default `NVIDIA_DRIVER_CAPABILITIES` and CUDA
/// toolkit gets first (its control nodes and driver files), so that such
/// a job only adds its GPUs' nodes ([`gpu_job`] starts from the same
/// part). `job_dir`: the warm sandbox's job directory.
pub fn gpu_ready(settings: &GpuSettings, job_dir: &Path) -> Result<GpuEdits, EditsError> {
    let toolkit = select_toolkit(&settings.toolkits, None, settings.driver_max)?;
    shared_part(settings, &settings.caps, toolkit, true, job_dir)
}

/// The first part of a GPU job's sandbox, the same for every job with
/// `caps` and `toolkit`: the control nodes (with `nodes`: a job that sees
/// GPUs), the driver's libraries and binaries (fake-nvml's library and
/// profile when simulated), the params overlay and the toolkit.
fn shared_part(
    settings: &GpuSettings,
    caps: &DriverCapabilities,
    toolkit: Option<&CudaToolkit>,
    nodes: bool,
    job_dir: &Path,
) -> Result<GpuEdits, EditsError> {
    let mut out = GpuEdits::default();
    if nodes {
        control_nodes(settings, &mut out)?;
    }
    let lib = Path::new(DRIVER_LIB_DIR);
    let bin = Path::new(DRIVER_BIN_DIR);
    match &settings.simulation {
        Some(sim) => {
            for name in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
                out.binds.push(Bind {
                    source: sim.library.clone(),
                    target: lib.join(name),
                    writable: false,
                });
            }
            let sim_dir = Path::new(SIM_DIR);
            let profile_name = sim
                .from
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("profile"));
            out.binds.push(Bind {
                source: sim.from.clone(),
                target: sim_dir.join(&profile_name),
                writable: false,
            });
            if let Some(state) = settings.simulate_state.as_ref().filter(|p| p.is_file()) {
                out.binds.push(Bind {
                    source: state.clone(),
                    target: sim_dir.join("state.json"),
                    writable: false,
                });
            }
        }
        None => {
            let files = settings.driver_files(caps);
            if !files.missing.is_empty() {
                return Err(EditsError::Libraries {
                    missing: files.missing.clone(),
                    ld_cache: settings.ld_cache_path.clone(),
                });
            }
            for l in &files.libraries {
                for name in &l.names {
                    out.binds.push(Bind {
                        source: l.path.clone(),
                        target: lib.join(name),
                        writable: false,
                    });
                }
            }
            for b in &files.binaries {
                if let Some(name) = b.file_name() {
                    out.binds.push(Bind {
                        source: b.clone(),
                        target: bin.join(name),
                        writable: false,
                    });
                }
            }
            if Path::new(PARAMS).is_file() {
                out.binds.push(params_overlay(job_dir)?);
            }
        }
    }
    if let Some(t) = toolkit {
        out.binds.push(Bind {
            source: PathBuf::from(&t.path),
            target: PathBuf::from(&t.path),
            writable: false,
        });
    }
    Ok(out)
}

/// A GPU job's sandbox part. `gpus`: its GPUs in PCI bus order;
/// `job_dir`: the job's host directory (for the params overlay).
pub fn gpu_job(
    settings: &GpuSettings,
    spec: &JobSpec,
    gpus: &[JobGpu],
    quota_mb: Option<u64>,
    job_dir: &Path,
) -> Result<GpuEdits, EditsError> {
    let visible_req = parse_visible(spec.env.get("NVIDIA_VISIBLE_DEVICES").map(String::as_str))?;
    if visible_req == VisibleRequest::Void {
        // No GPU handling at all: the job holds its GPUs but sees none.
        return Ok(cpu_job(settings));
    }
    let visible = resolve_visible(&visible_req, gpus)?;
    let caps = job_caps(settings, spec)?;
    // A runtime brings its own CUDA libraries (its lock's nvidia-* wheels;
    // admission checked them against the driver): no host toolkit is
    // bound into its read-only tree.
    let toolkit = if spec.runtime.is_some() {
        None
    } else {
        select_toolkit(
            &settings.toolkits,
            spec.cuda.as_deref(),
            settings.driver_max,
        )?
    };
    // What every job with these capabilities and toolkit shares first (a
    // GPU-ready warm sandbox's, `gpu_ready`), then the job's own.
    let mut out = shared_part(settings, &caps, toolkit, !visible.is_empty(), job_dir)?;
    if !visible.is_empty() {
        devices(settings, &visible, spec.gpu_profiling, &mut out)?;
    }
    let mps = mps_part(settings, spec, &visible, quota_mb, &mut out)?;
    let lib = Path::new(DRIVER_LIB_DIR);
    let bin = Path::new(DRIVER_BIN_DIR);
    let mut env = gpu_env(&GpuEnvInput {
        visible: &visible,
        caps: &caps,
        quota_mb,
        sharing: settings.sharing,
        mps,
        driver_lib_dir: lib,
        driver_bin_dir: bin,
        toolkit,
    });
    if let Some(sim) = &settings.simulation {
        let name = sim.from.file_name().map(PathBuf::from).unwrap_or_default();
        env.vars.insert(
            "MOCK_NVML_CONFIG".into(),
            Path::new(SIM_DIR).join(name).display().to_string(),
        );
        if settings
            .simulate_state
            .as_ref()
            .is_some_and(|p| p.is_file())
        {
            env.vars
                .insert("MOCK_NVML_STATE".into(), format!("{SIM_DIR}/state.json"));
        }
        env.vars.insert("JOBLET_GPU_SIMULATED".into(), "1".into());
    }
    out.env = Some(env);
    Ok(out)
}

/// The host's driver parameters with `ModifyDeviceFiles: 0`, so the driver
/// never creates device nodes inside the job (what the container toolkit
/// does too).
fn params_overlay(job_dir: &Path) -> Result<Bind, EditsError> {
    let text = std::fs::read_to_string(PARAMS).map_err(|source| EditsError::ReadParams {
        path: PathBuf::from(PARAMS),
        source,
    })?;
    let path = job_dir.join("nvidia-params");
    if let Err(source) = std::fs::write(&path, rewrite_params(&text)) {
        return Err(EditsError::WriteParams { path, source });
    }
    Ok(Bind {
        source: path,
        target: PathBuf::from(PARAMS),
        writable: false,
    })
}

fn rewrite_params(text: &str) -> String {
    let mut out = String::new();
    let mut seen = false;
    for line in text.lines() {
        if line.trim_start().starts_with("ModifyDeviceFiles:") {
            out.push_str("ModifyDeviceFiles: 0\n");
            seen = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !seen {
        out.push_str("ModifyDeviceFiles: 0\n");
    }
    out
}

/// Merges the GPU environment into a job's: GPU variables are set unless
/// the user gave them (except the device lists, which must match the
/// job's nodes), the driver and toolkit dirs go in front of PATH and
/// LD_LIBRARY_PATH.
pub fn merge_env(env: &mut std::collections::BTreeMap<String, String>, gpu: &GpuEnv) {
    for (k, v) in &gpu.vars {
        // The device lists must match the job's nodes; the MPS variables
        // name the daemon's pipe and enforce its quota (its own thread
        // share was already taken into account).
        let ours = matches!(
            k.as_str(),
            "CUDA_VISIBLE_DEVICES"
                | "NVIDIA_VISIBLE_DEVICES"
                | "JOBLET_GPU_UUIDS"
                | "CUDA_MPS_PIPE_DIRECTORY"
                | "CUDA_MPS_LOG_DIRECTORY"
                | "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
                | "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
        );
        if ours || !env.contains_key(k) {
            env.insert(k.clone(), v.clone());
        }
    }
    let join = |front: &[PathBuf], old: Option<&String>| {
        let mut parts: Vec<String> = front.iter().map(|p| p.display().to_string()).collect();
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            parts.push(old.clone());
        }
        parts.join(":")
    };
    if !gpu.path_prefix.is_empty() {
        let v = join(&gpu.path_prefix, env.get("PATH"));
        env.insert("PATH".into(), v);
    }
    if !gpu.ld_library_path.is_empty() {
        let v = join(&gpu.ld_library_path, env.get("LD_LIBRARY_PATH"));
        env.insert("LD_LIBRARY_PATH".into(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_overlay_turns_off_node_creation() {
        let got = rewrite_params("EnableMSI: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n");
        assert_eq!(
            got,
            "EnableMSI: 1\nModifyDeviceFiles: 0\nDeviceFileUID: 0\n"
        );
        assert!(rewrite_params("EnableMSI: 1\n").ends_with("ModifyDeviceFiles: 0\n"));
    }

    #[test]
    fn gpu_env_wins_for_device_lists_and_prefixes_paths() {
        let mut env = std::collections::BTreeMap::from([
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "0,1,2,3".to_string()),
            ("TF_FORCE_GPU_ALLOW_GROWTH".to_string(), "false".to_string()),
        ]);
        let gpu = GpuEnv {
            vars: [
                ("CUDA_VISIBLE_DEVICES", "0"),
                ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
            path_prefix: vec![PathBuf::from(DRIVER_BIN_DIR)],
            ld_library_path: vec![PathBuf::from(DRIVER_LIB_DIR)],
        };
        merge_env(&mut env, &gpu);
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0");
        assert_eq!(env["TF_FORCE_GPU_ALLOW_GROWTH"], "false");
        assert_eq!(env["PATH"], format!("{DRIVER_BIN_DIR}:/usr/bin"));
        assert_eq!(env["LD_LIBRARY_PATH"], DRIVER_LIB_DIR);
    }
}
