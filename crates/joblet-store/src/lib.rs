//! Joblet's durable state: one SQLite database holding every job, its state history and
//! its sealed secrets, the GPUs' health states and history, the GPU allocations ledger
//! the scheduler is restored from, the append-only GPU audit log ([`AuditRecord`]), and
//! the node's named volumes ([`VolumeRecord`]) and workflow runs ([`WorkflowRecord`]), and the
//! GPUs' readings over time, downsampled and bounded ([`downsample`], [`GpuSamples`]).
//!
//! [`Store`] is the only way the daemon reads or changes job state. Every state change goes
//! through [`Store::transition`], which checks it against the core state machine
//! ([`joblet_core::JobState::transition`]) and records it in the same transaction, so the
//! stored state and its history never disagree.
//!
//! # Durability
//!
//! The database runs in WAL mode with `synchronous=NORMAL`. A transaction that has returned
//! is in the WAL file, so it survives the daemon crashing or being killed (`kill -9`): that
//! is the guarantee the daemon needs, since jobs outlive it and it recovers from this
//! database on start ([`Store::unfinished`]). A power loss or kernel crash may lose the last
//! few transactions (never corrupting the database); the daemon's recovery treats such jobs
//! like any other it finds in an unexpected state.
//!
//! # Secrets
//!
//! Secret environment values are sealed with ChaCha20-Poly1305 under a key kept in a separate
//! file (mode 0600), bound to their job id, and deleted once the job has taken them
//! ([`Store::take_secrets`]) or has finished. The job spec only holds their names.
//!
//! # Concurrency
//!
//! One connection behind a mutex: operations are short, and `Store` is `Send + Sync` so the
//! daemon shares it between tasks. A panic while the lock was held does not wedge the store:
//! the next caller rolls back any open transaction and carries on.
//!
//! This crate does no scheduling and knows nothing of gRPC, tokio, processes or cgroups; it
//! must not depend on them.

mod allocations;
mod audit;
mod credentials;
pub mod downsample;
mod error;
mod execs;
mod gpu_history;
mod gpus;
mod job_stats;
mod lifecycle;
mod migrations;
mod records;
mod secrets;
mod volumes;
mod workflows;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use joblet_core::id::{check_prefix, resolve_prefix};
use joblet_core::{JobId, JobSpec, JobState, UnixMillis};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

pub use credentials::{CredentialKind, CredentialRecord};
pub use error::StoreError;
pub use execs::ExecRecord;
pub use gpu_history::GpuSamples;
pub use gpus::NewAllocation;
pub use job_stats::{JobFailure, JobWait, STATS_ROWS};
/// The records themselves are domain types ([`joblet_core::record`]).
pub use joblet_core::record::{
    AuditRecord, GpuEventRecord, JobProgress, JobRecord, TransitionRecord,
};
pub use lifecycle::{AuditEnd, GpuGrantRecords, JobStart};
pub use migrations::SCHEMA_VERSION;
pub use records::TransitionExtra;
pub use volumes::{VolumeRecord, VOLUME_KINDS};
pub use workflows::{WorkflowRecord, LIVE_WORKFLOW_STATES};

use records::{progress_from_row, RawJob, RawTransition, JOB_COLUMNS, PROGRESS_COLUMNS};
use secrets::SealingKey;

/// How long an operation waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Statements the connection keeps prepared: well above the two dozen the
/// store prepares with `prepare_cached`, so none is evicted by the others.
const STATEMENT_CACHE: usize = 64;

/// How many ids [`Store::resolve`] fetches for a prefix: enough to tell "one" from "several"
/// and to name a few of them.
const RESOLVE_CANDIDATES: usize = 6;

/// The job database. See the crate documentation.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    key: SealingKey,
    path: PathBuf,
}

/// Adds the database path and the failed operation to a SQLite error.
trait SqlContext<T> {
    fn during(self, path: &Path, op: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn during(self, path: &Path, op: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            op: op(),
            source,
        })
    }
}

fn encode_spec(id: &JobId, spec: &JobSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|source| StoreError::Encode {
        id: id.clone(),
        what: "the job spec",
        source,
    })
}

/// Whether job `id` has a record (inside a transaction or not).
fn job_exists(conn: &Connection, path: &Path, id: &JobId) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM jobs WHERE id = ?1")
        .and_then(|mut stmt| stmt.query_row([id.as_str()], |_| Ok(())).optional())
        .during(path, || format!("look up job {id}"))?
        .is_some())
}

/// Moves job `id` (whose progress `job` was read in transaction `tx`) to `to` if the state
/// machine allows it, and writes that: the job's row, the transition, and on a final state
/// the end of its sealed secrets. See [`Store::transition`].
fn apply_transition(
    tx: &Connection,
    path: &Path,
    id: &JobId,
    job: &mut JobProgress,
    to: JobState,
    now: UnixMillis,
    extra: TransitionExtra,
) -> Result<(), StoreError> {
    let from = advance(id, job, to, now, extra)?;
    tx.prepare_cached(
        "UPDATE jobs SET state = ?2, reason = ?3, exit_code = ?4, started_ms = ?5, \
         ended_ms = ?6, shim_pid = ?7 WHERE id = ?1",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            id.as_str(),
            job.state.as_str(),
            job.reason,
            job.exit_code,
            job.started_ms,
            job.ended_ms,
            job.shim_pid
        ])
    })
    .during(path, || format!("update job {id}"))?;
    record_transition(tx, path, id, job, Some(from), now)?;
    if to.is_terminal() {
        tx.prepare_cached("DELETE FROM job_secrets WHERE job_id = ?1")
            .and_then(|mut stmt| stmt.execute([id.as_str()]))
            .during(path, || format!("delete the secrets of job {id}"))?;
    }
    tracing::debug!(job = %id, %from, %to, reason = %job.reason, "job transition");
    Ok(())
}

/// Moves `job` to `to` in memory if the state machine allows it: its state,
/// `reason` (`extra.reason` or `""`), `exit_code`/`shim_pid` when given,
/// `started_ms` when `to` is RUNNING, `ended_ms` when `to` is final.
/// Returns the state it left.
fn advance(
    id: &JobId,
    job: &mut JobProgress,
    to: JobState,
    now: UnixMillis,
    extra: TransitionExtra,
) -> Result<JobState, StoreError> {
    let from = job.state;
    job.state = from
        .transition(to)
        .map_err(|source| StoreError::Transition {
            id: id.clone(),
            source,
        })?;
    job.reason = extra.reason.unwrap_or_default();
    if let Some(code) = extra.exit_code {
        job.exit_code = Some(code);
    }
    if let Some(pid) = extra.shim_pid {
        job.shim_pid = Some(pid);
    }
    if to == JobState::Running {
        job.started_ms = Some(now);
    }
    if to.is_terminal() {
        job.ended_ms = Some(now);
    }
    Ok(from)
}

/// Appends `job`'s move from `from` (`None`: its creation) to its current
/// state, with its current reason, to its transitions.
fn record_transition(
    tx: &Connection,
    path: &Path,
    id: &JobId,
    job: &JobProgress,
    from: Option<JobState>,
    now: UnixMillis,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO job_transitions (job_id, from_state, to_state, at_ms, reason) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            id.as_str(),
            from.map(|f| f.as_str()),
            job.state.as_str(),
            now,
            job.reason
        ])
    })
    .during(path, || format!("record the transition of job {id}"))?;
    Ok(())
}

/// Job `id`'s [`JobProgress`], inside a transaction or not.
fn read_progress(
    conn: &Connection,
    path: &Path,
    id: &JobId,
) -> Result<Option<JobProgress>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {PROGRESS_COLUMNS} FROM jobs WHERE id = ?1"
    ))
    .and_then(|mut stmt| {
        stmt.query_row([id.as_str()], |row| progress_from_row(id.as_str(), row))
            .optional()
    })
    .during(path, || format!("read job {id}"))?
    .transpose()
}

/// `?, ?, ?` with `n` placeholders.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

impl Store {
    /// Opens or creates the database at `db_path` and the secret-sealing key at `key_path`
    /// (32 random bytes, created with mode 0600 if missing; a key file that other users may
    /// read or write, or that is not 32 bytes, is refused). Applies pending migrations.
    ///
    /// The parent directories must exist. A new database file is created with mode 0600
    /// (SQLite gives its `-wal` and `-shm` files the same mode).
    pub fn open(db_path: &Path, key_path: &Path) -> Result<Store, StoreError> {
        let key = SealingKey::load_or_create(key_path)?;

        // Create the file ourselves so it is private from the first byte on.
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(db_path)
            .map_err(|source| StoreError::Io {
                path: db_path.to_owned(),
                op: "create the job database",
                source,
            })?;

        let path = db_path.to_owned();
        let mut conn = Connection::open(db_path).during(&path, || "open the database".into())?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .during(&path, || "set the busy timeout".into())?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .during(&path, || "switch to the WAL journal".into())?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::JournalMode { path, got: mode });
        }
        // Truncate the WAL whenever it restarts, so that new frames are
        // appended past its end instead of overwriting old ones: a frame
        // (page + 24-byte header) never lines up with the file system's
        // blocks, and overwriting part of a block whose page has left the
        // page cache (written back and reclaimed) first reads it from
        // disk: a wait on a job's start and end path.
        let limit: i64 = conn
            .pragma_update_and_check(None, "journal_size_limit", 0, |r| r.get(0))
            .during(&path, || "set PRAGMA journal_size_limit=0".into())?;
        if limit != 0 {
            tracing::warn!(
                limit,
                "SQLite kept another WAL size limit; the WAL is rewritten in place"
            );
        }
        for (pragma, value) in [
            ("synchronous", "NORMAL"),
            ("foreign_keys", "ON"),
            // Overwrite deleted content (spent sealed secrets, deleted jobs) with zeros.
            ("secure_delete", "ON"),
        ] {
            conn.pragma_update(None, pragma, value)
                .during(&path, || format!("set PRAGMA {pragma}={value}"))?;
        }
        migrations::apply(&mut conn, &path)?;
        // rusqlite's default of 16 is fewer than the statements a GPU job's
        // life goes through: they evicted each other and were parsed again
        // on every use (~0.25 ms of the daemon's CPU per GPU job,
        // bench/history/runs-17-22.md, eaa81b6).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        tracing::debug!(path = %path.display(), "opened the job database");
        Ok(Store {
            conn: Mutex::new(conn),
            key,
            path,
        })
    }

    /// The database file this store was opened on.
    pub fn db_path(&self) -> &Path {
        &self.path
    }

    /// Locks the connection. After a panic in another holder, rolls back whatever
    /// transaction it left open and goes on.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        match self.conn.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                let guard = poisoned.into_inner();
                self.conn.clear_poison();
                tracing::warn!(path = %self.path.display(), "recovering the job database connection after a panic");
                if !guard.is_autocommit() {
                    if let Err(e) = guard.execute_batch("ROLLBACK") {
                        tracing::warn!(error = %e, "could not roll back the interrupted transaction");
                    }
                }
                guard
            }
        }
    }

    /// Inserts a new PENDING job with its creation transition and, if `secrets` is not
    /// empty, its sealed secrets, in one transaction. An existing id is refused
    /// ([`StoreError::AlreadyExists`]).
    pub fn create_job(
        &self,
        id: &JobId,
        owner: &str,
        spec: &JobSpec,
        secrets: &BTreeMap<String, String>,
        now: UnixMillis,
    ) -> Result<JobRecord, StoreError> {
        self.create(id, owner, spec, secrets, now, None)
    }

    /// [`Store::create_job`] and the job's first transition, PENDING → `then.0` with
    /// `then.1` (see [`Store::transition`]), in the same transaction: a submission is one
    /// commit.
    pub fn create_job_and_transition(
        &self,
        id: &JobId,
        owner: &str,
        spec: &JobSpec,
        secrets: &BTreeMap<String, String>,
        now: UnixMillis,
        then: (JobState, TransitionExtra),
    ) -> Result<JobRecord, StoreError> {
        self.create(id, owner, spec, secrets, now, Some(then))
    }

    fn create(
        &self,
        id: &JobId,
        owner: &str,
        spec: &JobSpec,
        secrets: &BTreeMap<String, String>,
        now: UnixMillis,
        then: Option<(JobState, TransitionExtra)>,
    ) -> Result<JobRecord, StoreError> {
        let spec_json = encode_spec(id, spec)?;
        let sealed = if secrets.is_empty() {
            None
        } else {
            Some(self.key.seal(id, secrets)?)
        };
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin creating job {id}"))?;
        let exists = job_exists(&tx, path, id)?;
        if exists {
            return Err(StoreError::AlreadyExists(id.clone()));
        }
        let seq: i64 = tx
            .prepare_cached("UPDATE job_seq SET last = last + 1 WHERE id = 1 RETURNING last")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .during(path, || format!("number job {id}"))?;
        let mut job = JobRecord {
            id: id.clone(),
            seq,
            owner: owner.to_owned(),
            spec: spec.clone(),
            state: JobState::Pending,
            reason: String::new(),
            exit_code: None,
            created_ms: now,
            started_ms: None,
            ended_ms: None,
            shim_pid: None,
        };
        // Created PENDING; a first move (to QUEUED, say) is checked and
        // applied in memory, so the row is written once, as it ends up.
        let created = job.progress();
        let moved = match then {
            Some((to, extra)) => {
                let mut p = created.clone();
                let from = advance(id, &mut p, to, now, extra)?;
                job.set_progress(p);
                Some(from)
            }
            None => None,
        };
        tx.prepare_cached(
            "INSERT INTO jobs (id, seq, owner, spec_json, state, reason, created_ms, \
             exit_code, started_ms, ended_ms, shim_pid) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                id.as_str(),
                seq,
                owner,
                spec_json,
                job.state.as_str(),
                job.reason,
                now,
                job.exit_code,
                job.started_ms,
                job.ended_ms,
                job.shim_pid
            ])
        })
        .during(path, || format!("insert job {id}"))?;
        record_transition(&tx, path, id, &created, None, now)?;
        if let Some(from) = moved {
            record_transition(&tx, path, id, &job.progress(), Some(from), now)?;
            tracing::debug!(job = %id, %from, to = %job.state, reason = %job.reason, "job transition");
        }
        // A job created in a final state has no secrets to keep.
        if let Some((nonce, ciphertext)) = sealed.filter(|_| !job.state.is_terminal()) {
            tx.execute(
                "INSERT INTO job_secrets (job_id, nonce, ciphertext) VALUES (?1, ?2, ?3)",
                params![id.as_str(), &nonce[..], ciphertext],
            )
            .during(path, || format!("store the sealed secrets of job {id}"))?;
        }
        tx.commit()
            .during(path, || format!("commit the creation of job {id}"))?;
        tracing::debug!(job = %id, seq, owner, state = %job.state, "created job");
        Ok(job)
    }

    /// Moves job `id` to `to` if the state machine allows it, in one transaction: updates the
    /// state, `reason` (`extra.reason` or `""`), `exit_code`/`shim_pid` when given,
    /// `started_ms` when `to` is RUNNING and `ended_ms` when `to` is terminal; records the
    /// transition; deletes the sealed secrets when `to` is terminal.
    pub fn transition(
        &self,
        id: &JobId,
        to: JobState,
        now: UnixMillis,
        extra: TransitionExtra,
    ) -> Result<JobRecord, StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin a transition of job {id}"))?;
        let mut job = tx
            .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))
            .and_then(|mut stmt| stmt.query_row([id.as_str()], RawJob::from_row).optional())
            .during(path, || format!("read job {id}"))?
            .ok_or_else(|| StoreError::NotFound(id.clone()))?
            .into_record()?;
        let mut p = job.progress();
        apply_transition(&tx, path, id, &mut p, to, now, extra)?;
        tx.commit()
            .during(path, || format!("commit the transition of job {id}"))?;
        job.set_progress(p);
        Ok(job)
    }

    /// [`Store::transition`] for a caller that has the job's record already:
    /// reads and returns only its [`JobProgress`] (not its spec).
    pub fn transition_of(
        &self,
        id: &JobId,
        to: JobState,
        now: UnixMillis,
        extra: TransitionExtra,
    ) -> Result<JobProgress, StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin a transition of job {id}"))?;
        let mut p =
            read_progress(&tx, path, id)?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
        apply_transition(&tx, path, id, &mut p, to, now, extra)?;
        tx.commit()
            .during(path, || format!("commit the transition of job {id}"))?;
        Ok(p)
    }

    /// Where job `id` stands (its spec unread); `None` if there is no such job.
    pub fn progress(&self, id: &JobId) -> Result<Option<JobProgress>, StoreError> {
        let conn = self.lock();
        read_progress(&conn, &self.path, id)
    }

    /// Decrypts and deletes job `id`'s sealed secrets; an empty map if it has none (or they
    /// were taken already). If they do not decrypt they are kept and
    /// [`StoreError::Corrupt`] is returned.
    pub fn take_secrets(&self, id: &JobId) -> Result<BTreeMap<String, String>, StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin taking the secrets of job {id}"))?;
        let exists = job_exists(&tx, path, id)?;
        if !exists {
            return Err(StoreError::NotFound(id.clone()));
        }
        let sealed: Option<(Vec<u8>, Vec<u8>)> = tx
            .query_row(
                "SELECT nonce, ciphertext FROM job_secrets WHERE job_id = ?1",
                [id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .during(path, || format!("read the secrets of job {id}"))?;
        let Some((nonce, ciphertext)) = sealed else {
            return Ok(BTreeMap::new());
        };
        let secrets = self.key.open(id, &nonce, &ciphertext)?;
        tx.execute("DELETE FROM job_secrets WHERE job_id = ?1", [id.as_str()])
            .during(path, || format!("delete the secrets of job {id}"))?;
        tx.commit()
            .during(path, || format!("commit taking the secrets of job {id}"))?;
        Ok(secrets)
    }

    /// The job with this exact id, if any.
    pub fn get(&self, id: &JobId) -> Result<Option<JobRecord>, StoreError> {
        let conn = self.lock();
        conn.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))
            .and_then(|mut stmt| stmt.query_row([id.as_str()], RawJob::from_row).optional())
            .during(&self.path, || format!("read job {id}"))?
            .map(RawJob::into_record)
            .transpose()
    }

    /// Job `id`'s state history, oldest first. [`StoreError::NotFound`] if there is no such job.
    pub fn transitions(&self, id: &JobId) -> Result<Vec<TransitionRecord>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let exists = job_exists(&conn, path, id)?;
        if !exists {
            return Err(StoreError::NotFound(id.clone()));
        }
        let mut stmt = conn
            .prepare_cached(
                "SELECT from_state, to_state, at_ms, reason FROM job_transitions \
                 WHERE job_id = ?1 ORDER BY id",
            )
            .during(path, || format!("read the transitions of job {id}"))?;
        let rows = stmt
            .query_map([id.as_str()], RawTransition::from_row)
            .during(path, || format!("read the transitions of job {id}"))?;
        let mut out = Vec::new();
        for row in rows {
            let raw = row.during(path, || format!("read the transitions of job {id}"))?;
            out.push(raw.into_record(id)?);
        }
        Ok(out)
    }

    /// Resolves a user-typed job id or unique prefix (any case) to a job id.
    pub fn resolve(&self, prefix: &str) -> Result<JobId, StoreError> {
        check_prefix(prefix)?;
        let lower = prefix.to_ascii_lowercase();
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT id FROM jobs WHERE id LIKE ?1 || '%' ORDER BY id LIMIT ?2")
            .during(&self.path, || {
                format!("look up job ids starting with {lower}")
            })?;
        let ids = stmt
            .query_map(params![lower, RESOLVE_CANDIDATES as i64], |r| {
                r.get::<_, String>(0)
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .during(&self.path, || {
                format!("look up job ids starting with {lower}")
            })?;
        Ok(resolve_prefix(prefix, ids.iter().map(String::as_str))?)
    }

    /// Jobs newest first (by `seq`). `states` empty = every state; `limit` `None` = all.
    pub fn list(
        &self,
        states: &[JobState],
        limit: Option<usize>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let filter = if states.is_empty() {
            String::new()
        } else {
            format!("WHERE state IN ({})", placeholders(states.len()))
        };
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs {filter} ORDER BY seq DESC LIMIT ?");
        // SQLite reads a negative LIMIT as "no limit".
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let mut args: Vec<rusqlite::types::Value> = states
            .iter()
            .map(|s| rusqlite::types::Value::Text(s.as_str().to_owned()))
            .collect();
        args.push(rusqlite::types::Value::Integer(limit));
        self.query_jobs(&sql, rusqlite::params_from_iter(args), || {
            "list jobs".to_owned()
        })
    }

    /// Jobs not in a terminal state, oldest first: what the daemon recovers on start.
    pub fn unfinished(&self) -> Result<Vec<JobRecord>, StoreError> {
        let terminal: Vec<&str> = JobState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(JobState::as_str)
            .collect();
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state NOT IN ({}) ORDER BY seq ASC",
            placeholders(terminal.len())
        );
        self.query_jobs(&sql, rusqlite::params_from_iter(terminal), || {
            "list unfinished jobs".to_owned()
        })
    }

    fn query_jobs<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        op: impl Fn() -> String,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(sql).during(&self.path, &op)?;
        let rows = stmt
            .query_map(params, RawJob::from_row)
            .during(&self.path, &op)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.during(&self.path, &op)?.into_record()?);
        }
        Ok(out)
    }

    /// Deletes a finished job with its history and any secrets left. A job that is not in a
    /// terminal state is refused ([`StoreError::NotFinished`]).
    pub fn delete(&self, id: &JobId) -> Result<(), StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin deleting job {id}"))?;
        let state: String = tx
            .query_row("SELECT state FROM jobs WHERE id = ?1", [id.as_str()], |r| {
                r.get(0)
            })
            .optional()
            .during(path, || format!("read job {id}"))?
            .ok_or_else(|| StoreError::NotFound(id.clone()))?;
        let state = records::parse_state(id.as_str(), &state)?;
        if !state.is_terminal() {
            return Err(StoreError::NotFinished {
                id: id.clone(),
                state,
            });
        }
        // job_transitions and job_secrets go with it (ON DELETE CASCADE).
        tx.execute("DELETE FROM jobs WHERE id = ?1", [id.as_str()])
            .during(path, || format!("delete job {id}"))?;
        tx.commit()
            .during(path, || format!("commit deleting job {id}"))?;
        tracing::debug!(job = %id, "deleted job");
        Ok(())
    }

    /// How many jobs are stored.
    pub fn count(&self) -> Result<u64, StoreError> {
        let conn = self.lock();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
            .during(&self.path, || "count jobs".to_owned())?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn spec() -> JobSpec {
        joblet_core::JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0
    }

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn store_is_send_and_sync() {
        assert_send_sync::<Store>();
    }

    #[test]
    fn a_panic_inside_a_transaction_does_not_wedge_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(Store::open(&dir.path().join("state.db"), &dir.path().join("key")).unwrap());
        let id = JobId::parse("3f2a9c1e-0000-4000-8000-000000000001").unwrap();
        let s = Arc::clone(&store);
        let jid = id.clone();
        let panicked = std::thread::spawn(move || {
            let conn = s.conn.lock().unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            conn.execute(
                "INSERT INTO jobs (id, seq, owner, spec_json, state, created_ms) \
                 VALUES (?1, 999, 'x', '{}', 'PENDING', 0)",
                [jid.as_str()],
            )
            .unwrap();
            panic!("boom while holding the store lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(store.conn.is_poisoned());
        // The half-done insert was rolled back and the store works again.
        assert_eq!(store.get(&id).unwrap(), None);
        store
            .create_job(&id, "alice", &spec(), &BTreeMap::new(), 5)
            .unwrap();
        assert_eq!(store.count().unwrap(), 1);
        assert!(!store.conn.is_poisoned());
    }
}
