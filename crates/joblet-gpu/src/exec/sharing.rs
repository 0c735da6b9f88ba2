//! How jobs share a GPU (`gpu.sharing`) and the per-job MPS settings the
//! daemon hands to [`super::env::gpu_env`].

use super::error::ExecError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// `gpu.sharing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SharingMode {
    /// One job per GPU (the default).
    #[default]
    Exclusive,
    /// Several jobs per GPU, each held to its `--gpu-memory` quota by the
    /// daemon's NVML accounting.
    Shared,
    /// Shared through one MPS control daemon per GPU, with MPS's pinned
    /// memory limit and thread percentage per job.
    Mps,
}

impl SharingMode {
    pub fn name(self) -> &'static str {
        match self {
            SharingMode::Exclusive => "exclusive",
            SharingMode::Shared => "shared",
            SharingMode::Mps => "mps",
        }
    }
}

impl fmt::Display for SharingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SharingMode {
    type Err = ExecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            SharingMode::Exclusive,
            SharingMode::Shared,
            SharingMode::Mps,
        ]
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| ExecError::InvalidSharingMode {
            value: s.to_string(),
        })
    }
}

/// Where a job finds its MPS control daemon, and its share of the SMs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpsSettings {
    /// `CUDA_MPS_PIPE_DIRECTORY` of the control daemon serving the job's
    /// GPUs (as the job sees it).
    pub pipe_dir: PathBuf,
    /// `CUDA_MPS_LOG_DIRECTORY`.
    pub log_dir: PathBuf,
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (1..=100); MPS lets a client
    /// only lower the daemon's default.
    pub active_thread_percentage: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_print_and_serialize() {
        for m in [
            SharingMode::Exclusive,
            SharingMode::Shared,
            SharingMode::Mps,
        ] {
            assert_eq!(m.to_string().parse::<SharingMode>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{m}\""));
        }
        assert_eq!(" MPS ".parse::<SharingMode>().unwrap(), SharingMode::Mps);
        assert_eq!(SharingMode::default(), SharingMode::Exclusive);
        let msg = "timeslice".parse::<SharingMode>().unwrap_err().to_string();
        assert!(msg.contains("gpu.sharing"), "{msg}");
        assert!(msg.contains("exclusive, shared, mps"), "{msg}");
    }
}
