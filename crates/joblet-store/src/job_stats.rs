//! Reads of the job records for the console's history page: when jobs
//! waited and why they failed, over a time window. Aggregation is the
//! caller's (`joblet`'s `service::History`); these return the rows.

use joblet_core::UnixMillis;
use rusqlite::params;

use crate::{SqlContext, Store, StoreError};

/// How many rows one of these reads returns at most (newest first), so a
/// node with years of jobs answers in bounded time and memory.
pub const STATS_ROWS: usize = 100_000;

/// A job that started: when it was submitted and when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWait {
    pub owner: String,
    pub created_ms: UnixMillis,
    pub started_ms: UnixMillis,
    /// GPUs (or MIG slices) it asked for; 0 for a CPU job.
    pub gpus: u32,
}

/// A job that ended FAILED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    pub owner: String,
    pub ended_ms: UnixMillis,
    /// The recorded reason; empty when the job's own exit code says it.
    pub reason: String,
    pub exit_code: Option<i32>,
}

impl Store {
    /// Jobs that started at or after `since_ms`, newest first, at most
    /// [`STATS_ROWS`].
    pub fn job_waits(&self, since_ms: UnixMillis) -> Result<Vec<JobWait>, StoreError> {
        let conn = self.lock();
        let op = || "read when jobs started".to_owned();
        let mut stmt = conn
            .prepare_cached(
                "SELECT owner, created_ms, started_ms, \
                 COALESCE(json_extract(spec_json, '$.resources.gpu_count'), 0) \
                 FROM jobs WHERE started_ms IS NOT NULL AND started_ms >= ?1 \
                 ORDER BY started_ms DESC LIMIT ?2",
            )
            .during(&self.path, op)?;
        let rows = stmt
            .query_map(params![since_ms, STATS_ROWS as i64], |r| {
                Ok(JobWait {
                    owner: r.get(0)?,
                    created_ms: r.get(1)?,
                    started_ms: r.get(2)?,
                    gpus: r.get(3)?,
                })
            })
            .during(&self.path, op)?;
        rows.collect::<rusqlite::Result<_>>().during(&self.path, op)
    }

    /// Jobs that ended FAILED at or after `since_ms`, newest first, at
    /// most [`STATS_ROWS`].
    pub fn job_failures(&self, since_ms: UnixMillis) -> Result<Vec<JobFailure>, StoreError> {
        let conn = self.lock();
        let op = || "read failed jobs".to_owned();
        let mut stmt = conn
            .prepare_cached(
                "SELECT owner, ended_ms, reason, exit_code FROM jobs \
                 WHERE state = 'FAILED' AND ended_ms >= ?1 \
                 ORDER BY ended_ms DESC LIMIT ?2",
            )
            .during(&self.path, op)?;
        let rows = stmt
            .query_map(params![since_ms, STATS_ROWS as i64], |r| {
                Ok(JobFailure {
                    owner: r.get(0)?,
                    ended_ms: r.get(1)?,
                    reason: r.get(2)?,
                    exit_code: r.get(3)?,
                })
            })
            .during(&self.path, op)?;
        rows.collect::<rusqlite::Result<_>>().during(&self.path, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransitionExtra;
    use joblet_core::{JobId, JobRequest, JobState};
    use std::collections::BTreeMap;

    fn job(s: &Store, id: &str, gpus: u32, at: i64) -> JobId {
        let spec = JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0;
        let mut spec = spec;
        spec.resources.gpu_count = gpus;
        let id = JobId::parse(id).unwrap();
        s.create_job(&id, "alice", &spec, &BTreeMap::new(), at)
            .unwrap();
        id
    }

    #[test]
    fn waits_and_failures_of_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("db"), &dir.path().join("key")).unwrap();
        let none = TransitionExtra::default;
        let a = job(&s, "aaaa0001-0000-4000-8000-000000000001", 2, 1_000);
        s.transition(&a, JobState::Queued, 1_000, none()).unwrap();
        s.transition(&a, JobState::Running, 4_000, none()).unwrap();
        s.transition(
            &a,
            JobState::Failed,
            9_000,
            TransitionExtra {
                reason: Some("GPU memory quota exceeded: used 2 of 1".into()),
                ..none()
            },
        )
        .unwrap();
        let b = job(&s, "bbbb0002-0000-4000-8000-000000000002", 0, 500);
        s.transition(&b, JobState::Queued, 500, none()).unwrap();
        s.transition(&b, JobState::Running, 600, none()).unwrap();
        // Never started.
        job(&s, "cccc0003-0000-4000-8000-000000000003", 0, 5_000);

        let waits = s.job_waits(0).unwrap();
        assert_eq!(
            waits,
            [
                JobWait {
                    owner: "alice".into(),
                    created_ms: 1_000,
                    started_ms: 4_000,
                    gpus: 2
                },
                JobWait {
                    owner: "alice".into(),
                    created_ms: 500,
                    started_ms: 600,
                    gpus: 0
                }
            ]
        );
        assert_eq!(s.job_waits(1_000).unwrap().len(), 1);
        let failures = s.job_failures(0).unwrap();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].ended_ms, 9_000);
        assert!(failures[0].reason.starts_with("GPU memory quota exceeded"));
        assert!(s.job_failures(9_001).unwrap().is_empty());
    }
}
