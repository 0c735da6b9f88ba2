use std::sync::Arc;
use std::time::Duration;

use joblet_core::executor::{ExecutorCaps, ExecutorCatalog, ExecutorInfo, ExecutorKind};
use joblet_core::{JobRequest, Network, NodeCapabilities, UploadEntry, UploadKind};

use super::*;
use crate::node_facts::NodeFacts;
use joblet_gpu::exec::SharingMode;

fn node() -> Admission {
    Admission {
        allow_host_network: false,
        max_upload_bytes: 1000,
        work_size_bytes: Some(100),
        caps: NodeCapabilities {
            uploads: true,
            ..Default::default()
        },
        default_timeout: Some(Duration::from_secs(3600)),
        node: two_cpus(),
        state_disk: None,
        executors: Arc::new(ExecutorCatalog::default()),
        cdi_dirs: Vec::new(),
        gpu_sharing: SharingMode::Exclusive,
    }
}

/// A 2-CPU node with 4 KiB pages and an 8 MiB stack limit.
fn two_cpus() -> NodeFacts {
    NodeFacts {
        online_cpus: Some(vec![0, 1]),
        allowed_cpus: Some(vec![0, 1]),
        arg_max: Some(2 * 1024 * 1024),
        max_arg_strlen: Some(131_072),
    }
}

#[test]
fn a_gpu_share_needs_a_node_that_shares_its_gpus() {
    let mut n = node();
    n.caps.gpus = true;
    let half = JobRequest {
        gpu_count: 1,
        gpu_milli: 500,
        ..job()
    };
    let e = n.accept("alice", &half).unwrap_err().to_string();
    assert!(e.contains("resources.gpu_milli"), "{e}");
    assert!(e.contains("gpu.sharing: exclusive"), "{e}");
    for mode in [SharingMode::Shared, SharingMode::Mps] {
        n.gpu_sharing = mode;
        let (spec, _) = n.accept("alice", &half).unwrap();
        assert_eq!(spec.resources.gpu_milli, Some(500));
    }
}

fn job() -> JobRequest {
    JobRequest {
        command: "python3".into(),
        ..Default::default()
    }
}

fn file(path: &str, size: u64) -> UploadEntry {
    UploadEntry {
        path: path.into(),
        kind: UploadKind::File,
        mode: 0o644,
        size,
        target: String::new(),
    }
}

fn refusal(req: JobRequest) -> String {
    node().accept("alice", &req).unwrap_err().to_string()
}

/// The node's default is also its limit: a job that asks for none, or
/// for 0, gets it; a job may only ask for less; sub-second limits are kept.
#[test]
fn a_job_gets_the_smaller_of_its_timeout_and_the_nodes() {
    let timeout = |node: &Admission, ms: Option<i64>, secs: Option<i64>| {
        node.accept(
            "alice",
            &JobRequest {
                timeout_ms: ms,
                timeout_seconds: secs,
                ..job()
            },
        )
        .unwrap()
        .0
        .timeout
    };
    let hour = Some(Duration::from_secs(3600));
    assert_eq!(timeout(&node(), None, None), hour);
    assert_eq!(timeout(&node(), Some(0), None), hour, "0 = the node's");
    assert_eq!(timeout(&node(), None, Some(0)), hour, "0 = the node's");
    assert_eq!(
        timeout(&node(), None, Some(30)),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        timeout(&node(), None, Some(7200)),
        hour,
        "a job cannot raise the node's limit"
    );
    assert_eq!(
        timeout(&node(), Some(1900), Some(2)),
        Some(Duration::from_millis(1900))
    );

    // The node: default_timeout 500ms.
    let half = Admission {
        default_timeout: Some(Duration::from_millis(500)),
        ..node()
    };
    let ms500 = Some(Duration::from_millis(500));
    assert_eq!(timeout(&half, Some(500), Some(1)), ms500);
    assert_eq!(timeout(&half, Some(10_000), Some(10)), ms500);
    assert_eq!(timeout(&half, Some(0), None), ms500);
    assert_eq!(timeout(&half, None, None), ms500);
    assert_eq!(
        timeout(&half, Some(1), Some(1)),
        Some(Duration::from_millis(1))
    );

    let unlimited = Admission {
        default_timeout: None,
        ..node()
    };
    assert_eq!(timeout(&unlimited, None, None), None);
    assert_eq!(timeout(&unlimited, Some(0), None), None);
    assert_eq!(
        timeout(&unlimited, Some(1900), None),
        Some(Duration::from_millis(1900))
    );
}

#[test]
fn the_host_network_needs_the_nodes_permission() {
    let host = JobRequest {
        network: "host".into(),
        ..job()
    };
    assert_eq!(
        refusal(host.clone()),
        "network host: jobs on the host network are not allowed on this node; an admin can enable sandbox.allow_host_network in joblet-config.yml"
    );
    let allowing = Admission {
        allow_host_network: true,
        ..node()
    };
    assert_eq!(
        allowing.accept("alice", &host).unwrap().0.network,
        Network::Host
    );
}

#[test]
fn a_bad_field_is_refused_by_name() {
    let e = node()
        .accept(
            "alice",
            &JobRequest {
                max_cpu: -1,
                ..job()
            },
        )
        .unwrap_err();
    assert!(
        matches!(&e, ApiError::InvalidField(f) if f.field == "resources.max_cpu"),
        "{e}"
    );
    assert!(refusal(JobRequest {
        command: " ".into(),
        ..job()
    })
    .starts_with("command: is empty"));
}

#[test]
fn what_the_node_cannot_enforce_is_refused() {
    let e = node()
        .accept(
            "alice",
            &JobRequest {
                max_memory_mb: 512,
                ..job()
            },
        )
        .unwrap_err();
    assert!(matches!(e, ApiError::Unsupported(_)), "{e}");
}

#[test]
fn uploads_must_fit_the_node_limit_and_the_jobs_work_dir() {
    let e = refusal(JobRequest {
        uploads: vec![file("big", 2000)],
        ..job()
    });
    assert!(e.starts_with("uploads"), "{e}");
    assert_eq!(
        refusal(JobRequest {
            uploads: vec![file("a", 60), file("b", 60)],
            ..job()
        }),
        "uploads: 120 bytes in total do not fit in the job's /work (100 bytes, filesystem.work_size_mb); upload less, or ask an admin for a larger filesystem.work_size_mb"
    );
    let unsized_work = Admission {
        work_size_bytes: None,
        ..node()
    };
    let (spec, _) = unsized_work
        .accept(
            "alice",
            &JobRequest {
                uploads: vec![file("a", 60), file("b", 60)],
                ..job()
            },
        )
        .unwrap();
    assert_eq!((spec.upload_entries, spec.upload_bytes), (2, 120));
}

#[test]
fn run_job_carries_no_uploads() {
    assert!(no_uploads(&job()).is_ok());
    let e = no_uploads(&JobRequest {
        uploads: vec![file("a", 1)],
        ..job()
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "uploads: RunJob carries no file data: send jobs with uploads through SubmitJob (rnx --upload does)"
    );
}

#[test]
fn grace_limit_and_since_are_checked_by_name() {
    assert_eq!(grace(None), Ok(None));
    assert_eq!(grace(Some(0)), Ok(Some(Duration::ZERO)));
    assert_eq!(grace(Some(86_400)), Ok(Some(Duration::from_secs(86_400))));
    assert_eq!(
        grace(Some(86_401)).unwrap_err().to_string(),
        "grace_seconds: invalid value 86401: expected 0 to 86400 seconds"
    );
    assert_eq!(grace(Some(-1)).unwrap_err().field, "grace_seconds");

    assert_eq!(list_limit(0), Ok(None));
    assert_eq!(list_limit(5), Ok(Some(5)));
    assert_eq!(
        list_limit(-1).unwrap_err().to_string(),
        "limit: invalid value -1: expected 0 (all) or a positive number"
    );

    assert_eq!(audit_since(0), Ok(None));
    assert_eq!(audit_since(7), Ok(Some(7)));
    assert!(audit_since(-1)
        .unwrap_err()
        .to_string()
        .starts_with("since_ms: invalid value -1"));
}

#[test]
fn the_config_sets_the_admission() {
    let mut cfg = Config::default();
    cfg.jobs.max_upload_mb = 2;
    cfg.sandbox.enabled = true;
    cfg.filesystem.work_size_mb = 3;
    let a = Admission::new(
        &cfg,
        NodeCapabilities::default(),
        two_cpus(),
        Arc::new(ExecutorCatalog::default()),
    );
    assert_eq!(a.node, two_cpus());
    assert_eq!(a.max_upload_bytes, 2 * 1024 * 1024);
    assert_eq!(a.work_size_bytes, Some(3 * 1024 * 1024));
    assert_eq!(a.default_timeout, None, "0 = no default limit");
    cfg.sandbox.enabled = false;
    cfg.jobs.default_timeout = Duration::from_secs(60);
    let a = Admission::new(
        &cfg,
        NodeCapabilities::default(),
        NodeFacts::default(),
        Arc::new(ExecutorCatalog::default()),
    );
    assert_eq!(
        a.work_size_bytes, None,
        "unsandboxed jobs have no sized /work"
    );
    assert_eq!(a.default_timeout, Some(Duration::from_secs(60)));
}

fn pinning() -> Admission {
    Admission {
        caps: NodeCapabilities {
            cpu_pinning: true,
            ..Default::default()
        },
        ..node()
    }
}

fn cores(node: &Admission, list: &str) -> Result<Option<Vec<u32>>, String> {
    node.accept(
        "alice",
        &JobRequest {
            cpu_cores: list.into(),
            ..job()
        },
    )
    .map(|(spec, _)| spec.resources.cpu_cores)
    .map_err(|e| e.to_string())
}

#[test]
fn cpu_cores_must_be_cpus_jobs_may_use_on_this_node() {
    assert_eq!(cores(&pinning(), "0-1"), Ok(Some(vec![0, 1])));
    assert_eq!(cores(&pinning(), "1"), Ok(Some(vec![1])));
    assert_eq!(
        cores(&pinning(), "5").unwrap_err(),
        "resources.cpu_cores: CPU 5 is not on this node (online: 0-1); expected a CPU list within 0-1"
    );
    assert_eq!(
        cores(&pinning(), "0-7").unwrap_err(),
        "resources.cpu_cores: CPUs 2-7 are not on this node (online: 0-1); expected a CPU list within 0-1"
    );
    // Online, but outside the daemon's affinity (its cpuset).
    let confined = Admission {
        node: NodeFacts {
            online_cpus: Some(vec![0, 1, 2, 3]),
            allowed_cpus: Some(vec![0, 1]),
            ..two_cpus()
        },
        ..pinning()
    };
    assert_eq!(
        cores(&confined, "3").unwrap_err(),
        "resources.cpu_cores: CPU 3 is not available to jobs on this node (online: 0-3; the daemon's CPU affinity: 0-1); expected a CPU list within 0-1"
    );
    // Nothing known: nothing to check against.
    let unknown = Admission {
        node: NodeFacts::default(),
        ..pinning()
    };
    assert_eq!(cores(&unknown, "5"), Ok(Some(vec![5])));
    // A node that cannot pin says so first.
    assert!(cores(&node(), "5")
        .unwrap_err()
        .contains("not supported yet on this node"));
}

#[test]
fn each_string_fits_what_exec_takes() {
    let big = "x".repeat(1024 * 1024);
    let e = refusal(JobRequest {
        env: vec![("BIG".into(), big.clone())],
        ..job()
    });
    assert_eq!(
        e,
        "env[\"BIG\"]: value is 1048576 bytes, the kernel takes at most 131072 per string (KEY=VALUE with its NUL byte); pass large data as a file (--upload) instead"
    );
    let e = refusal(JobRequest {
        secret_env: vec![("TOKEN".into(), big.clone())],
        ..job()
    });
    assert!(
        e.starts_with("secret_env[\"TOKEN\"]: value is 1048576 bytes") && !e.contains("xxx"),
        "{e}"
    );
    let e = refusal(JobRequest {
        args: vec!["a".into(), "y".repeat(131_072)],
        ..job()
    });
    assert!(
        e.starts_with("args[1]: is 131072 bytes, the kernel takes at most 131072 per string"),
        "{e}"
    );
    // The largest string the kernel takes: 131071 bytes and its NUL.
    let (spec, _) = node()
        .accept(
            "alice",
            &JobRequest {
                args: vec!["y".repeat(131_071)],
                env: vec![("K".into(), "v".repeat(131_072 - 4))],
                ..job()
            },
        )
        .unwrap();
    assert_eq!(spec.args[0].len(), 131_071);
}

#[test]
fn argv_and_env_together_fit_arg_max() {
    // 20 variables of 120 KiB: each fits, together they do not.
    let env: Vec<(String, String)> = (0..20)
        .map(|i| (format!("V{i:02}"), "z".repeat(120 * 1024)))
        .collect();
    let e = refusal(JobRequest {
        env: env.clone(),
        ..job()
    });
    assert!(e.starts_with("env: the command line ("), "{e}");
    assert!(
        e.contains("the kernel takes at most 2080768 (ARG_MAX 2097152, less 16384 kept for what the node adds)"),
        "{e}"
    );
    let e = refusal(JobRequest {
        args: (0..20).map(|_| "a".repeat(120 * 1024)).collect(),
        ..job()
    });
    assert!(e.starts_with("args: the command line ("), "{e}");
    // Half of it fits.
    node()
        .accept(
            "alice",
            &JobRequest {
                env: env[..10].to_vec(),
                ..job()
            },
        )
        .unwrap();
    let unknown = Admission {
        node: NodeFacts::default(),
        ..node()
    };
    unknown
        .accept("alice", &JobRequest { env, ..job() })
        .unwrap();
}

/// Uploads are counted against the state disk's room above its floor.
#[test]
fn uploads_must_fit_on_the_state_disk_above_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let upload = |size: u64| JobRequest {
        command: "true".into(),
        uploads: vec![joblet_core::UploadEntry {
            path: "data.bin".into(),
            kind: joblet_core::UploadKind::File,
            size,
            mode: 0o644,
            target: String::new(),
        }],
        ..Default::default()
    };
    let roomy = Admission {
        state_disk: Some((dir.path().to_owned(), 0)),
        max_upload_bytes: u64::MAX,
        ..node()
    };
    roomy.accept("alice", &upload(1)).unwrap();
    let full = Admission {
        state_disk: Some((dir.path().to_owned(), u64::MAX / 2)),
        max_upload_bytes: u64::MAX,
        ..node()
    };
    let e = full.accept("alice", &upload(1)).unwrap_err().to_string();
    assert!(
        e.starts_with("uploads: 1 bytes do not fit on the node's state disk")
            && e.contains("jobs.min_free_disk_mb"),
        "{e}"
    );
    // No upload, no check.
    full.accept(
        "alice",
        &JobRequest {
            command: "true".into(),
            ..Default::default()
        },
    )
    .unwrap();
}

/// A node with the native sandbox (its default), runc (for `alice` and
/// `bob` only, with CDI) and gVisor, which cannot run GPU jobs.
fn with_executors() -> Admission {
    let mut catalog = ExecutorCatalog::default();
    catalog.executors.push(ExecutorInfo {
        name: "runc".into(),
        kind: ExecutorKind::Runc,
        binary: Some("/usr/bin/runc".into()),
        version: Some("1.1.12".into()),
        caps: ExecutorCaps {
            gpu: true,
            cdi: true,
            ..Default::default()
        },
        gpu_unavailable: None,
        users: vec!["alice".into(), "bob".into()],
    });
    catalog.executors.push(ExecutorInfo {
        name: "gvisor".into(),
        kind: ExecutorKind::Runsc,
        binary: Some("/usr/bin/runsc".into()),
        version: Some("release-20221219.0".into()),
        caps: ExecutorCaps::default(),
        gpu_unavailable: Some("runsc release 20221219 has no nvproxy".into()),
        users: Vec::new(),
    });
    Admission {
        caps: NodeCapabilities {
            uploads: true,
            gpus: true,
            ..Default::default()
        },
        executors: Arc::new(catalog),
        ..node()
    }
}

#[test]
fn an_admitted_job_names_the_executor_it_runs_on() {
    let cdi = tempfile::tempdir().unwrap();
    std::fs::write(
        cdi.path().join("nvidia.yaml"),
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: \"0\"\n    containerEdits:\n      env: [A=1]\n",
    )
    .unwrap();
    let node = Admission {
        cdi_dirs: vec![cdi.path().to_path_buf()],
        ..with_executors()
    };
    let (spec, _) = node.accept("carol", &job()).unwrap();
    assert_eq!(spec.executor.as_deref(), Some("native"), "the default");
    let (spec, _) = node
        .accept(
            "alice",
            &JobRequest {
                executor: "runc".into(),
                devices: vec!["nvidia.com/gpu=0".into()],
                ..job()
            },
        )
        .unwrap();
    assert_eq!(spec.executor.as_deref(), Some("runc"));
    assert_eq!(spec.devices, ["nvidia.com/gpu=0"]);
    // A device no spec there defines is refused, naming it and the known.
    let e = node
        .accept(
            "alice",
            &JobRequest {
                executor: "runc".into(),
                devices: vec!["nvidia.com/gpu=0".into(), "nvidia.com/gpu=7".into()],
                ..job()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("devices[1]") && e.contains("gpu=7") && e.ends_with(": 0"),
        "{e}"
    );
}

#[test]
fn an_unknown_executor_is_refused_naming_the_known_ones() {
    let e = with_executors()
        .accept(
            "alice",
            &JobRequest {
                executor: "kata".into(),
                ..job()
            },
        )
        .unwrap_err();
    let ApiError::InvalidField(f) = &e else {
        panic!("{e:?}");
    };
    assert_eq!(f.field, "executor");
    assert!(f.problem.contains("no executor \"kata\""), "{e}");
    assert!(f.problem.contains("native, runc, gvisor"), "{e}");
}

#[test]
fn a_gpu_job_on_an_executor_without_gpus_is_refused_naming_both() {
    let e = with_executors()
        .accept(
            "alice",
            &JobRequest {
                executor: "gvisor".into(),
                gpu_count: 1,
                ..job()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("executor: "), "{e}");
    assert!(
        e.contains("\"gvisor\" (runsc) lacks the gpu capability"),
        "{e}"
    );
    assert!(e.contains("runsc release 20221219 has no nvproxy"), "{e}");
}

#[test]
fn devices_need_an_executor_with_cdi_and_executors_their_users() {
    let node = with_executors();
    let e = node
        .accept(
            "alice",
            &JobRequest {
                devices: vec!["nvidia.com/gpu=0".into()],
                ..job()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"native\" (native) lacks the cdi capability"),
        "{e}"
    );
    let e = node
        .accept(
            "carol",
            &JobRequest {
                executor: "runc".into(),
                ..job()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("user \"carol\" may not use executor \"runc\""),
        "{e}"
    );
}
