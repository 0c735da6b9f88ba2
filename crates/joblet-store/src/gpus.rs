//! GPU records: the health state of every GPU the node has seen (so an
//! offline GPU stays offline across restarts) and the history of what
//! happened to each, with causes.

use std::collections::BTreeSet;

use joblet_core::gpu::{GpuEntry, GpuState, GpuUpdate};
use joblet_core::record::{AuditRecord, GpuEventRecord};
use joblet_core::{JobId, JobState, UnixMillis};
use rusqlite::{params, TransactionBehavior};

use crate::{SqlContext, Store, StoreError, TransitionExtra};

fn event_row(
    u: &GpuUpdate,
) -> (
    &str,
    u32,
    &'static str,
    Option<GpuState>,
    Option<GpuState>,
    String,
) {
    match u {
        GpuUpdate::Transition {
            uuid,
            index,
            from,
            to,
            cause,
        } => (
            uuid,
            *index,
            "transition",
            Some(*from),
            Some(*to),
            cause.clone(),
        ),
        GpuUpdate::Paused { uuid, index, cause } => {
            (uuid, *index, "paused", None, None, cause.clone())
        }
        GpuUpdate::Resumed { uuid, index, cause } => {
            (uuid, *index, "resumed", None, None, cause.clone())
        }
        GpuUpdate::Noted {
            uuid,
            index,
            message,
        } => (uuid, *index, "noted", None, None, message.clone()),
        GpuUpdate::EndJobs {
            uuid,
            jobs,
            reason,
            failed,
        } => (
            uuid,
            u32::MAX,
            "end_jobs",
            None,
            None,
            format!(
                "{} jobs {}: {reason}",
                if *failed { "failing" } else { "stopping" },
                jobs.join(", ")
            ),
        ),
    }
}

/// Saves `entries` and appends `updates` inside the transaction `tx`.
pub(crate) fn write_gpus(
    tx: &rusqlite::Transaction<'_>,
    path: &std::path::Path,
    entries: &[&GpuEntry],
    updates: &[GpuUpdate],
    now: UnixMillis,
) -> Result<(), StoreError> {
    for e in entries {
        let jobs = serde_json::to_string(&e.jobs).map_err(|source| StoreError::GpuEncode {
            uuid: e.uuid.clone(),
            source,
        })?;
        tx.prepare_cached(
                "INSERT INTO gpus (uuid, idx, state, cause, since_ms, paused, jobs_json, uncorrected_seen) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT(uuid) DO UPDATE SET idx = ?2, state = ?3, cause = ?4, since_ms = ?5, \
                 paused = ?6, jobs_json = ?7, uncorrected_seen = ?8",
            )
            .and_then(|mut stmt| stmt.execute(params![
                    e.uuid,
                    e.index,
                    e.state.as_str(),
                    e.cause,
                    e.since,
                    e.paused,
                    jobs,
                    e.uncorrected_seen as i64
                ]))
            .during(path, || format!("save GPU {}", e.uuid))?;
    }
    for u in updates {
        let (uuid, mut index, kind, from, to, message) = event_row(u);
        if index == u32::MAX {
            index = entries
                .iter()
                .find(|e| e.uuid == uuid)
                .map(|e| e.index)
                .unwrap_or_default();
        }
        tx.prepare_cached(
            "INSERT INTO gpu_events (uuid, idx, at_ms, kind, from_state, to_state, message) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                uuid,
                index,
                now,
                kind,
                from.map(|s| s.as_str()),
                to.map(|s| s.as_str()),
                message
            ])
        })
        .during(path, || format!("record an event of GPU {uuid}"))?;
    }
    Ok(())
}

/// A GPU allocation as it is saved when its job is placed
/// ([`Store::record_gpus_and_allocation`]): the ledger's request and
/// placement, the audit record it opens, and the job it starts.
#[derive(Debug, Clone, Copy)]
pub struct NewAllocation<'a> {
    pub request: &'a joblet_sched::model::JobRequest,
    pub placement: &'a joblet_sched::model::Placement,
    pub audit: &'a AuditRecord,
    /// The job moved to RUNNING in the same commit (its start follows the
    /// allocation at once; one commit less on its path).
    pub start: Option<&'a JobId>,
}

impl Store {
    /// Saves the current records of `entries` and appends `updates` to the
    /// history, in one transaction: what is logged and what is stored never
    /// disagree.
    pub fn record_gpus(
        &self,
        entries: &[&GpuEntry],
        updates: &[GpuUpdate],
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        self.record_gpus_and_allocation(entries, updates, now, None)
    }

    /// [`Store::record_gpus`], and with `allocation` also its ledger entry
    /// ([`Store::record_allocation`]) and the audit record it opens
    /// ([`Store::audit_open`]), in one transaction: a GPU allocation is
    /// saved whole or not at all (one commit on the job's start path
    /// instead of three). `entries` may be empty (a shared GPU already
    /// allocated: only the allocation is new).
    pub fn record_gpus_and_allocation(
        &self,
        entries: &[&GpuEntry],
        updates: &[GpuUpdate],
        now: UnixMillis,
        allocation: Option<&NewAllocation<'_>>,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        let what = if allocation.is_some() {
            "a GPU allocation"
        } else {
            "a GPU update"
        };
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin {what}"))?;
        write_gpus(&tx, path, entries, updates, now)?;
        if let Some(a) = allocation {
            crate::allocations::insert(&tx, path, a.request, a.placement, now)?;
            crate::audit::insert_open(&tx, path, a.audit)?;
            if let Some(id) = a.start {
                let mut job = crate::read_progress(&tx, path, id)?
                    .ok_or_else(|| StoreError::NotFound(id.clone()))?;
                crate::apply_transition(
                    &tx,
                    path,
                    id,
                    &mut job,
                    JobState::Running,
                    now,
                    TransitionExtra::default(),
                )?;
            }
        }
        tx.commit().during(path, || format!("commit {what}"))?;
        if let Some(a) = allocation {
            tracing::debug!(job = %a.audit.job_id, owner = %a.audit.owner, gpus = ?a.audit.gpu_uuids, "GPU allocation recorded, audit record opened");
        }
        Ok(())
    }

    /// Every GPU record, by index.
    pub fn gpus(&self) -> Result<Vec<GpuEntry>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT uuid, idx, state, cause, since_ms, paused, jobs_json, uncorrected_seen \
                 FROM gpus ORDER BY idx",
            )
            .during(path, || "read GPUs".into())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .during(path, || "read GPUs".into())?;
        let mut out = Vec::new();
        for row in rows {
            let (uuid, index, state, cause, since, paused, jobs, seen) =
                row.during(path, || "read a GPU".into())?;
            let state = state
                .parse::<GpuState>()
                .map_err(|e| StoreError::GpuCorrupt {
                    uuid: uuid.clone(),
                    what: e.to_string(),
                })?;
            let jobs: BTreeSet<String> =
                serde_json::from_str(&jobs).map_err(|e| StoreError::GpuCorrupt {
                    uuid: uuid.clone(),
                    what: format!("job list {jobs:?}: {e}"),
                })?;
            out.push(GpuEntry {
                uuid,
                index,
                state,
                cause,
                since,
                paused,
                jobs,
                uncorrected_seen: seen.max(0) as u64,
            });
        }
        Ok(out)
    }

    /// The last `limit` events of GPU `uuid`, oldest first.
    pub fn gpu_history(&self, uuid: &str, limit: u32) -> Result<Vec<GpuEventRecord>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT uuid, idx, at_ms, kind, from_state, to_state, message FROM \
                 (SELECT * FROM gpu_events WHERE uuid = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id",
            )
            .during(path, || format!("read the history of GPU {uuid}"))?;
        let rows = stmt
            .query_map(params![uuid, limit], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .during(path, || format!("read the history of GPU {uuid}"))?;
        let state = |s: Option<String>| -> Result<Option<GpuState>, StoreError> {
            s.map(|s| {
                s.parse::<GpuState>().map_err(|e| StoreError::GpuCorrupt {
                    uuid: uuid.to_string(),
                    what: e.to_string(),
                })
            })
            .transpose()
        };
        let mut out = Vec::new();
        for row in rows {
            let (uuid, index, at_ms, kind, from, to, message) =
                row.during(path, || "read a GPU event".into())?;
            out.push(GpuEventRecord {
                uuid,
                index,
                at_ms,
                kind,
                from: state(from)?,
                to: state(to)?,
                message,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::gpu::{AdminAction, GpuPool, Observed};

    #[test]
    fn states_and_history_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (db, key) = (dir.path().join("j.db"), dir.path().join("k"));
        let mut pool = GpuPool::new();
        let mut updates = pool.sync(&[("GPU-a".into(), 0), ("GPU-b".into(), 1)], 1);
        updates.extend(pool.observe("GPU-b", Observed::Xid(79), 2));
        updates.extend(pool.admin("GPU-a", AdminAction::Drain, "alice", 3).unwrap());
        {
            let store = Store::open(&db, &key).unwrap();
            store.record_gpus(&pool.entries(), &updates, 3).unwrap();
        }
        let store = Store::open(&db, &key).unwrap();
        let back = store.gpus().unwrap();
        let want: Vec<GpuEntry> = pool.entries().into_iter().cloned().collect();
        assert_eq!(back, want);
        assert_eq!(back[0].state, GpuState::Draining);
        assert_eq!(back[1].state, GpuState::Degraded);
        let hist = store.gpu_history("GPU-b", 10).unwrap();
        let kinds: Vec<_> = hist.iter().map(|h| h.kind.as_str()).collect();
        assert_eq!(kinds, ["noted", "transition"]);
        assert_eq!(hist[1].to, Some(GpuState::Degraded));
        assert_eq!(hist[1].message, "XID 79 (GPU has fallen off the bus)");
        assert_eq!(store.gpu_history("GPU-b", 1).unwrap().len(), 1);
        assert!(store.gpu_history("GPU-zzz", 10).unwrap().is_empty());
    }

    /// A store and a pool that both know GPU-a (index 0), free.
    fn store_with_gpu_a() -> (tempfile::TempDir, Store, GpuPool) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &dir.path().join("k")).unwrap();
        let mut pool = GpuPool::new();
        let synced = pool.sync(&[("GPU-a".into(), 0)], 1);
        store.record_gpus(&pool.entries(), &synced, 1).unwrap();
        (dir, store, pool)
    }

    /// An allocation of GPU-a (index 0) to `job`: its audit record,
    /// request and placement.
    fn allocation_of(
        job: &str,
    ) -> (
        crate::AuditRecord,
        joblet_sched::model::JobRequest,
        joblet_sched::model::Placement,
    ) {
        let audit = crate::AuditRecord {
            job_id: job.into(),
            owner: "alice".into(),
            gpu_uuids: vec!["GPU-a".into()],
            gpu_indices: vec![0],
            memory_mb_per_gpu: None,
            sharing: "exclusive".into(),
            start_ms: 2,
            end_ms: None,
            peak_memory_mb: None,
            ended: None,
            reason: None,
        };
        use joblet_sched::model::{GpuRef, JobRequest, Placement, Sharing, WorkloadClass};
        let request = JobRequest {
            gpu_milli: 0,
            job: job.into(),
            owner: "alice".into(),
            queue: "default".into(),
            gpu_count: 1,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        };
        let placement = Placement {
            gpu_milli: 0,
            job: job.into(),
            units: vec![GpuRef {
                node: 0,
                index: 0,
                mig: None,
            }],
            memory_mb: 40_960,
            node: 0,
            cpu_millis: 0,
            host_memory_mb: 0,
            sharing: Sharing::Exclusive,
            class: WorkloadClass::Training,
        };
        (audit, request, placement)
    }

    /// An allocation's ledger entry, pool records and audit record are
    /// saved together, or (the job holds an allocation already) none is.
    #[test]
    fn an_allocation_its_pool_records_and_audit_record_commit_together() {
        let (_dir, store, mut pool) = store_with_gpu_a();
        let (audit, request, placement) = allocation_of("job-1");
        let allocation = NewAllocation {
            request: &request,
            placement: &placement,
            audit: &audit,
            start: None,
        };
        let taken = pool.allocate("GPU-a", "job-1", 2).unwrap();
        store
            .record_gpus_and_allocation(&pool.entries(), &taken, 2, Some(&allocation))
            .unwrap();
        assert_eq!(store.gpus().unwrap()[0].state, GpuState::Allocated);
        assert_eq!(store.job_gpus("job-1").unwrap(), Some(audit.clone()));
        assert_eq!(
            store.allocations().unwrap(),
            vec![(request.clone(), placement.clone(), 2)]
        );
        let events = store.gpu_history("GPU-a", 10).unwrap().len();

        // Recording the same job's allocation again fails at its ledger
        // entry: the pool records and the event written before it in the
        // transaction are rolled back, and no second audit record opens.
        let released = pool.release("GPU-a", "job-1", 3).unwrap();
        let err = store
            .record_gpus_and_allocation(&pool.entries(), &released, 3, Some(&allocation))
            .unwrap_err();
        assert!(err.to_string().contains("already holds"), "{err}");
        assert_eq!(store.gpus().unwrap()[0].state, GpuState::Allocated);
        assert_eq!(store.gpu_history("GPU-a", 10).unwrap().len(), events);
        assert_eq!(store.allocations().unwrap().len(), 1);

        // The ledger entry gone (a release), a second audit record for the
        // job is what fails: still nothing of the transaction stays.
        assert!(store.release_allocation("job-1").unwrap());
        let err = store
            .record_gpus_and_allocation(&pool.entries(), &released, 3, Some(&allocation))
            .unwrap_err();
        assert!(err.to_string().contains("audited once"), "{err}");
        assert_eq!(store.gpus().unwrap()[0].state, GpuState::Allocated);
        assert!(store.allocations().unwrap().is_empty());
    }

    /// The allocation that starts its job moves it to RUNNING in the same
    /// commit; when that move is refused (the job is gone), nothing of the
    /// allocation is saved.
    #[test]
    fn an_allocation_that_starts_its_job_records_running_with_it() {
        let (_dir, store, mut pool) = store_with_gpu_a();
        let id = JobId::parse("0b6f0d5e-7a36-4d4c-9a59-2f1f1e6c2a11").unwrap();
        let spec = joblet_core::JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0;
        store
            .create_job_and_transition(
                &id,
                "alice",
                &spec,
                &Default::default(),
                1,
                (JobState::Queued, TransitionExtra::default()),
            )
            .unwrap();
        let (audit, request, placement) = allocation_of(id.as_str());
        let allocation = NewAllocation {
            request: &request,
            placement: &placement,
            audit: &audit,
            start: Some(&id),
        };
        let taken = pool.allocate("GPU-a", id.as_str(), 2).unwrap();
        store
            .record_gpus_and_allocation(&pool.entries(), &taken, 2, Some(&allocation))
            .unwrap();
        let job = store.get(&id).unwrap().unwrap();
        assert_eq!((job.state, job.started_ms), (JobState::Running, Some(2)));
        let states: Vec<JobState> = store
            .transitions(&id)
            .unwrap()
            .iter()
            .map(|t| t.to)
            .collect();
        assert_eq!(
            states,
            [JobState::Pending, JobState::Queued, JobState::Running]
        );
        assert_eq!(store.allocations().unwrap().len(), 1);

        // A job that does not exist cannot start: no ledger entry, no audit
        // record, no pool record change.
        let gone = JobId::parse("0b6f0d5e-7a36-4d4c-9a59-2f1f1e6c2a12").unwrap();
        let (audit, request, placement) = allocation_of(gone.as_str());
        let allocation = NewAllocation {
            request: &request,
            placement: &placement,
            audit: &audit,
            start: Some(&gone),
        };
        let err = store
            .record_gpus_and_allocation(&pool.entries(), &[], 3, Some(&allocation))
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err}");
        assert_eq!(store.allocations().unwrap().len(), 1);
        assert_eq!(store.job_gpus(gone.as_str()).unwrap(), None);
    }

    #[test]
    fn a_bad_stored_state_is_reported_with_the_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &dir.path().join("k")).unwrap();
        store
            .lock()
            .execute(
                "INSERT INTO gpus (uuid, idx, state, since_ms) VALUES ('GPU-x', 0, 'MELTED', 0)",
                [],
            )
            .unwrap();
        let err = store.gpus().unwrap_err().to_string();
        assert!(err.contains("GPU-x") && err.contains("MELTED"), "{err}");
    }
}
