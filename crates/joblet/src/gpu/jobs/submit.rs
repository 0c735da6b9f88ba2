//! Submission: a job's scheduler request, its wall-clock limits, and the
//! checks that refuse at once what could never run on this node, in seed
//! 001's words (`No GPUs available`, `Insufficient GPU memory`, `CUDA
//! libraries not accessible`), each with what to do.

use std::time::Duration;

use joblet_core::JobSpec;
use joblet_gpu::exec::{parse_visible, DriverCapabilities, SharingMode};
use joblet_sched::model::{JobRequest, Sharing, Unplaceable, WorkloadClass};

use super::GpuJobs;
use crate::service::ApiError;

impl GpuJobs {
    /// The scheduler's request for a job.
    pub fn request(&self, job: &str, owner: &str, spec: &JobSpec) -> JobRequest {
        let r = &spec.resources;
        // MIG slices are hardware-partitioned: never shared.
        let shared = self.settings.sharing != SharingMode::Exclusive
            && r.gpu_memory_mb.is_some()
            && r.mig_profile.is_none();
        JobRequest {
            job: job.to_string(),
            owner: owner.to_string(),
            queue: "default".into(),
            gpu_count: r.gpu_count,
            gpu_memory_mb: r.gpu_memory_mb.unwrap_or(0),
            sharing: if shared {
                Sharing::Shared
            } else {
                Sharing::Exclusive
            },
            mig_profile: r.mig_profile.clone(),
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: self.wall_limit(spec).map(|d| d.as_millis() as u64),
        }
    }

    /// The wall-clock limit a job's GPU time budget (`--gpu-time` or the
    /// node default; GPU time = GPUs × wall time) comes to.
    pub fn gpu_time_wall(&self, spec: &JobSpec) -> Option<(Duration, Duration)> {
        let budget = spec.resources.gpu_time.or(self.settings.default_gpu_time)?;
        let n = spec.resources.gpu_count.max(1);
        Some((budget, budget / n))
    }

    /// The job's effective wall-clock limit: its timeout or its GPU time
    /// budget, whichever ends first.
    pub fn wall_limit(&self, spec: &JobSpec) -> Option<Duration> {
        match (spec.timeout, self.gpu_time_wall(spec).map(|(_, w)| w)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Refuses at submission what could never run here, with seed 001's
    /// messages.
    pub fn check(&self, req: &JobRequest, spec: &JobSpec) -> Result<(), ApiError> {
        let total = self.sched.cluster().total_units();
        if total == 0 {
            return Err(ApiError::GpuRequest(
                "No GPUs available: this node found no usable GPU at start-up; check `nvidia-smi` on the host and the joblet log (GPU discovery), or run the job without --gpu".into(),
            ));
        }
        crate::gpu::mig::check_request(&self.offer, req).map_err(ApiError::GpuRequest)?;
        if let Err(e) = self.sched.cluster().check_ever_placeable(req) {
            let msg = match e {
                Unplaceable::TooMuchMemory { asked_mb, largest_mb } => format!(
                    "Insufficient GPU memory: the job asks for {asked_mb} MB per GPU but the largest GPU on this node has {largest_mb} MB; lower --gpu-memory (see `rnx gpu status`), or spread the work over more GPUs with less memory each"
                ),
                Unplaceable::OverQuota { asked, quota } => format!(
                    "No GPUs available: the job asks for {asked} GPUs but owner {}'s quota is {quota} (gpu.owner_max_gpus); ask for at most {quota}",
                    req.owner
                ),
                Unplaceable::LargerThanCluster { asked, total: n }
                | Unplaceable::LargerThanNode { asked, largest: n } => format!(
                    "No GPUs available: the job asks for {asked} GPUs but this node has {n} (see `rnx gpu status`); ask for at most {n}"
                ),
                other => format!(
                    "No GPUs available: the job {other}; this node has {total} GPUs (see `rnx gpu status`), ask for fewer"
                ),
            };
            return Err(ApiError::GpuRequest(msg));
        }
        for key in ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"] {
            if let Some(v) = spec.env.get(key) {
                let checked = if key == "NVIDIA_VISIBLE_DEVICES" {
                    parse_visible(Some(v)).map(|_| ())
                } else {
                    DriverCapabilities::parse(v).map(|_| ())
                };
                checked.map_err(|e| {
                    ApiError::InvalidField(joblet_core::FieldError::new(
                        format!("env[\"{key}\"]"),
                        e.to_string(),
                    ))
                })?;
            }
        }
        crate::gpu::setup::check_cuda(&self.settings, spec).map_err(ApiError::GpuRequest)?;
        if let (Some(client), Sharing::Shared) = (&self.settings.mps, req.sharing) {
            if req.gpu_count > 1 {
                return Err(ApiError::GpuRequest(format!(
                    "No GPUs available: with gpu.sharing: mps a job with --gpu-memory is an MPS client of one GPU's control daemon, and a process reaches only one; ask for --gpu=1 (or leave out --gpu-memory for {} whole GPUs)",
                    req.gpu_count
                )));
            }
            let key = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
            client
                .thread_percentage(spec.env.get(key).map(String::as_str))
                .map_err(|e| {
                    ApiError::InvalidField(joblet_core::FieldError::new(
                        format!("env[\"{key}\"]"),
                        e,
                    ))
                })?;
        }
        Ok(())
    }
}
