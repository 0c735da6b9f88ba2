//! The `gpu.*` values serde cannot check by type, each refused with the
//! dotted key and the accepted form (called by [`crate::config`]).

use std::time::Duration;

use joblet_gpu::exec::DriverCapabilities;

use crate::config::GpuConfig;

/// `(key, message)` of the first bad `gpu.*` value.
pub fn check(gpu: &GpuConfig) -> Result<(), (String, String)> {
    let err = |key: &str, message: String| Err((format!("gpu.{key}"), message));
    let interval = gpu.health_interval;
    if !interval.is_zero() && interval < Duration::from_millis(100) {
        return err(
            "health_interval",
            format!("{interval:?} is too short: expected 0 (off) or at least 100ms, e.g. 1s"),
        );
    }
    if let Some(p) = &gpu.simulate {
        if !p.is_file() {
            return err(
                "simulate",
                format!(
                    "{} is not a file: expected a mock-NVML profile (.yaml) or an `nvidia-smi -q -x` capture (.xml)",
                    p.display()
                ),
            );
        }
    }
    if let Err(e) = DriverCapabilities::parse(&gpu.driver_capabilities) {
        return err("driver_capabilities", e.to_string());
    }
    if let Some(rate) = &gpu.owner_rate {
        if !(rate.per_second.is_finite() && rate.per_second > 0.0) || rate.burst == 0 {
            return err(
                "owner_rate",
                format!("invalid rate {}/s with burst {}: expected per_second > 0 and burst >= 1, e.g. {{per_second: 2, burst: 10}}", rate.per_second, rate.burst),
            );
        }
    }
    for (key, path, example) in [
        ("dev_dir", &gpu.dev_dir, "/dev"),
        ("proc_dir", &gpu.proc_dir, "/proc"),
        ("mps_dir", &gpu.mps_dir, "/run/joblet/mps"),
    ] {
        if path.is_relative() {
            return err(
                key,
                format!(
                    "{} is not an absolute path; expected e.g. {example}",
                    path.display()
                ),
            );
        }
    }
    if let Some(p) = &gpu.mps_control {
        if p.is_relative() || !p.is_file() {
            return err(
                "mps_control",
                format!(
                    "{} is not an absolute path of a file: expected the MPS control program, e.g. /usr/bin/nvidia-cuda-mps-control, or leave it unset to find it in gpu.driver_bin_dirs and PATH",
                    p.display()
                ),
            );
        }
    }
    if !(1..=1 << 20).contains(&gpu.mps_shm_size_mb) {
        return err(
            "mps_shm_size_mb",
            format!(
                "invalid value {}: expected 1 to 1048576 (MiB of each GPU's MPS shared-memory tmpfs, also its MPS jobs' /dev/shm), e.g. 64",
                gpu.mps_shm_size_mb
            ),
        );
    }
    if let Some(pct) = gpu.mps_active_thread_percentage {
        if !(1..=100).contains(&pct) {
            return err(
                "mps_active_thread_percentage",
                format!("invalid value {pct}: expected 1 to 100 (percent of the GPU's SMs an MPS job may use), or null for MPS's default"),
            );
        }
    }
    Ok(())
}
