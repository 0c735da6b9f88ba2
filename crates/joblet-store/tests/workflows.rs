//! Workflow records: created with a sequence number, saved after each
//! step, listed newest first, resumed while live, resolved by prefix,
//! deleted only once final; a file with secrets kept sealed at rest; a
//! run's jobs found through their spec, every attempt.

use std::collections::BTreeMap;

use joblet_core::{JobId, JobRequest, JobState, WorkflowJobRef};
use joblet_store::{Store, StoreError, TransitionExtra, WorkflowRecord};

mod support;
use support::Env;

const A: &str = "3f2a9c1e-0000-4000-8000-000000000001";
const B: &str = "3f2b0000-0000-4000-8000-000000000002";

fn rec(id: &str, yaml: &str, sealed: bool) -> WorkflowRecord {
    WorkflowRecord {
        id: id.into(),
        seq: 0,
        owner: "alice".into(),
        name: "pipeline".into(),
        file: "p.yaml".into(),
        yaml: yaml.into(),
        sealed,
        state: "PENDING".into(),
        snapshot_json: "{}".into(),
        shared_volume: "wf-3f2a9c1e".into(),
        created_ms: 1_700_000_000_000,
        ended_ms: None,
    }
}

fn job(store: &Store, n: u8, workflow: &str, name: &str, attempt: u32) -> JobId {
    let id = JobId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02}")).unwrap();
    let (mut spec, _) = JobRequest {
        command: "true".into(),
        ..Default::default()
    }
    .validate()
    .unwrap();
    spec.workflow = Some(WorkflowJobRef {
        id: workflow.into(),
        job: name.into(),
        attempt,
        shared: Some("/volumes/wf-3f2a9c1e".into()),
    });
    store
        .create_job_and_transition(
            &id,
            "alice",
            &spec,
            &BTreeMap::new(),
            5,
            (JobState::Queued, TransitionExtra::default()),
        )
        .unwrap();
    id
}

#[test]
fn a_run_is_created_saved_listed_resumed_and_kept_across_a_reopen() {
    let env = Env::new();
    let store = env.open();
    let a = store
        .create_workflow(&rec(A, "jobs: {}", false), &[])
        .unwrap();
    let b = store
        .create_workflow(&rec(B, "jobs: {}", false), &[])
        .unwrap();
    assert!(b.seq > a.seq);
    store
        .save_workflow(A, "RUNNING", "{\"state\":\"RUNNING\"}", &[], None)
        .unwrap();
    store
        .save_workflow(B, "COMPLETED", "{}", &[], Some(9))
        .unwrap();
    let listed: Vec<String> = store
        .list_workflows(None)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [B, A], "newest first");
    assert_eq!(store.list_workflows(Some(1)).unwrap().len(), 1);
    drop(store);
    let store = env.open();
    let live = store.live_workflows().unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].id, A);
    assert_eq!(live[0].snapshot_json, "{\"state\":\"RUNNING\"}");
    let done = store.workflow(B).unwrap().unwrap();
    assert_eq!((done.state.as_str(), done.ended_ms), ("COMPLETED", Some(9)));
    assert!(matches!(
        store.save_workflow("nope", "RUNNING", "{}", &[], None),
        Err(StoreError::WorkflowNotFound(_))
    ));
}

#[test]
fn ids_resolve_by_unique_prefix_and_name_the_problem_otherwise() {
    let env = Env::new();
    let store = env.open();
    store
        .create_workflow(&rec(A, "jobs: {}", false), &[])
        .unwrap();
    store
        .create_workflow(&rec(B, "jobs: {}", false), &[])
        .unwrap();
    assert_eq!(store.resolve_workflow("3f2a").unwrap(), A);
    assert_eq!(store.resolve_workflow(B).unwrap(), B);
    let e = store.resolve_workflow("3f2").unwrap_err().to_string();
    assert!(e.contains("ambiguous") && e.contains("3f2a9c1e"), "{e}");
    let e = store.resolve_workflow("ffff").unwrap_err();
    assert!(matches!(e, StoreError::WorkflowNotFound(_)), "{e}");
    let e = store.resolve_workflow("not-hex!").unwrap_err().to_string();
    assert!(e.contains("not valid"), "{e}");
}

#[test]
fn a_file_with_secrets_is_sealed_at_rest_and_opened_on_read() {
    let env = Env::new();
    let store = env.open();
    let yaml = "jobs:\n  a:\n    command: x\n    secret_environment: {TOKEN: hunter2-secret}\n";
    store.create_workflow(&rec(A, yaml, true), &[]).unwrap();
    assert_eq!(store.workflow(A).unwrap().unwrap().yaml, yaml);
    assert_eq!(store.live_workflows().unwrap()[0].yaml, yaml);
    drop(store);
    // Not in the database file in clear.
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let stored: String = conn
        .query_row("SELECT yaml FROM workflows WHERE id = ?1", [A], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored, "");
    let raw = std::fs::read(env.db()).unwrap();
    let wal = std::fs::read(env.dir.path().join("state.db-wal")).unwrap_or_default();
    for bytes in [raw, wal] {
        assert!(
            !bytes.windows(14).any(|w| w == b"hunter2-secret"),
            "the secret is on disk in clear"
        );
    }
}

#[test]
fn a_runs_jobs_are_found_every_attempt_and_only_a_final_run_is_deleted() {
    let env = Env::new();
    let store = env.open();
    store
        .create_workflow(&rec(A, "jobs: {}", false), &[])
        .unwrap();
    let j1 = job(&store, 1, A, "train", 1);
    let _other = job(&store, 2, B, "train", 1);
    let j3 = job(&store, 3, A, "train", 2);
    let jobs = store.workflow_jobs(A).unwrap();
    let ids: Vec<&JobId> = jobs.iter().map(|j| &j.id).collect();
    assert_eq!(ids, [&j1, &j3], "both attempts, oldest first, none of B's");
    assert_eq!(jobs[1].spec.workflow.as_ref().unwrap().attempt, 2);

    let e = store.delete_workflow(A).unwrap_err();
    assert!(matches!(e, StoreError::WorkflowNotFinished { .. }), "{e}");
    store
        .save_workflow(A, "FAILED", "{}", &[], Some(1))
        .unwrap();
    store.delete_workflow(A).unwrap();
    assert!(store.workflow(A).unwrap().is_none());
}

#[test]
fn each_jobs_phase_is_a_row_a_step_rewrites_only_what_it_changed_and_delete_takes_them() {
    let env = Env::new();
    let store = env.open();
    let phases: Vec<(String, String)> = ["prep", "train", "eval"]
        .iter()
        .map(|j| (j.to_string(), "{\"phase\":\"WAITING\"}".to_owned()))
        .collect();
    store
        .create_workflow(&rec(A, "jobs: {}", false), &phases)
        .unwrap();
    store
        .create_workflow(&rec(B, "jobs: {}", false), &phases)
        .unwrap();
    store
        .save_workflow(
            A,
            "RUNNING",
            "{}",
            &[(
                "train",
                "{\"phase\":\"SUBMITTING\",\"attempt\":1}".to_owned(),
            )],
            None,
        )
        .unwrap();
    let got = store.workflow_phases(A).unwrap();
    let names: Vec<&str> = got.iter().map(|(j, _)| j.as_str()).collect();
    assert_eq!(names, ["prep", "train", "eval"], "file order");
    assert!(got[1].1.contains("SUBMITTING"));
    assert!(got[0].1.contains("WAITING") && got[2].1.contains("WAITING"));
    assert!(store.workflow_phases(B).unwrap()[1].1.contains("WAITING"));
    // A job the run does not have: nothing of the step is written.
    let e = store
        .save_workflow(A, "COMPLETED", "{}", &[("nope", "{}".to_owned())], Some(3))
        .unwrap_err();
    assert!(matches!(e, StoreError::WorkflowCorrupt { .. }), "{e}");
    assert_eq!(store.workflow(A).unwrap().unwrap().state, "RUNNING");
    store
        .save_workflow(A, "FAILED", "{}", &[], Some(4))
        .unwrap();
    store.delete_workflow(A).unwrap();
    assert!(store.workflow_phases(A).unwrap().is_empty());
    assert_eq!(store.workflow_phases(B).unwrap().len(), 3);
}
