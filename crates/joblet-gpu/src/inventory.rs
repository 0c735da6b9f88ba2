//! The backend seam: anything that can report a node's GPUs.
//!
//! NVIDIA's backends (NVML, procfs/sysfs) implement it today; an AMD
//! (ROCm SMI / amdgpu sysfs) or Intel (Level Zero / xe sysfs) backend would
//! implement the same trait and fill the same [`GpuInfo`] model, so the
//! scheduler and the CLI never learn which vendor they talk to.

use crate::model::{Backend, CudaVersion, GpuInfo};
use std::path::PathBuf;

/// What one backend saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendReport {
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    pub cuda_driver_version: Option<CudaVersion>,
    /// Sorted by index.
    pub gpus: Vec<GpuInfo>,
    /// Facts the backend could not read but worked around.
    pub warnings: Vec<String>,
}

/// A source of GPU facts. `discover` is called at start and then by the
/// health monitor on every poll, so it must be cheap to call again
/// (backends keep their library handle open between calls).
pub trait GpuInventory: Send + Sync {
    /// Which backend this is.
    fn backend(&self) -> Backend;
    /// Static facts and current dynamic state of every GPU.
    fn discover(&self) -> Result<BackendReport, InventoryError>;
}

/// Why a backend could not report.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The NVML library could not be loaded or initialised.
    #[error("NVML unavailable ({library}): {reason}; install the NVIDIA driver or set gpu.nvml_library to the library's path")]
    NvmlUnavailable { library: String, reason: String },
    /// An NVML call failed.
    #[error("NVML call {call} failed{}: {reason}", gpu.map(|g| format!(" for GPU {g}")).unwrap_or_default())]
    Nvml {
        call: &'static str,
        gpu: Option<u32>,
        reason: String,
    },
    /// The NVIDIA driver's procfs tree is missing.
    #[error("no NVIDIA driver found: {path} does not exist (is the nvidia kernel module loaded?)")]
    NoDriver { path: PathBuf },
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is not what the driver writes.
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    /// The NVML event thread could not be started.
    #[error(
        "cannot start the GPU event thread: {source} (is the process out of threads or memory?)"
    )]
    EventThread {
        #[source]
        source: std::io::Error,
    },
    /// hwloc failed to build or load a topology.
    #[error("hwloc topology failed: {reason}")]
    Hwloc { reason: String },
}
