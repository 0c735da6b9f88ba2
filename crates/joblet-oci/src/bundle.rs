//! The `config.json` of a job's OCI bundle, built from [`BundleInput`]:
//! the same isolation the native sandbox gives, said in the runtime spec's
//! terms. The job runs as its unprivileged user with no capabilities and
//! `noNewPrivileges`, under the project's seccomp policy
//! ([`crate::seccomp`]), in new pid, ipc, uts, mount, cgroup and (unless it
//! asked for the host's) network namespaces, on a read-only root that holds
//! only the read-only mounts it is given (the host's allowed paths, or a
//! runtime's tree), with `/work` its working directory, `/tmp` and
//! `/dev/shm` small tmpfs, no `/sys`, the usual masked and read-only
//! `/proc` paths, its limits in its own cgroup under joblet's base, and a
//! device cgroup that denies everything but the minimal character devices
//! and exactly the job's own nodes.
//!
//! Pure: every fact about the host (device numbers, paths) is an input.

use std::path::PathBuf;

use oci_spec::runtime::{
    Capabilities, LinuxBlockIoBuilder, LinuxBuilder, LinuxCpuBuilder, LinuxDevice,
    LinuxDeviceBuilder, LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType,
    LinuxMemoryBuilder, LinuxNamespaceBuilder, LinuxNamespaceType, LinuxPidsBuilder,
    LinuxResourcesBuilder, LinuxSeccomp, LinuxThrottleDeviceBuilder, Mount, MountBuilder,
    ProcessBuilder, RootBuilder, Spec, SpecBuilder, UserBuilder,
};

/// Paths of `/proc` hidden from the job (runc's and Docker's defaults).
pub const MASKED_PATHS: [&str; 9] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
];

/// Paths of `/proc` the job may read but not write. The NVIDIA driver's
/// `params` is among them: a job must never make the driver create
/// device nodes.
pub const READONLY_PATHS: [&str; 7] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/driver/nvidia/params",
    "/proc/driver/nvidia/capabilities",
];

/// One host path bound into the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// Absolute path on the host.
    pub source: PathBuf,
    /// Absolute path in the job.
    pub target: PathBuf,
    pub writable: bool,
}

/// One device node the job gets, with its numbers read on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Char,
    Block,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Where it appears in the job (under `/dev`).
    pub path: PathBuf,
    pub kind: NodeKind,
    pub major: u32,
    pub minor: u32,
    pub file_mode: u32,
}

/// One device cgroup rule that allows access (everything else is denied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAllow {
    /// `Some(kind)`, or `None` for both.
    pub kind: Option<NodeKind>,
    /// `None`: any.
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// `r`, `w` and `m`, as the device cgroup writes them.
    pub access: String,
}

/// A bandwidth limit on one block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoLimit {
    pub major: u32,
    pub minor: u32,
    pub bytes_per_second: u64,
}

/// The job's cgroup limits (`None`: not limited).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleLimits {
    pub memory_bytes: Option<u64>,
    /// Percent of one CPU (250 = two and a half).
    pub cpu_percent: Option<u32>,
    /// `0-3,8`, as cpuset writes it.
    pub cpuset: Option<String>,
    pub pids_max: Option<u64>,
    pub io: Vec<IoLimit>,
    /// Memory plus swap limited to the memory limit: no swap beyond it,
    /// as the native sandbox sets where the host accounts swap (a runtime
    /// refuses the setting where it does not).
    pub no_swap: bool,
}

/// Everything the bundle says, with every host fact already read.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleInput {
    /// `argv`, the program first (a name is looked up in the job's `PATH`).
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub uid: u32,
    pub gid: u32,
    pub hostname: String,
    /// The bundle's root directory (empty; mount points are made in it).
    pub rootfs: PathBuf,
    /// Read-only binds making the job's tree (`/usr`, `/lib`, …).
    pub ro_mounts: Vec<BindMount>,
    /// The host directory bound read-write at `/work`.
    pub work_dir: PathBuf,
    pub tmp_size_mb: u64,
    /// A host directory bound at `/dev/shm` instead of a private tmpfs.
    pub dev_shm: Option<PathBuf>,
    /// Further binds (driver files, volumes, toolkits), after `/proc`.
    pub binds: Vec<BindMount>,
    /// Paths hidden in the job besides [`MASKED_PATHS`].
    pub masks: Vec<PathBuf>,
    pub devices: Vec<DeviceNode>,
    /// Device cgroup rules allowing access; everything else is denied.
    pub device_allow: Vec<DeviceAllow>,
    /// Share the host's network namespace.
    pub host_network: bool,
    /// The job's cgroup, relative to each hierarchy's root
    /// (`/joblet/<job id>`).
    pub cgroups_path: PathBuf,
    pub limits: BundleLimits,
    pub seccomp: Option<LinuxSeccomp>,
    /// `createRuntime` hooks (run on the host once the namespaces exist):
    /// the program and its argv (the first being its name).
    pub create_runtime_hooks: Vec<(PathBuf, Vec<String>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("building the OCI runtime spec: {0}")]
    Spec(#[from] oci_spec::OciSpecError),
    #[error("{field}: {problem}")]
    Input {
        field: &'static str,
        problem: String,
    },
}

fn input(field: &'static str, problem: impl Into<String>) -> BundleError {
    BundleError::Input {
        field,
        problem: problem.into(),
    }
}

fn opts(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn tmpfs(dest: &str, options: Vec<String>) -> Result<Mount, BundleError> {
    Ok(MountBuilder::default()
        .destination(dest)
        .typ("tmpfs")
        .source("tmpfs")
        .options(options)
        .build()?)
}

fn bind(b: &BindMount) -> Result<Mount, BundleError> {
    let mode = if b.writable { "rw" } else { "ro" };
    Ok(MountBuilder::default()
        .destination(b.target.clone())
        .typ("bind")
        .source(b.source.clone())
        .options(opts(&["rbind", mode, "nosuid", "nodev"]))
        .build()?)
}

/// The mounts in the order the runtime makes them: `/proc` and `/dev`
/// first, so that binds into them (a GPU's `params` file) come after.
fn mounts(i: &BundleInput) -> Result<Vec<Mount>, BundleError> {
    let tmp = format!("size={}m", i.tmp_size_mb);
    let mut m = vec![
        MountBuilder::default()
            .destination("/proc")
            .typ("proc")
            .source("proc")
            .options(opts(&["nosuid", "noexec", "nodev"]))
            .build()?,
        tmpfs(
            "/dev",
            opts(&["nosuid", "strictatime", "mode=755", "size=65536k"]),
        )?,
        MountBuilder::default()
            .destination("/dev/pts")
            .typ("devpts")
            .source("devpts")
            .options(opts(&[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ]))
            .build()?,
    ];
    match &i.dev_shm {
        Some(dir) => m.push(
            MountBuilder::default()
                .destination("/dev/shm")
                .typ("bind")
                .source(dir.clone())
                .options(opts(&["rbind", "rw", "nosuid", "nodev", "noexec"]))
                .build()?,
        ),
        None => m.push(tmpfs(
            "/dev/shm",
            vec![
                "nosuid".into(),
                "noexec".into(),
                "nodev".into(),
                "mode=1777".into(),
                tmp.clone(),
            ],
        )?),
    }
    m.push(tmpfs(
        "/tmp",
        vec![
            "nosuid".into(),
            "nodev".into(),
            "mode=1777".into(),
            tmp.clone(),
        ],
    )?);
    for ro in &i.ro_mounts {
        m.push(bind(ro)?);
    }
    m.push(bind(&BindMount {
        source: i.work_dir.clone(),
        target: "/work".into(),
        writable: true,
    })?);
    for b in &i.binds {
        m.push(bind(b)?);
    }
    Ok(m)
}

fn kind(k: NodeKind) -> LinuxDeviceType {
    match k {
        NodeKind::Char => LinuxDeviceType::C,
        NodeKind::Block => LinuxDeviceType::B,
    }
}

fn device_rules(i: &BundleInput) -> Result<Vec<LinuxDeviceCgroup>, BundleError> {
    let mut rules = vec![LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()?];
    for a in &i.device_allow {
        if a.access.is_empty() || !a.access.chars().all(|c| "rwm".contains(c)) {
            return Err(input(
                "device_allow.access",
                format!("{:?}: expected letters of rwm", a.access),
            ));
        }
        let mut r = LinuxDeviceCgroupBuilder::default()
            .allow(true)
            .access(a.access.clone())
            .typ(a.kind.map(kind).unwrap_or(LinuxDeviceType::A));
        if let Some(major) = a.major {
            r = r.major(i64::from(major));
        }
        if let Some(minor) = a.minor {
            r = r.minor(i64::from(minor));
        }
        rules.push(r.build()?);
    }
    Ok(rules)
}

fn devices(i: &BundleInput) -> Result<Vec<LinuxDevice>, BundleError> {
    i.devices
        .iter()
        .map(|d| {
            if !d.path.starts_with("/dev/") {
                return Err(input(
                    "devices.path",
                    format!("{} must be under /dev/", d.path.display()),
                ));
            }
            Ok(LinuxDeviceBuilder::default()
                .path(d.path.clone())
                .typ(kind(d.kind))
                .major(i64::from(d.major))
                .minor(i64::from(d.minor))
                .file_mode(d.file_mode)
                .uid(0u32)
                .gid(0u32)
                .build()?)
        })
        .collect()
}

fn resources(i: &BundleInput) -> Result<oci_spec::runtime::LinuxResources, BundleError> {
    let l = &i.limits;
    let mut r = LinuxResourcesBuilder::default().devices(device_rules(i)?);
    if let Some(bytes) = l.memory_bytes {
        let bytes = i64::try_from(bytes).map_err(|_| input("limits.memory", "too large"))?;
        let mut m = LinuxMemoryBuilder::default().limit(bytes);
        if l.no_swap {
            m = m.swap(bytes);
        }
        r = r.memory(m.build()?);
    }
    if l.cpu_percent.is_some() || l.cpuset.is_some() {
        let mut cpu = LinuxCpuBuilder::default();
        if let Some(pct) = l.cpu_percent {
            // Per 100 ms period: 1% of a CPU = 1 ms.
            cpu = cpu.period(100_000u64).quota(i64::from(pct) * 1000);
        }
        if let Some(set) = &l.cpuset {
            cpu = cpu.cpus(set.clone());
        }
        r = r.cpu(cpu.build()?);
    }
    if let Some(max) = l.pids_max {
        let max = i64::try_from(max).map_err(|_| input("limits.pids", "too large"))?;
        r = r.pids(LinuxPidsBuilder::default().limit(max).build()?);
    }
    if !l.io.is_empty() {
        let throttle = |io: &IoLimit| {
            LinuxThrottleDeviceBuilder::default()
                .major(i64::from(io.major))
                .minor(i64::from(io.minor))
                .rate(io.bytes_per_second)
                .build()
        };
        let read = l.io.iter().map(throttle).collect::<Result<Vec<_>, _>>()?;
        let write = l.io.iter().map(throttle).collect::<Result<Vec<_>, _>>()?;
        r = r.block_io(
            LinuxBlockIoBuilder::default()
                .throttle_read_bps_device(read)
                .throttle_write_bps_device(write)
                .build()?,
        );
    }
    Ok(r.build()?)
}

/// The runtime spec of the job described by `i`.
pub fn build(i: &BundleInput) -> Result<Spec, BundleError> {
    let Some(program) = i.args.first() else {
        return Err(input("args", "is empty: give the program to run"));
    };
    if program.is_empty() {
        return Err(input("args[0]", "is empty: give the program to run"));
    }
    if let Some((k, _)) = i.env.iter().find(|(k, _)| k.is_empty() || k.contains('=')) {
        return Err(input(
            "env",
            format!("variable name {k:?} is empty or contains '='"),
        ));
    }
    let none = Capabilities::new();
    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(i.uid)
                .gid(i.gid)
                .additional_gids(Vec::<u32>::new())
                .build()?,
        )
        .args(i.args.clone())
        .env(
            i.env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        )
        .cwd("/work")
        .capabilities(
            oci_spec::runtime::LinuxCapabilitiesBuilder::default()
                .bounding(none.clone())
                .effective(none.clone())
                .inheritable(none.clone())
                .permitted(none.clone())
                .ambient(none)
                .build()?,
        )
        .no_new_privileges(true)
        .build()?;
    let mut namespaces = vec![
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ];
    if !i.host_network {
        namespaces.push(LinuxNamespaceType::Network);
    }
    let namespaces = namespaces
        .into_iter()
        .map(|t| LinuxNamespaceBuilder::default().typ(t).build())
        .collect::<Result<Vec<_>, _>>()?;
    let mut masked: Vec<String> = MASKED_PATHS.iter().map(|s| s.to_string()).collect();
    for m in &i.masks {
        let m = m.display().to_string();
        if !masked.contains(&m) {
            masked.push(m);
        }
    }
    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .devices(devices(i)?)
        .resources(resources(i)?)
        .cgroups_path(i.cgroups_path.clone())
        .masked_paths(masked)
        .readonly_paths(
            READONLY_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
        )
        .rootfs_propagation("private");
    if let Some(seccomp) = &i.seccomp {
        linux = linux.seccomp(seccomp.clone());
    }
    let mut spec = SpecBuilder::default();
    if !i.create_runtime_hooks.is_empty() {
        let hooks = i
            .create_runtime_hooks
            .iter()
            .map(|(path, args)| {
                oci_spec::runtime::HookBuilder::default()
                    .path(path.clone())
                    .args(args.clone())
                    .timeout(10i64)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        spec = spec.hooks(
            oci_spec::runtime::HooksBuilder::default()
                .create_runtime(hooks)
                .build()?,
        );
    }
    Ok(spec
        .version("1.0.2")
        .process(process)
        .hostname(i.hostname.clone())
        .root(
            RootBuilder::default()
                .path(i.rootfs.clone())
                .readonly(true)
                .build()?,
        )
        .mounts(mounts(i)?)
        .linux(linux.build()?)
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> BundleInput {
        BundleInput {
            args: vec!["python3".into(), "train.py".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            uid: 65534,
            gid: 65534,
            hostname: "job-1a2b3c4d".into(),
            rootfs: "/var/lib/joblet/jobs/x/bundle/rootfs".into(),
            ro_mounts: vec![BindMount {
                source: "/usr".into(),
                target: "/usr".into(),
                writable: false,
            }],
            work_dir: "/var/lib/joblet/jobs/x/work".into(),
            tmp_size_mb: 64,
            dev_shm: None,
            binds: vec![BindMount {
                source: "/srv/volumes/data".into(),
                target: "/volumes/data".into(),
                writable: true,
            }],
            masks: vec!["/proc/driver/nvidia".into()],
            devices: vec![DeviceNode {
                path: "/dev/nvidia0".into(),
                kind: NodeKind::Char,
                major: 195,
                minor: 0,
                file_mode: 0o666,
            }],
            device_allow: vec![
                DeviceAllow {
                    kind: Some(NodeKind::Char),
                    major: Some(1),
                    minor: Some(3),
                    access: "rw".into(),
                },
                DeviceAllow {
                    kind: Some(NodeKind::Char),
                    major: Some(195),
                    minor: Some(0),
                    access: "rw".into(),
                },
            ],
            host_network: false,
            cgroups_path: "/joblet/x".into(),
            limits: BundleLimits {
                memory_bytes: Some(512 << 20),
                cpu_percent: Some(150),
                cpuset: Some("0-1".into()),
                pids_max: Some(512),
                io: vec![IoLimit {
                    major: 8,
                    minor: 0,
                    bytes_per_second: 1 << 20,
                }],
                no_swap: true,
            },
            seccomp: None,
            create_runtime_hooks: vec![(
                "/usr/lib/joblet/joblet-shim".into(),
                vec!["joblet-shim".into(), "oci-hook".into(), "loopback".into()],
            )],
        }
    }

    fn json(i: &BundleInput) -> serde_json::Value {
        serde_json::to_value(build(i).unwrap()).unwrap()
    }

    #[test]
    fn the_job_is_unprivileged_on_a_read_only_root() {
        let v = json(&job());
        let p = &v["process"];
        assert_eq!(p["user"]["uid"], 65534);
        assert_eq!(p["user"]["gid"], 65534);
        assert_eq!(p["noNewPrivileges"], true);
        assert_eq!(p["cwd"], "/work");
        assert_eq!(p["args"], serde_json::json!(["python3", "train.py"]));
        for set in [
            "bounding",
            "effective",
            "inheritable",
            "permitted",
            "ambient",
        ] {
            assert_eq!(p["capabilities"][set], serde_json::json!([]), "{set}");
        }
        assert_eq!(v["root"]["readonly"], true);
        assert_eq!(v["hostname"], "job-1a2b3c4d");
        let hook = &v["hooks"]["createRuntime"][0];
        assert_eq!(hook["path"], "/usr/lib/joblet/joblet-shim");
        assert_eq!(hook["args"][2], "loopback");
    }

    #[test]
    fn namespaces_follow_the_network_mode() {
        let types = |v: &serde_json::Value| -> Vec<String> {
            v["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["type"].as_str().unwrap().to_string())
                .collect()
        };
        assert!(types(&json(&job())).contains(&"network".to_string()));
        let mut host = job();
        host.host_network = true;
        let t = types(&json(&host));
        assert!(!t.contains(&"network".to_string()) && t.contains(&"pid".to_string()));
    }

    #[test]
    fn devices_are_denied_but_the_jobs_own() {
        let v = json(&job());
        let rules = v["linux"]["resources"]["devices"].as_array().unwrap();
        assert_eq!(rules[0]["allow"], false);
        assert_eq!(rules[0]["access"], "rwm");
        assert!(
            rules[0].get("major").is_none(),
            "deny all first: {}",
            rules[0]
        );
        assert!(rules
            .iter()
            .any(|r| r["allow"] == true && r["major"] == 195 && r["minor"] == 0));
        assert!(!rules
            .iter()
            .any(|r| r["allow"] == true && r["major"] == 195 && r["minor"] == 1));
        let dev = &v["linux"]["devices"][0];
        assert_eq!(
            (dev["path"].as_str(), dev["type"].as_str(), &dev["major"]),
            (Some("/dev/nvidia0"), Some("c"), &serde_json::json!(195))
        );
    }

    #[test]
    fn mounts_come_in_order_and_read_only_unless_writable() {
        let v = json(&job());
        let mounts = v["mounts"].as_array().unwrap();
        let dests: Vec<&str> = mounts
            .iter()
            .map(|m| m["destination"].as_str().unwrap())
            .collect();
        assert_eq!(
            dests,
            [
                "/proc",
                "/dev",
                "/dev/pts",
                "/dev/shm",
                "/tmp",
                "/usr",
                "/work",
                "/volumes/data"
            ]
        );
        let opts =
            |d: &str| mounts.iter().find(|m| m["destination"] == d).unwrap()["options"].clone();
        assert!(opts("/usr").as_array().unwrap().contains(&"ro".into()));
        assert!(opts("/volumes/data")
            .as_array()
            .unwrap()
            .contains(&"rw".into()));
        assert!(opts("/tmp")
            .as_array()
            .unwrap()
            .contains(&"size=64m".into()));
        assert!(!dests.contains(&"/sys"), "no sysfs");
    }

    #[test]
    fn limits_land_in_the_resources() {
        let v = json(&job());
        let r = &v["linux"]["resources"];
        assert_eq!(r["memory"]["limit"], 512 << 20);
        assert_eq!(r["memory"]["swap"], 512 << 20);
        assert_eq!(r["cpu"]["quota"], 150_000);
        assert_eq!(r["cpu"]["period"], 100_000);
        assert_eq!(r["cpu"]["cpus"], "0-1");
        assert_eq!(r["pids"]["limit"], 512);
        assert_eq!(r["blockIO"]["throttleReadBpsDevice"][0]["rate"], 1 << 20);
        assert_eq!(v["linux"]["cgroupsPath"], "/joblet/x");
    }

    #[test]
    fn masked_and_read_only_paths_include_the_drivers() {
        let v = json(&job());
        let masked = v["linux"]["maskedPaths"].as_array().unwrap();
        assert!(masked.contains(&"/proc/kcore".into()));
        assert!(masked.contains(&"/proc/driver/nvidia".into()));
        let ro = v["linux"]["readonlyPaths"].as_array().unwrap();
        assert!(ro.contains(&"/proc/driver/nvidia/params".into()));
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut j = job();
        j.args.clear();
        assert!(build(&j).unwrap_err().to_string().starts_with("args:"));
        let mut j = job();
        j.devices[0].path = "/tmp/nvidia0".into();
        assert!(build(&j)
            .unwrap_err()
            .to_string()
            .contains("must be under /dev/"));
        let mut j = job();
        j.env.push(("A=B".into(), "x".into()));
        assert!(build(&j).unwrap_err().to_string().starts_with("env:"));
    }
}
