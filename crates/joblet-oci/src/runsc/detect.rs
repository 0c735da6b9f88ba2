//! Whether an OCI spec asks for NVIDIA GPUs: [`detect_gpu`].

use oci_spec::runtime::{LinuxDeviceType, Spec};

/// The character-device major of NVIDIA's GPU and control nodes (`/dev/nvidia0`, `/dev/nvidiactl`).
pub const NVIDIA_MAJOR: i64 = 195;
/// Annotation keys with this prefix carry CDI device requests (`cdi.k8s.io/<name>`).
pub const CDI_ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// True when the spec lists an NVIDIA device node in `linux.devices` (a path
/// under `/dev/nvidia`, or a character device with major 195) or carries a
/// CDI annotation (`cdi.k8s.io/…`), which names devices a CDI spec will add.
pub fn detect_gpu(spec: &Spec) -> bool {
    let device_node = spec
        .linux()
        .as_ref()
        .and_then(|linux| linux.devices().as_ref())
        .is_some_and(|devices| {
            devices.iter().any(|d| {
                d.path()
                    .to_str()
                    .is_some_and(|p| p.starts_with("/dev/nvidia"))
                    || (matches!(d.typ(), LinuxDeviceType::C | LinuxDeviceType::U)
                        && d.major() == NVIDIA_MAJOR)
            })
        });
    let cdi = spec
        .annotations()
        .as_ref()
        .is_some_and(|a| a.keys().any(|k| k.starts_with(CDI_ANNOTATION_PREFIX)));
    device_node || cdi
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use oci_spec::runtime::{LinuxBuilder, LinuxDevice, LinuxDeviceBuilder, SpecBuilder};

    use super::*;

    fn device(path: &str, typ: LinuxDeviceType, major: i64) -> LinuxDevice {
        LinuxDeviceBuilder::default()
            .path(path)
            .typ(typ)
            .major(major)
            .minor(0)
            .build()
            .unwrap()
    }

    fn spec_with(devices: Vec<LinuxDevice>, annotations: &[(&str, &str)]) -> Spec {
        let linux = LinuxBuilder::default().devices(devices).build().unwrap();
        let annotations: HashMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SpecBuilder::default()
            .linux(linux)
            .annotations(annotations)
            .build()
            .unwrap()
    }

    #[test]
    fn default_spec_has_no_gpu() {
        assert!(!detect_gpu(&Spec::default()));
        assert!(!detect_gpu(&spec_with(
            vec![device("/dev/fuse", LinuxDeviceType::C, 10)],
            &[("a", "b")]
        )));
    }

    #[test]
    fn nvidia_device_paths_count() {
        for path in [
            "/dev/nvidia0",
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-caps/nvidia-cap1",
        ] {
            assert!(
                detect_gpu(&spec_with(vec![device(path, LinuxDeviceType::C, 511)], &[])),
                "{path}"
            );
        }
    }

    #[test]
    fn character_major_195_counts_under_any_name() {
        assert!(detect_gpu(&spec_with(
            vec![device("/dev/gpu0", LinuxDeviceType::C, 195)],
            &[]
        )));
        assert!(detect_gpu(&spec_with(
            vec![device("/dev/gpu0", LinuxDeviceType::U, 195)],
            &[]
        )));
        assert!(!detect_gpu(&spec_with(
            vec![device("/dev/blk", LinuxDeviceType::B, 195)],
            &[]
        )));
    }

    #[test]
    fn cdi_annotations_count() {
        let spec = spec_with(vec![], &[("cdi.k8s.io/joblet", "nvidia.com/gpu=0")]);
        assert!(detect_gpu(&spec));
        assert!(!detect_gpu(&spec_with(
            vec![],
            &[("cdi.k8s.io", "x"), ("io.cdi.k8s.io/x", "y")]
        )));
    }
}
