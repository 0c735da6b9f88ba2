//! Schema migrations: an ordered list of SQL steps, tracked with `PRAGMA user_version`.
//!
//! Step `i` (0-based) moves the schema from version `i` to `i + 1`. Steps are append-only:
//! never edit one that has shipped; add a new step instead.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// The migration steps, oldest first.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, their transition history, sealed secrets and the submission counter.
    r#"
    CREATE TABLE jobs (
        id          TEXT PRIMARY KEY NOT NULL,
        seq         INTEGER NOT NULL UNIQUE,
        owner       TEXT NOT NULL,
        spec_json   TEXT NOT NULL,
        state       TEXT NOT NULL,
        reason      TEXT NOT NULL DEFAULT '',
        exit_code   INTEGER,
        created_ms  INTEGER NOT NULL,
        started_ms  INTEGER,
        ended_ms    INTEGER,
        shim_pid    INTEGER
    ) STRICT;
    CREATE INDEX jobs_state ON jobs(state);

    CREATE TABLE job_transitions (
        id          INTEGER PRIMARY KEY,
        job_id      TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        from_state  TEXT,
        to_state    TEXT NOT NULL,
        at_ms       INTEGER NOT NULL,
        reason      TEXT NOT NULL DEFAULT ''
    ) STRICT;
    CREATE INDEX job_transitions_job ON job_transitions(job_id, id);

    CREATE TABLE job_secrets (
        job_id      TEXT PRIMARY KEY NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        nonce       BLOB NOT NULL,
        ciphertext  BLOB NOT NULL
    ) STRICT;

    -- One row: the last submission number handed out. Never reused, even after deletes.
    CREATE TABLE job_seq (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        last        INTEGER NOT NULL
    ) STRICT;
    INSERT INTO job_seq (id, last) VALUES (1, 0);
    "#,
    // 2: GPUs (health state that survives restarts) and their event history.
    r#"
    CREATE TABLE gpus (
        uuid              TEXT PRIMARY KEY NOT NULL,
        idx               INTEGER NOT NULL,
        state             TEXT NOT NULL,
        cause             TEXT NOT NULL DEFAULT '',
        since_ms          INTEGER NOT NULL,
        paused            TEXT,
        jobs_json         TEXT NOT NULL DEFAULT '[]',
        uncorrected_seen  INTEGER NOT NULL DEFAULT 0
    ) STRICT;

    CREATE TABLE gpu_events (
        id          INTEGER PRIMARY KEY,
        uuid        TEXT NOT NULL,
        idx         INTEGER NOT NULL,
        at_ms       INTEGER NOT NULL,
        kind        TEXT NOT NULL,
        from_state  TEXT,
        to_state    TEXT,
        message     TEXT NOT NULL
    ) STRICT;
    CREATE INDEX gpu_events_uuid ON gpu_events(uuid, id);
    "#,
    // 3: the GPU allocations ledger the scheduler is restored from.
    r#"
    CREATE TABLE gpu_allocations (
        job_id          TEXT PRIMARY KEY NOT NULL,
        request_json    TEXT NOT NULL,
        placement_json  TEXT NOT NULL,
        started_ms      INTEGER NOT NULL
    ) STRICT;
    "#,
    // 4: the GPU audit log. One row per allocation: opened when a job gets its GPUs, closed
    // once when they are released. No foreign key to `jobs`, so deleting a job keeps its
    // records; the triggers make the table append-only (no deletes, a closed row is final,
    // what was allocated never changes).
    r#"
    CREATE TABLE gpu_audit (
        id                  INTEGER PRIMARY KEY,
        job_id              TEXT NOT NULL,
        owner               TEXT NOT NULL,
        gpu_uuids_json      TEXT NOT NULL,
        gpu_indices_json    TEXT NOT NULL,
        memory_mb_per_gpu   INTEGER,
        sharing             TEXT NOT NULL,
        start_ms            INTEGER NOT NULL,
        end_ms              INTEGER,
        peak_memory_mb      INTEGER,
        ended               TEXT,
        reason              TEXT
    ) STRICT;
    CREATE INDEX gpu_audit_job ON gpu_audit(job_id, id);
    CREATE INDEX gpu_audit_end ON gpu_audit(end_ms);
    -- At most one open record per job.
    CREATE UNIQUE INDEX gpu_audit_open ON gpu_audit(job_id) WHERE end_ms IS NULL;
    CREATE TRIGGER gpu_audit_no_delete BEFORE DELETE ON gpu_audit
    BEGIN
        SELECT RAISE(ABORT, 'gpu_audit is append-only: records are never deleted');
    END;
    CREATE TRIGGER gpu_audit_closed_is_final BEFORE UPDATE ON gpu_audit
    WHEN OLD.end_ms IS NOT NULL
    BEGIN
        SELECT RAISE(ABORT, 'gpu_audit: a closed record is final');
    END;
    CREATE TRIGGER gpu_audit_allocation_is_fixed
    BEFORE UPDATE OF job_id, owner, gpu_uuids_json, gpu_indices_json, memory_mb_per_gpu,
        sharing, start_ms ON gpu_audit
    BEGIN
        SELECT RAISE(ABORT, 'gpu_audit: what was allocated is never changed');
    END;
    "#,
    // 5: named volumes (`rnx volume create`). The host side (image, mount) is the daemon's;
    // this is what survives a restart: which volumes exist, their kind, size and owner.
    r#"
    CREATE TABLE volumes (
        name        TEXT PRIMARY KEY NOT NULL,
        kind        TEXT NOT NULL,
        size_bytes  INTEGER NOT NULL CHECK (size_bytes > 0),
        owner       TEXT NOT NULL,
        shared      INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1)),
        created_ms  INTEGER NOT NULL
    ) STRICT;
    "#,
    // 6: workflow runs (`rnx workflow run`): the checked file, who ran it, and its decision
    // core's snapshot, written after every step (each job's phase a row of its own). A file with secret values is kept sealed
    // (`yaml` empty, `yaml_nonce`/`yaml_sealed` set), like jobs' secrets. A workflow's jobs
    // are ordinary jobs whose spec names the run (`spec_json.workflow.id`), found through
    // this index.
    r#"
    CREATE TABLE workflows (
        id              TEXT PRIMARY KEY NOT NULL,
        seq             INTEGER NOT NULL UNIQUE,
        owner           TEXT NOT NULL,
        name            TEXT NOT NULL DEFAULT '',
        file            TEXT NOT NULL,
        yaml            TEXT NOT NULL,
        yaml_nonce      BLOB,
        yaml_sealed     BLOB,
        state           TEXT NOT NULL,
        snapshot_json   TEXT NOT NULL,
        shared_volume   TEXT NOT NULL DEFAULT '',
        created_ms      INTEGER NOT NULL,
        ended_ms        INTEGER
    ) STRICT;
    CREATE INDEX workflows_state ON workflows(state);

    -- Each job's phase in its run's decision core, in file order (`position`): a step
    -- rewrites only the jobs it changed, and `workflows.snapshot_json` holds the rest of
    -- the snapshot (the run's state, stopping, outcome).
    CREATE TABLE workflow_jobs (
        workflow_id     TEXT NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
        job             TEXT NOT NULL,
        position        INTEGER NOT NULL,
        phase_json      TEXT NOT NULL,
        PRIMARY KEY (workflow_id, job)
    ) STRICT;
    CREATE INDEX jobs_workflow ON jobs(json_extract(spec_json, '$.workflow.id'))
        WHERE json_extract(spec_json, '$.workflow.id') IS NOT NULL;
    "#,
    // 7: the GPUs' readings over time for the web console's charts (`gpu_history`): one row
    // per GPU, tier (0: 1 s, 1: 1 min, 2: 15 min) and bucket, each reading's sum and count.
    // Old buckets are deleted as new ones come, through the (tier, at_ms) index.
    r#"
    CREATE TABLE gpu_samples (
        uuid        TEXT NOT NULL,
        tier        INTEGER NOT NULL,
        at_ms       INTEGER NOT NULL,
        util_sum    REAL NOT NULL DEFAULT 0,
        util_n      INTEGER NOT NULL DEFAULT 0,
        mem_sum     REAL NOT NULL DEFAULT 0,
        mem_n       INTEGER NOT NULL DEFAULT 0,
        temp_sum    REAL NOT NULL DEFAULT 0,
        temp_n      INTEGER NOT NULL DEFAULT 0,
        power_sum   REAL NOT NULL DEFAULT 0,
        power_n     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (uuid, tier, at_ms)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX gpu_samples_age ON gpu_samples(tier, at_ms);
    "#,
    // 8: credentials of the REST API and the web console (`credentials`): API tokens,
    // one-time console sign-in codes and console sessions, each kept as the SHA-256 of its
    // secret. Token names are unique among tokens.
    r#"
    CREATE TABLE credentials (
        id              TEXT PRIMARY KEY NOT NULL,
        kind            TEXT NOT NULL,
        name            TEXT NOT NULL,
        role            TEXT NOT NULL,
        secret_sha256   BLOB NOT NULL,
        csrf            TEXT NOT NULL DEFAULT '',
        created_by      TEXT NOT NULL,
        created_ms      INTEGER NOT NULL,
        expires_ms      INTEGER,
        last_used_ms    INTEGER
    ) STRICT;
    CREATE UNIQUE INDEX credentials_token_name ON credentials(name) WHERE kind = 'token';
    CREATE INDEX credentials_expiry ON credentials(expires_ms) WHERE expires_ms IS NOT NULL;
    "#,
    // 9: the audit of processes run inside jobs (`rnx job exec`): who, what,
    // when, how it ended. An audit: it outlives the job's record, as gpu_audit does.
    r#"
    CREATE TABLE job_execs (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id          TEXT NOT NULL,
        caller          TEXT NOT NULL,
        argv            TEXT NOT NULL,
        tty             INTEGER NOT NULL,
        started_ms      INTEGER NOT NULL,
        ended_ms        INTEGER,
        exit_code       INTEGER,
        signal          INTEGER
    ) STRICT;
    CREATE INDEX job_execs_job ON job_execs(job_id, id);
    "#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Applies the pending migrations in one transaction. Refuses a database newer than
/// [`SCHEMA_VERSION`].
pub(crate) fn apply(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let sqlite = |op: &str, source| StoreError::Sqlite {
        path: path.to_owned(),
        op: op.to_owned(),
        source,
    };
    // IMMEDIATE: take the write lock before reading the version, so two processes opening
    // the same database cannot both apply the same step.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sqlite("begin the schema migration", e))?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| sqlite("read the schema version", e))?;
    let found = u32::try_from(found).map_err(|_| StoreError::SchemaTooNew {
        path: path.to_owned(),
        found: u32::MAX,
        supported: SCHEMA_VERSION,
    })?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = i as u32 + 1;
        let migration = |source| StoreError::Migration {
            path: path.to_owned(),
            from: found,
            version,
            source,
        };
        tx.execute_batch(step).map_err(migration)?;
        tx.pragma_update(None, "user_version", version)
            .map_err(migration)?;
    }
    tx.commit()
        .map_err(|e| sqlite("commit the schema migration", e))?;
    tracing::info!(
        path = %path.display(),
        from = found,
        to = SCHEMA_VERSION,
        "migrated the job database schema"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(conn: &Connection) -> u32 {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn applies_every_step_to_an_empty_database_then_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(version(&conn), 0);
        apply(&mut conn, &path).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        apply(&mut conn, &path).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for t in [
            "gpu_allocations",
            "gpu_audit",
            "job_secrets",
            "job_seq",
            "job_transitions",
            "jobs",
            "volumes",
            "gpu_samples",
        ] {
            assert!(tables.iter().any(|x| x == t), "{t} missing from {tables:?}");
        }
    }

    #[test]
    fn a_newer_database_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 5)
            .unwrap();
        let err = apply(&mut conn, &path).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found, supported, .. }
                if found == SCHEMA_VERSION + 5 && supported == SCHEMA_VERSION),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade joblet"), "{err}");
        assert_eq!(version(&conn), SCHEMA_VERSION + 5);
    }

    #[test]
    fn a_failing_step_leaves_the_database_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut conn = Connection::open(&path).unwrap();
        // A table with the name step 1 creates makes step 1 fail.
        conn.execute_batch("CREATE TABLE jobs (x INTEGER)").unwrap();
        let err = apply(&mut conn, &path).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Migration {
                    version: 1,
                    from: 0,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(version(&conn), 0);
        let n: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'job_seq'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
    }
}
