//! The services against a temp-dir store and a real engine that never gets
//! to start a shim (no sandbox, a shim path that does not exist): role
//! refusals, refusals naming the field, and what an admitted request
//! turns into.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::record::AuditRecord;
use joblet_core::{FieldError, JobId, JobRequest, JobState, NodeCapabilities};
use joblet_pki::Role;
use joblet_store::{Store, TransitionExtra};

use super::*;
use crate::engine::{Engine, EngineConfig, EngineHandle};
use crate::state_dir::StateDir;

struct Node {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    jobs: Jobs,
    audit: Audit,
}

fn admission() -> Admission {
    Admission {
        allow_host_network: false,
        max_upload_bytes: 1 << 20,
        work_size_bytes: None,
        caps: NodeCapabilities {
            uploads: true,
            ..Default::default()
        },
        default_timeout: Some(Duration::from_secs(600)),
        node: crate::node_facts::NodeFacts {
            online_cpus: Some(vec![0, 1]),
            allowed_cpus: Some(vec![0, 1]),
            arg_max: Some(2 * 1024 * 1024),
            max_arg_strlen: Some(131_072),
        },
        state_disk: None,
        executors: Arc::new(joblet_core::executor::ExecutorCatalog::default()),
        cdi_dirs: Vec::new(),
        gpu_sharing: joblet_gpu::exec::SharingMode::Exclusive,
    }
}

/// A real engine on a node without a sandbox, whose jobs cannot start
/// (there is no shim binary): enough for what the service decides.
async fn engine(store: Arc<Store>, dirs: StateDir) -> EngineHandle {
    let agent = crate::agent::LocalAgent::new(crate::agent::AgentConfig {
        dirs: dirs.clone(),
        shim_program: "/nonexistent/joblet-shim".into(),
        shim_args: Vec::new(),
        sandbox: None,
        gpus: None,
        capacity: joblet_sched::model::NodeCapacity {
            max_jobs: Some(1),
            ..Default::default()
        },
        warm_pool: (0, 0),
        work_retention: None,
        mounts: None,
        executors: Arc::new(crate::executor::NodeExecutors::native_only(
            &Default::default(),
        )),
    });
    Engine::start(
        store,
        dirs,
        EngineConfig {
            sched: joblet_sched::model::SchedConfig::default(),
            stop_grace: Duration::from_secs(1),
            rules: joblet_engine::JobRules::default(),
            state_reserve_mb: 0,
            min_free_disk_mb: 0,
        },
        agent,
    )
    .await
    .unwrap()
}

async fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let dirs = StateDir::new(dir.path());
    std::fs::create_dir_all(dirs.jobs()).unwrap();
    let store = Arc::new(Store::open(&dirs.db(), &dirs.secrets_key()).unwrap());
    let handle = engine(store.clone(), dirs.clone()).await;
    Node {
        jobs: Jobs::new(store.clone(), handle, dirs, admission(), None, None),
        audit: Audit::new(store.clone()),
        store,
        _dir: dir,
    }
}

fn admin() -> Caller {
    Caller {
        name: "alice".into(),
        role: Role::Admin,
    }
}

fn viewer() -> Caller {
    Caller {
        name: "bob".into(),
        role: Role::Viewer,
    }
}

fn request() -> JobRequest {
    JobRequest {
        command: "python3".into(),
        ..Default::default()
    }
}

/// A finished job in the store, made without the engine.
fn stored(store: &Store, n: u32, gpus: i64) -> JobId {
    let id = JobId::parse(&format!("{n:08x}-0000-4000-8000-000000000000")).unwrap();
    let spec = JobRequest {
        gpu_count: gpus,
        ..request()
    }
    .validate()
    .unwrap()
    .0;
    store
        .create_job(&id, "alice", &spec, &BTreeMap::new(), 1)
        .unwrap();
    for s in [JobState::Queued, JobState::Running, JobState::Completed] {
        store
            .transition(&id, s, 2, TransitionExtra::default())
            .unwrap();
    }
    id
}

fn denied(r: Result<impl std::fmt::Debug, ApiError>, action: &str) {
    match r {
        Err(ApiError::PermissionDenied {
            name, action: a, ..
        }) => {
            assert_eq!((name.as_str(), a), ("bob", action))
        }
        other => panic!("expected a refusal to {action}, got {other:?}"),
    }
}

fn field(r: Result<impl std::fmt::Debug, ApiError>) -> String {
    match r {
        Err(ApiError::InvalidField(FieldError { field, .. })) => field,
        other => panic!("expected a bad field, got {other:?}"),
    }
}

#[tokio::test]
async fn a_viewer_is_refused_every_change_before_its_request_is_looked_at() {
    let n = node().await;
    let id = stored(&n.store, 1, 0);
    let bad = JobRequest {
        max_cpu: -1,
        ..request()
    };
    denied(n.jobs.run(&viewer(), bad.clone()).await, "run jobs");
    denied(n.jobs.run_follow(&viewer(), bad).await, "run jobs");
    denied(n.jobs.submission(&viewer()).map(|_| ()), "run jobs");
    denied(
        n.jobs.stop(&viewer(), "not-hex", Some(-1)).await,
        "stop jobs",
    );
    denied(n.jobs.kill(&viewer(), id.as_str()).await, "kill jobs");
    denied(n.jobs.delete(&viewer(), id.as_str()).await, "delete jobs");
    denied(
        n.audit.list(
            &viewer(),
            &AuditQuery {
                since_ms: -1,
                owner: String::new(),
            },
        ),
        "read the GPU audit log (it needs role admin)",
    );
    let gpus = Gpus::new(None, || 0);
    let bad_action = Err(FieldError::new("action", "invalid value 0"));
    denied(
        gpus.set_state(&viewer(), "0", bad_action),
        "change GPU states",
    );
    assert!(n.store.get(&id).unwrap().is_some(), "nothing was deleted");
}

#[tokio::test]
async fn a_viewer_reads() {
    let n = node().await;
    let id = stored(&n.store, 1, 0);
    let job = n.jobs.status(&viewer(), &id.as_str()[..4]).await.unwrap();
    assert_eq!(job.record.id, id);
    assert_eq!(job.transitions.len(), 4, "status shows the history");
    assert_eq!(job.gpus, None);
    let all = n.jobs.list(&viewer(), &JobFilter::default()).await.unwrap();
    assert_eq!(all.len(), 1);
    assert!(all[0].transitions.is_empty(), "a list does not");
    let me = n.jobs.whoami(&viewer());
    assert_eq!((me.name.as_str(), me.role), ("bob", Role::Viewer));
    assert!(me.supported.contains(&"upload"), "{:?}", me.supported);
    assert_eq!(me.default_executor, "native");
    let names: Vec<(&str, bool)> = me
        .executors
        .iter()
        .map(|e| (e.info.name.as_str(), e.allowed))
        .collect();
    assert_eq!(names, [("native", true)]);
    assert!(n.jobs.logs(&viewer(), id.as_str(), 0, false).await.is_ok());
}

#[tokio::test]
async fn an_admins_bad_request_is_refused_naming_the_field() {
    let n = node().await;
    let id = stored(&n.store, 1, 0);
    let negative = JobRequest {
        max_cpu: -1,
        ..request()
    };
    assert_eq!(
        field(n.jobs.run(&admin(), negative).await),
        "resources.max_cpu"
    );
    let with_upload = JobRequest {
        uploads: vec![joblet_core::UploadEntry {
            path: "a".into(),
            kind: joblet_core::UploadKind::File,
            mode: 0o644,
            size: 1,
            target: String::new(),
        }],
        ..request()
    };
    assert_eq!(field(n.jobs.run(&admin(), with_upload).await), "uploads");
    let submit = n.jobs.submission(&admin()).unwrap();
    let none = futures::stream::empty();
    assert_eq!(field(submit.submit(None, none).await), "job");
    assert_eq!(
        field(n.jobs.stop(&admin(), id.as_str(), Some(-1)).await),
        "grace_seconds"
    );
    let filter = JobFilter {
        states: Vec::new(),
        limit: -1,
    };
    assert_eq!(field(n.jobs.list(&admin(), &filter).await), "limit");
    let query = AuditQuery {
        since_ms: -1,
        owner: String::new(),
    };
    assert_eq!(field(n.audit.list(&admin(), &query)), "since_ms");
    let e = n.jobs.status(&admin(), "ffff").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "no job with id or prefix \"ffff\" (see `rnx job list`)"
    );
    // What exec would refuse is refused before anything is recorded.
    let big_env = JobRequest {
        env: vec![("BIG".into(), "x".repeat(1 << 20))],
        ..request()
    };
    assert_eq!(field(n.jobs.run(&admin(), big_env).await), "env[\"BIG\"]");
    // An executor this node lacks, through RunJob and SubmitJob alike.
    let kata = JobRequest {
        executor: "kata".into(),
        ..request()
    };
    let e = n.jobs.run(&admin(), kata.clone()).await.unwrap_err();
    assert!(e.to_string().contains("it has: native"), "{e}");
    assert_eq!(field(Err::<(), _>(e)), "executor");
    let submit = n.jobs.submission(&admin()).unwrap();
    let none = futures::stream::empty();
    assert_eq!(field(submit.submit(Some(kata), none).await), "executor");
    // CDI devices on the native sandbox, which has no cdi capability.
    let device = JobRequest {
        devices: vec!["nvidia.com/gpu=0".into()],
        ..request()
    };
    let e = n.jobs.run(&admin(), device).await.unwrap_err();
    assert!(e.to_string().contains("lacks the cdi capability"), "{e}");
    let listed = n.jobs.list(&admin(), &JobFilter::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "only the stored job");
    // A 100 KB id is named by its start.
    let e = n
        .jobs
        .status(&admin(), &"a".repeat(100 * 1024))
        .await
        .unwrap_err();
    assert!(e.to_string().len() < 200, "{e}");
}

#[tokio::test]
async fn the_host_network_needs_the_nodes_permission() {
    let n = node().await;
    let host = JobRequest {
        network: "host".into(),
        ..request()
    };
    let e = n.jobs.run(&admin(), host).await.unwrap_err();
    assert!(
        matches!(
            e,
            ApiError::NotAllowed {
                setting: "sandbox.allow_host_network",
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn an_admitted_job_is_the_callers_with_the_nodes_default_timeout() {
    let n = node().await;
    let job = n.jobs.run(&admin(), request()).await.unwrap();
    assert_eq!(job.record.owner, "alice");
    assert_eq!(job.record.spec.timeout, Some(Duration::from_secs(600)));
    assert_eq!(
        job.record.spec.executor.as_deref(),
        Some("native"),
        "the record names the executor it runs on"
    );
    let stored = n.store.get(&job.record.id).unwrap().unwrap();
    assert_eq!(stored.spec.executor.as_deref(), Some("native"));
    let zero = JobRequest {
        timeout_seconds: Some(0),
        ..request()
    };
    let job = n.jobs.run(&admin(), zero).await.unwrap();
    assert_eq!(
        job.record.spec.timeout,
        Some(Duration::from_secs(600)),
        "0 = the node's, never no limit"
    );
    let shorter = JobRequest {
        timeout_ms: Some(500),
        ..request()
    };
    let job = n.jobs.run(&admin(), shorter).await.unwrap();
    assert_eq!(job.record.spec.timeout, Some(Duration::from_millis(500)));
}

#[tokio::test]
async fn a_finished_job_is_deleted_by_an_admin() {
    let n = node().await;
    let id = stored(&n.store, 1, 0);
    assert_eq!(
        n.jobs.delete(&admin(), &id.as_str()[..6]).await.unwrap(),
        id
    );
    assert!(n.store.get(&id).unwrap().is_none());
}

#[tokio::test]
async fn the_audit_log_filters_by_time_and_owner() {
    let n = node().await;
    let rec = |job: &str, owner: &str, start_ms| AuditRecord {
        job_id: job.into(),
        owner: owner.into(),
        gpu_uuids: vec!["GPU-a".into()],
        gpu_indices: vec![0],
        memory_mb_per_gpu: None,
        sharing: "exclusive".into(),
        start_ms,
        end_ms: None,
        peak_memory_mb: None,
        ended: None,
        reason: None,
    };
    n.store.audit_open(&rec("a", "alice", 100)).unwrap();
    n.store.audit_open(&rec("b", "bob", 200)).unwrap();
    n.store.audit_close("a", 1_100, "FAILED", "").unwrap();
    let list = |since_ms, owner: &str| {
        n.audit
            .list(
                &admin(),
                &AuditQuery {
                    since_ms,
                    owner: owner.into(),
                },
            )
            .unwrap()
            .into_iter()
            .map(|r| r.job_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(list(0, ""), ["a", "b"]);
    assert_eq!(list(0, " bob "), ["b"]);
    assert_eq!(list(2_000, ""), ["b"], "only the open one");
}

#[tokio::test]
async fn a_jobs_gpus_come_from_its_audit_record() {
    let n = node().await;
    let id = stored(&n.store, 2, 1);
    n.store
        .audit_open(&AuditRecord {
            job_id: id.to_string(),
            owner: "alice".into(),
            gpu_uuids: vec!["GPU-a".into()],
            gpu_indices: vec![3],
            memory_mb_per_gpu: Some(1024),
            sharing: "shared".into(),
            start_ms: 5,
            end_ms: None,
            peak_memory_mb: None,
            ended: None,
            reason: None,
        })
        .unwrap();
    let job = n.jobs.status(&viewer(), id.as_str()).await.unwrap();
    let gpus = job.gpus.expect("a placed GPU job shows its GPUs");
    assert_eq!(
        (gpus.indices, gpus.memory_mb_per_gpu),
        (vec![3], Some(1024))
    );
}

#[test]
fn gpu_calls_on_a_node_without_gpus_say_so_after_the_role_check() {
    let gpus = Gpus::new(None, || 0);
    assert!(matches!(
        gpus.status(&viewer()),
        Err(ApiError::GpusDisabled)
    ));
    assert!(matches!(
        gpus.health(&viewer(), "0"),
        Err(ApiError::GpusDisabled)
    ));
    let bad_action = Err(FieldError::new("action", "invalid value 0"));
    assert!(matches!(
        gpus.set_state(&admin(), "0", bad_action),
        Err(ApiError::GpusDisabled)
    ));
}
