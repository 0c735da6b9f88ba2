//! The GPU audit log: one record per GPU allocation (who, which job, which
//! GPUs, how much memory, when it started and ended, the peak GPU memory
//! seen, how the job ended).
//!
//! A record is opened once when a job gets its GPUs and closed once when
//! they are released; while open only its peak memory may rise. Records
//! are never deleted, also not with their job ([`Store::delete`]): the
//! table has no foreign key to `jobs`, and triggers refuse deletes and
//! changes to a closed record (schema step 4). A job that runs again after
//! being preempted gets a new record; at most one record per job is open.

use joblet_core::record::AuditRecord;
use joblet_core::UnixMillis;
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use crate::{SqlContext, Store, StoreError};

const COLUMNS: &str = "job_id, owner, gpu_uuids_json, gpu_indices_json, memory_mb_per_gpu, \
     sharing, start_ms, end_ms, peak_memory_mb, ended, reason";

fn bad(job: &str, what: impl Into<String>) -> StoreError {
    StoreError::Audit {
        job: job.to_owned(),
        what: what.into(),
    }
}

fn mb_to_sql(job: &str, what: &str, v: Option<u64>) -> Result<Option<i64>, StoreError> {
    v.map(|mb| {
        i64::try_from(mb).map_err(|_| bad(job, format!("{what} {mb} MiB does not fit in 63 bits")))
    })
    .transpose()
}

fn mb_from_sql(job: &str, what: &str, v: Option<i64>) -> Result<Option<u64>, StoreError> {
    v.map(|mb| {
        u64::try_from(mb).map_err(|_| {
            bad(
                job,
                format!("stored {what} {mb} is negative; the row is corrupt"),
            )
        })
    })
    .transpose()
}

/// A `gpu_audit` row before its JSON columns are parsed.
struct RawAudit {
    job_id: String,
    owner: String,
    uuids_json: String,
    indices_json: String,
    memory_mb_per_gpu: Option<i64>,
    sharing: String,
    start_ms: i64,
    end_ms: Option<i64>,
    peak_memory_mb: Option<i64>,
    ended: Option<String>,
    reason: Option<String>,
}

impl RawAudit {
    /// Reads the columns in [`COLUMNS`] order.
    fn from_row(r: &Row<'_>) -> rusqlite::Result<RawAudit> {
        RawAudit::from_row_at(r, 0)
    }

    /// Reads the columns in [`COLUMNS`] order, starting at column `at`.
    fn from_row_at(r: &Row<'_>, at: usize) -> rusqlite::Result<RawAudit> {
        Ok(RawAudit {
            job_id: r.get(at)?,
            owner: r.get(at + 1)?,
            uuids_json: r.get(at + 2)?,
            indices_json: r.get(at + 3)?,
            memory_mb_per_gpu: r.get(at + 4)?,
            sharing: r.get(at + 5)?,
            start_ms: r.get(at + 6)?,
            end_ms: r.get(at + 7)?,
            peak_memory_mb: r.get(at + 8)?,
            ended: r.get(at + 9)?,
            reason: r.get(at + 10)?,
        })
    }

    fn into_record(self) -> Result<AuditRecord, StoreError> {
        let job = self.job_id.as_str();
        let gpu_uuids = serde_json::from_str(&self.uuids_json)
            .map_err(|e| bad(job, format!("stored GPU UUIDs are corrupt: {e}")))?;
        let gpu_indices = serde_json::from_str(&self.indices_json)
            .map_err(|e| bad(job, format!("stored GPU indices are corrupt: {e}")))?;
        let memory_mb_per_gpu = mb_from_sql(job, "memory per GPU", self.memory_mb_per_gpu)?;
        let peak_memory_mb = mb_from_sql(job, "peak memory", self.peak_memory_mb)?;
        Ok(AuditRecord {
            job_id: self.job_id,
            owner: self.owner,
            gpu_uuids,
            gpu_indices,
            memory_mb_per_gpu,
            sharing: self.sharing,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            peak_memory_mb,
            ended: self.ended,
            reason: self.reason,
        })
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// Opens `rec` inside the transaction `tx` (see [`Store::audit_open`]).
pub(crate) fn insert_open(
    tx: &rusqlite::Transaction<'_>,
    path: &std::path::Path,
    rec: &AuditRecord,
) -> Result<(), StoreError> {
    let job = rec.job_id.as_str();
    let uuids = serde_json::to_string(&rec.gpu_uuids)
        .map_err(|e| bad(job, format!("cannot encode the GPU UUIDs: {e}")))?;
    let indices = serde_json::to_string(&rec.gpu_indices)
        .map_err(|e| bad(job, format!("cannot encode the GPU indices: {e}")))?;
    let memory = mb_to_sql(job, "memory per GPU", rec.memory_mb_per_gpu)?;
    let peak = mb_to_sql(job, "peak memory", rec.peak_memory_mb)?;
    let open = tx
        .prepare_cached("SELECT 1 FROM gpu_audit WHERE job_id = ?1 AND end_ms IS NULL")
        .and_then(|mut stmt| stmt.query_row([job], |_| Ok(())).optional())
        .during(path, || {
            format!("look up the GPU audit record of job {job}")
        })?
        .is_some();
    if open {
        return Err(bad(
            job,
            "it already has an open record; an allocation is audited once",
        ));
    }
    tx.prepare_cached(
        "INSERT INTO gpu_audit (job_id, owner, gpu_uuids_json, gpu_indices_json, \
         memory_mb_per_gpu, sharing, start_ms, peak_memory_mb) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            job,
            rec.owner,
            uuids,
            indices,
            memory,
            rec.sharing,
            rec.start_ms,
            peak
        ])
    })
    .during(path, || format!("open the GPU audit record of job {job}"))?;
    Ok(())
}

/// Closes the job's open record on `conn` (see [`Store::audit_close`]).
pub(crate) fn close_open(
    conn: &Connection,
    path: &Path,
    job: &str,
    end_ms: UnixMillis,
    ended: &str,
    reason: &str,
) -> Result<Option<AuditRecord>, StoreError> {
    let row: Option<(i64, RawAudit)> = conn
        .prepare_cached(&format!(
            "SELECT id, {COLUMNS} FROM gpu_audit WHERE job_id = ?1 AND end_ms IS NULL"
        ))
        .and_then(|mut stmt| {
            stmt.query_row([job], |r| Ok((r.get(0)?, RawAudit::from_row_at(r, 1)?)))
                .optional()
        })
        .during(path, || format!("read the GPU audit record of job {job}"))?;
    let Some((id, raw)) = row else {
        return Ok(None);
    };
    let mut rec = raw.into_record()?;
    rec.end_ms = Some(end_ms);
    rec.ended = Some(ended.to_owned());
    rec.reason = non_empty(reason).map(str::to_owned);
    conn.prepare_cached("UPDATE gpu_audit SET end_ms = ?2, ended = ?3, reason = ?4 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute(params![id, end_ms, ended, rec.reason]))
        .during(path, || format!("close the GPU audit record of job {job}"))?;
    tracing::debug!(job, ended, duration_ms = ?rec.duration_ms(), "GPU audit record closed");
    Ok(Some(rec))
}

impl Store {
    /// Opens the audit record of an allocation. `rec.end_ms`, `ended` and
    /// `reason` are ignored (a record starts open); `peak_memory_mb` is
    /// kept as a first reading. A job that already has an open record is
    /// refused: an allocation is audited once.
    pub fn audit_open(&self, rec: &AuditRecord) -> Result<(), StoreError> {
        let job = rec.job_id.as_str();
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || {
                format!("begin opening the GPU audit record of job {job}")
            })?;
        insert_open(&tx, path, rec)?;
        tx.commit()
            .during(path, || format!("commit the GPU audit record of job {job}"))?;
        tracing::debug!(job, owner = %rec.owner, gpus = ?rec.gpu_uuids, "GPU audit record opened");
        Ok(())
    }

    /// Raises the open record's peak GPU memory to `peak_mb` if that is
    /// higher. Nothing happens when the job has no open record.
    pub fn audit_peak(&self, job: &str, peak_mb: u64) -> Result<(), StoreError> {
        let peak = mb_to_sql(job, "peak memory", Some(peak_mb))?;
        let path = &self.path;
        self.lock()
            .execute(
                "UPDATE gpu_audit SET peak_memory_mb = ?2 WHERE job_id = ?1 AND end_ms IS NULL \
                 AND (peak_memory_mb IS NULL OR peak_memory_mb < ?2)",
                params![job, peak],
            )
            .during(path, || format!("record the peak GPU memory of job {job}"))?;
        Ok(())
    }

    /// Closes the job's open record: when it ended, its final state name
    /// and why (`""` = nothing to say). Returns the closed record the first
    /// time; `None` when the job has no open record (never opened, or
    /// closed already), so a release is audited exactly once.
    pub fn audit_close(
        &self,
        job: &str,
        end_ms: UnixMillis,
        ended: &str,
        reason: &str,
    ) -> Result<Option<AuditRecord>, StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || {
                format!("begin closing the GPU audit record of job {job}")
            })?;
        let rec = close_open(&tx, path, job, end_ms, ended, reason)?;
        tx.commit().during(path, || {
            format!("commit closing the GPU audit record of job {job}")
        })?;
        Ok(rec)
    }

    /// Audit records, oldest first (by start): those still open and those
    /// that ended at or after `since_ms` (all when `None`), of `owner` only
    /// when given.
    pub fn audit_query(
        &self,
        since_ms: Option<UnixMillis>,
        owner: Option<&str>,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let op = || "read the GPU audit log".to_owned();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM gpu_audit \
                 WHERE (?1 IS NULL OR end_ms IS NULL OR end_ms >= ?1) \
                 AND (?2 IS NULL OR owner = ?2) ORDER BY start_ms, id"
            ))
            .during(path, op)?;
        let rows = stmt
            .query_map(params![since_ms, owner], RawAudit::from_row)
            .during(path, op)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.during(path, op)?.into_record()?);
        }
        Ok(out)
    }

    /// The job's latest audit record (open or closed): the GPUs it holds
    /// or last held. `None` for a job that never got GPUs.
    pub fn job_gpus(&self, job: &str) -> Result<Option<AuditRecord>, StoreError> {
        let path = &self.path;
        self.lock()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM gpu_audit WHERE job_id = ?1 ORDER BY id DESC LIMIT 1"
            ))
            .and_then(|mut stmt| stmt.query_row([job], RawAudit::from_row).optional())
            .during(path, || format!("read the GPUs of job {job}"))?
            .map(RawAudit::into_record)
            .transpose()
    }
}
