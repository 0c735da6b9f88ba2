//! Why a job's GPU edits cannot be built: [`EditsError`] for the job's
//! CUDA request, driver files and params overlay, [`DeviceError`] for its
//! device nodes and MPS part. Each names the node, file, variable or
//! setting at fault and what to do; the job does not start (security
//! fails closed).

use std::path::PathBuf;

use joblet_gpu::exec::{DriverCapabilities, ExecError, MigCapError};

use crate::gpu::mps::InvalidThreadPercentage;

/// Why the GPU part of a job's sandbox edits cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum EditsError {
    /// `--cuda`, `NVIDIA_DRIVER_CAPABILITIES` or `NVIDIA_VISIBLE_DEVICES`
    /// (the message names which).
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// At submission: driver libraries the job's capabilities need are
    /// not in the loader cache.
    #[error(
        "CUDA libraries not accessible: {} not found in the loader cache {} for NVIDIA_DRIVER_CAPABILITIES={caps}; install the NVIDIA driver's libraries on the host (then run ldconfig), or ask for fewer capabilities",
        missing.join(", "),
        ld_cache.display()
    )]
    LibrariesForCaps {
        /// The missing sonames.
        missing: Vec<String>,
        /// `gpu.ld_cache`'s path.
        ld_cache: PathBuf,
        caps: DriverCapabilities,
    },
    /// At start: driver libraries to bind into the job are missing.
    #[error(
        "CUDA libraries not accessible: {} not found in the loader cache {}",
        missing.join(", "),
        ld_cache.display()
    )]
    Libraries {
        missing: Vec<String>,
        ld_cache: PathBuf,
    },
    /// The host's driver parameters (`/proc/driver/nvidia/params`).
    #[error("cannot read {}: {source}", path.display())]
    ReadParams {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The job's copy of the driver parameters.
    #[error("cannot write {}: {source}", path.display())]
    WriteParams {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Devices(#[from] DeviceError),
}

/// Why a job cannot be given its GPU device nodes or its MPS part.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "GPU device node {} is not usable: {source}; is the NVIDIA driver loaded (nvidia-smi; nvidia-modprobe -u -c0 for nvidia-uvm)?",
        path.display()
    )]
    Unusable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a character device; refusing to give it to a job",
        path.display()
    )]
    NotCharDevice { path: PathBuf },
    /// The node's numbers are not the driver's: it may be another device.
    #[error(
        "{} is {}:{} but the driver says it is {}:{}; refusing to give the job a node that may be another device",
        path.display(),
        found.0,
        found.1,
        driver.0,
        driver.1
    )]
    OtherNumbers {
        path: PathBuf,
        /// `(major, minor)` of the node on disk.
        found: (u32, u32),
        /// `(major, minor)` the driver gives it.
        driver: (u32, u32),
    },
    #[error("the nvidia-uvm driver is not loaded (no nvidia-uvm line in /proc/devices); CUDA needs it: run nvidia-modprobe -u -c0 or load the nvidia-uvm module")]
    NoUvm,
    /// A MIG job on a node whose `<gpu.proc_dir>/devices` lists no
    /// `nvidia-caps` major.
    #[error(
        "MIG slices need the nvidia-caps device major, but {} has no nvidia-caps line; load the NVIDIA driver with MIG support (gpu.proc_dir is {})",
        proc_dir.join("devices").display(),
        proc_dir.display()
    )]
    NoCapsMajor { proc_dir: PathBuf },
    /// A MIG slice's access capabilities.
    #[error(transparent)]
    MigCaps(#[from] MigCapError),
    #[error("an MPS job is a client of one GPU's control daemon but this one sees {count} GPUs; ask for --gpu=1")]
    MpsGpus { count: usize },
    /// The job's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
    #[error("env[\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\"]: {0}")]
    ThreadPercentage(InvalidThreadPercentage),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_libraries_are_listed_with_the_cache_and_capabilities() {
        let missing = vec!["libcuda.so.1".to_string(), "libnvidia-ml.so.1".to_string()];
        let ld_cache = PathBuf::from("/etc/ld.so.cache");
        let at_start = EditsError::Libraries {
            missing: missing.clone(),
            ld_cache: ld_cache.clone(),
        };
        assert_eq!(
            at_start.to_string(),
            "CUDA libraries not accessible: libcuda.so.1, libnvidia-ml.so.1 not found in the loader cache /etc/ld.so.cache"
        );
        let at_submission = EditsError::LibrariesForCaps {
            missing,
            ld_cache,
            caps: DriverCapabilities::parse("compute,utility").unwrap(),
        };
        assert_eq!(
            at_submission.to_string(),
            "CUDA libraries not accessible: libcuda.so.1, libnvidia-ml.so.1 not found in the loader cache /etc/ld.so.cache for NVIDIA_DRIVER_CAPABILITIES=compute,utility; install the NVIDIA driver's libraries on the host (then run ldconfig), or ask for fewer capabilities"
        );
    }

    #[test]
    fn device_errors_name_the_node_and_the_numbers() {
        let e = DeviceError::OtherNumbers {
            path: PathBuf::from("/dev/nvidia0"),
            found: (1, 3),
            driver: (195, 0),
        };
        assert_eq!(
            e.to_string(),
            "/dev/nvidia0 is 1:3 but the driver says it is 195:0; refusing to give the job a node that may be another device"
        );
        let e = DeviceError::NoCapsMajor {
            proc_dir: PathBuf::from("/proc"),
        };
        assert!(
            e.to_string().contains(
                "/proc/devices has no nvidia-caps line; load the NVIDIA driver with MIG support (gpu.proc_dir is /proc)"
            ),
            "{e}"
        );
        let e = DeviceError::Unusable {
            path: PathBuf::from("/dev/nvidia9"),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(
            e.to_string()
                .starts_with("GPU device node /dev/nvidia9 is not usable: "),
            "{e}"
        );
    }

    #[test]
    fn a_bad_thread_percentage_names_the_variable() {
        let e = EditsError::from(DeviceError::ThreadPercentage(InvalidThreadPercentage {
            value: "0".into(),
        }));
        assert_eq!(
            e.to_string(),
            "env[\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\"]: invalid value \"0\": expected a whole number from 1 to 100 (percent of the GPU's SMs)"
        );
    }
}
