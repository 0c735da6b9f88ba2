//! The GPU audit log: opened once, closed once, peak only rises, survives
//! a restart and the deletion of its job, and is queried by time and owner.

use std::collections::BTreeMap;

use joblet_core::{JobId, JobRequest, JobState};
use joblet_store::{AuditRecord, StoreError, TransitionExtra};

mod support;
use support::Env;

fn rec(job: &str, owner: &str, start_ms: i64) -> AuditRecord {
    AuditRecord {
        job_id: job.into(),
        owner: owner.into(),
        gpu_uuids: vec!["GPU-aaaa".into(), "GPU-bbbb".into()],
        gpu_indices: vec![0, 1],
        memory_mb_per_gpu: Some(8192),
        sharing: "exclusive".into(),
        start_ms,
        end_ms: None,
        peak_memory_mb: None,
        ended: None,
        reason: None,
    }
}

#[test]
fn open_peak_close_and_read_back() {
    let env = Env::new();
    let store = env.open();
    store.audit_open(&rec("job-1", "alice", 1_000)).unwrap();
    let open = store.job_gpus("job-1").unwrap().unwrap();
    assert_eq!(open, rec("job-1", "alice", 1_000));
    assert_eq!(open.duration_ms(), None);

    store.audit_peak("job-1", 3_000).unwrap();
    store.audit_peak("job-1", 1_000).unwrap(); // lower: kept at 3000
    store.audit_peak("job-1", 5_500).unwrap();
    assert_eq!(
        store.job_gpus("job-1").unwrap().unwrap().peak_memory_mb,
        Some(5_500)
    );

    let closed = store
        .audit_close(
            "job-1",
            61_000,
            "FAILED",
            "GPU memory quota exceeded: used 9000 MB of 8192 MB on GPU-aaaa",
        )
        .unwrap()
        .unwrap();
    assert_eq!(closed.end_ms, Some(61_000));
    assert_eq!(closed.duration_ms(), Some(60_000));
    assert_eq!(closed.ended.as_deref(), Some("FAILED"));
    assert!(closed.reason.as_deref().unwrap().contains("quota exceeded"));
    assert_eq!(closed.peak_memory_mb, Some(5_500));
    assert_eq!(store.job_gpus("job-1").unwrap(), Some(closed.clone()));

    // Closed is final: no more peaks, no second close.
    store.audit_peak("job-1", 9_999).unwrap();
    assert_eq!(
        store.audit_close("job-1", 99_000, "COMPLETED", "").unwrap(),
        None
    );
    assert_eq!(store.job_gpus("job-1").unwrap(), Some(closed));
}

#[test]
fn absent_jobs_are_no_ops() {
    let store = Env::new().open();
    store.audit_peak("nope", 10).unwrap();
    assert_eq!(store.audit_close("nope", 1, "COMPLETED", "").unwrap(), None);
    assert_eq!(store.job_gpus("nope").unwrap(), None);
    assert!(store.audit_query(None, None).unwrap().is_empty());
}

#[test]
fn a_second_open_is_refused_while_the_first_is_open() {
    let store = Env::new().open();
    store.audit_open(&rec("job-1", "alice", 1_000)).unwrap();
    let e = store.audit_open(&rec("job-1", "alice", 2_000)).unwrap_err();
    assert!(
        matches!(&e, StoreError::Audit { job, what } if job == "job-1" && what.contains("already has an open record")),
        "{e}"
    );
    assert_eq!(store.audit_query(None, None).unwrap().len(), 1);

    // After a preemption the job runs again: a new allocation, a new record.
    store
        .audit_close("job-1", 5_000, "PREEMPTED", "preempted")
        .unwrap()
        .unwrap();
    store.audit_open(&rec("job-1", "alice", 6_000)).unwrap();
    let all = store.audit_query(None, None).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(store.job_gpus("job-1").unwrap().unwrap().start_ms, 6_000);
    assert_eq!(store.job_gpus("job-1").unwrap().unwrap().end_ms, None);
}

#[test]
fn open_records_survive_a_restart_and_close_once() {
    let env = Env::new();
    {
        let store = env.open();
        store.audit_open(&rec("job-1", "alice", 1_000)).unwrap();
        store.audit_peak("job-1", 700).unwrap();
    }
    let store = env.open();
    // The restarted daemon re-opening it is refused; the record is as left.
    assert!(store.audit_open(&rec("job-1", "alice", 1_000)).is_err());
    let got = store.job_gpus("job-1").unwrap().unwrap();
    assert_eq!((got.end_ms, got.peak_memory_mb), (None, Some(700)));
    store.audit_peak("job-1", 900).unwrap();
    let closed = store
        .audit_close("job-1", 4_000, "COMPLETED", "")
        .unwrap()
        .unwrap();
    assert_eq!(closed.peak_memory_mb, Some(900));
    assert_eq!(closed.reason, None);
    drop(store);
    let store = env.open();
    assert_eq!(
        store.audit_close("job-1", 5_000, "COMPLETED", "").unwrap(),
        None
    );
    assert_eq!(store.job_gpus("job-1").unwrap(), Some(closed));
}

#[test]
fn query_by_time_and_owner_oldest_first() {
    let store = Env::new().open();
    // a: 100..200 (alice), b: 300..400 (bob), c: 500.. open (alice), d: 50..600 (bob)
    for (job, owner, start) in [
        ("c", "alice", 500),
        ("a", "alice", 100),
        ("b", "bob", 300),
        ("d", "bob", 50),
    ] {
        store.audit_open(&rec(job, owner, start)).unwrap();
    }
    store.audit_close("a", 200, "COMPLETED", "").unwrap();
    store.audit_close("b", 400, "FAILED", "exit 1").unwrap();
    store.audit_close("d", 600, "STOPPED", "").unwrap();

    let jobs = |since: Option<i64>, owner: Option<&str>| -> Vec<String> {
        store
            .audit_query(since, owner)
            .unwrap()
            .into_iter()
            .map(|r| r.job_id)
            .collect()
    };
    assert_eq!(jobs(None, None), ["d", "a", "b", "c"]);
    assert_eq!(jobs(Some(400), None), ["d", "b", "c"]);
    assert_eq!(jobs(Some(401), None), ["d", "c"]);
    assert_eq!(jobs(Some(10_000), None), ["c"]);
    assert_eq!(jobs(None, Some("alice")), ["a", "c"]);
    assert_eq!(jobs(Some(300), Some("bob")), ["d", "b"]);
    assert!(jobs(None, Some("carol")).is_empty());
}

#[test]
fn deleting_a_job_keeps_its_audit_records() {
    let store = Env::new().open();
    let id = JobId::parse("00000001-0000-4000-8000-000000000000").unwrap();
    let spec = JobRequest {
        command: "python".into(),
        gpu_count: 2,
        ..Default::default()
    }
    .validate()
    .unwrap()
    .0;
    store
        .create_job(&id, "alice", &spec, &BTreeMap::new(), 1)
        .unwrap();
    for to in [JobState::Queued, JobState::Running] {
        store
            .transition(&id, to, 2, TransitionExtra::default())
            .unwrap();
    }
    store.audit_open(&rec(id.as_str(), "alice", 2)).unwrap();
    store
        .transition(&id, JobState::Completed, 9, TransitionExtra::default())
        .unwrap();
    store
        .audit_close(id.as_str(), 9, "COMPLETED", "exited with code 0")
        .unwrap()
        .unwrap();
    store.delete(&id).unwrap();
    assert_eq!(store.get(&id).unwrap(), None);
    let kept = store.job_gpus(id.as_str()).unwrap().unwrap();
    assert_eq!(kept.ended.as_deref(), Some("COMPLETED"));
    assert_eq!(store.audit_query(None, None).unwrap(), vec![kept]);
}

/// The table refuses deletes and edits of closed records even from SQL
/// that bypasses the Store API.
#[test]
fn the_table_is_append_only() {
    let env = Env::new();
    let store = env.open();
    store.audit_open(&rec("job-1", "alice", 1)).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let err = conn
        .execute("DELETE FROM gpu_audit", [])
        .unwrap_err()
        .to_string();
    assert!(err.contains("append-only"), "{err}");
    let err = conn
        .execute("UPDATE gpu_audit SET owner = 'mallory'", [])
        .unwrap_err()
        .to_string();
    assert!(err.contains("never changed"), "{err}");
    conn.execute("UPDATE gpu_audit SET end_ms = 5, ended = 'COMPLETED'", [])
        .unwrap();
    let err = conn
        .execute("UPDATE gpu_audit SET end_ms = 6", [])
        .unwrap_err()
        .to_string();
    assert!(err.contains("final"), "{err}");
}

#[test]
fn records_serialize_with_their_field_names() {
    let v = serde_json::to_value(rec("j", "alice", 5)).unwrap();
    for k in [
        "job_id",
        "owner",
        "gpu_uuids",
        "gpu_indices",
        "memory_mb_per_gpu",
        "sharing",
        "start_ms",
        "end_ms",
        "peak_memory_mb",
        "ended",
        "reason",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from {v}");
    }
}
