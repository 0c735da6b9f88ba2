//! A job's sandbox settings ([`JobSandbox`]) and command, said as an OCI
//! bundle's input ([`BundleInput`]): the same user, tree, limits, device
//! rules and seccomp policy the native sandbox would apply. The host
//! facts a bundle needs are read here: the numbers of the device nodes the
//! job gets (a missing or non-device node fails the start), and the disk
//! under the job's work directory for an IO limit.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use joblet_oci::bundle::{
    BindMount, BundleInput, BundleLimits, DeviceAllow, DeviceNode, IoLimit, NodeKind,
};
use joblet_shim::ShimSpec;

use crate::devices::DeviceType;
use crate::init::NetMode;
use crate::runner::JobSandbox;

/// Targets under `/proc` a runtime refuses to mount over (runc allows a
/// short list of its own); such binds are left out and the path is made
/// read-only instead (see `joblet_oci::bundle::READONLY_PATHS`).
fn under_proc(target: &Path) -> bool {
    target.starts_with("/proc")
}

/// The device node at `host` (following links), to appear at `path`.
pub fn device_node(host: &Path, path: &Path) -> Result<DeviceNode, String> {
    let meta =
        std::fs::metadata(host).map_err(|e| format!("device node {}: {e}", host.display()))?;
    let ft = meta.file_type();
    let kind = if ft.is_char_device() {
        NodeKind::Char
    } else if ft.is_block_device() {
        NodeKind::Block
    } else {
        return Err(format!(
            "{} is not a device node; refusing to start the job without it",
            host.display()
        ));
    };
    let rdev = meta.rdev();
    Ok(DeviceNode {
        path: path.to_path_buf(),
        kind,
        major: nix::sys::stat::major(rdev) as u32,
        minor: nix::sys::stat::minor(rdev) as u32,
        file_mode: 0o666,
    })
}

/// The bundle input of `job` running `spec`'s command, with its root at
/// `rootfs`. `sysfs`: where `/sys` is (for the IO limit's disk).
/// `swap_accounting`: the host limits memory plus swap, so the job gets
/// no swap beyond its memory limit.
///
/// `shim`: this binary, run by the runtime as the hook that brings the
/// job's loopback up (not under runsc, whose network stack is its own,
/// nor with the host's network), and as the job's pid 1 (`init_binary`).
pub fn bundle_input(
    job: &JobSandbox,
    spec: &ShimSpec,
    rootfs: &Path,
    sysfs: &Path,
    swap_accounting: bool,
    shim: Option<&Path>,
) -> Result<BundleInput, String> {
    let init_binary = shim;
    let init = &job.init;
    let ro_mounts = init
        .ro_mounts
        .iter()
        .map(|p| BindMount {
            source: match &init.root {
                Some(root) => root.join(p.strip_prefix("/").unwrap_or(p)),
                None => p.clone(),
            },
            target: p.clone(),
            writable: false,
        })
        .collect();
    let binds: Vec<BindMount> = init
        .binds
        .iter()
        .filter(|b| !under_proc(&b.target))
        .map(|b| BindMount {
            source: b.source.clone(),
            target: b.target.clone(),
            writable: b.writable,
        })
        .collect();
    let mut devices = Vec::new();
    for d in &init.extra_devices {
        devices.push(device_node(d, d)?);
    }
    for b in &init.device_binds {
        devices.push(device_node(&b.source, &b.target)?);
    }
    let device_allow = job
        .devices
        .rules()
        .iter()
        .map(|r| DeviceAllow {
            kind: match r.kind {
                DeviceType::Char => Some(NodeKind::Char),
                DeviceType::Block => Some(NodeKind::Block),
                DeviceType::All => None,
            },
            major: r.major,
            minor: r.minor,
            access: r.access.to_string(),
        })
        .collect();
    let l = &job.limits;
    let io = match (l.io_bps, &l.io_path) {
        (Some(bps), Some(path)) => {
            let disk = crate::cgroup::block_device_for(path, sysfs).map_err(|e| e.to_string())?;
            vec![IoLimit {
                major: disk.major,
                minor: disk.minor,
                bytes_per_second: bps,
            }]
        }
        _ => Vec::new(),
    };
    let limits = BundleLimits {
        memory_bytes: l.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024)),
        cpu_percent: l.cpu_percent,
        cpuset: l.cpuset.as_ref().map(|c| {
            c.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }),
        pids_max: (l.pids_max > 0).then_some(l.pids_max),
        io,
        no_swap: swap_accounting,
    };
    let seccomp = if init.seccomp {
        Some(
            joblet_oci::seccomp::profile(&crate::init::oci_rules(&init.seccomp_allow))
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    // Under runc and crun the job runs under joblet's own pid 1 (see
    // `super::init`), the shim's binary bound in read-only.
    let mut args = Vec::new();
    let mut binds = binds;
    if let Some(shim) = init_binary {
        binds.push(BindMount {
            source: shim.to_path_buf(),
            target: PathBuf::from(super::init::INIT_PATH),
            writable: false,
        });
        args.push(super::init::INIT_PATH.to_string());
        args.extend(super::init::INIT_ARGS.iter().map(|s| s.to_string()));
    }
    args.push(spec.command.clone());
    args.extend(spec.args.iter().cloned());
    Ok(BundleInput {
        args,
        env: spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        uid: init.uid,
        gid: init.gid,
        hostname: init.hostname.clone(),
        rootfs: rootfs.to_path_buf(),
        ro_mounts,
        work_dir: init.work_dir.clone(),
        tmp_size_mb: init.tmp_size_mb,
        dev_shm: init.dev_shm.clone(),
        binds,
        masks: init.masks.clone(),
        devices,
        device_allow,
        host_network: init.net == NetMode::Host,
        cgroups_path: PathBuf::from(format!("/{}/{}", job.cgroup_base, job.cgroup_name)),
        limits,
        seccomp,
        create_runtime_hooks: match shim {
            Some(shim) if init.net == NetMode::None => {
                let mut argv = vec!["joblet-shim".to_string()];
                argv.extend(super::hook::LOOPBACK_ARGS.iter().map(|s| s.to_string()));
                vec![(shim.to_path_buf(), argv)]
            }
            _ => Vec::new(),
        },
    })
}
