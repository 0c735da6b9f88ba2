use super::*;

pub(crate) fn sample() -> InitConfig {
    InitConfig {
        command: "sh".into(),
        args: vec!["-c".into(), "true".into()],
        env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
        hostname: "job".into(),
        uid: 65534,
        gid: 65534,
        allow_root: false,
        ro_mounts: vec!["/usr".into(), "/bin".into()],
        root: None,
        extra_devices: vec!["/dev/nvidia0".into()],
        work_dir: "/var/lib/joblet/jobs/x/work".into(),
        work_size_mb: 0,
        tmp_size_mb: 64,
        net: NetMode::None,
        seccomp: true,
        seccomp_allow: vec![],
        binds: vec![Bind {
            source: "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15".into(),
            target: "/run/joblet/driver/lib/libcuda.so.1".into(),
            writable: false,
        }],
        masks: vec!["/proc/driver/nvidia".into()],
        device_binds: vec![],
        dev_shm: Some("/run/joblet/mps/GPU-1/shm".into()),
        warm: false,
        stdin: None,
    }
}

#[test]
fn a_warm_sandbox_fits_jobs_that_differ_only_in_their_own_settings() {
    let base = InitConfig {
        warm: true,
        binds: vec![],
        ..sample()
    };
    let mut job = sample();
    job.command = "python3".into();
    job.hostname = "job-2".into();
    job.extra_devices.push("/dev/nvidia1".into());
    job.binds.clear();
    job.dev_shm = None;
    job.work_size_mb = 512;
    assert_eq!(base.warm_mismatch(&job), None);
    job.net = NetMode::Host;
    assert_eq!(base.warm_mismatch(&job), Some("net"));
    job.net = NetMode::None;
    job.ro_mounts.push("/opt".into());
    assert_eq!(base.warm_mismatch(&job), Some("ro_mounts"));
    job.ro_mounts = base.ro_mounts.clone();
    job.root = Some("/var/lib/joblet/runtimes/trees/abc".into());
    assert_eq!(base.warm_mismatch(&job), Some("root"));
    job.root = None;
    job.tmp_size_mb = 1;
    assert_eq!(base.warm_mismatch(&job), Some("tmp_size_mb"));
    job.tmp_size_mb = base.tmp_size_mb;
    job.seccomp = false;
    assert_eq!(base.warm_mismatch(&job), Some("seccomp"));
    job.seccomp = true;
    job.seccomp_allow = vec![super::super::SyscallGroup::IoUring];
    assert_eq!(base.warm_mismatch(&job), Some("seccomp_allow"));
    job.seccomp_allow.clear();
    job.uid += 1;
    assert_eq!(base.warm_mismatch(&job), Some("user"));
    job.uid = base.uid;
    job.allow_root = !base.allow_root;
    assert_eq!(base.warm_mismatch(&job), Some("user"));
}

fn bind(source: &str, target: &str) -> Bind {
    Bind {
        source: source.into(),
        target: target.into(),
        writable: false,
    }
}

#[test]
fn binds_made_ahead_must_be_the_first_of_the_jobs_and_are_left_out_of_its_part() {
    let lib = bind(
        "/usr/lib/libnvidia-ml.so.1",
        "/run/nvidia/driver/lib/libnvidia-ml.so.1",
    );
    let ctl = bind("/dev/nvidiactl", "/dev/nvidiactl");
    let gpu0 = bind("/dev/nvidia0", "/dev/nvidia0");
    let mps = bind("/run/joblet/mps/GPU-1/pipe", "/run/nvidia/mps");
    let warm = InitConfig {
        warm: true,
        binds: vec![lib.clone()],
        device_binds: vec![ctl.clone()],
        ..sample()
    };
    let mut job = InitConfig {
        binds: vec![lib.clone(), mps.clone()],
        device_binds: vec![ctl.clone(), gpu0.clone()],
        ..sample()
    };
    assert_eq!(warm.warm_mismatch(&job), None);
    let part = warm.job_part(&job);
    assert_eq!(part.binds, vec![mps.clone()]);
    assert_eq!(part.device_binds, vec![gpu0.clone()]);
    assert_eq!(
        (part.command.as_str(), &part.env),
        (job.command.as_str(), &job.env)
    );

    // Not first, missing, or another source: not what the job asks for.
    job.binds = vec![mps.clone(), lib.clone()];
    assert_eq!(warm.warm_mismatch(&job), Some("binds"));
    job.binds = vec![mps.clone()];
    assert_eq!(warm.warm_mismatch(&job), Some("binds"));
    job.binds = vec![bind(
        "/opt/other/libnvidia-ml.so.1",
        &lib.target.display().to_string(),
    )];
    assert_eq!(warm.warm_mismatch(&job), Some("binds"));
    // One of the job's own above a bind made ahead would have been
    // mounted first, under it: it cannot be added after.
    job.binds = vec![lib.clone(), bind("/opt/driver", "/run/nvidia")];
    assert_eq!(warm.warm_mismatch(&job), Some("binds"));
    job.binds = vec![lib.clone()];
    job.device_binds = vec![gpu0.clone()];
    assert_eq!(warm.warm_mismatch(&job), Some("device_binds"));
    // A CPU job in a GPU-ready sandbox: never.
    job.binds.clear();
    job.device_binds.clear();
    assert_eq!(warm.warm_mismatch(&job), Some("binds"));
}

#[test]
fn config_json_without_binds_or_masks_still_parses() {
    let mut v = serde_json::to_value(sample()).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove("binds");
    obj.remove("masks");
    obj.remove("dev_shm");
    let c: InitConfig = serde_json::from_value(v).unwrap();
    assert!(c.binds.is_empty() && c.masks.is_empty());
    assert_eq!(c.dev_shm, None);
    c.validate().unwrap();
}

#[test]
fn bind_paths_must_be_clean_and_absolute_naming_the_entry() {
    for (source, target, end) in [
        ("lib/libcuda.so", "/run/x", "source"),
        ("/usr/../etc/shadow", "/run/x", "source"),
        ("/usr/lib", "run/x", "target"),
        ("/usr/lib", "/run/../etc", "target"),
        ("/usr/./lib", "/run/x", "source"),
        ("/usr/lib", "/run/x/.", "target"),
        ("/usr/lib", "", "target"),
    ] {
        let mut c = sample();
        c.binds.push(bind(source, target));
        let e = c.validate().unwrap_err();
        let path = if end == "source" { source } else { target };
        assert_eq!(
            e,
            ConfigError::BadBindPath {
                index: 1,
                end,
                path: path.into()
            },
            "{source} -> {target}"
        );
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("binds[1].{end} ")), "{msg}");
        assert!(msg.contains("absolute path without '..'"), "{msg}");
    }
}

#[test]
fn bind_targets_may_not_cover_what_the_sandbox_builds() {
    for target in [
        "/",
        "/proc",
        "/dev",
        "/dev/nvidia0",
        "/work",
        "/work/x",
        "/.oldroot/etc",
    ] {
        let mut c = sample();
        c.binds = vec![bind("/usr/lib", target)];
        match c.validate() {
            Err(e @ ConfigError::ReservedBindTarget { index: 0, .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with(&format!("binds[0].target {target} is refused: ")),
                    "{msg}"
                );
                assert!(msg.contains("/run/<name>"), "{msg}");
            }
            other => panic!("{target}: {other:?}"),
        }
    }
    // Near misses are fine: a file under /proc, names that only
    // start like a reserved path, existing paths of read-only mounts.
    let mut c = sample();
    c.binds = vec![
        bind("/tmp/params", "/proc/driver/nvidia/params"),
        bind("/usr/lib", "/device"),
        bind("/usr/lib", "/workspace/lib"),
        bind("/usr/lib", "/tmp/lib"),
        bind("/etc/hosts", "/etc/hosts"),
    ];
    c.validate().unwrap();
}

#[test]
fn dev_shm_must_be_a_clean_absolute_utf8_path() {
    use std::os::unix::ffi::OsStrExt;
    let non_utf8 = PathBuf::from(std::ffi::OsStr::from_bytes(b"/run/\xff/shm"));
    for bad in [
        PathBuf::from("run/shm"),
        PathBuf::from("/run/../dev/shm"),
        PathBuf::from("/run/./shm"),
        PathBuf::from("/"),
        PathBuf::from(""),
        non_utf8,
    ] {
        let mut c = sample();
        c.dev_shm = Some(bad.clone());
        let e = c.validate().unwrap_err();
        assert_eq!(e, ConfigError::BadDevShm(bad.clone()), "{}", bad.display());
        let msg = e.to_string();
        assert!(
            msg.starts_with("dev_shm ") && msg.contains("absolute UTF-8 path"),
            "{msg}"
        );
    }
    let mut c = sample();
    c.dev_shm = None;
    c.validate().unwrap();
}

#[test]
fn two_binds_may_not_share_a_target() {
    let mut c = sample();
    c.binds
        .push(bind("/usr/lib", "/run/joblet/driver/lib/libcuda.so.1"));
    assert_eq!(
        c.validate(),
        Err(ConfigError::DuplicateBindTarget {
            index: 1,
            first: 0,
            path: "/run/joblet/driver/lib/libcuda.so.1".into()
        })
    );
}

mod paths {
    use super::*;
    use proptest::prelude::*;

    /// One path component that is neither `.` nor `..`.
    fn segment() -> impl Strategy<Value = String> {
        "[a-z0-9._-]{1,8}".prop_filter("not . or ..", |s| s != "." && s != "..")
    }

    proptest! {
        #[test]
        fn clean_paths_pass_and_a_parent_component_anywhere_fails(
            segs in proptest::collection::vec(segment(), 1..6),
            at in 0usize..6,
        ) {
            let clean = format!("/{}", segs.join("/"));
            let mut with_parent = segs.clone();
            with_parent.insert(at.min(segs.len()), "..".into());
            let dirty = format!("/{}", with_parent.join("/"));

            let mut c = sample();
            c.masks = vec![clean.clone().into()];
            c.binds = vec![bind(&clean, &format!("/run/j{clean}"))];
            prop_assert_eq!(c.validate(), Ok(()));

            c.masks = vec![dirty.clone().into()];
            prop_assert_eq!(
                c.validate(),
                Err(ConfigError::BadMask { index: 0, path: dirty.clone().into() })
            );
            c.masks.clear();
            c.binds = vec![bind("/usr/lib", &dirty)];
            prop_assert_eq!(
                c.validate(),
                Err(ConfigError::BadBindPath { index: 0, end: "target", path: dirty.into() })
            );
        }

        #[test]
        fn targets_are_refused_exactly_at_and_under_reserved_places(
            first in prop_oneof![
                prop::sample::select(vec!["dev", "work", "proc", ".oldroot", "run", "devices", "workspace"])
                    .prop_map(String::from),
                segment(),
            ],
            rest in proptest::collection::vec(segment(), 0..4),
        ) {
            let segs: Vec<String> = std::iter::once(first).chain(rest).collect();
            let target = format!("/{}", segs.join("/"));
            let reserved = segs[0] == "dev"
                || segs[0] == "work"
                || segs[0] == ".oldroot"
                || (segs.len() == 1 && segs[0] == "proc");
            let mut c = sample();
            c.binds = vec![bind("/usr/lib", &target)];
            let refused = matches!(
                c.validate(),
                Err(ConfigError::ReservedBindTarget { .. })
            );
            prop_assert_eq!(refused, reserved, "{}", target);
        }
    }
}

#[test]
fn masks_must_be_clean_absolute_and_not_root() {
    for bad in ["/", "relative", "/proc/../etc", ""] {
        let mut c = sample();
        c.masks = vec!["/ok".into(), bad.into()];
        let e = c.validate().unwrap_err();
        assert_eq!(
            e,
            ConfigError::BadMask {
                index: 1,
                path: bad.into()
            },
            "{bad}"
        );
        assert!(e.to_string().starts_with("masks[1] "), "{e}");
    }
    let mut c = sample();
    c.masks = vec![
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into(),
        "/dev/nvidia0".into(),
        "/proc/driver/nvidia".into(),
    ];
    c.validate().unwrap();
}

#[test]
fn sample_is_valid_and_round_trips_through_json() {
    let c = sample();
    c.validate().unwrap();
    let json = serde_json::to_string(&c).unwrap();
    let back: InitConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
    assert!(json.contains(r#""net":"None""#), "{json}");
}

#[test]
fn root_needs_allow_root() {
    let mut c = sample();
    c.uid = 0;
    assert_eq!(
        c.validate(),
        Err(ConfigError::RootNotAllowed { uid: 0, gid: 65534 })
    );
    c.uid = 1000;
    c.gid = 0;
    assert!(matches!(
        c.validate(),
        Err(ConfigError::RootNotAllowed { .. })
    ));
    c.uid = 0;
    c.allow_root = true;
    c.validate().unwrap();
}

#[test]
fn paths_must_be_clean_absolute_and_not_reserved() {
    for bad in ["usr", "/usr/../etc", "../usr"] {
        let mut c = sample();
        c.ro_mounts = vec![bad.into()];
        assert!(
            matches!(c.validate(), Err(ConfigError::BadPath { .. })),
            "{bad}"
        );
    }
    for reserved in ["/", "/tmp", "/proc/sys", "/dev", "/work"] {
        let mut c = sample();
        c.ro_mounts = vec![reserved.into()];
        assert_eq!(
            c.validate(),
            Err(ConfigError::ReservedMount(reserved.into())),
            "{reserved}"
        );
    }
    let mut c = sample();
    c.work_dir = "relative/work".into();
    assert!(matches!(
        c.validate(),
        Err(ConfigError::BadPath {
            field: "work_dir",
            ..
        })
    ));
}

#[test]
fn devices_must_live_under_dev() {
    let mut c = sample();
    c.extra_devices = vec!["/tmp/nvidia0".into()];
    assert_eq!(
        c.validate(),
        Err(ConfigError::DeviceOutsideDev("/tmp/nvidia0".into()))
    );
    c.extra_devices = vec!["/devices/x".into()];
    assert!(c.validate().is_err());
}

#[test]
fn rejects_empty_command_nul_bytes_bad_env_hostname_and_sizes() {
    let mut c = sample();
    c.command.clear();
    assert_eq!(c.validate(), Err(ConfigError::EmptyCommand));
    let mut c = sample();
    c.args.push("a\0b".into());
    assert!(matches!(
        c.validate(),
        Err(ConfigError::Nul { field: "args", .. })
    ));
    let mut c = sample();
    c.env.insert("A=B".into(), "x".into());
    assert_eq!(c.validate(), Err(ConfigError::BadEnvName("A=B".into())));
    let mut c = sample();
    c.hostname = "h".repeat(65);
    assert!(matches!(c.validate(), Err(ConfigError::BadHostname(_))));
    let mut c = sample();
    c.tmp_size_mb = 0;
    assert_eq!(c.validate(), Err(ConfigError::BadTmpSize(0)));
}
