//! CDI spec versions and the lowest one a spec's fields need, by the CDI
//! library's rules (container-device-interface `specs-go/version.go`,
//! spec 1.1.0):
//!
//! | version | needed for |
//! |---|---|
//! | 0.3.0 | the earliest supported; the default |
//! | 0.4.0 | a mount's `type` |
//! | 0.5.0 | a device name starting with a digit; a device node's `hostPath` |
//! | 0.6.0 | spec or device `annotations`; a `.` in the kind's class |
//! | 0.7.0 | `intelRdt`; `additionalGids` |
//! | 0.8.0, 1.0.0 | nothing (library changes only) |
//! | 1.1.0 | `netDevices`; `intelRdt.schemata` / `enableMonitoring` |
//!
//! Writers should declare the lowest version that fits: readers skip
//! versions they do not know (Debian's podman 4.3.1 knows up to 0.5.0 and
//! silently ignores a 0.6.0 file).

use std::fmt;

use super::spec::{ContainerEdits, Spec};

/// A released CDI spec version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CdiVersion {
    V0_1_0,
    V0_2_0,
    V0_3_0,
    V0_4_0,
    V0_5_0,
    V0_6_0,
    V0_7_0,
    V0_8_0,
    V1_0_0,
    V1_1_0,
}

impl CdiVersion {
    /// Every released version, oldest first.
    pub const ALL: [CdiVersion; 10] = [
        CdiVersion::V0_1_0,
        CdiVersion::V0_2_0,
        CdiVersion::V0_3_0,
        CdiVersion::V0_4_0,
        CdiVersion::V0_5_0,
        CdiVersion::V0_6_0,
        CdiVersion::V0_7_0,
        CdiVersion::V0_8_0,
        CdiVersion::V1_0_0,
        CdiVersion::V1_1_0,
    ];
    /// What a spec that needs nothing newer declares.
    pub const EARLIEST: CdiVersion = CdiVersion::V0_3_0;

    pub fn as_str(self) -> &'static str {
        match self {
            CdiVersion::V0_1_0 => "0.1.0",
            CdiVersion::V0_2_0 => "0.2.0",
            CdiVersion::V0_3_0 => "0.3.0",
            CdiVersion::V0_4_0 => "0.4.0",
            CdiVersion::V0_5_0 => "0.5.0",
            CdiVersion::V0_6_0 => "0.6.0",
            CdiVersion::V0_7_0 => "0.7.0",
            CdiVersion::V0_8_0 => "0.8.0",
            CdiVersion::V1_0_0 => "1.0.0",
            CdiVersion::V1_1_0 => "1.1.0",
        }
    }

    /// A declared `cdiVersion` (`0.5.0`, or `v0.5.0` as the library also
    /// accepts); `None` for an unknown one.
    pub fn parse(s: &str) -> Option<CdiVersion> {
        let s = s.strip_prefix('v').unwrap_or(s);
        CdiVersion::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl fmt::Display for CdiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version's test: what in the spec needs it, if anything.
type Needs = fn(&Spec) -> Option<&'static str>;

/// The lowest version a spec needs, and the field that needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Required {
    pub version: CdiVersion,
    /// What needs it (`None` at [`CdiVersion::EARLIEST`]).
    pub because: Option<&'static str>,
}

/// The lowest version `spec`'s fields need (its declared `cdiVersion` is
/// not looked at).
pub fn minimum_version(spec: &Spec) -> Required {
    // Newest first: the first that applies is the answer.
    let rules: [(CdiVersion, Needs); 5] = [
        (CdiVersion::V1_1_0, needs_1_1_0),
        (CdiVersion::V0_7_0, needs_0_7_0),
        (CdiVersion::V0_6_0, needs_0_6_0),
        (CdiVersion::V0_5_0, needs_0_5_0),
        (CdiVersion::V0_4_0, needs_0_4_0),
    ];
    for (version, needs) in rules {
        if let Some(because) = needs(spec) {
            return Required {
                version,
                because: Some(because),
            };
        }
    }
    Required {
        version: CdiVersion::EARLIEST,
        because: None,
    }
}

/// The spec's shared edits, then each device's.
fn all_edits(spec: &Spec) -> impl Iterator<Item = &ContainerEdits> {
    std::iter::once(&spec.container_edits).chain(spec.devices.iter().map(|d| &d.container_edits))
}

fn needs_1_1_0(spec: &Spec) -> Option<&'static str> {
    for e in all_edits(spec) {
        if !e.net_devices.is_empty() {
            return Some("netDevices");
        }
        if let Some(rdt) = &e.intel_rdt {
            if !rdt.schemata.is_empty() || rdt.enable_monitoring {
                return Some("intelRdt.schemata or intelRdt.enableMonitoring");
            }
        }
    }
    None
}

fn needs_0_7_0(spec: &Spec) -> Option<&'static str> {
    for e in all_edits(spec) {
        if e.intel_rdt.is_some() {
            return Some("intelRdt");
        }
        if !e.additional_gids.is_empty() {
            return Some("additionalGids");
        }
    }
    None
}

fn needs_0_6_0(spec: &Spec) -> Option<&'static str> {
    if !spec.annotations.is_empty() {
        return Some("annotations");
    }
    if spec.devices.iter().any(|d| !d.annotations.is_empty()) {
        return Some("device annotations");
    }
    match spec.kind.split_once('/') {
        Some((_, class)) if class.contains('.') => Some("a '.' in the kind's class"),
        _ => None,
    }
}

fn needs_0_5_0(spec: &Spec) -> Option<&'static str> {
    if spec
        .devices
        .iter()
        .any(|d| d.name.as_bytes().first().is_some_and(u8::is_ascii_digit))
    {
        return Some("a device name starting with a digit");
    }
    if all_edits(spec).any(|e| e.device_nodes.iter().any(|n| n.host_path.is_some())) {
        return Some("hostPath on a device node");
    }
    None
}

fn needs_0_4_0(spec: &Spec) -> Option<&'static str> {
    all_edits(spec)
        .any(|e| e.mounts.iter().any(|m| m.mount_type.is_some()))
        .then_some("a mount's type")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::{Device, DeviceNode, IntelRdt, Mount, NetDevice};
    use std::path::PathBuf;

    fn base() -> Spec {
        Spec {
            cdi_version: String::new(),
            kind: "example.com/gpu".into(),
            devices: vec![Device {
                name: "gpu0".into(),
                container_edits: ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        path: PathBuf::from("/dev/nvidia0"),
                        ..DeviceNode::default()
                    }],
                    ..ContainerEdits::default()
                },
                ..Device::default()
            }],
            ..Spec::default()
        }
    }

    fn min(spec: &Spec) -> CdiVersion {
        minimum_version(spec).version
    }

    #[test]
    fn each_field_raises_the_version_to_where_it_was_added() {
        let plain = base();
        assert_eq!(minimum_version(&plain).version, CdiVersion::V0_3_0);
        assert_eq!(minimum_version(&plain).because, None);

        let mut s = base();
        s.container_edits.mounts.push(Mount {
            host_path: "/a".into(),
            container_path: "/a".into(),
            options: vec![],
            mount_type: Some("bind".into()),
        });
        assert_eq!(min(&s), CdiVersion::V0_4_0);

        let mut s = base();
        s.devices[0].name = "0".into();
        assert_eq!(min(&s), CdiVersion::V0_5_0);
        let mut s = base();
        s.devices[0].container_edits.device_nodes[0].host_path = Some("/host/dev/nvidia0".into());
        assert_eq!(min(&s), CdiVersion::V0_5_0);
        assert_eq!(
            minimum_version(&s).because,
            Some("hostPath on a device node")
        );

        let mut s = base();
        s.annotations.insert("a".into(), "b".into());
        assert_eq!(min(&s), CdiVersion::V0_6_0);
        let mut s = base();
        s.devices[0].annotations.insert("a".into(), "b".into());
        assert_eq!(min(&s), CdiVersion::V0_6_0);
        let mut s = base();
        s.kind = "example.com/gpu.mig".into();
        assert_eq!(min(&s), CdiVersion::V0_6_0);
        // A '.' in the vendor does not count.
        let mut s = base();
        s.kind = "sub.example.com/gpu".into();
        assert_eq!(min(&s), CdiVersion::V0_3_0);

        let mut s = base();
        s.devices[0].container_edits.additional_gids = vec![44];
        assert_eq!(min(&s), CdiVersion::V0_7_0);
        let mut s = base();
        s.container_edits.intel_rdt = Some(IntelRdt {
            clos_id: Some("c".into()),
            ..IntelRdt::default()
        });
        assert_eq!(min(&s), CdiVersion::V0_7_0);
        s.container_edits
            .intel_rdt
            .as_mut()
            .unwrap()
            .enable_monitoring = true;
        assert_eq!(min(&s), CdiVersion::V1_1_0);
        let mut s = base();
        s.devices[0].container_edits.net_devices = vec![NetDevice {
            host_interface_name: "eth1".into(),
            name: "net0".into(),
        }];
        assert_eq!(min(&s), CdiVersion::V1_1_0);
    }

    #[test]
    fn the_newest_need_wins() {
        let mut s = base();
        s.devices[0].name = "0".into();
        s.annotations.insert("a".into(), "b".into());
        s.container_edits.mounts.push(Mount {
            host_path: "/a".into(),
            container_path: "/a".into(),
            options: vec![],
            mount_type: Some("bind".into()),
        });
        assert_eq!(min(&s), CdiVersion::V0_6_0);
    }

    #[test]
    fn versions_parse_with_or_without_v_and_order() {
        assert_eq!(CdiVersion::parse("0.5.0"), Some(CdiVersion::V0_5_0));
        assert_eq!(CdiVersion::parse("v1.1.0"), Some(CdiVersion::V1_1_0));
        assert_eq!(CdiVersion::parse("0.9.0"), None);
        assert_eq!(CdiVersion::parse("1.2.0"), None);
        assert!(CdiVersion::V0_5_0 < CdiVersion::V0_6_0);
        assert!(CdiVersion::V0_8_0 < CdiVersion::V1_0_0);
        for v in CdiVersion::ALL {
            assert_eq!(CdiVersion::parse(&v.to_string()), Some(v));
        }
    }
}
