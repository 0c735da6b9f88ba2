//! Workflow runs (`rnx workflow run FILE`): the checked file, its owner, its state and its
//! decision core's snapshot (schema step 6).
//!
//! The store keeps the snapshot as the daemon hands it over (JSON it does not read): the
//! run's part in its row, each job's phase in a row of `workflow_jobs`, so that a step
//! rewrites only what it changed; and the state beside it so lists and recovery need not
//! decode it. A run's jobs are ordinary
//! job rows whose spec names the run ([`joblet_core::WorkflowJobRef`]), written in the
//! same commit as the job: [`Store::workflow_jobs`] finds them.

use std::collections::BTreeMap;
use std::path::Path;

use joblet_core::id::check_prefix;
use joblet_core::record::JobRecord;
use joblet_core::{JobId, UnixMillis};
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use crate::records::JOB_COLUMNS;
use crate::{SqlContext, Store, StoreError};

const COLUMNS: &str = "id, seq, owner, name, file, yaml, state, snapshot_json, shared_volume, \
     created_ms, ended_ms, yaml_nonce, yaml_sealed";

/// The states in which a run is not over: the daemon resumes these after a restart.
pub const LIVE_WORKFLOW_STATES: [&str; 2] = ["PENDING", "RUNNING"];

/// How many ids a prefix lookup reads at most (enough to name an ambiguity).
const CANDIDATES: i64 = 6;

/// A workflow run as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRecord {
    /// A UUID, like a job's.
    pub id: String,
    /// Submission order (newest has the highest); set by the store.
    pub seq: i64,
    pub owner: String,
    /// `name:` in the file; empty = none.
    pub name: String,
    /// The file name it was submitted as.
    pub file: String,
    /// The file's text, as submitted and checked (opened here when it is kept sealed).
    pub yaml: String,
    /// The file holds secret values (`secret_environment`): the store keeps it sealed.
    pub sealed: bool,
    /// PENDING, RUNNING, COMPLETED, FAILED, CANCELED or STOPPED (the daemon's words).
    pub state: String,
    /// The decision core's snapshot without its jobs (the run's state, stopping,
    /// outcome), as JSON; the jobs' phases are [`Store::workflow_phases`].
    pub snapshot_json: String,
    /// The volume its jobs share; empty = none.
    pub shared_volume: String,
    pub created_ms: UnixMillis,
    pub ended_ms: Option<UnixMillis>,
}

/// A row as read, its file possibly still sealed.
struct RawWorkflow {
    rec: WorkflowRecord,
    sealed: Option<(Vec<u8>, Vec<u8>)>,
}

impl RawWorkflow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<RawWorkflow> {
        let nonce: Option<Vec<u8>> = r.get(11)?;
        let ciphertext: Option<Vec<u8>> = r.get(12)?;
        Ok(RawWorkflow {
            rec: WorkflowRecord {
                id: r.get(0)?,
                seq: r.get(1)?,
                owner: r.get(2)?,
                name: r.get(3)?,
                file: r.get(4)?,
                yaml: r.get(5)?,
                sealed: nonce.is_some(),
                state: r.get(6)?,
                snapshot_json: r.get(7)?,
                shared_volume: r.get(8)?,
                created_ms: r.get(9)?,
                ended_ms: r.get(10)?,
            },
            sealed: nonce.zip(ciphertext),
        })
    }

    /// The record, its file opened with the store's key.
    fn open(self, store: &Store) -> Result<WorkflowRecord, StoreError> {
        let mut rec = self.rec;
        if let Some((nonce, ciphertext)) = self.sealed {
            let corrupt = |what: String| StoreError::WorkflowCorrupt {
                id: rec.id.clone(),
                what,
            };
            let key_id = JobId::parse(&rec.id).map_err(|e| corrupt(e.to_string()))?;
            let mut opened = store.key.open(&key_id, &nonce, &ciphertext)?;
            rec.yaml = opened
                .remove(YAML_KEY)
                .ok_or_else(|| corrupt("its sealed file is empty".into()))?;
        }
        Ok(rec)
    }
}

/// The one entry of a sealed file's map.
const YAML_KEY: &str = "yaml";

impl WorkflowRecord {
    /// Whether the run is over (its state is not PENDING or RUNNING).
    pub fn is_final(&self) -> bool {
        !LIVE_WORKFLOW_STATES.contains(&self.state.as_str())
    }
}

fn read(conn: &Connection, path: &Path, id: &str) -> Result<Option<RawWorkflow>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM workflows WHERE id = ?1"))
        .and_then(|mut stmt| stmt.query_row([id], RawWorkflow::from_row).optional())
        .during(path, || format!("read workflow {id}"))
}

fn query(
    conn: &Connection,
    path: &Path,
    sql: &str,
    args: impl rusqlite::Params,
    op: &str,
) -> Result<Vec<RawWorkflow>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).during(path, || op.to_owned())?;
    let rows = stmt
        .query_map(args, RawWorkflow::from_row)
        .during(path, || op.to_owned())?;
    rows.collect::<Result<Vec<_>, _>>()
        .during(path, || op.to_owned())
}

impl Store {
    /// Records a new run and its jobs' phases (`(job, phase JSON)` in file order), in one
    /// transaction; its `seq` is assigned here (the one passed is ignored) and returned in
    /// the record. A file with secret values (`rec.sealed`) is kept sealed under the
    /// store's key, bound to the run's id (which must then be a UUID).
    pub fn create_workflow(
        &self,
        rec: &WorkflowRecord,
        phases: &[(String, String)],
    ) -> Result<WorkflowRecord, StoreError> {
        let path = &self.path;
        let (yaml, nonce, ciphertext) = if rec.sealed {
            let key_id = JobId::parse(&rec.id).map_err(|e| StoreError::WorkflowCorrupt {
                id: rec.id.clone(),
                what: e.to_string(),
            })?;
            let plain = BTreeMap::from([(YAML_KEY.to_owned(), rec.yaml.clone())]);
            let (nonce, ciphertext) = self.key.seal(&key_id, &plain)?;
            (String::new(), Some(nonce.to_vec()), Some(ciphertext))
        } else {
            (rec.yaml.clone(), None, None)
        };
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin creating workflow {}", rec.id))?;
        let seq: i64 = tx
            .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM workflows", [], |r| {
                r.get(0)
            })
            .during(path, || format!("number workflow {}", rec.id))?;
        tx.prepare_cached(&format!(
            "INSERT INTO workflows ({COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        ))
        .and_then(|mut stmt| {
            stmt.execute(params![
                rec.id,
                seq,
                rec.owner,
                rec.name,
                rec.file,
                yaml,
                rec.state,
                rec.snapshot_json,
                rec.shared_volume,
                rec.created_ms,
                rec.ended_ms,
                nonce,
                ciphertext
            ])
        })
        .during(path, || format!("insert workflow {}", rec.id))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO workflow_jobs (workflow_id, job, position, phase_json) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .during(path, || format!("record the jobs of workflow {}", rec.id))?;
            for (position, (job, phase)) in phases.iter().enumerate() {
                stmt.execute(params![rec.id, job, position as i64, phase])
                    .during(path, || format!("record job {job} of workflow {}", rec.id))?;
            }
        }
        tx.commit().during(path, || {
            format!("commit the creation of workflow {}", rec.id)
        })?;
        tracing::debug!(workflow = %rec.id, owner = %rec.owner, jobs = phases.len(), "created workflow");
        Ok(WorkflowRecord { seq, ..rec.clone() })
    }

    /// Writes a run's state, the run's part of its snapshot, the phases of the jobs a step
    /// changed (`(job, phase JSON)`) and its end time once it has one, in one transaction.
    /// An unknown run is [`StoreError::WorkflowNotFound`]; a job it does not have,
    /// [`StoreError::WorkflowCorrupt`].
    pub fn save_workflow(
        &self,
        id: &str,
        state: &str,
        snapshot_json: &str,
        changed: &[(&str, String)],
        ended_ms: Option<UnixMillis>,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin saving workflow {id}"))?;
        let n = tx
            .prepare_cached(
                "UPDATE workflows SET state = ?2, snapshot_json = ?3, ended_ms = ?4 WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.execute(params![id, state, snapshot_json, ended_ms]))
            .during(path, || format!("save workflow {id}"))?;
        if n == 0 {
            return Err(StoreError::WorkflowNotFound(id.to_owned()));
        }
        {
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE workflow_jobs SET phase_json = ?3 WHERE workflow_id = ?1 AND job = ?2",
                )
                .during(path, || format!("save the jobs of workflow {id}"))?;
            for (job, phase) in changed {
                let n = stmt
                    .execute(params![id, job, phase])
                    .during(path, || format!("save job {job} of workflow {id}"))?;
                if n == 0 {
                    return Err(StoreError::WorkflowCorrupt {
                        id: id.to_owned(),
                        what: format!("it has no job {job}"),
                    });
                }
            }
        }
        tx.commit()
            .during(path, || format!("commit saving workflow {id}"))
    }

    /// Each job's phase in run `id` (`(job, phase JSON)`), in file order.
    pub fn workflow_phases(&self, id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.lock();
        conn.prepare_cached(
            "SELECT job, phase_json FROM workflow_jobs WHERE workflow_id = ?1 ORDER BY position",
        )
        .and_then(|mut stmt| {
            stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .during(&self.path, || format!("read the jobs of workflow {id}"))
    }

    /// The run with this exact id, if any.
    pub fn workflow(&self, id: &str) -> Result<Option<WorkflowRecord>, StoreError> {
        let raw = read(&self.lock(), &self.path, id)?;
        raw.map(|r| r.open(self)).transpose()
    }

    /// Resolves a user-typed workflow id or unique prefix (any case) to an id.
    pub fn resolve_workflow(&self, prefix: &str) -> Result<String, StoreError> {
        let shown = || prefix.chars().take(40).collect::<String>();
        if check_prefix(prefix).is_err() {
            return Err(StoreError::WorkflowRef(format!(
                "workflow id {:?} is not valid: give a workflow id or a unique prefix of one, hex digits and '-' (see `rnx workflow list`)",
                shown()
            )));
        }
        let lower = prefix.to_ascii_lowercase();
        let conn = self.lock();
        let ids: Vec<String> = conn
            .prepare_cached("SELECT id FROM workflows WHERE id LIKE ?1 || '%' ORDER BY id LIMIT ?2")
            .and_then(|mut stmt| {
                stmt.query_map(params![lower, CANDIDATES], |r| r.get(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .during(&self.path, || {
                format!("look up workflow ids starting with {lower}")
            })?;
        if let Some(exact) = ids.iter().find(|id| **id == lower) {
            return Ok(exact.clone());
        }
        match ids.as_slice() {
            [] => Err(StoreError::WorkflowNotFound(shown())),
            [one] => Ok(one.clone()),
            many => Err(StoreError::WorkflowRef(format!(
                "workflow id prefix {:?} is ambiguous: it matches {}; type more characters",
                shown(),
                many.iter()
                    .take(5)
                    .map(|m| &m[..8.min(m.len())])
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Runs newest first; `limit` `None` = all.
    pub fn list_workflows(&self, limit: Option<usize>) -> Result<Vec<WorkflowRecord>, StoreError> {
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let raw = query(
            &self.lock(),
            &self.path,
            &format!("SELECT {COLUMNS} FROM workflows ORDER BY seq DESC LIMIT ?1"),
            [limit],
            "list workflows",
        )?;
        raw.into_iter().map(|r| r.open(self)).collect()
    }

    /// Runs that are not over ([`LIVE_WORKFLOW_STATES`]), oldest first: what the daemon
    /// resumes on start.
    pub fn live_workflows(&self) -> Result<Vec<WorkflowRecord>, StoreError> {
        let raw = query(
            &self.lock(),
            &self.path,
            &format!("SELECT {COLUMNS} FROM workflows WHERE state IN (?1, ?2) ORDER BY seq ASC"),
            LIVE_WORKFLOW_STATES,
            "list live workflows",
        )?;
        raw.into_iter().map(|r| r.open(self)).collect()
    }

    /// Every job of run `id`, every attempt, oldest first.
    pub fn workflow_jobs(&self, id: &str) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE json_extract(spec_json, '$.workflow.id') = ?1 \
             ORDER BY seq ASC"
        );
        self.query_jobs(&sql, [id], || format!("list the jobs of workflow {id}"))
    }

    /// Deletes a finished run's record (its jobs are deleted one by one beforehand, like any
    /// job). A run that is not over is refused ([`StoreError::WorkflowNotFinished`]).
    pub fn delete_workflow(&self, id: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        let rec = read(&conn, &self.path, id)?
            .ok_or_else(|| StoreError::WorkflowNotFound(id.to_owned()))?
            .rec;
        if !rec.is_final() {
            return Err(StoreError::WorkflowNotFinished {
                id: id.to_owned(),
                state: rec.state,
            });
        }
        conn.execute("DELETE FROM workflows WHERE id = ?1", [id])
            .during(&self.path, || format!("delete workflow {id}"))?;
        tracing::debug!(workflow = %id, "deleted workflow");
        Ok(())
    }
}
