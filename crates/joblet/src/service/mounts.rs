//! Admission of a job's runtime and volumes: the runtime is installed
//! (and pinned to the version and tree it has now), its CUDA runs on the
//! node's driver, and each volume exists, may be mounted by the caller and
//! is mounted on the node.

use joblet_core::{FieldError, JobSpec};

use super::{ApiError, Caller};
use crate::storage::NodeStorage;

/// Checks `spec`'s runtime and volumes against the node and pins its
/// runtime to `name@version` and its digest. The caller holds
/// [`NodeStorage::gate`] shared until the job is recorded.
pub fn admit(storage: &NodeStorage, caller: &Caller, spec: &mut JobSpec) -> Result<(), ApiError> {
    if let Some(reference) = spec.runtime.clone() {
        let name = reference.split('@').next().unwrap_or(&reference).to_owned();
        let installed = storage
            .runtimes
            .resolve(&reference)
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "runtime {reference} is not installed on this node: install it with `rnx runtime install {reference}` (`rnx runtime list --all` shows what this node can install), or build your own with `rnx runtime build DIR`"
                ))
            })?;
        if let Some(need) = installed.cuda.as_deref() {
            check_cuda(storage, spec, &name, need)?;
        } else if spec.cuda.is_some() {
            return Err(FieldError::new(
                "cuda_version",
                format!("runtime {name} carries no CUDA libraries, so --cuda cannot be met in it; leave --cuda out, or use a runtime whose manifest sets cuda"),
            )
            .into());
        }
        spec.runtime = Some(format!("{}@{}", installed.name, installed.version));
        spec.runtime_digest = Some(installed.digest);
    }
    for v in &spec.volumes {
        let rec = storage
            .volumes
            .record(&v.name)
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "volume {} does not exist on this node: create it with `rnx volume create {} --size=1GB` (`rnx volume list` shows the node's volumes)",
                    v.name, v.name
                ))
            })?;
        if rec.owner != caller.name && !rec.shared {
            return Err(ApiError::InUse(format!(
                "volume {} belongs to {}, who has not shared it; they can share it with `rnx volume share {}`",
                rec.name, rec.owner, rec.name
            )));
        }
        storage.volumes.job_dir(&v.name).map_err(|why| {
            ApiError::NodeCannot(format!("volume {} cannot be mounted: {why}", v.name))
        })?;
    }
    Ok(())
}

/// A GPU job in a runtime that needs CUDA `need`: the node's driver must
/// support it, and `--cuda`, if given, must name it.
fn check_cuda(
    storage: &NodeStorage,
    spec: &JobSpec,
    name: &str,
    need: &str,
) -> Result<(), ApiError> {
    let need_key = major_minor(need);
    if let Some(asked) = spec.cuda.as_deref() {
        let asked_key = major_minor(asked);
        let fits = match (asked_key, need_key) {
            (Some((am, None)), Some((nm, _))) => am == nm,
            (Some((am, Some(an))), Some((nm, Some(nn)))) => (am, an) == (nm, nn),
            _ => false,
        };
        if !fits {
            return Err(FieldError::new(
                "cuda_version",
                format!("runtime {name} carries CUDA {need}, not {asked}; leave --cuda out (jobs in a runtime use its CUDA), or pick a runtime built for CUDA {asked}"),
            )
            .into());
        }
    }
    if spec.resources.gpu_count == 0 {
        return Ok(());
    }
    let (Some((nm, nn)), Some((dm, dn))) = (need_key, storage.driver_cuda) else {
        return Ok(());
    };
    if (nm, nn.unwrap_or(0)) > (dm, dn) {
        return Err(ApiError::GpuRequest(format!(
            "CUDA libraries not accessible: runtime {name} needs CUDA {need}, and this node's driver supports CUDA up to {dm}.{dn}; update the NVIDIA driver, or use a runtime built for CUDA {dm}.{dn} or older"
        )));
    }
    Ok(())
}

/// `12.4` → (12, Some(4)); `12` → (12, None).
fn major_minor(v: &str) -> Option<(u32, Option<u32>)> {
    let mut parts = v.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map(str::parse).transpose().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::major_minor;

    #[test]
    fn cuda_versions_parse_to_major_and_minor() {
        assert_eq!(major_minor("12.4"), Some((12, Some(4))));
        assert_eq!(major_minor("13"), Some((13, None)));
        assert_eq!(major_minor("12.4.1"), Some((12, Some(4))));
        assert_eq!(major_minor("x"), None);
    }
}
