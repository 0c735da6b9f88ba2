//! Behaviour of `Store` through its public API, on databases in temporary directories.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use joblet_core::{JobId, JobRequest, JobSpec, JobState, PrefixError};
use joblet_store::{Store, StoreError, TransitionExtra, TransitionRecord, SCHEMA_VERSION};

mod support;
use support::Env;

fn id(n: u32) -> JobId {
    JobId::parse(&format!("{n:08x}-0000-4000-8000-000000000000")).unwrap()
}

fn spec(cmd: &str) -> JobSpec {
    JobRequest {
        command: cmd.into(),
        args: vec!["-c".into(), "echo hi".into()],
        env: vec![("MODE".into(), "fast".into())],
        secret_env: vec![("TOKEN".into(), "x".into())],
        timeout_seconds: Some(60),
        ..Default::default()
    }
    .validate()
    .unwrap()
    .0
}

fn no_secrets() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn extra(reason: &str) -> TransitionExtra {
    TransitionExtra {
        reason: Some(reason.into()),
        ..Default::default()
    }
}

fn user_version(db: &Path) -> u32 {
    rusqlite::Connection::open(db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn creates_a_database_and_reopens_it_unchanged() {
    let env = Env::new();
    {
        let store = env.open();
        assert_eq!(store.count().unwrap(), 0);
        store
            .create_job(&id(1), "alice", &spec("sh"), &no_secrets(), 100)
            .unwrap();
    }
    assert_eq!(user_version(&env.db()), SCHEMA_VERSION);
    let mode = fs::metadata(env.db()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let store = env.open();
    assert_eq!(user_version(&env.db()), SCHEMA_VERSION);
    let job = store.get(&id(1)).unwrap().unwrap();
    assert_eq!(job.owner, "alice");
    assert_eq!(job.spec, spec("sh"));
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.seq, 1);
    let wal: String = rusqlite::Connection::open(env.db())
        .unwrap()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(wal.to_lowercase(), "wal");
}

/// The WAL is truncated when it restarts after a checkpoint, so frames are
/// appended instead of overwriting old ones in place (which reads back any
/// block whose page the kernel has reclaimed: a disk wait per job start).
#[test]
fn the_wal_starts_over_from_an_empty_file_after_a_checkpoint() {
    let env = Env::new();
    let store = env.open();
    let wal = env.db().with_extension("db-wal");
    let mut largest = 0;
    for n in 1..=2000 {
        store
            .create_job(&id(n), "alice", &spec("sh"), &no_secrets(), 100)
            .unwrap();
        let size = fs::metadata(&wal).unwrap().len();
        if size < largest / 4 {
            // Past the auto-checkpoint (1000 pages), a commit restarted
            // the log: the file holds that commit's frames only.
            assert!(largest > 1000 * 4096, "checkpoint came early: {largest}");
            return;
        }
        largest = largest.max(size);
    }
    panic!("the WAL never shrank: it grew to {largest} bytes and was rewritten in place");
}

#[test]
fn a_database_from_a_newer_joblet_is_refused() {
    let env = Env::new();
    drop(env.open());
    rusqlite::Connection::open(env.db())
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let err = Store::open(&env.db(), &env.key()).unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found, .. } if found == SCHEMA_VERSION + 1),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("upgrade joblet"), "{msg}");
    assert!(msg.contains(&env.db().display().to_string()), "{msg}");
}

#[test]
fn full_lifecycle_records_timestamps_exit_code_and_history() {
    let env = Env::new();
    let store = env.open();
    let j = id(0xabc);
    let created = store
        .create_job(&j, "alice", &spec("sh"), &no_secrets(), 1_000)
        .unwrap();
    assert_eq!(created.state, JobState::Pending);
    assert_eq!(store.get(&j).unwrap().unwrap(), created);

    let queued = store
        .transition(&j, JobState::Queued, 1_100, TransitionExtra::default())
        .unwrap();
    assert_eq!(queued.state, JobState::Queued);
    assert_eq!(queued.reason, "");
    assert_eq!(queued.started_ms, None);

    let running = store
        .transition(
            &j,
            JobState::Running,
            1_200,
            TransitionExtra {
                reason: Some("started by shim".into()),
                shim_pid: Some(4242),
                exit_code: None,
            },
        )
        .unwrap();
    assert_eq!(running.started_ms, Some(1_200));
    assert_eq!(running.shim_pid, Some(4242));
    assert_eq!(running.ended_ms, None);
    assert_eq!(running.reason, "started by shim");

    let done = store
        .transition(
            &j,
            JobState::Completed,
            1_500,
            TransitionExtra {
                exit_code: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(done.started_ms, Some(1_200));
    assert_eq!(done.ended_ms, Some(1_500));
    assert_eq!(done.created_ms, 1_000);
    assert_eq!(done.shim_pid, Some(4242), "shim pid kept when not given");
    assert_eq!(done.reason, "", "reason resets when not given");
    assert_eq!(store.get(&j).unwrap().unwrap(), done);

    let history = store.transitions(&j).unwrap();
    let t = |from: Option<JobState>, to, at_ms, reason: &str| TransitionRecord {
        from,
        to,
        at_ms,
        reason: reason.into(),
    };
    use JobState::*;
    assert_eq!(
        history,
        vec![
            t(None, Pending, 1_000, ""),
            t(Some(Pending), Queued, 1_100, ""),
            t(Some(Queued), Running, 1_200, "started by shim"),
            t(Some(Running), Completed, 1_500, ""),
        ]
    );
}

#[test]
fn an_illegal_transition_is_refused_and_changes_nothing() {
    let env = Env::new();
    let store = env.open();
    let j = id(7);
    store
        .create_job(&j, "bob", &spec("sh"), &no_secrets(), 10)
        .unwrap();
    let before = store.get(&j).unwrap().unwrap();
    let err = store
        .transition(
            &j,
            JobState::Completed,
            20,
            TransitionExtra {
                reason: Some("nope".into()),
                exit_code: Some(3),
                shim_pid: Some(9),
            },
        )
        .unwrap_err();
    match &err {
        StoreError::Transition { id, source } => {
            assert_eq!(id, &j);
            assert_eq!(
                (source.from, source.to),
                (JobState::Pending, JobState::Completed)
            );
        }
        other => panic!("expected a transition error, got {other}"),
    }
    assert!(err.to_string().contains(j.as_str()), "{err}");
    assert_eq!(store.get(&j).unwrap().unwrap(), before);
    assert_eq!(store.transitions(&j).unwrap().len(), 1);

    // A terminal job cannot move either.
    store
        .transition(&j, JobState::Stopped, 30, extra("cancelled"))
        .unwrap();
    assert!(matches!(
        store.transition(&j, JobState::Queued, 40, TransitionExtra::default()),
        Err(StoreError::Transition { .. })
    ));
    assert!(matches!(
        store.transition(&id(8), JobState::Queued, 40, TransitionExtra::default()),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn a_preempted_job_runs_again_and_keeps_its_history() {
    let env = Env::new();
    let store = env.open();
    let j = id(9);
    store
        .create_job(&j, "bob", &spec("sh"), &no_secrets(), 0)
        .unwrap();
    for (to, at) in [
        (JobState::Queued, 1),
        (JobState::Running, 2),
        (JobState::Preempted, 3),
        (JobState::Queued, 4),
        (JobState::Running, 5),
        (JobState::Failed, 6),
    ] {
        store
            .transition(&j, to, at, TransitionExtra::default())
            .unwrap();
    }
    let job = store.get(&j).unwrap().unwrap();
    assert_eq!(job.started_ms, Some(5));
    assert_eq!(job.ended_ms, Some(6));
    assert_eq!(store.transitions(&j).unwrap().len(), 7);
}

fn file_contains(path: &Path, needle: &[u8]) -> bool {
    match fs::read(path) {
        Ok(bytes) => bytes.windows(needle.len()).any(|w| w == needle),
        Err(_) => false,
    }
}

#[test]
fn secrets_are_sealed_taken_once_and_deleted_at_the_end() {
    let env = Env::new();
    let store = env.open();
    let value = "s3cr3t-Value-that-must-not-leak-91827";
    let secrets = BTreeMap::from([
        ("TOKEN".to_owned(), value.to_owned()),
        ("OTHER".to_owned(), "another-hidden-value-5512".to_owned()),
    ]);
    let a = id(1);
    let b = id(2);
    store
        .create_job(&a, "alice", &spec("sh"), &secrets, 1)
        .unwrap();
    store
        .create_job(&b, "alice", &spec("sh"), &secrets, 2)
        .unwrap();

    // Neither the database nor its WAL holds a secret value in clear.
    let db = env.db();
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert!(wal.exists(), "expected a WAL file at {}", wal.display());
    let total = fs::metadata(&db).unwrap().len() + fs::metadata(&wal).unwrap().len();
    assert!(total > 0);
    for file in [&db, &wal] {
        for v in [value, "another-hidden-value-5512"] {
            assert!(
                !file_contains(file, v.as_bytes()),
                "{v} found in {}",
                file.display()
            );
        }
    }
    // The names are in the spec, as intended (this also shows the search itself works).
    assert!(file_contains(&wal, b"TOKEN") || file_contains(&db, b"TOKEN"));

    // Taken once, then gone.
    assert_eq!(store.take_secrets(&a).unwrap(), secrets);
    assert!(store.take_secrets(&a).unwrap().is_empty());

    // Survive a reopen (same key file), and are deleted by a terminal transition.
    drop(store);
    let store = env.open();
    store
        .transition(&b, JobState::Stopped, 3, extra("cancelled before start"))
        .unwrap();
    assert!(store.take_secrets(&b).unwrap().is_empty());
    assert!(matches!(
        store.take_secrets(&id(3)),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn secrets_survive_a_reopen_until_taken() {
    let env = Env::new();
    let secrets = BTreeMap::from([("K".to_owned(), "v".to_owned())]);
    env.open()
        .create_job(&id(1), "alice", &spec("sh"), &secrets, 1)
        .unwrap();
    assert_eq!(env.open().take_secrets(&id(1)).unwrap(), secrets);
}

#[test]
fn secrets_sealed_under_another_key_are_reported_corrupt_and_kept() {
    let env = Env::new();
    let secrets = BTreeMap::from([("K".to_owned(), "v".to_owned())]);
    env.open()
        .create_job(&id(1), "alice", &spec("sh"), &secrets, 1)
        .unwrap();
    let other_key = env.dir.path().join("other.key");
    let store = Store::open(&env.db(), &other_key).unwrap();
    let err = store.take_secrets(&id(1)).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    drop(store);
    assert_eq!(env.open().take_secrets(&id(1)).unwrap(), secrets);
}

#[test]
fn a_key_file_readable_by_others_is_refused() {
    let env = Env::new();
    drop(env.open());
    fs::set_permissions(env.key(), fs::Permissions::from_mode(0o644)).unwrap();
    let err = Store::open(&env.db(), &env.key()).unwrap_err();
    assert!(matches!(err, StoreError::Key { .. }), "{err}");
    assert!(
        err.to_string().contains(&env.key().display().to_string()),
        "{err}"
    );
}

#[test]
fn a_new_key_file_is_private() {
    let env = Env::new();
    drop(env.open());
    let meta = fs::metadata(env.key()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
}

#[test]
fn a_duplicate_id_is_refused() {
    let env = Env::new();
    let store = env.open();
    store
        .create_job(&id(1), "alice", &spec("a"), &no_secrets(), 1)
        .unwrap();
    let err = store
        .create_job(&id(1), "bob", &spec("b"), &no_secrets(), 2)
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists(_)), "{err}");
    assert_eq!(store.get(&id(1)).unwrap().unwrap().owner, "alice");
    assert_eq!(store.count().unwrap(), 1);
}

#[test]
fn resolve_exact_prefix_ambiguous_missing_malformed() {
    let env = Env::new();
    let store = env.open();
    let a = JobId::parse("3f2a9c1e-0000-4000-8000-000000000001").unwrap();
    let b = JobId::parse("3f2b0000-0000-4000-8000-000000000002").unwrap();
    for (n, j) in [&a, &b].into_iter().enumerate() {
        store
            .create_job(j, "alice", &spec("sh"), &no_secrets(), n as i64)
            .unwrap();
    }
    assert_eq!(store.resolve(a.as_str()).unwrap(), a);
    assert_eq!(store.resolve("3f2a").unwrap(), a);
    assert_eq!(store.resolve("3F2B").unwrap(), b);
    match store.resolve("3f2") {
        Err(StoreError::JobRef(PrefixError::Ambiguous { matches, .. })) => {
            assert_eq!(matches, vec!["3f2a9c1e", "3f2b0000"]);
        }
        other => panic!("expected ambiguous, got {other:?}"),
    }
    assert!(matches!(
        store.resolve("ab"),
        Err(StoreError::JobRef(PrefixError::NotFound(_)))
    ));
    assert!(matches!(
        store.resolve("3f2a%"),
        Err(StoreError::JobRef(PrefixError::Malformed(_)))
    ));
    assert!(matches!(
        store.resolve("_"),
        Err(StoreError::JobRef(PrefixError::Malformed(_)))
    ));
    assert!(matches!(
        store.resolve(""),
        Err(StoreError::JobRef(PrefixError::Empty))
    ));
}

#[test]
fn list_filters_orders_newest_first_and_limits() {
    let env = Env::new();
    let store = env.open();
    for n in 1..=5 {
        store
            .create_job(&id(n), "alice", &spec("sh"), &no_secrets(), n as i64)
            .unwrap();
    }
    store
        .transition(&id(2), JobState::Queued, 10, TransitionExtra::default())
        .unwrap();
    store
        .transition(&id(4), JobState::Stopped, 11, TransitionExtra::default())
        .unwrap();

    let ids =
        |jobs: Vec<joblet_store::JobRecord>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list(&[], None).unwrap()),
        vec![id(5), id(4), id(3), id(2), id(1)]
    );
    assert_eq!(ids(store.list(&[], Some(2)).unwrap()), vec![id(5), id(4)]);
    assert_eq!(ids(store.list(&[], Some(0)).unwrap()), Vec::<JobId>::new());
    assert_eq!(
        ids(store.list(&[JobState::Pending], None).unwrap()),
        vec![id(5), id(3), id(1)]
    );
    assert_eq!(
        ids(store
            .list(&[JobState::Queued, JobState::Stopped], None)
            .unwrap()),
        vec![id(4), id(2)]
    );
    assert_eq!(
        ids(store.list(&[JobState::Pending], Some(1)).unwrap()),
        vec![id(5)]
    );
    assert!(store.list(&[JobState::Running], None).unwrap().is_empty());
}

#[test]
fn unfinished_jobs_oldest_first() {
    let env = Env::new();
    let store = env.open();
    for n in 1..=6 {
        store
            .create_job(&id(n), "alice", &spec("sh"), &no_secrets(), n as i64)
            .unwrap();
    }
    let go = |n, path: &[JobState]| {
        for &s in path {
            store
                .transition(&id(n), s, 100, TransitionExtra::default())
                .unwrap();
        }
    };
    use JobState::*;
    go(1, &[Queued, Running]);
    go(2, &[Queued, Running, Completed]);
    go(3, &[Failed]);
    go(4, &[Queued, Running, Preempted]);
    go(5, &[Queued]);
    let got: Vec<(JobId, JobState)> = store
        .unfinished()
        .unwrap()
        .into_iter()
        .map(|j| (j.id, j.state))
        .collect();
    assert_eq!(
        got,
        vec![
            (id(1), Running),
            (id(4), Preempted),
            (id(5), Queued),
            (id(6), Pending)
        ]
    );
}

#[test]
fn delete_refuses_active_jobs_and_removes_finished_ones_entirely() {
    let env = Env::new();
    let store = env.open();
    let secrets = BTreeMap::from([("K".to_owned(), "v".to_owned())]);
    store
        .create_job(&id(1), "alice", &spec("sh"), &secrets, 1)
        .unwrap();
    let err = store.delete(&id(1)).unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::NotFinished {
                state: JobState::Pending,
                ..
            }
        ),
        "{err}"
    );
    assert!(store.get(&id(1)).unwrap().is_some());

    store
        .transition(&id(1), JobState::Stopped, 2, TransitionExtra::default())
        .unwrap();
    store.delete(&id(1)).unwrap();
    assert_eq!(store.get(&id(1)).unwrap(), None);
    assert_eq!(store.count().unwrap(), 0);
    assert!(matches!(
        store.transitions(&id(1)),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(store.delete(&id(1)), Err(StoreError::NotFound(_))));
    drop(store);

    let conn = rusqlite::Connection::open(env.db()).unwrap();
    for table in ["job_transitions", "job_secrets"] {
        let n: i64 = conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table} still has rows of the deleted job");
    }
}

#[test]
fn seq_is_never_reused_after_a_delete() {
    let env = Env::new();
    let store = env.open();
    store
        .create_job(&id(1), "a", &spec("sh"), &no_secrets(), 1)
        .unwrap();
    let second = store
        .create_job(&id(2), "a", &spec("sh"), &no_secrets(), 2)
        .unwrap();
    store
        .transition(&id(2), JobState::Failed, 3, TransitionExtra::default())
        .unwrap();
    store.delete(&id(2)).unwrap();
    drop(store);
    let third = env
        .open()
        .create_job(&id(3), "a", &spec("sh"), &no_secrets(), 4)
        .unwrap();
    assert!(third.seq > second.seq);
}

#[test]
fn a_corrupt_row_is_reported_not_panicked_on() {
    let env = Env::new();
    let store = env.open();
    store
        .create_job(&id(1), "a", &spec("sh"), &no_secrets(), 1)
        .unwrap();
    store
        .create_job(&id(2), "a", &spec("sh"), &no_secrets(), 1)
        .unwrap();
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute(
        "UPDATE jobs SET state = 'EXPLODED' WHERE id = ?1",
        [id(1).as_str()],
    )
    .unwrap();
    conn.execute(
        "UPDATE jobs SET spec_json = '{\"command\": 5}' WHERE id = ?1",
        [id(2).as_str()],
    )
    .unwrap();
    let err = store.get(&id(1)).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("EXPLODED"), "{err}");
    assert!(matches!(store.get(&id(2)), Err(StoreError::Corrupt { .. })));
    assert!(matches!(
        store.list(&[], None),
        Err(StoreError::Corrupt { .. })
    ));
}

#[test]
fn concurrent_creates_from_eight_threads() {
    let env = Env::new();
    let store = Arc::new(env.open());
    let handles: Vec<_> = (0..8u32)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                (0..50u32)
                    .map(|i| {
                        let rec = store
                            .create_job(
                                &id(t * 1000 + i),
                                &format!("user{t}"),
                                &spec("sh"),
                                &BTreeMap::from([("K".to_owned(), format!("{t}-{i}"))]),
                                i64::from(i),
                            )
                            .unwrap();
                        rec.seq
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let seqs: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(seqs.len(), 400);
    let distinct: HashSet<i64> = seqs.iter().copied().collect();
    assert_eq!(distinct.len(), 400);
    assert_eq!(store.count().unwrap(), 400);
    let all = store.list(&[], None).unwrap();
    assert_eq!(all.len(), 400);
    let ids: HashSet<JobId> = all.iter().map(|j| j.id.clone()).collect();
    assert_eq!(ids.len(), 400);
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq));
    assert_eq!(
        store.take_secrets(&id(7 * 1000 + 49)).unwrap(),
        BTreeMap::from([("K".to_owned(), "7-49".to_owned())])
    );
}

/// A submission is one commit: the job and its first transition are both
/// recorded, or (an edge the state machine refuses) neither is.
#[test]
fn a_job_is_created_and_queued_in_one_transaction_or_not_at_all() {
    let env = Env::new();
    let store = env.open();
    let job = store
        .create_job_and_transition(
            &id(1),
            "alice",
            &spec("sh"),
            &no_secrets(),
            100,
            (JobState::Queued, extra("")),
        )
        .unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(store.get(&id(1)).unwrap().unwrap(), job);
    let history: Vec<_> = store
        .transitions(&id(1))
        .unwrap()
        .into_iter()
        .map(|t| (t.from, t.to, t.at_ms))
        .collect();
    assert_eq!(
        history,
        [
            (None, JobState::Pending, 100),
            (Some(JobState::Pending), JobState::Queued, 100)
        ]
    );

    let err = store
        .create_job_and_transition(
            &id(2),
            "alice",
            &spec("sh"),
            &BTreeMap::from([("TOKEN".to_string(), "x".to_string())]),
            100,
            (JobState::Running, extra("")),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Transition { .. }), "{err}");
    assert_eq!(store.get(&id(2)).unwrap(), None);
    assert!(matches!(
        store.transitions(&id(2)),
        Err(StoreError::NotFound(_))
    ));
    assert!(store.take_secrets(&id(2)).is_err());
    assert_eq!(store.count().unwrap(), 1);
}

#[test]
fn a_transition_by_progress_alone_matches_the_full_record() {
    let env = Env::new();
    let store = env.open();
    let job = store
        .create_job_and_transition(
            &id(7),
            "alice",
            &spec("sh"),
            &no_secrets(),
            100,
            (JobState::Queued, extra("")),
        )
        .unwrap();
    assert_eq!(store.progress(&id(7)).unwrap(), Some(job.progress()));
    let running = store
        .transition_of(&id(7), JobState::Running, 110, TransitionExtra::default())
        .unwrap();
    assert_eq!(running.state, JobState::Running);
    assert_eq!(running.started_ms, Some(110));
    let done = store
        .transition_of(
            &id(7),
            JobState::Completed,
            120,
            TransitionExtra {
                reason: Some("exited with code 0".into()),
                exit_code: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    let rec = store.get(&id(7)).unwrap().unwrap();
    assert_eq!(rec.progress(), done);
    assert_eq!(
        (rec.state, rec.exit_code, rec.ended_ms, rec.reason.as_str()),
        (
            JobState::Completed,
            Some(0),
            Some(120),
            "exited with code 0"
        )
    );
    assert_eq!(rec.spec, spec("sh"));
    let history: Vec<_> = store
        .transitions(&id(7))
        .unwrap()
        .into_iter()
        .map(|t| t.to)
        .collect();
    assert_eq!(
        history,
        [
            JobState::Pending,
            JobState::Queued,
            JobState::Running,
            JobState::Completed
        ]
    );
    // A move the state machine refuses writes nothing.
    let err = store
        .transition_of(&id(7), JobState::Running, 130, TransitionExtra::default())
        .unwrap_err();
    assert!(matches!(err, StoreError::Transition { .. }), "{err}");
    assert_eq!(store.progress(&id(7)).unwrap(), Some(done));
    assert!(matches!(
        store.transition_of(&id(8), JobState::Queued, 1, TransitionExtra::default()),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.progress(&id(8)).unwrap(), None);
}
