//! Unit tests of `spec`.

use super::*;

fn req() -> JobRequest {
    JobRequest {
        command: "echo".into(),
        args: vec!["hi".into()],
        ..Default::default()
    }
}

#[test]
fn minimal_request_is_valid() {
    let (spec, secrets) = req().validate().unwrap();
    assert_eq!(spec.command, "echo");
    assert_eq!(spec.timeout, None);
    assert!(secrets.is_empty());
    spec.check_supported(&NodeCapabilities::default()).unwrap();
}

/// Each bad field is refused with its own name and the accepted form.
#[test]
fn bad_fields_are_named() {
    type Edit = fn(&mut JobRequest);
    let table: &[(&str, Edit, &str)] = &[
        ("command", |r| r.command = "  ".into(), "is empty"),
        ("command", |r| r.command = "a\0b".into(), "NUL"),
        ("args[0]", |r| r.args = vec!["x\0".into()], "NUL"),
        (
            "resources.max_cpu",
            |r| r.max_cpu = -1,
            "must not be negative",
        ),
        ("resources.max_cpu", |r| r.max_cpu = i64::MAX, "too large"),
        (
            "resources.max_memory_mb",
            |r| r.max_memory_mb = -5,
            "negative",
        ),
        (
            "resources.max_memory_mb",
            |r| r.max_memory_mb = i64::MAX,
            "too large",
        ),
        ("resources.max_iobps", |r| r.max_iobps = -1, "negative"),
        ("resources.gpu_count", |r| r.gpu_count = -2, "negative"),
        (
            "resources.gpu_count",
            |r| r.gpu_count = 100_000,
            "too large",
        ),
        (
            "resources.gpu_memory_mb",
            |r| {
                r.gpu_count = 1;
                r.gpu_memory_mb = -8
            },
            "negative",
        ),
        (
            "resources.gpu_memory_mb",
            |r| r.gpu_memory_mb = 8192,
            "gpu_count",
        ),
        (
            "resources.gpu_milli",
            |r| r.gpu_milli = 500,
            "needs resources.gpu_count 1 (got 0)",
        ),
        (
            "resources.gpu_milli",
            |r| {
                r.gpu_count = 2;
                r.gpu_milli = 500
            },
            "--gpu=0.5 asks for half of one GPU",
        ),
        (
            "resources.gpu_milli",
            |r| {
                r.gpu_count = 1;
                r.gpu_milli = 1500
            },
            "1 to 999 thousandths",
        ),
        (
            "resources.gpu_milli",
            |r| {
                r.gpu_count = 1;
                r.gpu_milli = -1
            },
            "1 to 999 thousandths",
        ),
        (
            "resources.gpu_milli",
            |r| {
                r.gpu_count = 1;
                r.gpu_milli = 250;
                r.mig_profile = "1g.10gb".into()
            },
            "cannot be a MIG slice",
        ),
        (
            "resources.cpu_cores",
            |r| r.cpu_cores = "3-1".into(),
            "0-3 or 1,3",
        ),
        (
            "env[\"1X\"]",
            |r| r.env = vec![("1X".into(), "v".into())],
            "KEY=VALUE",
        ),
        (
            "secret_env[\"A\"]",
            |r| {
                r.env = vec![("A".into(), "1".into())];
                r.secret_env = vec![("A".into(), "2".into())]
            },
            "twice",
        ),
        (
            "uploads[0].path",
            |r| {
                r.uploads = vec![UploadEntry {
                    path: "../x".into(),
                    kind: crate::UploadKind::File,
                    mode: 0o644,
                    size: 1,
                    target: String::new(),
                }]
            },
            "no '..'",
        ),
        (
            "runtime",
            |r| r.runtime = "py thon".into(),
            "python-3.11-ml",
        ),
        (
            "volumes[0]",
            |r| r.volumes = vec!["../etc".into()],
            "data-lake",
        ),
        (
            "network",
            |r| r.network = "bridge".into(),
            "none (own namespace",
        ),
        (
            "timeout_seconds",
            |r| r.timeout_seconds = Some(-1),
            "negative",
        ),
        (
            "resources.gpu_time_seconds",
            |r| {
                r.gpu_count = 1;
                r.gpu_time_seconds = Some(0)
            },
            "must be positive",
        ),
        (
            "resources.gpu_time_seconds",
            |r| {
                r.gpu_count = 1;
                r.gpu_time_seconds = Some(-3)
            },
            "--gpu-time=2h",
        ),
        (
            "resources.gpu_time_seconds",
            |r| {
                r.gpu_count = 1;
                r.gpu_time_seconds = Some(i64::MAX)
            },
            "too large",
        ),
        (
            "resources.gpu_time_seconds",
            |r| r.gpu_time_seconds = Some(60),
            "gpu_count",
        ),
        (
            "cuda_version",
            |r| {
                r.gpu_count = 1;
                r.cuda_version = "12".into()
            },
            "MAJOR.MINOR or MAJOR.MINOR.PATCH",
        ),
        (
            "cuda_version",
            |r| {
                r.gpu_count = 1;
                r.cuda_version = "v12.2".into()
            },
            "like 12.2",
        ),
        ("cuda_version", |r| r.cuda_version = "12.2".into(), "--cuda"),
        (
            "mig_profile",
            |r| {
                r.gpu_count = 1;
                r.mig_profile = "1gpu".into()
            },
            "like 1g.10gb",
        ),
        (
            "mig_profile",
            |r| r.mig_profile = "1g.10gb".into(),
            "--gpu=N together with --mig",
        ),
        (
            "gpu_profiling",
            |r| r.gpu_profiling = true,
            "--gpu-profiling",
        ),
        (
            "timeout_seconds",
            |r| r.timeout_seconds = Some(i64::MAX),
            "too large",
        ),
        ("timeout_ms", |r| r.timeout_ms = Some(-1), "negative"),
        (
            "timeout_ms",
            |r| r.timeout_ms = Some(limits::MAX_TIMEOUT_MS + 1),
            "too large",
        ),
    ];
    for (field, edit, needle) in table {
        let mut r = req();
        edit(&mut r);
        let e = r.validate().unwrap_err();
        assert_eq!(&e.field, field, "{e}");
        assert!(e.to_string().contains(needle), "{field}: {e}");
    }
}

#[test]
fn secrets_are_kept_apart_from_the_spec() {
    let mut r = req();
    r.secret_env = vec![("TOKEN".into(), "s3cret".into())];
    let (spec, secrets) = r.validate().unwrap();
    assert_eq!(spec.secret_env_keys, vec!["TOKEN".to_string()]);
    assert!(!serde_json::to_string(&spec).unwrap().contains("s3cret"));
    assert_eq!(secrets["TOKEN"], "s3cret");
}

/// 0 and unset both leave the limit to the node; a limit is kept to the
/// millisecond, and `timeout_ms` wins over the older `timeout_seconds`.
#[test]
fn timeouts_keep_milliseconds_and_zero_asks_for_none() {
    let timeout = |ms: Option<i64>, secs: Option<i64>| {
        let r = JobRequest {
            timeout_ms: ms,
            timeout_seconds: secs,
            ..req()
        };
        r.validate().unwrap().0.timeout
    };
    assert_eq!(timeout(None, None), None);
    assert_eq!(timeout(None, Some(0)), None);
    assert_eq!(timeout(Some(0), None), None);
    assert_eq!(timeout(None, Some(30)), Some(Duration::from_secs(30)));
    assert_eq!(timeout(Some(500), None), Some(Duration::from_millis(500)));
    assert_eq!(timeout(Some(1), None), Some(Duration::from_millis(1)));
    assert_eq!(
        timeout(Some(1900), Some(2)),
        Some(Duration::from_millis(1900)),
        "timeout_ms wins; timeout_seconds is its rounded-up copy for older nodes"
    );
}

/// A value echoed in a message is cut, so a huge one cannot make the
/// message huge.
#[test]
fn long_values_are_echoed_clipped() {
    let huge = "x".repeat(100_000);
    for edit in [
        (|r: &mut JobRequest, h: &str| r.runtime = format!("{h} y")) as fn(&mut JobRequest, &str),
        |r, h| r.volumes = vec![format!("{h}/")],
        |r, h| r.network = h.into(),
        |r, h| r.cpu_cores = h.into(),
        |r, h| r.env = vec![(format!("1{h}"), "v".into())],
        |r, h| r.mig_profile = h.into(),
    ] {
        let mut r = req();
        r.gpu_count = 1;
        edit(&mut r, &huge);
        let e = r.validate().unwrap_err();
        assert!(
            e.to_string().len() < 400,
            "{}: {}",
            e.field,
            e.to_string().len()
        );
        assert!(e.to_string().contains('…'), "{e}");
    }
}

#[test]
fn unenforceable_requests_are_refused_by_name() {
    let none = NodeCapabilities::default();
    let mut r = req();
    r.gpu_count = 2;
    r.gpu_memory_mb = 8192;
    let (spec, _) = r.validate().unwrap();
    let e = spec.check_supported(&none).unwrap_err();
    assert_eq!(e.flag, "--gpu");
    assert!(e.to_string().contains("not supported yet on this node"));
    let gpus = NodeCapabilities { gpus: true, ..none };
    spec.check_supported(&gpus).unwrap();

    let mut r = req();
    r.max_memory_mb = 512;
    let e = r.validate().unwrap().0.check_supported(&none).unwrap_err();
    assert_eq!(e.flag, "--max-memory");
}

#[test]
fn a_gpu_share_is_kept_and_a_whole_share_is_a_whole_gpu() {
    let mut r = req();
    r.gpu_count = 1;
    r.gpu_milli = 250;
    let (spec, _) = r.validate().unwrap();
    assert_eq!(
        (spec.resources.gpu_count, spec.resources.gpu_milli),
        (1, Some(250))
    );
    r.gpu_milli = 1000;
    let (whole, _) = r.validate().unwrap();
    assert_eq!(whole.resources.gpu_milli, None);
}

#[test]
fn gpu_time_and_cuda_are_kept_in_the_spec() {
    let mut r = req();
    r.gpu_count = 2;
    r.gpu_time_seconds = Some(5400);
    r.cuda_version = " 12.2 ".into();
    let (spec, _) = r.validate().unwrap();
    assert_eq!(spec.resources.gpu_time, Some(Duration::from_secs(5400)));
    assert_eq!(spec.cuda.as_deref(), Some("12.2"));
    let e = spec
        .check_supported(&NodeCapabilities::default())
        .unwrap_err();
    assert_eq!(e.flag, "--gpu");
    spec.check_supported(&NodeCapabilities {
        gpus: true,
        ..Default::default()
    })
    .unwrap();

    let (plain, _) = req().validate().unwrap();
    assert_eq!((plain.resources.gpu_time, plain.cuda), (None, None));
}

#[test]
fn mig_profile_and_profiling_are_kept_and_need_gpu_support() {
    let mut r = req();
    r.gpu_count = 2;
    r.mig_profile = " 1G.10GB ".into();
    r.gpu_profiling = true;
    let (spec, _) = r.validate().unwrap();
    assert_eq!(spec.resources.mig_profile.as_deref(), Some("1g.10gb"));
    assert!(spec.gpu_profiling);
    let gpus = NodeCapabilities {
        gpus: true,
        ..Default::default()
    };
    spec.check_supported(&gpus).unwrap();
    for (edit, flag) in [
        (
            (|s: &mut JobSpec| s.resources.gpu_count = 0) as fn(&mut JobSpec),
            "--mig",
        ),
        (
            |s: &mut JobSpec| {
                s.resources.gpu_count = 0;
                s.resources.mig_profile = None
            },
            "--gpu-profiling",
        ),
    ] {
        let mut s = spec.clone();
        edit(&mut s);
        let e = s.check_supported(&NodeCapabilities::default()).unwrap_err();
        assert_eq!(e.flag, flag);
    }
    let (plain, _) = req().validate().unwrap();
    assert_eq!(plain.resources.mig_profile, None);
    assert!(!plain.gpu_profiling);
}

/// A spec stored before `gpu_time`, `cuda`, `mig_profile` and
/// `gpu_profiling` existed still reads.
#[test]
fn old_specs_deserialize() {
    let (mut spec, _) = req().validate().unwrap();
    let mut v = serde_json::to_value(&spec).unwrap();
    v["resources"].as_object_mut().unwrap().remove("gpu_time");
    v["resources"]
        .as_object_mut()
        .unwrap()
        .remove("mig_profile");
    v.as_object_mut().unwrap().remove("cuda");
    v.as_object_mut().unwrap().remove("gpu_profiling");
    let back: JobSpec = serde_json::from_value(v).unwrap();
    spec.resources.gpu_time = None;
    spec.cuda = None;
    assert_eq!(back, spec);
}
