//! A job's sandbox settings ([`JobSandbox`]) and command, said as an OCI
//! bundle's input ([`BundleInput`]): the same user, tree, limits, device
//! rules and seccomp policy the native sandbox would apply. The host
//! facts a bundle needs are read here: the numbers of the device nodes the
//! job gets (a missing or non-device node fails the start), and the disk
//! under the job's work directory for an IO limit.

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
fn device_node(host: &Path, path: &Path) -> Result<DeviceNode, String> {
    use joblet_oci::cdi::{HostNodes, NodeKind as Host, NodeStat};
    let info = std::fs::canonicalize(host)
        .and_then(|real| HostNodes.stat(&real))
        .map_err(|e| format!("device node {}: {e}", host.display()))?;
    let kind = match info.kind {
        Host::Char => NodeKind::Char,
        Host::Block => NodeKind::Block,
        Host::Fifo | Host::NotADevice => {
            return Err(format!(
                "{} is not a device node; refusing to start the job without it",
                host.display()
            ))
        }
    };
    Ok(DeviceNode {
        path: path.to_path_buf(),
        kind,
        major: info.major,
        minor: info.minor,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cgroup::Limits;
    use crate::devices::DeviceRules;
    use crate::init::{Bind, InitConfig};

    fn job(net: NetMode) -> JobSandbox {
        JobSandbox {
            cgroup_base: "joblet".into(),
            cgroup_name: "j1".into(),
            limits: Limits {
                memory_mb: Some(64),
                cpuset: Some(vec![0, 1]),
                pids_max: 128,
                ..Limits::default()
            },
            devices: DeviceRules::minimal(),
            init: InitConfig {
                command: String::new(),
                args: Vec::new(),
                env: BTreeMap::new(),
                hostname: "job-j1".into(),
                uid: 65534,
                gid: 65534,
                allow_root: false,
                ro_mounts: vec!["/usr".into(), "/etc".into()],
                root: None,
                extra_devices: Vec::new(),
                work_dir: "/var/lib/joblet/jobs/j1/work".into(),
                work_size_mb: 0,
                tmp_size_mb: 64,
                net,
                seccomp: true,
                seccomp_allow: Vec::new(),
                binds: vec![
                    Bind {
                        source: "/var/lib/joblet/params".into(),
                        target: "/proc/driver/nvidia/params".into(),
                        writable: false,
                    },
                    Bind {
                        source: "/srv/vol".into(),
                        target: "/volumes/data".into(),
                        writable: true,
                    },
                ],
                masks: vec!["/proc/driver/nvidia".into()],
                device_binds: vec![Bind {
                    source: "/dev/null".into(),
                    target: "/dev/nvidia0".into(),
                    writable: false,
                }],
                dev_shm: None,
                warm: false,
                stdin: None,
            },
            oci: None,
        }
    }

    fn spec() -> ShimSpec {
        ShimSpec {
            job_id: "j1".into(),
            command: "python3".into(),
            args: vec!["train.py".into()],
            env: BTreeMap::from([("PATH".into(), "/usr/bin".into())]),
            cwd: "/work".into(),
            timeout_ms: None,
            stop_grace_ms: 1000,
            runner: None,
            fence: None,
            stdio: Default::default(),
        }
    }

    #[test]
    fn the_job_runs_under_joblets_init_with_its_own_nodes_and_binds() {
        let shim = Path::new("/usr/lib/joblet/joblet-shim");
        let i = bundle_input(
            &job(NetMode::None),
            &spec(),
            Path::new("/b/rootfs"),
            Path::new("/sys"),
            true,
            Some(shim),
        )
        .unwrap();
        assert_eq!(
            i.args,
            ["/run/joblet/init", "oci-init", "--", "python3", "train.py"]
        );
        // Binds into /proc are left to readonlyPaths; the init is bound in.
        let targets: Vec<_> = i.binds.iter().map(|b| b.target.clone()).collect();
        assert_eq!(
            targets,
            [
                PathBuf::from("/volumes/data"),
                PathBuf::from("/run/joblet/init")
            ]
        );
        assert!(i.binds[0].writable && !i.binds[1].writable);
        // A device bind becomes a node with the host node's numbers.
        assert_eq!(
            (
                i.devices[0].path.as_path(),
                i.devices[0].major,
                i.devices[0].minor
            ),
            (Path::new("/dev/nvidia0"), 1, 3)
        );
        assert_eq!(i.cgroups_path, PathBuf::from("/joblet/j1"));
        assert_eq!(i.limits.memory_bytes, Some(64 << 20));
        assert_eq!(i.limits.cpuset.as_deref(), Some("0,1"));
        assert!(i.limits.no_swap && i.seccomp.is_some());
        assert_eq!(i.create_runtime_hooks.len(), 1, "lo is brought up");
        assert!(!i.host_network);
    }

    #[test]
    fn runsc_and_the_host_network_get_no_hook_and_a_runtime_tree_its_paths() {
        let mut j = job(NetMode::Host);
        j.init.root = Some("/srv/runtimes/py".into());
        let i = bundle_input(
            &j,
            &spec(),
            Path::new("/b/rootfs"),
            Path::new("/sys"),
            false,
            None,
        )
        .unwrap();
        assert_eq!(i.args, ["python3", "train.py"], "no init under runsc");
        assert!(i.create_runtime_hooks.is_empty() && i.host_network);
        assert_eq!(i.ro_mounts[0].source, PathBuf::from("/srv/runtimes/py/usr"));
        assert_eq!(i.ro_mounts[0].target, PathBuf::from("/usr"));
        assert!(!i.limits.no_swap);
    }

    #[test]
    fn a_missing_or_non_device_node_fails_the_start() {
        let mut j = job(NetMode::None);
        j.init.device_binds[0].source = "/nonexistent/nvidia0".into();
        let e = bundle_input(
            &j,
            &spec(),
            Path::new("/b/rootfs"),
            Path::new("/sys"),
            true,
            None,
        )
        .unwrap_err();
        assert!(e.contains("/nonexistent/nvidia0"), "{e}");
        let file = tempfile::NamedTempFile::new().unwrap();
        j.init.device_binds[0].source = file.path().to_path_buf();
        let e = bundle_input(
            &j,
            &spec(),
            Path::new("/b/rootfs"),
            Path::new("/sys"),
            true,
            None,
        )
        .unwrap_err();
        assert!(e.contains("is not a device node"), "{e}");
    }
}
