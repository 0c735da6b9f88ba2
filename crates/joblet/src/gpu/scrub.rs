//! The release check (`gpu.scrub_policy`): a GPU goes back to the pool
//! only when a reading taken after its job ended shows none of the job's
//! processes and (for a GPU the job had alone) memory back to its idle
//! baseline. The driver scrubs memory on free, but CUDA promises nothing,
//! so this is checked, not assumed. `reset` resets an exclusive GPU that
//! stays dirty (`nvidia-smi --gpu-reset`) and checks again; a GPU that does
//! not come back clean is quarantined with the reason.

use std::collections::BTreeSet;
use std::path::PathBuf;
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

/// Why `t` is not clean in `node`'s latest reading, if it is not.
pub fn dirty(node: &GpuNode, t: &ScrubTarget) -> Option<String> {
    let Some(g) = node.inventory.gpus.iter().find(|g| g.uuid == t.uuid) else {
        return Some("the GPU is no longer reported by the driver".into());
    };
    let left: Vec<u32> = g
        .processes
        .iter()
        .map(|p| p.pid)
        .filter(|pid| t.exclusive || t.job_pids.contains(pid))
        .collect();
    if !left.is_empty() {
        let list: Vec<String> = left.iter().map(u32::to_string).collect();
        return Some(format!(
            "{} process(es) still on it after the job ended (pids {})",
            left.len(),
            list.join(", ")
        ));
    }
    if t.exclusive {
        let used = g.memory_used_bytes.unwrap_or(0) / (1024 * 1024);
        if used > t.baseline_mb + TOLERANCE_MB {
            return Some(format!(
                "{used} MiB of memory still in use after the job ended (idle baseline {} MiB)",
                t.baseline_mb
            ));
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
                    .filter_map(|t| dirty(&node, t).map(|why| (t.uuid.clone(), why)))
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
async fn reset(t: &ScrubTarget, bin_dirs: &[PathBuf]) -> Result<(), String> {
    let smi = bin_dirs
        .iter()
        .map(|d| d.join("nvidia-smi"))
        .find(|p| p.is_file())
        .ok_or_else(|| "nvidia-smi not found in gpu.driver_bin_dirs".to_string())?;
    let out = tokio::process::Command::new(&smi)
        .args(["--gpu-reset", "-i", &t.bus_id])
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", smi.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} --gpu-reset exited with {}: {}",
            smi.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
