//! What a node can enforce ([`NodeCapabilities`]), and refusing a valid
//! spec that asks for more ([`Unsupported`], naming the field and flag).

use serde::{Deserialize, Serialize};

use super::JobSpec;

/// What this node can enforce. A spec asking for anything else is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCapabilities {
    pub cpu_limit: bool,
    pub cpu_pinning: bool,
    pub memory_limit: bool,
    pub io_limit: bool,
    pub gpus: bool,
    pub uploads: bool,
    pub runtimes: bool,
    pub volumes: bool,
}

impl NodeCapabilities {
    /// Names of the enforced features, for `WhoAmI` and `--help` texts.
    pub fn supported_names(&self) -> Vec<&'static str> {
        let mut v = vec!["env", "secret_env", "timeout"];
        let flags = [
            (self.cpu_limit, "max_cpu"),
            (self.cpu_pinning, "cpu_cores"),
            (self.memory_limit, "max_memory"),
            (self.io_limit, "max_iobps"),
            (self.gpus, "gpu"),
            (self.uploads, "upload"),
            (self.runtimes, "runtime"),
            (self.volumes, "volume"),
        ];
        v.extend(flags.into_iter().filter(|(on, _)| *on).map(|(_, n)| n));
        v
    }
}

/// A valid request this node cannot enforce.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} ({flag}): {what} is not supported yet on this node; the job was not started. Remove {flag} or run it on a node that supports it (`rnx whoami` lists what this node enforces)")]
pub struct Unsupported {
    pub field: &'static str,
    pub flag: &'static str,
    pub what: &'static str,
}

impl JobSpec {
    /// Refuses the first limit or feature the node cannot enforce.
    pub fn check_supported(&self, caps: &NodeCapabilities) -> Result<(), Unsupported> {
        let r = &self.resources;
        let checks: [(bool, bool, &str, &str, &str); 13] = [
            (
                r.max_cpu_percent.is_some(),
                caps.cpu_limit,
                "resources.max_cpu",
                "--max-cpu",
                "a CPU limit",
            ),
            (
                r.cpu_cores.is_some(),
                caps.cpu_pinning,
                "resources.cpu_cores",
                "--cpu-cores",
                "CPU pinning",
            ),
            (
                r.max_memory_mb.is_some(),
                caps.memory_limit,
                "resources.max_memory_mb",
                "--max-memory",
                "a memory limit",
            ),
            (
                r.max_iobps.is_some(),
                caps.io_limit,
                "resources.max_iobps",
                "--max-iobps",
                "an IO bandwidth limit",
            ),
            (
                r.gpu_count > 0,
                caps.gpus,
                "resources.gpu_count",
                "--gpu",
                "GPU allocation",
            ),
            (
                r.gpu_memory_mb.is_some(),
                caps.gpus,
                "resources.gpu_memory_mb",
                "--gpu-memory",
                "a GPU memory requirement",
            ),
            (
                r.gpu_time.is_some(),
                caps.gpus,
                "resources.gpu_time_seconds",
                "--gpu-time",
                "a GPU time limit",
            ),
            (
                self.cuda.is_some(),
                caps.gpus,
                "cuda_version",
                "--cuda",
                "a CUDA toolkit version",
            ),
            (
                r.mig_profile.is_some(),
                caps.gpus,
                "mig_profile",
                "--mig",
                "MIG slices",
            ),
            (
                self.gpu_profiling,
                caps.gpus,
                "gpu_profiling",
                "--gpu-profiling",
                "GPU profiling",
            ),
            (
                self.upload_entries > 0,
                caps.uploads,
                "uploads",
                "--upload",
                "uploading files",
            ),
            (
                self.runtime.is_some(),
                caps.runtimes,
                "runtime",
                "--runtime",
                "a runtime environment",
            ),
            (
                !self.volumes.is_empty(),
                caps.volumes,
                "volumes",
                "--volume",
                "mounting volumes",
            ),
        ];
        for (asked, can, field, flag, what) in checks {
            if asked && !can {
                return Err(Unsupported { field, flag, what });
            }
        }
        Ok(())
    }
}
