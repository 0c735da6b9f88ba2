//! Where a job's runtime tree and volume directories come from on this
//! node ([`NodeMounts`]), and the mounts a job gets from them
//! ([`job_mounts`]). The agent asks at the job's start, so a runtime
//! removed or a volume unmounted since the job was admitted fails the
//! start (closed), never runs the job on the host's tree or on an
//! unlimited directory.

use std::collections::BTreeMap;
use std::path::PathBuf;

use joblet_core::JobSpec;
use joblet_sandbox::init::Bind;

use crate::sandbox::{JobMounts, VOLUMES_DIR};

/// A runtime as a job's start needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRoot {
    /// Its tree on the host.
    pub tree: PathBuf,
    /// `sha256:…` of the tree.
    pub digest: String,
    /// Variables its jobs get (under the user's own).
    pub environment: BTreeMap<String, String>,
}

/// Why a job's runtime or volume cannot be mounted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    #[error("runtime {name} is not installed on this node (removed since the job was queued?); install it with `rnx runtime install {name}` and run the job again")]
    RuntimeMissing { name: String },
    #[error(
        "runtime {name} is now {found}, not {wanted} the job was admitted with; run the job again"
    )]
    RuntimeChanged {
        name: String,
        wanted: String,
        found: String,
    },
    #[error("volume {name} cannot be mounted: {why}")]
    Volume { name: String, why: String },
    #[error("runtimes: {0}")]
    Runtimes(String),
}

/// The node's runtimes and volumes, as the agent sees them.
pub trait NodeMounts: Send + Sync {
    /// The installed runtime `name@version` (as admission pinned it).
    fn runtime(&self, reference: &str) -> Result<Option<RuntimeRoot>, MountError>;
    /// The host directory of volume `name`, mounted and ready, or why not.
    fn volume_dir(&self, name: &str) -> Result<PathBuf, MountError>;
}

/// A job's runtime and volume mounts, and its runtime's environment.
pub fn job_mounts(
    node: &dyn NodeMounts,
    spec: &JobSpec,
) -> Result<(JobMounts, Option<BTreeMap<String, String>>), MountError> {
    let mut mounts = JobMounts::default();
    let mut env = None;
    if let Some(reference) = &spec.runtime {
        let name = reference.split('@').next().unwrap_or(reference).to_owned();
        let root = node
            .runtime(reference)?
            .ok_or(MountError::RuntimeMissing { name: name.clone() })?;
        if let Some(wanted) = spec.runtime_digest.as_ref().filter(|w| **w != root.digest) {
            return Err(MountError::RuntimeChanged {
                name,
                wanted: wanted.clone(),
                found: root.digest,
            });
        }
        mounts.runtime = Some(root.tree);
        env = Some(root.environment);
    }
    for v in &spec.volumes {
        let source = node.volume_dir(&v.name)?;
        mounts.volumes.push(Bind {
            source,
            target: PathBuf::from(VOLUMES_DIR).join(&v.name),
            writable: !v.read_only,
        });
    }
    Ok((mounts, env))
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::VolumeMount;

    struct Fake;

    impl NodeMounts for Fake {
        fn runtime(&self, reference: &str) -> Result<Option<RuntimeRoot>, MountError> {
            Ok((reference == "py@1").then(|| RuntimeRoot {
                tree: "/rt/trees/abc".into(),
                digest: "sha256:abc".into(),
                environment: BTreeMap::from([("PYTHONUNBUFFERED".into(), "1".into())]),
            }))
        }

        fn volume_dir(&self, name: &str) -> Result<PathBuf, MountError> {
            match name {
                "data" => Ok(PathBuf::from("/v/data/data")),
                _ => Err(MountError::Volume {
                    name: name.into(),
                    why: "not mounted".into(),
                }),
            }
        }
    }

    fn spec(runtime: Option<&str>, digest: Option<&str>, volumes: &[(&str, bool)]) -> JobSpec {
        let (mut spec, _) = joblet_core::JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap();
        spec.runtime = runtime.map(str::to_owned);
        spec.runtime_digest = digest.map(str::to_owned);
        spec.volumes = volumes
            .iter()
            .map(|(n, ro)| VolumeMount {
                name: (*n).into(),
                read_only: *ro,
            })
            .collect();
        spec
    }

    #[test]
    fn a_runtime_and_volumes_become_the_root_and_binds() {
        let (m, env) = job_mounts(
            &Fake,
            &spec(Some("py@1"), Some("sha256:abc"), &[("data", true)]),
        )
        .unwrap();
        assert_eq!(m.runtime, Some(PathBuf::from("/rt/trees/abc")));
        assert_eq!(env.unwrap()["PYTHONUNBUFFERED"], "1");
        assert_eq!(
            m.volumes,
            vec![Bind {
                source: "/v/data/data".into(),
                target: "/volumes/data".into(),
                writable: false,
            }]
        );
    }

    #[test]
    fn a_missing_or_changed_runtime_or_an_unmounted_volume_fails_closed() {
        let e = job_mounts(&Fake, &spec(Some("py@2"), None, &[])).unwrap_err();
        assert!(e.to_string().contains("rnx runtime install py"), "{e}");
        let e = job_mounts(&Fake, &spec(Some("py@1"), Some("sha256:old"), &[])).unwrap_err();
        assert!(matches!(e, MountError::RuntimeChanged { .. }), "{e}");
        let e = job_mounts(&Fake, &spec(None, None, &[("other", false)])).unwrap_err();
        assert!(e.to_string().contains("volume other"), "{e}");
    }
}
