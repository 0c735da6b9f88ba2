//! MIG mode and the MIG devices (GPU instance + compute instance) of one GPU.

use super::ffi;
use super::query::{is_absent, Answers};
use crate::model::{MigGpuInstance, MigInfo};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// `nvmlDeviceGetMigMode` says 1 for enabled.
const MIG_ENABLED: u32 = 1;

/// MIG state of `device`; `None` when the GPU has no MIG support.
pub(crate) fn read_mig(nvml: &Nvml, device: &Device<'_>, answers: &mut Answers) -> Option<MigInfo> {
    let mode = answers.get("nvmlDeviceGetMigMode", || device.mig_mode())?;
    let enabled = mode.current == MIG_ENABLED;
    let mut info = MigInfo {
        enabled,
        pending: mode.pending == MIG_ENABLED,
        gpu_instances: Vec::new(),
    };
    if !enabled {
        return Some(info);
    }
    let slots = answers
        .get("nvmlDeviceGetMaxMigDeviceCount", || {
            device.mig_device_count()
        })
        .unwrap_or(0);
    for slot in 0..slots {
        let mig = match device.mig_device_by_index(slot) {
            Ok(mig) => mig,
            // An empty slot: fewer instances than the maximum exist.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) if is_absent(&e) => break,
            Err(e) => {
                answers.note("nvmlDeviceGetMigDeviceHandleByIndex", &e);
                if answers.lost {
                    break;
                }
                continue;
            }
        };
        if let Some(instance) = read_instance(nvml, &mig, answers) {
            info.gpu_instances.push(instance);
        }
    }
    info.gpu_instances
        .sort_by_key(|i| (i.gpu_instance_id, i.compute_instance_id));
    Some(info)
}

/// One MIG device; `None` when its instance ids cannot be read (without
/// them the slice cannot be addressed).
fn read_instance(nvml: &Nvml, mig: &Device<'_>, answers: &mut Answers) -> Option<MigGpuInstance> {
    let gpu_instance_id = answers.get("nvmlDeviceGetGpuInstanceId", || {
        ffi::gpu_instance_id(nvml, mig)
    })?;
    let compute_instance_id = answers.get("nvmlDeviceGetComputeInstanceId", || {
        ffi::compute_instance_id(nvml, mig)
    })?;
    let name = answers.get("nvmlDeviceGetName(MIG)", || mig.name());
    let profile = name.as_deref().and_then(profile_from_name);
    if profile.is_none() {
        answers.warnings.push(format!(
            "GPU {}: MIG device GI {gpu_instance_id} CI {compute_instance_id} has no profile in its name {:?}",
            answers.gpu,
            name.as_deref().unwrap_or("")
        ));
    }
    let memory = answers.get("nvmlDeviceGetMemoryInfo_v2(MIG)", || mig.memory_info());
    let attributes = answers.get("nvmlDeviceGetAttributes_v2(MIG)", || mig.attributes());
    Some(MigGpuInstance {
        gpu_instance_id,
        compute_instance_id,
        profile: profile.unwrap_or_default(),
        uuid: answers.get("nvmlDeviceGetUUID(MIG)", || mig.uuid()),
        memory_total_bytes: memory.as_ref().map(|m| m.total),
        memory_used_bytes: memory.as_ref().map(|m| m.used),
        multiprocessors: attributes.map(|a| a.multiprocessor_count),
    })
}

/// The profile in a MIG device's name: `NVIDIA A100-SXM4-40GB MIG 1g.5gb`
/// → `1g.5gb`, `... MIG 1c.3g.20gb` → `1c.3g.20gb`.
pub(crate) fn profile_from_name(name: &str) -> Option<String> {
    let (_, rest) = name.rsplit_once("MIG ")?;
    let profile = rest.split_whitespace().next()?;
    // `<slices>g.<size>gb`, optionally `<n>c.` before and `+me` / `-me`
    // (media extensions) after.
    let looks_right = profile.contains("g.")
        && profile.contains("gb")
        && profile
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'));
    looks_right.then(|| profile.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn profiles_parse() {
        for (name, want) in [
            ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", Some("1g.5gb")),
            ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", Some("3g.40gb")),
            ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", Some("1g.10gb+me")),
            ("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", Some("1c.3g.40gb")),
            ("NVIDIA A100-SXM4-40GB", None),
            ("MIG ", None),
            ("NVIDIA A100 MIG garbage", None),
            ("", None),
        ] {
            assert_eq!(profile_from_name(name).as_deref(), want, "{name}");
        }
    }

    proptest! {
        #[test]
        fn profile_parser_never_panics(name in ".*") {
            let _ = profile_from_name(&name);
        }
    }
}
