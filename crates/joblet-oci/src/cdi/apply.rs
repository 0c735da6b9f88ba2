//! Applies CDI edits to an OCI runtime spec (`config.json`), as the CDI
//! library's `ContainerEdits.Apply` does:
//!
//! - device nodes into `linux.devices` (replacing one at the same path),
//!   with type and numbers read from the host node (`hostPath`, else
//!   `path`) **at apply time**, and a matching allow rule in
//!   `linux.resources.devices` (access `rwm` unless `permissions` says
//!   otherwise; none for `none`). Unlike the library, the host node is
//!   always looked at: a missing node, something that is not a device
//!   node, or numbers that differ from what the spec states is an error,
//!   so a job never starts with a rule for a device that is not there
//!   (fail closed). A node's owner defaults to the process's user;
//! - mounts into `mounts` (replacing one at the same destination), then
//!   sorted by destination depth so parents come before children;
//! - environment into `process.env`, replacing a variable of the same
//!   name;
//! - hooks into `hooks.<hookName>`; network devices into
//!   `linux.netDevices`; Intel RDT into `linux.intelRdt`; extra groups
//!   into `process.user.additionalGids`.
//!
//! The host is read through [`NodeStat`] ([`HostNodes`] on a real host),
//! so all of it is tested against a fake.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Hook as OciHook, Hooks, Linux, LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType, LinuxIntelRdt,
    LinuxNetDevice, LinuxResources, Mount as OciMount, Spec as OciSpec,
};

use super::spec::{ContainerEdits, DeviceNode};
use super::validate::check_edits;

/// What a host path is, as far as device nodes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Char,
    Block,
    Fifo,
    /// A regular file, directory, symlink or socket.
    NotADevice,
}

/// A host node's type and numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo {
    pub kind: NodeKind,
    pub major: u32,
    pub minor: u32,
}

/// Reads host device nodes (a fake in tests).
pub trait NodeStat {
    /// `lstat` of `path`: a symlink is not followed (and is not a node).
    fn stat(&self, path: &Path) -> std::io::Result<NodeInfo>;
}

/// The real host.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostNodes;

impl NodeStat for HostNodes {
    fn stat(&self, path: &Path) -> std::io::Result<NodeInfo> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::symlink_metadata(path)?;
        let t = meta.file_type();
        let kind = if t.is_char_device() {
            NodeKind::Char
        } else if t.is_block_device() {
            NodeKind::Block
        } else if t.is_fifo() {
            NodeKind::Fifo
        } else {
            NodeKind::NotADevice
        };
        let rdev = meta.rdev();
        Ok(NodeInfo {
            kind,
            major: libc::major(rdev),
            minor: libc::minor(rdev),
        })
    }
}

/// Why edits could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("CDI edits: `{field}`: {reason}")]
    Invalid { field: String, reason: String },
    #[error("CDI device node {path}: cannot read its host node {host}: {source}; refusing to start without it")]
    HostNode {
        path: PathBuf,
        host: PathBuf,
        source: std::io::Error,
    },
    #[error("CDI device node {path}: its host node {host} is not a device node")]
    NotADevice { path: PathBuf, host: PathBuf },
    #[error("CDI device node {path}: the spec says {stated} but the host node {host} is {found}; refusing")]
    Mismatch {
        path: PathBuf,
        host: PathBuf,
        stated: String,
        found: String,
    },
    #[error("CDI edits set {what}, but the OCI spec has no process")]
    NoProcess { what: &'static str },
}

/// Applies `edits` to `spec`, reading host nodes through `nodes`. On
/// error `spec` may be partly edited: throw it away.
pub fn apply(
    edits: &ContainerEdits,
    spec: &mut OciSpec,
    nodes: &dyn NodeStat,
) -> Result<(), ApplyError> {
    check_edits(edits).map_err(|(field, reason)| ApplyError::Invalid { field, reason })?;
    if !edits.env.is_empty() {
        let process = spec.process_mut().as_mut().ok_or(ApplyError::NoProcess {
            what: "environment variables",
        })?;
        let env = process.env_mut().get_or_insert_with(Vec::new);
        for v in &edits.env {
            set_env(env, v);
        }
    }
    let owner = spec
        .process()
        .as_ref()
        .map(|p| (p.user().uid(), p.user().gid()));
    for node in &edits.device_nodes {
        let (device, rule) = oci_device(node, owner, nodes)?;
        let linux = spec.linux_mut().get_or_insert_with(Linux::default);
        let devices = linux.devices_mut().get_or_insert_with(Vec::new);
        devices.retain(|d| d.path() != device.path());
        devices.push(device);
        if let Some(rule) = rule {
            linux
                .resources_mut()
                .get_or_insert_with(LinuxResources::default)
                .devices_mut()
                .get_or_insert_with(Vec::new)
                .push(rule);
        }
    }
    if !edits.net_devices.is_empty() {
        let linux = spec.linux_mut().get_or_insert_with(Linux::default);
        let net = linux.net_devices_mut().get_or_insert_with(HashMap::new);
        for d in &edits.net_devices {
            let mut dev = LinuxNetDevice::default();
            dev.set_name(Some(d.name.clone()));
            net.insert(d.host_interface_name.clone(), dev);
        }
    }
    if !edits.mounts.is_empty() {
        let mounts = spec.mounts_mut().get_or_insert_with(Vec::new);
        for m in &edits.mounts {
            mounts.retain(|old| old.destination() != &m.container_path);
            let mut mount = OciMount::default();
            mount
                .set_destination(m.container_path.clone())
                .set_source(Some(m.host_path.clone()))
                .set_typ(m.mount_type.clone())
                .set_options((!m.options.is_empty()).then(|| m.options.clone()));
            mounts.push(mount);
        }
        mounts.sort_by_key(|m| depth(m.destination()));
    }
    for h in &edits.hooks {
        let mut hook = OciHook::default();
        hook.set_path(h.path.clone())
            .set_args((!h.args.is_empty()).then(|| h.args.clone()))
            .set_env((!h.env.is_empty()).then(|| h.env.clone()))
            .set_timeout(h.timeout);
        let hooks = spec.hooks_mut().get_or_insert_with(Hooks::default);
        let list = match h.hook_name.as_str() {
            // Deprecated in the runtime spec, still a CDI hook name.
            #[allow(deprecated)]
            "prestart" => hooks.prestart_mut(),
            "createRuntime" => hooks.create_runtime_mut(),
            "createContainer" => hooks.create_container_mut(),
            "startContainer" => hooks.start_container_mut(),
            "poststart" => hooks.poststart_mut(),
            "poststop" => hooks.poststop_mut(),
            other => {
                return Err(ApplyError::Invalid {
                    field: "hooks".into(),
                    reason: format!("unknown hook name `{other}`"),
                })
            }
        };
        list.get_or_insert_with(Vec::new).push(hook);
    }
    if let Some(rdt) = &edits.intel_rdt {
        let mut oci = LinuxIntelRdt::default();
        oci.set_clos_id(rdt.clos_id.clone())
            .set_l3_cache_schema(rdt.l3_cache_schema.clone())
            .set_mem_bw_schema(rdt.mem_bw_schema.clone())
            .set_schemata((!rdt.schemata.is_empty()).then(|| rdt.schemata.clone()))
            .set_enable_monitoring(rdt.enable_monitoring.then_some(true));
        spec.linux_mut()
            .get_or_insert_with(Linux::default)
            .set_intel_rdt(Some(oci));
    }
    let gids: Vec<u32> = edits
        .additional_gids
        .iter()
        .copied()
        .filter(|g| *g != 0)
        .collect();
    if !gids.is_empty() {
        let process = spec.process_mut().as_mut().ok_or(ApplyError::NoProcess {
            what: "additional groups",
        })?;
        let list = process
            .user_mut()
            .additional_gids_mut()
            .get_or_insert_with(Vec::new);
        for g in gids {
            if !list.contains(&g) {
                list.push(g);
            }
        }
    }
    Ok(())
}

/// `KEY=VALUE` into `env`, replacing `KEY=…`.
fn set_env(env: &mut Vec<String>, var: &str) {
    let key = var.split_once('=').map_or(var, |(k, _)| k);
    let prefix = format!("{key}=");
    match env.iter_mut().find(|e| e.starts_with(&prefix)) {
        Some(old) => *old = var.to_string(),
        None => env.push(var.to_string()),
    }
}

/// Path components of a mount destination (`/` is 0).
fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count()
}

/// The OCI device for `node` (read from its host node) and its allow rule
/// (`None` for `permissions: none` and FIFOs).
fn oci_device(
    node: &DeviceNode,
    owner: Option<(u32, u32)>,
    nodes: &dyn NodeStat,
) -> Result<(LinuxDevice, Option<LinuxDeviceCgroup>), ApplyError> {
    let host = node.host();
    let info = nodes.stat(host).map_err(|source| ApplyError::HostNode {
        path: node.path.clone(),
        host: host.to_path_buf(),
        source,
    })?;
    let found_type = match info.kind {
        NodeKind::Char => LinuxDeviceType::C,
        NodeKind::Block => LinuxDeviceType::B,
        NodeKind::Fifo => LinuxDeviceType::P,
        NodeKind::NotADevice => {
            return Err(ApplyError::NotADevice {
                path: node.path.clone(),
                host: host.to_path_buf(),
            })
        }
    };
    let mismatch = |stated: String, found: String| ApplyError::Mismatch {
        path: node.path.clone(),
        host: host.to_path_buf(),
        stated,
        found,
    };
    if let Some(t) = &node.node_type {
        // `u` is an unbuffered character device.
        let same = t == found_type.as_str() || (t == "u" && found_type == LinuxDeviceType::C);
        if !same {
            return Err(mismatch(
                format!("type {t}"),
                format!("type {}", found_type.as_str()),
            ));
        }
    }
    let (major, minor) = (i64::from(info.major), i64::from(info.minor));
    let stated_major = node.major.filter(|m| *m != 0);
    if let Some(m) = stated_major {
        let stated_minor = node.minor.unwrap_or(0);
        if (m, stated_minor) != (major, minor) {
            return Err(mismatch(
                format!("{m}:{stated_minor}"),
                format!("{major}:{minor}"),
            ));
        }
    }
    let typ = match node.node_type.as_deref() {
        Some("u") => LinuxDeviceType::U,
        _ => found_type,
    };
    let (uid, gid) = match owner {
        Some((uid, gid)) => (
            node.uid.or((uid > 0).then_some(uid)),
            node.gid.or((gid > 0).then_some(gid)),
        ),
        None => (node.uid, node.gid),
    };
    let mut device = LinuxDevice::default();
    device
        .set_path(node.path.clone())
        .set_typ(typ)
        .set_major(major)
        .set_minor(minor)
        .set_file_mode(node.file_mode)
        .set_uid(uid)
        .set_gid(gid);
    let access = match node.permissions.as_deref() {
        None | Some("") => Some("rwm".to_string()),
        Some("none") => None,
        Some(p) => Some(p.to_string()),
    };
    let rule = match (found_type, access) {
        (LinuxDeviceType::C | LinuxDeviceType::B, Some(access)) => {
            let mut rule = LinuxDeviceCgroup::default();
            // A cgroup rule knows `c` and `b`; `u` is a `c` device.
            rule.set_allow(true)
                .set_typ(Some(found_type))
                .set_major(Some(major))
                .set_minor(Some(minor))
                .set_access(Some(access));
            Some(rule)
        }
        _ => None,
    };
    Ok((device, rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::{Hook, Mount, NetDevice};
    use std::collections::BTreeMap;

    /// Host nodes by path.
    #[derive(Default)]
    struct FakeNodes(BTreeMap<PathBuf, NodeInfo>);

    impl FakeNodes {
        fn with(mut self, path: &str, kind: NodeKind, major: u32, minor: u32) -> Self {
            self.0
                .insert(PathBuf::from(path), NodeInfo { kind, major, minor });
            self
        }
    }

    impl NodeStat for FakeNodes {
        fn stat(&self, path: &Path) -> std::io::Result<NodeInfo> {
            self.0
                .get(path)
                .copied()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn host() -> FakeNodes {
        FakeNodes::default()
            .with("/sim/dev/nvidia0", NodeKind::Char, 195, 0)
            .with("/dev/nvidiactl", NodeKind::Char, 195, 255)
            .with("/dev/sda", NodeKind::Block, 8, 0)
            .with("/run/pipe", NodeKind::Fifo, 0, 0)
            .with("/etc/hosts", NodeKind::NotADevice, 0, 0)
    }

    fn node(path: &str, host: Option<&str>) -> DeviceNode {
        DeviceNode {
            path: path.into(),
            host_path: host.map(PathBuf::from),
            ..DeviceNode::default()
        }
    }

    fn rules(spec: &OciSpec) -> Vec<String> {
        spec.linux()
            .as_ref()
            .and_then(|l| l.resources().as_ref())
            .and_then(|r| r.devices().as_ref())
            .map(|d| d.iter().map(|r| r.to_string()).collect())
            .unwrap_or_default()
    }

    fn devices(spec: &OciSpec) -> Vec<(String, String, i64, i64)> {
        spec.linux()
            .as_ref()
            .and_then(|l| l.devices().as_ref())
            .map(|d| {
                d.iter()
                    .map(|d| {
                        (
                            d.path().display().to_string(),
                            d.typ().as_str().to_string(),
                            d.major(),
                            d.minor(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn device_nodes_come_from_the_host_node_with_an_allow_rule() {
        let mut spec = OciSpec::default();
        let before = rules(&spec).len();
        let edits = ContainerEdits {
            device_nodes: vec![
                node("/dev/nvidia0", Some("/sim/dev/nvidia0")),
                node("/dev/nvidiactl", None),
                DeviceNode {
                    permissions: Some("r".into()),
                    ..node("/dev/disk", Some("/dev/sda"))
                },
                DeviceNode {
                    permissions: Some("none".into()),
                    ..node("/dev/quiet", Some("/dev/nvidiactl"))
                },
                node("/dev/pipe", Some("/run/pipe")),
            ],
            ..ContainerEdits::default()
        };
        apply(&edits, &mut spec, &host()).unwrap();
        assert_eq!(
            devices(&spec),
            [
                ("/dev/nvidia0".to_string(), "c".to_string(), 195, 0),
                ("/dev/nvidiactl".to_string(), "c".to_string(), 195, 255),
                ("/dev/disk".to_string(), "b".to_string(), 8, 0),
                ("/dev/quiet".to_string(), "c".to_string(), 195, 255),
                ("/dev/pipe".to_string(), "p".to_string(), 0, 0),
            ]
        );
        let r = rules(&spec);
        assert_eq!(r[before..], ["c 195:0 rwm", "c 195:255 rwm", "b 8:0 r"]);
        // Applying again replaces the nodes, it does not repeat them.
        apply(&edits, &mut spec, &host()).unwrap();
        assert_eq!(devices(&spec).len(), 5);
    }

    #[test]
    fn missing_or_wrong_host_nodes_fail_closed() {
        let cases = [
            (
                node("/dev/nvidia1", Some("/sim/dev/nvidia1")),
                "cannot read its host node /sim/dev/nvidia1",
            ),
            (
                node("/dev/hosts", Some("/etc/hosts")),
                "/etc/hosts is not a device node",
            ),
            (
                DeviceNode {
                    node_type: Some("b".into()),
                    ..node("/dev/nvidia0", Some("/sim/dev/nvidia0"))
                },
                "says type b but the host node /sim/dev/nvidia0 is type c",
            ),
            (
                DeviceNode {
                    major: Some(195),
                    minor: Some(1),
                    ..node("/dev/nvidia0", Some("/sim/dev/nvidia0"))
                },
                "says 195:1 but the host node /sim/dev/nvidia0 is 195:0",
            ),
            (node("dev/x", None), "`deviceNodes[0].path`"),
        ];
        for (n, want) in cases {
            let mut spec = OciSpec::default();
            let edits = ContainerEdits {
                device_nodes: vec![n],
                ..ContainerEdits::default()
            };
            let e = apply(&edits, &mut spec, &host()).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        // Stated numbers and `u` that match are fine.
        let mut spec = OciSpec::default();
        let edits = ContainerEdits {
            device_nodes: vec![DeviceNode {
                node_type: Some("u".into()),
                major: Some(195),
                minor: Some(0),
                ..node("/dev/nvidia0", Some("/sim/dev/nvidia0"))
            }],
            ..ContainerEdits::default()
        };
        apply(&edits, &mut spec, &host()).unwrap();
        assert_eq!(devices(&spec)[0].1, "u");
        assert_eq!(rules(&spec).last().unwrap(), "c 195:0 rwm");
    }

    #[test]
    fn nodes_belong_to_the_process_user_unless_the_spec_says() {
        let mut spec = OciSpec::default();
        let p = spec.process_mut().as_mut().unwrap();
        p.user_mut().set_uid(1000).set_gid(1001);
        let edits = ContainerEdits {
            device_nodes: vec![
                node("/dev/nvidiactl", None),
                DeviceNode {
                    uid: Some(0),
                    gid: Some(44),
                    ..node("/dev/nvidia0", Some("/sim/dev/nvidia0"))
                },
            ],
            ..ContainerEdits::default()
        };
        apply(&edits, &mut spec, &host()).unwrap();
        let devs = spec.linux().as_ref().unwrap().devices().as_ref().unwrap();
        assert_eq!((devs[0].uid(), devs[0].gid()), (Some(1000), Some(1001)));
        assert_eq!((devs[1].uid(), devs[1].gid()), (Some(0), Some(44)));
    }

    #[test]
    fn env_replaces_by_name_and_mounts_replace_by_destination_sorted_by_depth() {
        let mut spec = OciSpec::default();
        let p = spec.process_mut().as_mut().unwrap();
        p.set_env(Some(vec!["PATH=/bin".into(), "A=old".into()]));
        let mut old = OciMount::default();
        old.set_destination("/usr/lib/libcuda.so.1".into());
        spec.mounts_mut().as_mut().unwrap().push(old);
        let edits = ContainerEdits {
            env: vec!["A=new".into(), "B=x=y".into()],
            mounts: vec![
                Mount {
                    host_path: "/host/libcuda.so.550".into(),
                    container_path: "/usr/lib/libcuda.so.1".into(),
                    options: vec!["ro".into(), "rbind".into()],
                    mount_type: None,
                },
                Mount {
                    host_path: "/host/bin".into(),
                    container_path: "/opt".into(),
                    options: vec![],
                    mount_type: Some("bind".into()),
                },
            ],
            ..ContainerEdits::default()
        };
        apply(&edits, &mut spec, &host()).unwrap();
        let env = spec.process().as_ref().unwrap().env().clone().unwrap();
        assert_eq!(env, ["PATH=/bin", "A=new", "B=x=y"]);
        let mounts = spec.mounts().as_ref().unwrap();
        let ours: Vec<&OciMount> = mounts
            .iter()
            .filter(|m| m.destination() == Path::new("/usr/lib/libcuda.so.1"))
            .collect();
        assert_eq!(ours.len(), 1);
        assert_eq!(
            ours[0].source().as_deref(),
            Some(Path::new("/host/libcuda.so.550"))
        );
        assert_eq!(
            ours[0].options().as_deref(),
            Some(&["ro".to_string(), "rbind".to_string()][..])
        );
        let depths: Vec<usize> = mounts.iter().map(|m| depth(m.destination())).collect();
        assert!(depths.windows(2).all(|w| w[0] <= w[1]), "{depths:?}");
        let opt = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/opt"))
            .unwrap();
        assert_eq!(opt.typ().as_deref(), Some("bind"));
        assert_eq!(opt.options(), &None);
    }

    #[test]
    fn hooks_net_devices_rdt_and_groups_land_where_oci_wants_them() {
        let mut spec = OciSpec::default();
        let edits = ContainerEdits {
            hooks: vec![
                Hook {
                    hook_name: "createContainer".into(),
                    path: "/usr/bin/hook".into(),
                    args: vec!["hook".into(), "x".into()],
                    env: vec!["DEBUG=1".into()],
                    timeout: Some(5),
                },
                Hook {
                    hook_name: "poststop".into(),
                    path: "/usr/bin/cleanup".into(),
                    ..Hook::default()
                },
                Hook {
                    hook_name: "prestart".into(),
                    path: "/usr/bin/old".into(),
                    ..Hook::default()
                },
            ],
            net_devices: vec![NetDevice {
                host_interface_name: "eth1".into(),
                name: "net0".into(),
            }],
            intel_rdt: Some(crate::cdi::spec::IntelRdt {
                clos_id: Some("gold".into()),
                ..Default::default()
            }),
            additional_gids: vec![0, 44, 44],
            ..ContainerEdits::default()
        };
        apply(&edits, &mut spec, &host()).unwrap();
        let hooks = spec.hooks().as_ref().unwrap();
        let cc = hooks.create_container().as_ref().unwrap();
        assert_eq!(cc[0].path(), Path::new("/usr/bin/hook"));
        assert_eq!(cc[0].args().as_ref().unwrap(), &["hook", "x"]);
        assert_eq!(cc[0].env().as_ref().unwrap(), &["DEBUG=1"]);
        assert_eq!(cc[0].timeout(), Some(5));
        assert_eq!(hooks.poststop().as_ref().unwrap().len(), 1);
        #[allow(deprecated)]
        let pre = hooks.prestart().as_ref().unwrap();
        assert_eq!(pre[0].path(), Path::new("/usr/bin/old"));
        let linux = spec.linux().as_ref().unwrap();
        let net = linux.net_devices().as_ref().unwrap();
        assert_eq!(net["eth1"].name().as_deref(), Some("net0"));
        assert_eq!(
            linux.intel_rdt().as_ref().unwrap().clos_id().as_deref(),
            Some("gold")
        );
        let gids = spec.process().as_ref().unwrap().user().additional_gids();
        assert_eq!(gids.as_deref(), Some(&[44][..]));
    }

    #[test]
    fn env_without_a_process_is_an_error() {
        let mut spec = OciSpec::default();
        spec.set_process(None);
        let edits = ContainerEdits {
            env: vec!["A=1".into()],
            ..ContainerEdits::default()
        };
        let e = apply(&edits, &mut spec, &host()).unwrap_err().to_string();
        assert!(e.contains("no process"), "{e}");
    }

    #[test]
    fn the_real_host_reads_dev_null() {
        let info = HostNodes.stat(Path::new("/dev/null")).unwrap();
        assert_eq!(
            info,
            NodeInfo {
                kind: NodeKind::Char,
                major: 1,
                minor: 3
            }
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            HostNodes.stat(dir.path()).unwrap().kind,
            NodeKind::NotADevice
        );
        assert!(HostNodes.stat(&dir.path().join("none")).is_err());
    }
}
