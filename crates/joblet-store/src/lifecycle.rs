//! A job's start, end and release, each saved in one commit with what
//! must never disagree with it: RUNNING with the job's allocation (and a
//! GPU job's pool records and opened audit record); the final state with
//! the release of an allocation that held no GPUs; the release of a GPU
//! allocation with the GPUs' records and the closed audit record. A
//! daemon killed between two of these finds the ledger and the jobs
//! consistent, and its recovery finishes what was left.

use joblet_core::gpu::{GpuEntry, GpuUpdate};
use joblet_core::{JobId, JobState, UnixMillis};
use joblet_sched::model::{JobRequest, Placement};
use rusqlite::TransactionBehavior;

use crate::records::TransitionExtra;
use crate::{SqlContext, Store, StoreError};
use joblet_core::record::{AuditRecord, JobProgress};

/// What a GPU job's start adds to its commit.
#[derive(Debug, Clone, Copy)]
pub struct GpuGrantRecords<'a> {
    /// The GPU pool's records that changed, and the history of the change.
    pub entries: &'a [&'a GpuEntry],
    pub updates: &'a [GpuUpdate],
    /// The audit record the allocation opens.
    pub audit: &'a AuditRecord,
}

/// A job's start: RUNNING, with its allocation.
#[derive(Debug, Clone, Copy)]
pub struct JobStart<'a> {
    pub job: &'a JobId,
    pub request: &'a JobRequest,
    pub placement: &'a Placement,
    pub gpus: Option<GpuGrantRecords<'a>>,
}

/// How a GPU allocation's audit record is closed.
#[derive(Debug, Clone, Copy)]
pub struct AuditEnd<'a> {
    pub end_ms: UnixMillis,
    /// The job's final state, or `DELETED`.
    pub ended: &'a str,
    pub reason: &'a str,
}

impl Store {
    /// Records `start` in one commit: the job moves to RUNNING, its
    /// allocation enters the ledger (a job that holds one already is
    /// refused), and for a GPU job the pool's records are saved and its
    /// audit record opened.
    pub fn record_start(&self, start: &JobStart<'_>, now: UnixMillis) -> Result<(), StoreError> {
        let path = &self.path;
        let id = start.job;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin the start of job {id}"))?;
        if let Some(g) = &start.gpus {
            crate::gpus::write_gpus(&tx, path, g.entries, g.updates, now)?;
            crate::audit::insert_open(&tx, path, g.audit)?;
        }
        crate::allocations::insert(&tx, path, start.request, start.placement, now)?;
        let mut job =
            crate::read_progress(&tx, path, id)?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
        crate::apply_transition(
            &tx,
            path,
            id,
            &mut job,
            JobState::Running,
            now,
            TransitionExtra::default(),
        )?;
        tx.commit()
            .during(path, || format!("commit the start of job {id}"))?;
        Ok(())
    }

    /// Records job `id`'s final state (see [`Store::transition`]) and, with
    /// `release`, removes its allocation from the ledger, in one commit.
    pub fn record_end(
        &self,
        id: &JobId,
        to: JobState,
        now: UnixMillis,
        extra: TransitionExtra,
        release: bool,
    ) -> Result<JobProgress, StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin the end of job {id}"))?;
        let mut p =
            crate::read_progress(&tx, path, id)?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
        crate::apply_transition(&tx, path, id, &mut p, to, now, extra)?;
        if release {
            crate::allocations::delete(&tx, path, id.as_str())?;
        }
        tx.commit()
            .during(path, || format!("commit the end of job {id}"))?;
        Ok(p)
    }

    /// Gives a job's allocation back in one commit: the ledger entry goes,
    /// the GPU pool's changed records and their history are saved, and the
    /// audit record is closed. Returns whether the ledger held it and the
    /// closed audit record (`None`: none was open).
    pub fn record_release(
        &self,
        job: &str,
        entries: &[&GpuEntry],
        updates: &[GpuUpdate],
        audit: AuditEnd<'_>,
        now: UnixMillis,
    ) -> Result<(bool, Option<AuditRecord>), StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || format!("begin the release of job {job}"))?;
        let held = crate::allocations::delete(&tx, path, job)?;
        crate::gpus::write_gpus(&tx, path, entries, updates, now)?;
        let closed =
            crate::audit::close_open(&tx, path, job, audit.end_ms, audit.ended, audit.reason)?;
        tx.commit()
            .during(path, || format!("commit the release of job {job}"))?;
        Ok((held, closed))
    }
}
