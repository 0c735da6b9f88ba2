//! Whether a parsed spec may be used, by the CDI library's rules
//! (`pkg/cdi/spec.go`, `device.go`, `container-edits.go`), a little
//! stricter where a loose value could only fail later inside a runtime:
//! device node, container mount and hook paths must be absolute, and a
//! hook's timeout positive.
//!
//! A spec is valid when its `cdiVersion` is a released one that covers
//! the fields it uses ([`super::version`]), its kind and device names are
//! CDI names ([`super::name`]), device names are unique, every device has
//! edits, and every edit is well formed (environment `KEY=VALUE`, node
//! types `b`/`c`/`u`/`p`, permissions from `rwm` or `none`, known hook
//! names, non-empty paths, unique network devices).

use std::collections::BTreeSet;
use std::path::Path;

use super::name::{check_device_name, Kind};
use super::spec::{ContainerEdits, Spec, SpecError};
use super::version::{minimum_version, CdiVersion};

/// The OCI hook names a CDI hook may use.
pub const HOOK_NAMES: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// Checks `spec` (read from `path`, named in errors) and returns its kind.
pub fn validate(spec: &Spec, path: &Path) -> Result<Kind, SpecError> {
    let invalid = |field: &str, reason: String| SpecError::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        reason,
    };
    let declared = CdiVersion::parse(&spec.cdi_version).ok_or_else(|| {
        let known: Vec<&str> = CdiVersion::ALL.iter().map(|v| v.as_str()).collect();
        invalid(
            "cdiVersion",
            format!(
                "unknown version `{}` (known: {})",
                spec.cdi_version,
                known.join(", ")
            ),
        )
    })?;
    let required = minimum_version(spec);
    if required.version > declared {
        return Err(invalid(
            "cdiVersion",
            format!(
                "{declared} is too old for the fields used: {} needs at least {}",
                required.because.unwrap_or("the spec"),
                required.version
            ),
        ));
    }
    let kind: Kind = spec
        .kind
        .parse()
        .map_err(|e: super::name::NameError| invalid("kind", e.to_string()))?;
    if spec.devices.is_empty() {
        return Err(invalid("devices", "no devices".into()));
    }
    check_edits(&spec.container_edits)
        .map_err(|(field, reason)| invalid(&format!("containerEdits.{field}"), reason))?;
    let mut seen = BTreeSet::new();
    for (i, d) in spec.devices.iter().enumerate() {
        let at = |rest: &str| format!("devices[{i}]{rest}");
        check_device_name(&d.name).map_err(|why| invalid(&at(".name"), why))?;
        if !seen.insert(d.name.as_str()) {
            return Err(invalid(
                &at(".name"),
                format!("device `{}` is defined twice", d.name),
            ));
        }
        if d.container_edits.is_empty() {
            return Err(invalid(
                &at(".containerEdits"),
                format!("device `{}` has no edits", d.name),
            ));
        }
        check_edits(&d.container_edits)
            .map_err(|(field, reason)| invalid(&at(&format!(".containerEdits.{field}")), reason))?;
    }
    Ok(kind)
}

/// Checks one set of edits; on error, the field (relative to the edits)
/// and what is wrong with it.
pub(crate) fn check_edits(e: &ContainerEdits) -> Result<(), (String, String)> {
    for (i, v) in e.env.iter().enumerate() {
        check_env(v).map_err(|why| (format!("env[{i}]"), why))?;
    }
    for (i, n) in e.device_nodes.iter().enumerate() {
        let at = |f: &str| format!("deviceNodes[{i}].{f}");
        check_absolute(&n.path).map_err(|why| (at("path"), why))?;
        if let Some(host) = &n.host_path {
            check_absolute(host).map_err(|why| (at("hostPath"), why))?;
        }
        if let Some(t) = &n.node_type {
            if !matches!(t.as_str(), "b" | "c" | "u" | "p") {
                return Err((
                    at("type"),
                    format!("`{t}` is not a device type (b, c, u or p)"),
                ));
            }
        }
        for (f, v) in [("major", n.major), ("minor", n.minor)] {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Err((at(f), format!("{v} is negative")));
            }
        }
        if let Some(p) = &n.permissions {
            if p != "none" && !p.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
                return Err((
                    at("permissions"),
                    format!("`{p}` is not a subset of `rwm` nor `none`"),
                ));
            }
        }
    }
    let mut hosts = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, d) in e.net_devices.iter().enumerate() {
        let at = |f: &str| format!("netDevices[{i}].{f}");
        if d.host_interface_name.is_empty() {
            return Err((at("hostInterfaceName"), "empty".into()));
        }
        if d.name.is_empty() {
            return Err((at("name"), "empty".into()));
        }
        if !hosts.insert(&d.host_interface_name) {
            return Err((
                at("hostInterfaceName"),
                format!("`{}` is listed twice", d.host_interface_name),
            ));
        }
        if !names.insert(&d.name) {
            return Err((at("name"), format!("`{}` is listed twice", d.name)));
        }
    }
    for (i, h) in e.hooks.iter().enumerate() {
        let at = |f: &str| format!("hooks[{i}].{f}");
        if !HOOK_NAMES.contains(&h.hook_name.as_str()) {
            return Err((
                at("hookName"),
                format!(
                    "`{}` is not a hook name ({})",
                    h.hook_name,
                    HOOK_NAMES.join(", ")
                ),
            ));
        }
        check_absolute(&h.path).map_err(|why| (at("path"), why))?;
        for (j, v) in h.env.iter().enumerate() {
            check_env(v).map_err(|why| (at(&format!("env[{j}]")), why))?;
        }
        if let Some(t) = h.timeout.filter(|t| *t <= 0) {
            return Err((
                at("timeout"),
                format!("{t} is not a positive number of seconds"),
            ));
        }
    }
    for (i, m) in e.mounts.iter().enumerate() {
        let at = |f: &str| format!("mounts[{i}].{f}");
        if m.host_path.as_os_str().is_empty() {
            return Err((at("hostPath"), "empty".into()));
        }
        check_absolute(&m.container_path).map_err(|why| (at("containerPath"), why))?;
    }
    if let Some(rdt) = &e.intel_rdt {
        if let Some(c) = &rdt.clos_id {
            if c != "/" && (c.len() >= 4096 || c == "." || c == ".." || c.contains(['/', '\n'])) {
                return Err((
                    "intelRdt.closID".into(),
                    format!("`{c}` is not a file name"),
                ));
            }
        }
    }
    Ok(())
}

/// `KEY=VALUE` with a non-empty key.
fn check_env(v: &str) -> Result<(), String> {
    match v.find('=') {
        Some(i) if i > 0 => Ok(()),
        _ => Err(format!("`{v}` is not KEY=VALUE")),
    }
}

fn check_absolute(p: &Path) -> Result<(), String> {
    if p.as_os_str().is_empty() {
        Err("empty".into())
    } else if !p.is_absolute() {
        Err(format!("`{}` is not an absolute path", p.display()))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::{Device, DeviceNode, Format, Hook, Mount, NetDevice};

    fn good() -> Spec {
        Spec::parse(
            br#"
cdiVersion: 0.5.0
kind: example.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: /sim/dev/nvidia0
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  deviceNodes:
    - path: /dev/nvidiactl
  hooks:
    - hookName: createContainer
      path: /usr/bin/true
  mounts:
    - hostPath: /usr/lib/libcuda.so.1
      containerPath: /usr/lib/libcuda.so.1
"#,
            Format::Yaml,
            Path::new("g.yaml"),
        )
        .unwrap()
    }

    fn err(spec: &Spec) -> String {
        validate(spec, Path::new("/etc/cdi/bad.yaml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_good_spec_gives_its_kind() {
        let kind = validate(&good(), Path::new("g.yaml")).unwrap();
        assert_eq!(kind.to_string(), "example.com/gpu");
    }

    #[test]
    fn versions_must_be_known_and_new_enough() {
        let mut s = good();
        s.cdi_version = "0.9.0".into();
        let e = err(&s);
        assert!(
            e.contains("/etc/cdi/bad.yaml") && e.contains("`cdiVersion`"),
            "{e}"
        );
        assert!(
            e.contains("unknown version `0.9.0`") && e.contains("1.1.0"),
            "{e}"
        );
        s.cdi_version = "0.3.0".into();
        let e = err(&s);
        assert!(
            e.contains("0.3.0 is too old") && e.contains("needs at least 0.5.0"),
            "{e}"
        );
        s.cdi_version = "0.6.0".into();
        validate(&s, Path::new("x")).unwrap();
    }

    #[test]
    fn names_and_devices_are_checked() {
        let mut s = good();
        s.kind = "example.com".into();
        assert!(err(&s).contains("`kind`"), "{}", err(&s));
        let mut s = good();
        s.devices.clear();
        assert!(err(&s).contains("no devices"));
        let mut s = good();
        s.devices.push(s.devices[0].clone());
        let e = err(&s);
        assert!(
            e.contains("devices[1].name") && e.contains("defined twice"),
            "{e}"
        );
        let mut s = good();
        s.devices.push(Device {
            name: "1".into(),
            ..Device::default()
        });
        let e = err(&s);
        assert!(
            e.contains("devices[1].containerEdits") && e.contains("no edits"),
            "{e}"
        );
        let mut s = good();
        s.devices[0].name = "0:".into();
        assert!(err(&s).contains("devices[0].name"));
    }

    #[test]
    fn each_kind_of_edit_is_checked_and_named() {
        // Each case breaks one field of a good spec.
        type Break = fn(&mut Spec);
        let cases: Vec<(Break, &str)> = vec![
            (
                |s| s.container_edits.env.push("=x".into()),
                "containerEdits.env[1]",
            ),
            (
                |s| s.container_edits.device_nodes[0].node_type = Some("x".into()),
                "containerEdits.deviceNodes[0].type",
            ),
            (
                |s| s.container_edits.device_nodes[0].major = Some(-1),
                "containerEdits.deviceNodes[0].major",
            ),
            (
                |s| s.container_edits.device_nodes[0].permissions = Some("rx".into()),
                "containerEdits.deviceNodes[0].permissions",
            ),
            (
                |s| s.devices[0].container_edits.device_nodes[0].path = "dev/nvidia0".into(),
                "devices[0].containerEdits.deviceNodes[0].path",
            ),
            (
                |s| s.devices[0].container_edits.device_nodes[0].host_path = Some("".into()),
                "devices[0].containerEdits.deviceNodes[0].hostPath",
            ),
            (
                |s| s.container_edits.hooks[0].hook_name = "preStart".into(),
                "containerEdits.hooks[0].hookName",
            ),
            (
                |s| s.container_edits.hooks[0].env.push("NOVALUE".into()),
                "containerEdits.hooks[0].env[0]",
            ),
            (
                |s| s.container_edits.hooks[0].timeout = Some(0),
                "containerEdits.hooks[0].timeout",
            ),
            (
                |s| s.container_edits.mounts[0].host_path = "".into(),
                "containerEdits.mounts[0].hostPath",
            ),
            (
                |s| {
                    s.container_edits.mounts.push(Mount {
                        host_path: "/a".into(),
                        container_path: "a".into(),
                        ..Mount::default()
                    })
                },
                "containerEdits.mounts[1].containerPath",
            ),
            (
                |s| {
                    s.cdi_version = "1.1.0".into();
                    let d = NetDevice {
                        host_interface_name: "eth1".into(),
                        name: "n".into(),
                    };
                    s.container_edits.net_devices = vec![d.clone(), d];
                },
                "containerEdits.netDevices[1].hostInterfaceName",
            ),
        ];
        for (break_it, field) in cases {
            let mut s = good();
            break_it(&mut s);
            let e = err(&s);
            assert!(e.contains(&format!("`{field}`")), "{field}: {e}");
        }
        // A hook and a node that are fine on their own.
        let mut s = good();
        s.container_edits.hooks.push(Hook {
            hook_name: "poststop".into(),
            path: "/bin/x".into(),
            timeout: Some(3),
            ..Hook::default()
        });
        s.container_edits.device_nodes.push(DeviceNode {
            path: "/dev/x".into(),
            permissions: Some("none".into()),
            ..DeviceNode::default()
        });
        validate(&s, Path::new("x")).unwrap();
    }
}
