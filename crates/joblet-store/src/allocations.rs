//! The allocation ledger: every running job's request and placement (its
//! GPUs, CPU and memory on its node), written with its move to RUNNING and
//! removed exactly once when what it holds is released, so a restarted
//! daemon re-derives the scheduler's exact allocations
//! (`joblet_sched::scheduler::Scheduler::restore`). The table keeps its
//! first name, `gpu_allocations`.

use joblet_core::UnixMillis;
use joblet_sched::model::{JobRequest, Placement};
use rusqlite::{params, Connection, OptionalExtension};

use crate::{SqlContext, Store, StoreError};

fn bad(job: &str, what: impl Into<String>) -> StoreError {
    StoreError::Allocation {
        job: job.to_string(),
        what: what.into(),
    }
}

/// The ledger entry of a job's allocation, on `conn` (a transaction's,
/// or autocommitted). A job that already holds one is refused.
pub(crate) fn insert(
    conn: &Connection,
    path: &std::path::Path,
    req: &JobRequest,
    placement: &Placement,
    started_ms: UnixMillis,
) -> Result<(), StoreError> {
    let job = &placement.job;
    if &req.job != job {
        return Err(bad(
            job,
            format!(
                "the request is for job {} but the placement for {job}",
                req.job
            ),
        ));
    }
    let request_json = serde_json::to_string(req)
        .map_err(|e| bad(job, format!("cannot encode the request: {e}")))?;
    let placement_json = serde_json::to_string(placement)
        .map_err(|e| bad(job, format!("cannot encode the placement: {e}")))?;
    let exists = conn
        .prepare_cached("SELECT 1 FROM gpu_allocations WHERE job_id = ?1")
        .and_then(|mut stmt| stmt.query_row([job], |_| Ok(())).optional())
        .during(path, || format!("look up the allocation of job {job}"))?
        .is_some();
    if exists {
        return Err(bad(job, "it already holds an allocation"));
    }
    conn.prepare_cached(
        "INSERT INTO gpu_allocations (job_id, request_json, placement_json, started_ms) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut stmt| stmt.execute(params![job, request_json, placement_json, started_ms]))
    .during(path, || format!("record the allocation of job {job}"))?;
    Ok(())
}

/// Removes job `job`'s ledger entry on `conn`; true if it held one.
pub(crate) fn delete(
    conn: &Connection,
    path: &std::path::Path,
    job: &str,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached("DELETE FROM gpu_allocations WHERE job_id = ?1")
        .and_then(|mut stmt| stmt.execute([job]))
        .during(path, || format!("release the allocation of job {job}"))?;
    Ok(n > 0)
}

impl Store {
    /// Records a job's allocation. A job that already holds one is refused
    /// (an allocation is never silently replaced).
    pub fn record_allocation(
        &self,
        req: &JobRequest,
        placement: &Placement,
        started_ms: UnixMillis,
    ) -> Result<(), StoreError> {
        let conn = self.lock();
        insert(&conn, &self.path, req, placement, started_ms)
    }

    /// Removes a job's allocation; true if it held one (so a release is
    /// carried out exactly once, also across restarts).
    pub fn release_allocation(&self, job: &str) -> Result<bool, StoreError> {
        delete(&self.lock(), &self.path, job)
    }

    /// The whole ledger, by job id.
    pub fn allocations(&self) -> Result<Vec<(JobRequest, Placement, UnixMillis)>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT job_id, request_json, placement_json, started_ms FROM gpu_allocations \
                 ORDER BY job_id",
            )
            .during(path, || "read the GPU allocations".into())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .during(path, || "read the GPU allocations".into())?;
        let mut out = Vec::new();
        for row in rows {
            let (job, req, placement, started) =
                row.during(path, || "read a GPU allocation".into())?;
            let req: JobRequest = serde_json::from_str(&req)
                .map_err(|e| bad(&job, format!("stored request is corrupt: {e}")))?;
            let placement: Placement = serde_json::from_str(&placement)
                .map_err(|e| bad(&job, format!("stored placement is corrupt: {e}")))?;
            out.push((req, placement, started));
        }
        Ok(out)
    }
}
