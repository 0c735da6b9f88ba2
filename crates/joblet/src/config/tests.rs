use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("joblet-config.yml"))
}

#[test]
fn empty_file_is_all_defaults() {
    assert_eq!(parse("").unwrap(), Config::default());
    assert!(!Config::default().gpu.enabled);
}

#[test]
fn seed_001_gpu_section_is_accepted() {
    let cfg = parse("gpu:\n  enabled: true\n  cuda_paths:\n    - \"/usr/local/cuda\"\n    - \"/opt/cuda\"\n    - \"/usr/lib/cuda\"\n").unwrap();
    assert!(cfg.gpu.enabled);
    assert_eq!(cfg.gpu.cuda_paths.len(), 3);
    assert!(
        cfg.gpu.required,
        "a GPU node without GPUs is an error by default"
    );
    assert_eq!(cfg.gpu.health_interval, Duration::from_secs(1));
}

#[test]
fn values_parse() {
    let cfg = parse("server:\n  address: \"0.0.0.0:7000\"\n  state_dir: /tmp/x\njobs:\n  default_timeout: 1h30m\n  stop_grace_period: 3\n  max_running: 20\n").unwrap();
    assert_eq!(cfg.server.address.port(), 7000);
    assert_eq!(cfg.jobs.default_timeout, Duration::from_secs(5400));
    assert_eq!(cfg.jobs.stop_grace_period, Duration::from_secs(3));
    assert_eq!(cfg.jobs.max_running, 20);
}

/// Every duration key keeps milliseconds: sub-second values are never
/// 0 (none) or cut to whole seconds.
#[test]
fn durations_keep_milliseconds() {
    let cfg = parse("jobs:\n  default_timeout: 500ms\n  stop_grace_period: 1.5s\ngpu:\n  health_interval: 250ms\n  scrub_timeout: 1.9s\n  default_gpu_time: 90s\n").unwrap();
    assert_eq!(cfg.jobs.default_timeout, Duration::from_millis(500));
    assert_eq!(cfg.jobs.stop_grace_period, Duration::from_millis(1500));
    assert_eq!(cfg.gpu.health_interval, Duration::from_millis(250));
    assert_eq!(cfg.gpu.scrub_timeout, Duration::from_millis(1900));
    assert_eq!(cfg.gpu.default_gpu_time, Duration::from_secs(90));
    for (yaml, ms) in [
        ("0.5", 500),
        ("1.9", 1900),
        ("\"0.5s\"", 500),
        ("1ms", 1),
        ("2", 2000),
    ] {
        let cfg = parse(&format!("jobs:\n  default_timeout: {yaml}\n")).unwrap();
        assert_eq!(
            cfg.jobs.default_timeout,
            Duration::from_millis(ms),
            "{yaml}"
        );
    }
    for bad in ["1us", "0.0001", "-0.5", ".nan"] {
        let e = parse(&format!("jobs:\n  default_timeout: {bad}\n")).unwrap_err();
        assert!(e.to_string().contains("jobs.default_timeout"), "{bad}: {e}");
        assert!(e.to_string().contains("duration like 30s"), "{bad}: {e}");
    }
}

#[test]
fn log_levels_need_a_level_in_every_directive() {
    for good in [
        "info",
        "DEBUG",
        "off",
        "joblet=debug,warn",
        "joblet::engine=trace,tower=off",
        "joblet[job]=debug",
    ] {
        check_log_filter(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for (bad, needle) in [
        ("shouting", "\"shouting\" is not a log level"),
        ("joblet", "\"joblet\" is not a log level"),
        ("info,joblet", "\"joblet\" is not a log level"),
        ("joblet=loud", "\"joblet=loud\""),
        ("", "is empty"),
        ("[[", "invalid filter"),
    ] {
        let e = check_log_filter(bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
        assert!(
            e.contains("trace, debug, info, warn, error or off"),
            "{bad}: {e}"
        );
    }
    let e = parse("logging:\n  level: shouting\n").unwrap_err();
    assert!(
        matches!(&e, ConfigError::Invalid { key, .. } if key == "logging.level"),
        "{e}"
    );
}

/// What `check-config` and `server` both refuse about `jobs.user`.
#[test]
fn jobs_user_resolves_and_is_not_root_without_allow_root() {
    let check = |user: &str, allow_root: bool| {
        let mut cfg = Config::default();
        cfg.jobs.user = user.into();
        cfg.jobs.allow_root = allow_root;
        cfg.check(Path::new("j.yml")).map_err(|e| e.to_string())
    };
    for (user, needle) in [
        ("root", "\"root\" is root (uid 0)"),
        ("0", "\"0\" is root (uid 0)"),
        ("65534:0", "\"65534:0\" has root's group (gid 0)"),
        ("0:65534", "is root (uid 0)"),
    ] {
        let e = check(user, false).unwrap_err();
        assert!(
            e.starts_with("config file j.yml: jobs.user: "),
            "{user}: {e}"
        );
        assert!(
            e.contains(needle) && e.contains("jobs.allow_root: true"),
            "{user}: {e}"
        );
        check(user, true).unwrap_or_else(|e| panic!("{user} with allow_root: {e}"));
    }
    let e = check("nosuchuser", true).unwrap_err();
    assert_eq!(e, "config file j.yml: jobs.user: no user named \"nosuchuser\" on this host: expected a user name, UID or UID:GID (e.g. nobody or 65534:65534)");
    let e = check("1:x", false).unwrap_err();
    assert!(e.contains("UID:GID"), "{e}");
    check("nobody", false).unwrap();
    check("65534:65534", false).unwrap();
    assert_eq!(resolve_user("1000:50").unwrap(), (1000, 50));
    assert_eq!(resolve_user("root").unwrap(), (0, 0));
    // The values are checked again, as in parse.
    let mut cfg = Config::default();
    cfg.logging.level = "shouting".into();
    assert!(cfg
        .check(Path::new("j.yml"))
        .unwrap_err()
        .to_string()
        .contains("logging.level"));
}

/// Each bad key is named with its dotted path and the accepted form.
#[test]
fn bad_keys_and_values_are_named() {
    let table = [
        (
            "server:\n  adress: x\n",
            "server.adress",
            "expected one of `address`",
        ),
        (
            "server:\n  address: localhost\n",
            "server.address",
            "IP:PORT",
        ),
        (
            "server:\n  state_dir: relative/dir\n",
            "server.state_dir",
            "absolute",
        ),
        (
            "jobs:\n  default_timeout: soon\n",
            "jobs.default_timeout",
            "duration like 30s",
        ),
        (
            "jobs:\n  default_timeout: -5\n",
            "jobs.default_timeout",
            "duration like 30s",
        ),
        ("jobs:\n  max_running: 0\n", "jobs.max_running", "from 1 to"),
        ("gpu:\n  enabled: maybe\n", "gpu.enabled", "bool"),
        ("gpu:\n  strategy: pack\n", "gpu.strategy", "unknown field"),
        (
            "gpu:\n  health_interval: 10ms\n",
            "gpu.health_interval",
            "at least 100ms",
        ),
        (
            "gpu:\n  simulate: /nonexistent/profile.yaml\n",
            "gpu.simulate",
            "mock-NVML profile",
        ),
        ("bogus: 1\n", "bogus", "unknown field"),
        ("version: \"2\"\n", "version", "expected \"1\""),
        ("logging:\n  level: \"[[\"\n", "logging.level", "filter"),
        ("jobs:\n  pids_max: 2\n", "jobs.pids_max", "from 8 to"),
        (
            "filesystem:\n  allowed_mounts: [/proc]\n",
            "filesystem.allowed_mounts[0]",
            "absolute host directory",
        ),
        (
            "filesystem:\n  allowed_mounts: [usr]\n",
            "filesystem.allowed_mounts[0]",
            "absolute host directory",
        ),
        (
            "filesystem:\n  allowed_mounts: [/usr, /tmp/tools]\n",
            "filesystem.allowed_mounts[1]",
            "lies under",
        ),
        (
            "filesystem:\n  tmp_size_mb: 0\n",
            "filesystem.tmp_size_mb",
            "1 to 1048576",
        ),
        (
            "sandbox:\n  cgroup_base: a/b\n",
            "sandbox.cgroup_base",
            "single directory name",
        ),
        ("sandbox:\n  enabled: sure\n", "sandbox.enabled", "bool"),
        (
            "sandbox:\n  warm_pool: 65\n",
            "sandbox.warm_pool",
            "0 (no warm sandboxes) to 64",
        ),
        ("sandbox:\n  warm_pool: -1\n", "sandbox.warm_pool", "usize"),
        (
            "gpu:\n  warm_pool: 100\n",
            "gpu.warm_pool",
            "0 (no warm sandboxes) to 64",
        ),
        ("gpu:\n  proc_dir: proc\n", "gpu.proc_dir", "e.g. /proc"),
        (
            "gpu:\n  mps_dir: run/mps\n",
            "gpu.mps_dir",
            "e.g. /run/joblet/mps",
        ),
        (
            "gpu:\n  mps_control: /nonexistent/mps-control\n",
            "gpu.mps_control",
            "nvidia-cuda-mps-control",
        ),
        (
            "gpu:\n  mps_shm_size_mb: 0\n",
            "gpu.mps_shm_size_mb",
            "1 to 1048576",
        ),
        (
            "gpu:\n  mps_active_thread_percentage: 0\n",
            "gpu.mps_active_thread_percentage",
            "1 to 100",
        ),
        (
            "gpu:\n  mps_active_thread_percentage: 101\n",
            "gpu.mps_active_thread_percentage",
            "1 to 100",
        ),
    ];
    for (text, key, needle) in table {
        let e = parse(text).unwrap_err();
        let ConfigError::Invalid {
            key: got, message, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(got, key, "{text}: {e}");
        assert!(e.to_string().contains(needle), "{text}: {message}");
    }
}

#[test]
fn runtime_and_volume_dirs_default_under_the_state_dir_and_must_be_absolute() {
    let cfg = parse("server:\n  state_dir: /srv/j\n").unwrap();
    assert_eq!(cfg.runtimes_dir(), PathBuf::from("/srv/j/runtimes"));
    assert_eq!(cfg.volumes_dir(), PathBuf::from("/srv/j/volumes"));
    let cfg = parse("runtimes:\n  dir: /opt/joblet/runtimes\n").unwrap();
    assert_eq!(cfg.runtimes_dir(), PathBuf::from("/opt/joblet/runtimes"));
    let err = parse("volumes:\n  dir: vols\n").unwrap_err().to_string();
    assert!(
        err.contains("volumes.dir") && err.contains("absolute"),
        "{err}"
    );
    let err = parse("runtimes:\n  path: /x\n").unwrap_err().to_string();
    assert!(
        err.contains("runtimes") && err.contains("unknown field"),
        "{err}"
    );
}

#[test]
fn rest_section_defaults_parses_and_names_bad_keys() {
    let d = parse("").unwrap().rest;
    assert!(d.enabled);
    assert_eq!(d.address.to_string(), "127.0.0.1:8443");
    let cfg = parse("rest:\n  enabled: false\n  address: \"0.0.0.0:9443\"\n").unwrap();
    assert!(!cfg.rest.enabled);
    assert_eq!(cfg.rest.address.port(), 9443);
    let e = parse("rest:\n  adress: \"127.0.0.1:1\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rest") && e.contains("adress"), "{e}");
    let e = parse("rest:\n  address: localhost\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rest.address") && e.contains("IP:PORT"), "{e}");
    let e = parse("rest:\n  enabled: maybe\n").unwrap_err().to_string();
    assert!(e.contains("rest.enabled"), "{e}");
}

#[test]
fn metrics_section_defaults_to_dcgm_exporters_loopback_port_and_names_bad_keys() {
    let d = parse("").unwrap().metrics;
    assert!(d.enabled && !d.tls);
    assert_eq!(d.address.to_string(), "127.0.0.1:9400");
    let cfg = parse("metrics:\n  address: \"0.0.0.0:0\"\n  tls: true\n").unwrap();
    assert_eq!(cfg.metrics.address.port(), 0);
    assert!(cfg.metrics.tls);
    for (text, key, form) in [
        (
            "metrics:\n  address: localhost:9400\n",
            "metrics.address",
            "IP:PORT",
        ),
        ("metrics:\n  address: 9400\n", "metrics.address", "IP:PORT"),
        ("metrics:\n  tls: sometimes\n", "metrics.tls", "bool"),
        ("metrics:\n  port: 9400\n", "metrics.port", "unknown field"),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(form), "{text}: {e}");
    }
}
