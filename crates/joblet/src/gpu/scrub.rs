//! The release check (`gpu.scrub_policy`): a GPU goes back to the pool
//! only when a reading taken after its job ended shows none of the job's
//! processes and (for a GPU the job had alone) memory back to its idle
//! baseline. The driver scrubs memory on free, but CUDA promises nothing,
//! so this is checked, not assumed. `reset` resets an exclusive GPU that
//! stays dirty (`nvidia-smi --gpu-reset`) and checks again; a GPU that does
//! not come back clean is quarantined with the reason.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use joblet_core::UnixMillis;

use super::{GpuNode, SharedGpus};
use crate::config::ScrubPolicy;

/// Memory above the baseline still counted as idle (driver bookkeeping).
pub const TOLERANCE_MB: u64 = 64;

/// One GPU of a finished job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubTarget {
    pub uuid: String,
    pub index: u32,
    pub bus_id: String,
    pub exclusive: bool,
    pub job_pids: BTreeSet<u32>,
    pub baseline_mb: u64,
}

/// Why a GPU of a finished job is not clean (its quarantine reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unclean {
    #[error("the GPU is no longer reported by the driver")]
    Gone,
    #[error("{} process(es) still on it after the job ended (pids {})", pids.len(), list(pids))]
    Processes { pids: Vec<u32> },
    /// An exclusive GPU's memory above its idle baseline.
    #[error("{used_mb} MiB of memory still in use after the job ended (idle baseline {baseline_mb} MiB)")]
    Memory { used_mb: u64, baseline_mb: u64 },
}

fn list(pids: &[u32]) -> String {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    list.join(", ")
}

/// Why `nvidia-smi --gpu-reset` did not reset a GPU.
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    #[error("nvidia-smi not found in gpu.driver_bin_dirs")]
    NoSmi,
    #[error("cannot run {}: {source}", smi.display())]
    Spawn {
        smi: PathBuf,
        source: std::io::Error,
    },
    #[error("{} --gpu-reset exited with {status}: {stderr}", smi.display())]
    Failed {
        smi: PathBuf,
        status: ExitStatus,
        /// Its standard error, trimmed.
        stderr: String,
    },
}

/// Why `t` is not clean in `node`'s latest reading, if it is not.
pub fn dirty(node: &GpuNode, t: &ScrubTarget) -> Option<Unclean> {
    let Some(g) = node.inventory.gpus.iter().find(|g| g.uuid == t.uuid) else {
        return Some(Unclean::Gone);
    };
    let left: Vec<u32> = g
        .processes
        .iter()
        .map(|p| p.pid)
        .filter(|pid| t.exclusive || t.job_pids.contains(pid))
        .collect();
    if !left.is_empty() {
        return Some(Unclean::Processes { pids: left });
    }
    if t.exclusive {
        let used = g.memory_used_bytes.unwrap_or(0) / (1024 * 1024);
        if used > t.baseline_mb + TOLERANCE_MB {
            return Some(Unclean::Memory {
                used_mb: used,
                baseline_mb: t.baseline_mb,
            });
        }
    }
    None
}

/// Waits (up to `timeout`) for readings taken after `ended_ms` that show
/// every target clean; returns `(uuid, reason)` for those that are not.
/// `can_verify` false (no NVML sampling): nothing can be checked, so the
/// GPUs are released as they are, with a warning.
pub async fn verify(
    shared: &SharedGpus,
    targets: &[ScrubTarget],
    policy: ScrubPolicy,
    timeout: Duration,
    ended_ms: UnixMillis,
    can_verify: bool,
    bin_dirs: &[PathBuf],
) -> Vec<(String, String)> {
    if policy == ScrubPolicy::Off || targets.is_empty() {
        return Vec::new();
    }
    if !can_verify {
        tracing::warn!("GPU release check skipped: the monitor does not sample NVML (gpu.health_interval: 0 or no NVML)");
        return Vec::new();
    }
    let mut left = wait_clean(shared, targets, timeout, ended_ms).await;
    if policy == ScrubPolicy::Reset && !left.is_empty() {
        let mut after_reset = Vec::new();
        for (uuid, why) in left {
            let Some(t) = targets.iter().find(|t| t.uuid == uuid) else {
                continue;
            };
            if !t.exclusive {
                after_reset.push((uuid, format!("{why}; a shared GPU is not reset")));
                continue;
            }
            match reset(t, bin_dirs).await {
                Ok(()) => {
                    tracing::info!(gpu = t.index, %uuid, "GPU reset after an unclean release");
                    let again = wait_clean(
                        shared,
                        std::slice::from_ref(t),
                        timeout,
                        crate::clock::now_ms(),
                    )
                    .await;
                    after_reset.extend(
                        again
                            .into_iter()
                            .map(|(u, w)| (u, format!("{w} (still after a GPU reset)"))),
                    );
                }
                Err(e) => after_reset.push((uuid, format!("{why}; reset failed: {e}"))),
            }
        }
        left = after_reset;
    }
    left
}

async fn wait_clean(
    shared: &SharedGpus,
    targets: &[ScrubTarget],
    timeout: Duration,
    after_ms: UnixMillis,
) -> Vec<(String, String)> {
    let deadline = Instant::now() + timeout;
    loop {
        let verdicts: Option<Vec<(String, String)>> = {
            let node = shared.lock();
            (node.sampled_at > after_ms).then(|| {
                targets
                    .iter()
                    .filter_map(|t| dirty(&node, t).map(|why| (t.uuid.clone(), why.to_string())))
                    .collect()
            })
        };
        match verdicts {
            Some(v) if v.is_empty() => return v,
            Some(v) if Instant::now() >= deadline => {
                return v
                    .into_iter()
                    .map(|(u, w)| {
                        (
                            u,
                            format!("{w}, for {}", humantime::format_duration(timeout)),
                        )
                    })
                    .collect()
            }
            None if Instant::now() >= deadline => {
                return targets
                    .iter()
                    .map(|t| {
                        (
                            t.uuid.clone(),
                            format!(
                                "no GPU reading within {} of the job's end to verify it",
                                humantime::format_duration(timeout)
                            ),
                        )
                    })
                    .collect()
            }
            None => {
                // Ask for a reading now instead of waiting for the period.
                shared.sample_now();
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Some(_) => {
                shared.sample_now();
                tokio::time::sleep(Duration::from_millis(50)).await
            }
        }
    }
}

/// `nvidia-smi --gpu-reset -i <bus id>` (the driver's only reset path).
async fn reset(t: &ScrubTarget, bin_dirs: &[PathBuf]) -> Result<(), ResetError> {
    let smi = bin_dirs
        .iter()
        .map(|d| d.join("nvidia-smi"))
        .find(|p| p.is_file())
        .ok_or(ResetError::NoSmi)?;
    let out = match tokio::process::Command::new(&smi)
        .args(["--gpu-reset", "-i", &t.bus_id])
        .output()
        .await
    {
        Ok(out) => out,
        Err(source) => return Err(ResetError::Spawn { smi, source }),
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(ResetError::Failed {
            smi,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn reasons_name_what_is_left_on_the_gpu() {
        let left = Unclean::Processes { pids: vec![41, 42] };
        assert_eq!(
            left.to_string(),
            "2 process(es) still on it after the job ended (pids 41, 42)"
        );
        let memory = Unclean::Memory {
            used_mb: 900,
            baseline_mb: 300,
        };
        assert_eq!(
            memory.to_string(),
            "900 MiB of memory still in use after the job ended (idle baseline 300 MiB)"
        );
    }

    #[test]
    fn a_failed_reset_names_the_program_and_its_status() {
        let e = ResetError::Failed {
            smi: PathBuf::from("/usr/bin/nvidia-smi"),
            status: ExitStatus::from_raw(3 << 8),
            stderr: "Unable to reset GPU".into(),
        };
        assert_eq!(
            e.to_string(),
            "/usr/bin/nvidia-smi --gpu-reset exited with exit status: 3: Unable to reset GPU"
        );
    }
}
