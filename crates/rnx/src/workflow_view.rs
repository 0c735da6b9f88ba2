//! What rnx shows about workflows: serde views built from the wire's
//! `Workflow` and `WorkflowJob`. `--json` prints them as they are (the
//! JSON contract of `rnx workflow …`); [`crate::workflow_text`] formats
//! them for people.

use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::view::rfc3339_millis;

/// One workflow run (or, from `validate`, a checked file with no id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowView {
    /// `null` for a workflow only validated.
    pub id: Option<String>,
    /// `name:` in the file.
    pub name: Option<String>,
    pub description: Option<String>,
    /// The file name it was submitted as.
    pub file: String,
    pub owner: String,
    /// `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `CANCELED` or `STOPPED`.
    pub state: String,
    /// A stop was asked for and jobs are still ending.
    pub stopping: bool,
    /// Why it ended as it did; `null` while it runs.
    pub outcome: Option<String>,
    pub created: Option<String>,
    pub created_unix_ms: Option<UnixMillis>,
    pub ended: Option<String>,
    pub ended_unix_ms: Option<UnixMillis>,
    /// The volume every job mounts read-write at `$JOBLET_WORKFLOW_SHARED`.
    pub shared_volume: Option<String>,
    /// In file order.
    pub jobs: Vec<WorkflowJobView>,
}

/// One job of a workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowJobView {
    /// Its key in the file.
    pub name: String,
    /// `WAITING`, `SUBMITTING`, `SUBMITTED` (queued), `RUNNING`,
    /// `RETRY_WAIT`, `COMPLETED`, `FAILED`, `STOPPED` or `CANCELED`.
    pub state: String,
    pub requires: Vec<RequirementView>,
    pub command: String,
    pub args: Vec<String>,
    pub runtime: Option<String>,
    /// The attempt asked for last (0 = none yet), of `max_attempts`.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The job of the latest attempt (`rnx job status ID`); `null` = none yet.
    pub job_id: Option<String>,
    /// Every attempt's job, oldest first.
    pub attempt_job_ids: Vec<String>,
    /// Why it is CANCELED, or its job's reason (exit code, signal, timeout).
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    /// Of the latest attempt.
    pub started: Option<String>,
    pub started_unix_ms: Option<UnixMillis>,
    pub ended: Option<String>,
    pub ended_unix_ms: Option<UnixMillis>,
    /// `RETRY_WAIT`: when the next attempt is submitted.
    pub retry_at: Option<String>,
    pub retry_at_unix_ms: Option<UnixMillis>,
    /// GPUs asked for, and the host GPU indices the latest attempt holds or held.
    pub gpu_count: u32,
    pub gpu_indices: Vec<u32>,
}

/// `- JOB: STATE`, and whether it holds now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequirementView {
    pub job: String,
    /// `COMPLETED`, `FAILED`, `STOPPED` or `ANY`.
    pub state: String,
    pub holds: bool,
}

/// What `rnx workflow delete` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowDeletedView {
    pub id: String,
    pub deleted: bool,
    /// Job records deleted with it.
    pub jobs_deleted: u32,
}

fn positive(v: i64) -> Option<i64> {
    (v > 0).then_some(v)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// Whether a workflow state or a workflow job state is final.
pub fn is_final(state: &str) -> bool {
    matches!(state, "COMPLETED" | "FAILED" | "STOPPED" | "CANCELED")
}

impl WorkflowView {
    /// Whether the run has ended.
    pub fn ended(&self) -> bool {
        is_final(&self.state)
    }

    /// How many of its jobs are final.
    pub fn jobs_done(&self) -> usize {
        self.jobs.iter().filter(|j| is_final(&j.state)).count()
    }

    /// The job named `name`.
    pub fn job(&self, name: &str) -> Option<&WorkflowJobView> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

impl From<&pb::Workflow> for WorkflowView {
    fn from(w: &pb::Workflow) -> Self {
        WorkflowView {
            id: non_empty(&w.id),
            name: non_empty(&w.name),
            description: non_empty(&w.description),
            file: w.file.clone(),
            owner: w.owner.clone(),
            state: w.state.clone(),
            stopping: w.stopping,
            outcome: non_empty(&w.outcome),
            created: positive(w.created_unix_ms).map(rfc3339_millis),
            created_unix_ms: positive(w.created_unix_ms),
            ended: positive(w.ended_unix_ms).map(rfc3339_millis),
            ended_unix_ms: positive(w.ended_unix_ms),
            shared_volume: non_empty(&w.shared_volume),
            jobs: w.jobs.iter().map(WorkflowJobView::from).collect(),
        }
    }
}

impl From<&pb::WorkflowJob> for WorkflowJobView {
    fn from(j: &pb::WorkflowJob) -> Self {
        WorkflowJobView {
            name: j.name.clone(),
            state: j.state.clone(),
            requires: j
                .requires
                .iter()
                .map(|r| RequirementView {
                    job: r.job.clone(),
                    state: r.state.clone(),
                    holds: r.holds,
                })
                .collect(),
            command: j.command.clone(),
            args: j.args.clone(),
            runtime: non_empty(&j.runtime),
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            job_id: non_empty(&j.job_id),
            attempt_job_ids: j.attempt_job_ids.clone(),
            reason: non_empty(&j.reason),
            exit_code: j.exit_code,
            started: positive(j.started_unix_ms).map(rfc3339_millis),
            started_unix_ms: positive(j.started_unix_ms),
            ended: positive(j.ended_unix_ms).map(rfc3339_millis),
            ended_unix_ms: positive(j.ended_unix_ms),
            retry_at: positive(j.retry_at_unix_ms).map(rfc3339_millis),
            retry_at_unix_ms: positive(j.retry_at_unix_ms),
            gpu_count: j.gpu_count,
            gpu_indices: j.gpu_indices.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_values_are_null_and_times_rfc3339() {
        let w = pb::Workflow {
            file: "wf.yaml".into(),
            state: "RUNNING".into(),
            created_unix_ms: 1_500,
            jobs: vec![pb::WorkflowJob {
                name: "a".into(),
                state: "COMPLETED".into(),
                exit_code: Some(0),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = serde_json::to_value(WorkflowView::from(&w)).unwrap();
        assert_eq!(v["id"], serde_json::Value::Null);
        assert_eq!(v["outcome"], serde_json::Value::Null);
        assert_eq!(v["created"], "1970-01-01T00:00:01.500Z");
        assert_eq!(v["ended_unix_ms"], serde_json::Value::Null);
        assert_eq!(v["jobs"][0]["job_id"], serde_json::Value::Null);
        assert_eq!(v["jobs"][0]["exit_code"], 0);
        let view = WorkflowView::from(&w);
        assert_eq!(view.jobs_done(), 1);
        assert!(!view.ended());
    }
}
