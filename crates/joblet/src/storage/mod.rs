//! The node's runtimes ([`NodeRuntimes`]) and volumes ([`NodeVolumes`]),
//! together as [`NodeStorage`]: what admission checks a job's `--runtime`
//! and `--volume` against, what the agent mounts at the job's start
//! ([`crate::agent::mounts::NodeMounts`]), and what `rnx runtime` and
//! `rnx volume` change.

pub mod runtimes;
pub mod volumes;

use std::path::PathBuf;

pub use runtimes::{BuildEvent, NodeRuntimes, RuntimeOpError};
pub use volumes::{NodeVolumes, VolumeOpError, VolumeState};

use crate::agent::mounts::{MountError, NodeMounts, RuntimeRoot};

/// The node's runtimes and volumes.
pub struct NodeStorage {
    pub runtimes: NodeRuntimes,
    pub volumes: NodeVolumes,
    /// Admission holds it shared from its check of a job's runtime and
    /// volumes until the job is recorded; removing a runtime or a volume
    /// holds it exclusively while it checks that no unfinished job names
    /// it and removes it. So a job is never recorded naming something
    /// being removed.
    pub gate: tokio::sync::RwLock<()>,
    /// The highest CUDA version the node's driver supports (`None`: no
    /// GPUs, or unknown).
    pub driver_cuda: Option<(u32, u32)>,
}

impl NodeMounts for NodeStorage {
    fn runtime(&self, reference: &str) -> Result<Option<RuntimeRoot>, MountError> {
        let found = self
            .runtimes
            .resolve(reference)
            .map_err(|e| MountError::Runtimes(e.to_string()))?;
        Ok(found.map(|i| RuntimeRoot {
            tree: i.root,
            digest: i.digest,
            environment: i.environment,
        }))
    }

    fn volume_dir(&self, name: &str) -> Result<PathBuf, MountError> {
        self.volumes
            .job_dir(name)
            .map_err(|why| MountError::Volume {
                name: name.to_owned(),
                why,
            })
    }
}
