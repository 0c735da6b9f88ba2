//! A CDI spec for a node's GPUs, from a plain description of them
//! ([`GpuNode`]), in the shape `nvidia-ctk cdi generate` writes:
//!
//! - a device per GPU by index (`"0"`, `"1"`, …) and by UUID
//!   (`"GPU-…"`), each with the GPU's `/dev/nvidiaN`;
//! - a device per MIG slice by `"<gpu index>:<slice index>"` and by its
//!   `MIG-…` UUID, with its parent's node and the slice's GPU-instance and
//!   compute-instance access capabilities
//!   (`/dev/nvidia-caps/nvidia-cap<m>`);
//! - `"all"`: every node of every device above;
//! - shared edits: the control nodes (`nvidiactl`, `nvidia-uvm`,
//!   `nvidia-uvm-tools`, `nvidia-modeset`, those present), the driver's
//!   libraries and binaries as read-only bind mounts (options
//!   `ro, nosuid, nodev, rbind, rprivate`, as nvidia-ctk writes them), and
//!   `NVIDIA_VISIBLE_DEVICES=void`, so that an NVIDIA runtime hook also
//!   installed leaves the container alone.
//!
//! Every device node carries its `hostPath`, so simulated GPUs (nodes
//! made with `mknod` in a directory of their own) work like real ones.
//!
//! Differences from nvidia-ctk, on purpose: **no hooks**. nvidia-ctk adds
//! `createContainer` hooks running `nvidia-cdi-hook` (create-symlinks,
//! update-ldcache, enable-cuda-compat, disable-device-node-modification,
//! chmod of `/dev/nvidia-caps`), which is not installed with Joblet; and
//! with no hook there is no `NVIDIA_CTK_LIBCUDA_DIR` either. Instead, each
//! library is mounted under the names the loader looks for (its SONAME,
//! and `libcuda.so` / `libnvidia-ml.so`) in the directory the host's
//! loader cache has it in, which is what the symlink and ldcache hooks
//! achieve. The `cdiVersion` is the lowest the fields need
//! ([`super::version`]), 0.5.0 for this shape, which Debian's podman 4.3.1
//! still reads (it skips 0.6.0 files), so nothing here needs annotations.

use std::path::PathBuf;

use super::name::Kind;
use super::spec::{ContainerEdits, Device, DeviceNode, Mount, Spec};
use super::version::minimum_version;

/// Mount options of a driver file, as nvidia-ctk writes them.
pub const FILE_MOUNT_OPTIONS: [&str; 5] = ["ro", "nosuid", "nodev", "rbind", "rprivate"];

/// What the spec is generated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNode {
    /// The spec's kind (`nvidia.com/gpu`).
    pub kind: Kind,
    /// The GPUs, in index order.
    pub gpus: Vec<Gpu>,
    /// Control nodes every device needs (`nvidiactl`, `nvidia-uvm`, …).
    pub control_nodes: Vec<Node>,
    /// Driver libraries and binaries, bound read-only.
    pub files: Vec<FileMount>,
    /// More `KEY=VALUE` for the shared edits (after
    /// `NVIDIA_VISIBLE_DEVICES=void`).
    pub env: Vec<String>,
}

/// A device node: where the container sees it and which host node it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    /// In the container, e.g. `/dev/nvidia0`.
    pub path: PathBuf,
    /// On the host, e.g. `/dev/nvidia0`, or a simulation's
    /// `/tmp/sim/dev/nvidia0`.
    pub host_path: PathBuf,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its NVML index: the device name `"<index>"`.
    pub index: u32,
    /// `GPU-…`: the device name by UUID.
    pub uuid: String,
    /// Its `/dev/nvidia<minor>`.
    pub node: Node,
    /// Its MIG slices (empty without MIG).
    pub mig: Vec<MigSlice>,
}

/// One MIG slice (a GPU instance with a compute instance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigSlice {
    /// Its index among its GPU's slices: the device name
    /// `"<gpu index>:<index>"`.
    pub index: u32,
    /// `MIG-…`, when known: the device name by UUID.
    pub uuid: Option<String>,
    /// Its GPU-instance and compute-instance access capability nodes.
    pub caps: Vec<Node>,
}

/// A file bound into the container read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMount {
    pub host_path: PathBuf,
    pub container_path: PathBuf,
}

fn device_node(n: &Node) -> DeviceNode {
    DeviceNode {
        path: n.path.clone(),
        host_path: Some(n.host_path.clone()),
        ..DeviceNode::default()
    }
}

fn device(name: String, nodes: &[&Node]) -> Device {
    Device {
        name,
        container_edits: ContainerEdits {
            device_nodes: nodes.iter().map(|n| device_node(n)).collect(),
            ..ContainerEdits::default()
        },
        ..Device::default()
    }
}

/// The spec for `node`, with the lowest `cdiVersion` its fields need.
pub fn generate(node: &GpuNode) -> Spec {
    fn add_to_all<'a>(nodes: &[&'a Node], all: &mut Vec<&'a Node>) {
        for n in nodes {
            if !all.iter().any(|seen| seen.path == n.path) {
                all.push(n);
            }
        }
    }
    let mut devices = Vec::new();
    let mut all: Vec<&Node> = Vec::new();
    for g in &node.gpus {
        let nodes = [&g.node];
        devices.push(device(g.index.to_string(), &nodes));
        devices.push(device(g.uuid.clone(), &nodes));
        add_to_all(&nodes, &mut all);
    }
    for g in &node.gpus {
        for m in &g.mig {
            let mut nodes = vec![&g.node];
            nodes.extend(&m.caps);
            devices.push(device(format!("{}:{}", g.index, m.index), &nodes));
            if let Some(uuid) = &m.uuid {
                devices.push(device(uuid.clone(), &nodes));
            }
            add_to_all(&nodes, &mut all);
        }
    }
    if !all.is_empty() {
        devices.push(device("all".into(), &all));
    }
    let mut env = vec!["NVIDIA_VISIBLE_DEVICES=void".to_string()];
    env.extend(node.env.iter().cloned());
    let mut spec = Spec {
        cdi_version: String::new(),
        kind: node.kind.to_string(),
        devices,
        container_edits: ContainerEdits {
            env,
            device_nodes: node.control_nodes.iter().map(device_node).collect(),
            mounts: node
                .files
                .iter()
                .map(|f| Mount {
                    host_path: f.host_path.clone(),
                    container_path: f.container_path.clone(),
                    options: FILE_MOUNT_OPTIONS.iter().map(|o| o.to_string()).collect(),
                    mount_type: None,
                })
                .collect(),
            ..ContainerEdits::default()
        },
        ..Spec::default()
    };
    spec.cdi_version = minimum_version(&spec).version.to_string();
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::validate::validate;
    use std::path::Path;

    fn node(name: &str, dev: &str) -> Node {
        Node {
            path: Path::new("/dev").join(name),
            host_path: Path::new(dev).join(name),
        }
    }

    fn two_gpus() -> GpuNode {
        GpuNode {
            kind: "nvidia.com/gpu".parse().unwrap(),
            gpus: (0..2)
                .map(|i| Gpu {
                    index: i,
                    uuid: format!("GPU-{i}"),
                    // Index and minor differ: the node follows the minor.
                    node: node(&format!("nvidia{}", 1 - i), "/sim/dev"),
                    mig: Vec::new(),
                })
                .collect(),
            control_nodes: vec![
                node("nvidiactl", "/sim/dev"),
                node("nvidia-uvm", "/sim/dev"),
            ],
            files: vec![FileMount {
                host_path: "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15".into(),
                container_path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into(),
            }],
            env: vec!["JOBLET_GPU_SIMULATED=1".into()],
        }
    }

    fn names(spec: &Spec) -> Vec<&str> {
        spec.devices.iter().map(|d| d.name.as_str()).collect()
    }

    fn paths(d: &Device) -> Vec<(String, String)> {
        d.container_edits
            .device_nodes
            .iter()
            .map(|n| (n.path.display().to_string(), n.host().display().to_string()))
            .collect()
    }

    #[test]
    fn gpus_by_index_and_uuid_then_all() {
        let spec = generate(&two_gpus());
        assert_eq!(names(&spec), ["0", "GPU-0", "1", "GPU-1", "all"]);
        assert_eq!(
            paths(&spec.devices[0]),
            [("/dev/nvidia1".to_string(), "/sim/dev/nvidia1".to_string())]
        );
        assert_eq!(paths(&spec.devices[1]), paths(&spec.devices[0]));
        assert_eq!(
            paths(&spec.devices[4]),
            [
                ("/dev/nvidia1".to_string(), "/sim/dev/nvidia1".to_string()),
                ("/dev/nvidia0".to_string(), "/sim/dev/nvidia0".to_string()),
            ]
        );
        let common = &spec.container_edits;
        assert_eq!(
            common.env,
            ["NVIDIA_VISIBLE_DEVICES=void", "JOBLET_GPU_SIMULATED=1"]
        );
        assert_eq!(common.device_nodes.len(), 2);
        assert!(common.hooks.is_empty());
        assert_eq!(
            common.mounts[0].options,
            ["ro", "nosuid", "nodev", "rbind", "rprivate"]
        );
        assert_eq!(common.mounts[0].mount_type, None);
        // hostPath and names starting with digits: 0.5.0, nothing newer.
        assert_eq!(spec.cdi_version, "0.5.0");
        assert!(spec.annotations.is_empty());
        validate(&spec, Path::new("generated")).unwrap();
    }

    #[test]
    fn mig_slices_get_their_parent_and_their_caps() {
        let mut n = two_gpus();
        n.gpus[1].mig = vec![
            MigSlice {
                index: 0,
                uuid: Some("MIG-a".into()),
                caps: vec![
                    node("nvidia-caps/nvidia-cap12", "/dev"),
                    node("nvidia-caps/nvidia-cap13", "/dev"),
                ],
            },
            MigSlice {
                index: 1,
                uuid: None,
                caps: vec![
                    node("nvidia-caps/nvidia-cap21", "/dev"),
                    node("nvidia-caps/nvidia-cap22", "/dev"),
                ],
            },
        ];
        let spec = generate(&n);
        assert_eq!(
            names(&spec),
            ["0", "GPU-0", "1", "GPU-1", "1:0", "MIG-a", "1:1", "all"]
        );
        let slice = &spec.devices[4];
        assert_eq!(
            paths(slice),
            [
                ("/dev/nvidia0".to_string(), "/sim/dev/nvidia0".to_string()),
                (
                    "/dev/nvidia-caps/nvidia-cap12".to_string(),
                    "/dev/nvidia-caps/nvidia-cap12".to_string()
                ),
                (
                    "/dev/nvidia-caps/nvidia-cap13".to_string(),
                    "/dev/nvidia-caps/nvidia-cap13".to_string()
                ),
            ]
        );
        assert_eq!(spec.devices[5].container_edits, slice.container_edits);
        // "all": each node once (the parent is shared).
        let all = paths(spec.devices.last().unwrap());
        assert_eq!(all.len(), 2 + 4, "{all:?}");
        validate(&spec, Path::new("generated")).unwrap();
    }

    #[test]
    fn no_gpus_no_all_device() {
        let mut n = two_gpus();
        n.gpus.clear();
        let spec = generate(&n);
        assert!(spec.devices.is_empty());
        // (Such a spec is not valid: the caller refuses to write it.)
        assert!(validate(&spec, Path::new("x")).is_err());
    }
}
