//! What a GPU job may ask of this node, checked before it is recorded, so
//! that a request that could never run is refused at once in seed 001's
//! words (`No GPUs available`, `Insufficient GPU memory`, `CUDA libraries
//! not accessible`), each with what to do.

use joblet_core::{FieldError, JobSpec};
use joblet_gpu::exec::{parse_visible, DriverCapabilities};
use joblet_sched::model::{JobRequest, Sharing, Unplaceable};

use super::allocation::NodeGpus;
use super::edits::EditsError;
use super::mig::{self, MigRefusal};

/// Why a GPU job is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("No GPUs available: GPU jobs are off on this node (they need gpu.enabled: true and sandbox.enabled: true); run the job without --gpu or ask an admin")]
    Off,
    #[error("No GPUs available: this node found no usable GPU at start-up; check `nvidia-smi` on the host and the joblet log (GPU discovery), or run the job without --gpu")]
    NoGpus,
    #[error(transparent)]
    Mig(#[from] MigRefusal),
    #[error("Insufficient GPU memory: the job asks for {asked_mb} MB per GPU but the largest GPU on this node has {largest_mb} MB; lower --gpu-memory (see `rnx gpu status`), or spread the work over more GPUs with less memory each")]
    Memory { asked_mb: u64, largest_mb: u64 },
    #[error("No GPUs available: the job asks for {asked} GPUs but owner {owner}'s quota is {quota} (gpu.owner_max_gpus); ask for at most {quota}")]
    Quota {
        owner: String,
        asked: u32,
        quota: u32,
    },
    #[error("No GPUs available: the job asks for {asked} GPUs but this node has {have} (see `rnx gpu status`); ask for at most {have}")]
    TooMany { asked: u32, have: u32 },
    #[error("No GPUs available: the job {why}; this node has {total} GPUs (see `rnx gpu status`), ask for fewer")]
    Other { why: Unplaceable, total: u32 },
    /// A bad `NVIDIA_*` or `CUDA_MPS_*` variable: the caller's field.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// `--cuda` or the driver's libraries (the message says which).
    #[error(transparent)]
    Cuda(#[from] EditsError),
    #[error("No GPUs available: with gpu.sharing: mps a job with --gpu-memory is an MPS client of one GPU's control daemon, and a process reaches only one; ask for --gpu=1 (or leave out --gpu-memory for {count} whole GPUs)")]
    MpsGpus { count: u32 },
}

impl Refused {
    /// The refusal for a request the scheduler says could never be placed
    /// here (its GPU part).
    pub fn unplaceable(why: Unplaceable, owner: &str, total: u32) -> Refused {
        match why {
            Unplaceable::TooMuchMemory {
                asked_mb,
                largest_mb,
            } => Refused::Memory {
                asked_mb,
                largest_mb,
            },
            Unplaceable::OverQuota { asked, quota } => Refused::Quota {
                owner: owner.to_string(),
                asked,
                quota,
            },
            Unplaceable::LargerThanCluster { asked, total: have }
            | Unplaceable::LargerThanNode {
                asked,
                largest: have,
            } => Refused::TooMany { asked, have },
            other => Refused::Other { why: other, total },
        }
    }
}

impl NodeGpus {
    /// Refuses at submission what this node's GPUs could never serve.
    /// `total`: the GPU units the scheduler has; `never`: why the
    /// scheduler could never place the request, if it could not.
    pub fn admit(
        &self,
        req: &JobRequest,
        spec: &JobSpec,
        total: u32,
        never: Option<Unplaceable>,
    ) -> Result<(), Refused> {
        if total == 0 {
            return Err(Refused::NoGpus);
        }
        mig::check_request(&self.offer, req)?;
        if let Some(why) = never {
            return Err(Refused::unplaceable(why, &req.owner, total));
        }
        for key in ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"] {
            if let Some(v) = spec.env.get(key) {
                let checked = if key == "NVIDIA_VISIBLE_DEVICES" {
                    parse_visible(Some(v)).map(|_| ())
                } else {
                    DriverCapabilities::parse(v).map(|_| ())
                };
                checked.map_err(|e| FieldError::new(format!("env[\"{key}\"]"), e.to_string()))?;
            }
        }
        super::edits::check_cuda(&self.settings, spec)?;
        if let (Some(client), Sharing::Shared) = (&self.settings.mps, req.sharing) {
            if req.gpu_count > 1 {
                return Err(Refused::MpsGpus {
                    count: req.gpu_count,
                });
            }
            let key = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
            client
                .thread_percentage(spec.env.get(key).map(String::as_str))
                .map_err(|e| FieldError::new(format!("env[\"{key}\"]"), e.to_string()))?;
        }
        Ok(())
    }
}
