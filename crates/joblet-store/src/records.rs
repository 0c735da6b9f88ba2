//! Job and transition records ([`joblet_core::record`]) from table rows,
//! and what a transition may set.

use joblet_core::record::{JobProgress, JobRecord, TransitionRecord};
use joblet_core::{JobId, JobState};
use rusqlite::Row;

use crate::error::StoreError;

/// What a transition may set besides the state.
#[derive(Debug, Clone, Default)]
pub struct TransitionExtra {
    /// The job's new `reason` (`None` = `""`).
    pub reason: Option<String>,
    /// Set only when given; otherwise the stored value is kept.
    pub exit_code: Option<i32>,
    /// Set only when given; otherwise the stored value is kept.
    pub shim_pid: Option<i32>,
}

/// The `jobs` columns [`JobProgress`] is read from, in order.
pub(crate) const PROGRESS_COLUMNS: &str =
    "state, reason, exit_code, started_ms, ended_ms, shim_pid";

/// A [`JobProgress`] from a row of [`PROGRESS_COLUMNS`] of job `id`.
pub(crate) fn progress_from_row(
    id: &str,
    row: &Row<'_>,
) -> rusqlite::Result<Result<JobProgress, StoreError>> {
    let state: String = row.get(0)?;
    let (reason, exit_code, started_ms, ended_ms, shim_pid) = (
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    );
    Ok(parse_state(id, &state).map(|state| JobProgress {
        state,
        reason,
        exit_code,
        started_ms,
        ended_ms,
        shim_pid,
    }))
}

/// The `jobs` columns in the order [`RawJob::from_row`] reads them.
pub(crate) const JOB_COLUMNS: &str = "id, seq, owner, spec_json, state, reason, exit_code, \
     created_ms, started_ms, ended_ms, shim_pid";

/// A `jobs` row before its text columns are parsed.
pub(crate) struct RawJob {
    id: String,
    seq: i64,
    owner: String,
    spec_json: String,
    state: String,
    reason: String,
    exit_code: Option<i32>,
    created_ms: i64,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
    shim_pid: Option<i32>,
}

impl RawJob {
    pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<RawJob> {
        Ok(RawJob {
            id: row.get(0)?,
            seq: row.get(1)?,
            owner: row.get(2)?,
            spec_json: row.get(3)?,
            state: row.get(4)?,
            reason: row.get(5)?,
            exit_code: row.get(6)?,
            created_ms: row.get(7)?,
            started_ms: row.get(8)?,
            ended_ms: row.get(9)?,
            shim_pid: row.get(10)?,
        })
    }

    pub(crate) fn into_record(self) -> Result<JobRecord, StoreError> {
        let id = JobId::parse(&self.id).map_err(|_| StoreError::Corrupt {
            id: self.id.clone(),
            what: "the stored job id is not a valid job id".to_owned(),
        })?;
        let state = parse_state(&self.id, &self.state)?;
        let spec = serde_json::from_str(&self.spec_json).map_err(|e| StoreError::Corrupt {
            id: self.id.clone(),
            what: format!("the stored job spec is not valid JSON for a job spec: {e}"),
        })?;
        Ok(JobRecord {
            id,
            seq: self.seq,
            owner: self.owner,
            spec,
            state,
            reason: self.reason,
            exit_code: self.exit_code,
            created_ms: self.created_ms,
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            shim_pid: self.shim_pid,
        })
    }
}

/// Parses a stored state name; an unknown name means the row is corrupt.
pub(crate) fn parse_state(id: &str, s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Corrupt {
        id: id.to_owned(),
        what: format!("{e}"),
    })
}

/// A `job_transitions` row before its state names are parsed.
pub(crate) struct RawTransition {
    from: Option<String>,
    to: String,
    at_ms: i64,
    reason: String,
}

impl RawTransition {
    /// Reads the columns `from_state, to_state, at_ms, reason`.
    pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<RawTransition> {
        Ok(RawTransition {
            from: row.get(0)?,
            to: row.get(1)?,
            at_ms: row.get(2)?,
            reason: row.get(3)?,
        })
    }

    pub(crate) fn into_record(self, id: &JobId) -> Result<TransitionRecord, StoreError> {
        Ok(TransitionRecord {
            from: self
                .from
                .map(|s| parse_state(id.as_str(), &s))
                .transpose()?,
            to: parse_state(id.as_str(), &self.to)?,
            at_ms: self.at_ms,
            reason: self.reason,
        })
    }
}
