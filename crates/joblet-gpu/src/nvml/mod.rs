//! The NVML backend: nvml-wrapper over `libnvidia-ml.so.1` (or the
//! configured library, e.g. the project's fake), kept open between calls.
//!
//! Every optional fact NVML cannot give (`NOT_SUPPORTED`, `N/A`, a symbol
//! an older driver lacks) is `None`, never an error; a GPU NVML calls lost
//! is listed with `lost: true` and a warning.

mod device;
mod ecc;
pub mod events;
mod ffi;
mod mig;
mod nvlink;
mod query;
pub mod readings;

use crate::inventory::{BackendReport, GpuInventory, InventoryError};
pub use readings::{GpuReadings, ProcessUtilization, ReadingsSampler};

use crate::model::{Backend, CudaVersion};
use nvml_wrapper::Nvml;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

/// The library name the NVIDIA driver installs (`ld.so` finds it).
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// An initialised NVML; cheap to query again (the health monitor polls).
#[derive(Clone)]
pub struct NvmlInventory {
    nvml: Arc<Nvml>,
    library: String,
}

impl std::fmt::Debug for NvmlInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlInventory")
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

impl NvmlInventory {
    /// Load and initialise NVML from `library` (a path or a bare name for
    /// `ld.so`), or [`DEFAULT_LIBRARY`].
    pub fn open(library: Option<&Path>) -> Result<NvmlInventory, InventoryError> {
        let path: &OsStr = library.map_or(OsStr::new(DEFAULT_LIBRARY), Path::as_os_str);
        let shown = path.to_string_lossy().into_owned();
        let nvml =
            Nvml::builder()
                .lib_path(path)
                .init()
                .map_err(|e| InventoryError::NvmlUnavailable {
                    library: shown.clone(),
                    reason: e.to_string(),
                })?;
        tracing::debug!(library = %shown, "NVML initialised");
        Ok(NvmlInventory {
            nvml: Arc::new(nvml),
            library: shown,
        })
    }

    /// The library this inventory loaded, as given.
    pub fn library(&self) -> &str {
        &self.library
    }

    /// The shared NVML handle (the event thread holds a clone).
    pub(crate) fn nvml(&self) -> &Arc<Nvml> {
        &self.nvml
    }

    /// Number of GPUs NVML enumerates.
    fn device_count(&self) -> Result<u32, InventoryError> {
        self.nvml.device_count().map_err(|e| InventoryError::Nvml {
            call: "nvmlDeviceGetCount_v2",
            gpu: None,
            reason: e.to_string(),
        })
    }
}

impl GpuInventory for NvmlInventory {
    fn backend(&self) -> Backend {
        Backend::Nvml
    }

    fn discover(&self) -> Result<BackendReport, InventoryError> {
        let nvml = &*self.nvml;
        let mut report = BackendReport {
            driver_version: optional(nvml.sys_driver_version(), "nvmlSystemGetDriverVersion"),
            nvml_version: optional(nvml.sys_nvml_version(), "nvmlSystemGetNVMLVersion"),
            cuda_driver_version: optional(
                nvml.sys_cuda_driver_version(),
                "nvmlSystemGetCudaDriverVersion_v2",
            )
            .and_then(CudaVersion::from_nvml),
            ..BackendReport::default()
        };
        let count = self.device_count()?;
        let mut readings = Vec::with_capacity(count as usize);
        for index in 0..count {
            match device::read_gpu(nvml, index)? {
                device::Handle::Read(reading) => {
                    report.warnings.extend(reading.warnings.iter().cloned());
                    readings.push(*reading);
                }
                device::Handle::Refused(warning) => report.warnings.push(warning),
            }
        }
        let links: Vec<(String, Vec<String>)> = readings
            .iter()
            .map(|r| (r.info.pci_bus_id.clone(), r.link_endpoints.clone()))
            .collect();
        for (reading, peers) in readings.iter_mut().zip(nvlink::peers(&links)) {
            reading.info.nvlink_peers = peers;
        }
        report.gpus = readings.into_iter().map(|r| r.info).collect();
        report.gpus.sort_by_key(|g| g.index);
        Ok(report)
    }
}

/// A node-wide fact: absent or failing is `None` (logged), never fatal.
fn optional<T>(result: Result<T, nvml_wrapper::error::NvmlError>, call: &'static str) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::debug!(call, error = %e, "NVML node-wide fact unavailable");
            None
        }
    }
}
