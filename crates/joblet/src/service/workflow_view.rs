//! A workflow run as the API reports it ([`WorkflowInfo`]): its record,
//! its decision core's snapshot and its jobs' records, put together.

use std::collections::HashMap;

use joblet_core::record::JobRecord;
use joblet_core::{JobId, JobState, UnixMillis};
use joblet_store::WorkflowRecord;
use joblet_workflow::{JobPhase, Limits, Need, Snapshot, Workflow};

use super::ApiError;

/// A run, or a workflow only checked (`id` empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    pub file: String,
    pub owner: String,
    /// PENDING, RUNNING, COMPLETED, FAILED, CANCELED or STOPPED.
    pub state: String,
    pub stopping: bool,
    /// Why it ended as it did; empty while it runs.
    pub outcome: String,
    pub created_ms: UnixMillis,
    pub ended_ms: Option<UnixMillis>,
    pub shared_volume: String,
    /// In file order.
    pub jobs: Vec<WorkflowJobInfo>,
}

/// One job of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowJobInfo {
    pub name: String,
    /// WAITING, SUBMITTING, SUBMITTED, RUNNING, RETRY_WAIT, COMPLETED,
    /// FAILED, STOPPED or CANCELED.
    pub state: String,
    /// Each requirement: the job, the state asked for, whether it holds.
    pub requires: Vec<(String, String, bool)>,
    pub command: String,
    pub args: Vec<String>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub job_id: Option<JobId>,
    pub attempt_job_ids: Vec<JobId>,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub started_ms: Option<UnixMillis>,
    pub ended_ms: Option<UnixMillis>,
    pub retry_at_ms: Option<UnixMillis>,
    pub gpu_count: u32,
    pub gpu_indices: Vec<u32>,
    pub runtime: String,
}

/// A workflow only checked: every job WAITING, nothing recorded.
pub fn checked(workflow: &Workflow, owner: &str) -> WorkflowInfo {
    let phases: HashMap<&str, JobPhase> = HashMap::new();
    WorkflowInfo {
        id: String::new(),
        name: workflow.name().unwrap_or_default().to_owned(),
        description: workflow.description().unwrap_or_default().to_owned(),
        file: workflow.file().to_owned(),
        owner: owner.to_owned(),
        state: "PENDING".into(),
        stopping: false,
        outcome: String::new(),
        created_ms: 0,
        ended_ms: None,
        shared_volume: String::new(),
        jobs: jobs(workflow, &phases, &[], |_| None),
    }
}

/// A stored run: `phases` its jobs' stored phases, `jobs_of_run` its job
/// records (every attempt, any order); `gpus` gives a job's host GPU
/// indices.
pub fn info(
    rec: WorkflowRecord,
    phases: &[(String, String)],
    jobs_of_run: &[JobRecord],
    gpus: impl Fn(&JobId) -> Option<Vec<u32>>,
) -> Result<WorkflowInfo, ApiError> {
    let corrupt = |what: String| {
        ApiError::Internal(format!(
            "workflow {}: stored data is corrupt: {what}",
            rec.id
        ))
    };
    let workflow = Workflow::parse(
        &rec.yaml,
        &rec.file,
        &Limits {
            max_gpus_per_node: None,
        },
    )
    .map_err(|e| corrupt(e.to_string()))?;
    let snapshot: Option<Snapshot> =
        crate::workflow::snapshot::join(&rec.snapshot_json, phases).ok();
    let phases: HashMap<&str, JobPhase> = snapshot
        .as_ref()
        .map(|s| {
            s.jobs
                .iter()
                .map(|j| (j.job.as_str(), j.phase.clone()))
                .collect()
        })
        .unwrap_or_default();
    let outcome = snapshot
        .as_ref()
        .and_then(|s| s.outcome.as_ref())
        .map(ToString::to_string)
        .unwrap_or_default();
    Ok(WorkflowInfo {
        name: rec.name.clone(),
        description: workflow.description().unwrap_or_default().to_owned(),
        file: rec.file.clone(),
        owner: rec.owner.clone(),
        state: rec.state.clone(),
        stopping: snapshot.as_ref().is_some_and(|s| s.stopping),
        outcome,
        created_ms: rec.created_ms,
        ended_ms: rec.ended_ms,
        shared_volume: rec.shared_volume.clone(),
        jobs: jobs(&workflow, &phases, jobs_of_run, gpus),
        id: rec.id,
    })
}

fn jobs(
    workflow: &Workflow,
    phases: &HashMap<&str, JobPhase>,
    records: &[JobRecord],
    gpus: impl Fn(&JobId) -> Option<Vec<u32>>,
) -> Vec<WorkflowJobInfo> {
    let mut attempts: HashMap<&str, Vec<&JobRecord>> = HashMap::new();
    for r in records {
        if let Some(wf) = &r.spec.workflow {
            attempts.entry(wf.job.as_str()).or_default().push(r);
        }
    }
    for list in attempts.values_mut() {
        list.sort_by_key(|r| (r.spec.workflow.as_ref().map_or(0, |w| w.attempt), r.seq));
    }
    let state_of = |name: &str| -> Option<String> { phases.get(name).map(|p| p.name().to_owned()) };
    workflow
        .jobs()
        .iter()
        .map(|job| {
            let phase = phases.get(job.name.as_str());
            let tries = attempts.get(job.name.as_str()).cloned().unwrap_or_default();
            let latest = tries.last().copied();
            let requires = job
                .requires
                .iter()
                .map(|r| {
                    let holds = phases
                        .get(r.job.as_str())
                        .and_then(JobPhase::final_state)
                        .is_some_and(|f| r.need.accepts(f));
                    (r.job.clone(), need_name(r.need), holds)
                })
                .collect();
            let mut state = state_of(&job.name).unwrap_or_else(|| "WAITING".into());
            // The snapshot says SUBMITTED until the job ends; its record
            // knows when it started.
            if state == "SUBMITTED" && latest.is_some_and(|r| r.state == JobState::Running) {
                state = "RUNNING".into();
            }
            let reason = match phase {
                Some(JobPhase::Canceled { reason }) => reason.to_string(),
                _ => latest.map(|r| r.reason.clone()).unwrap_or_default(),
            };
            let retry_at_ms = match phase {
                Some(JobPhase::RetryWait { until, .. }) => Some(*until),
                _ => None,
            };
            WorkflowJobInfo {
                name: job.name.clone(),
                state,
                requires,
                command: job.command.clone(),
                args: job.args.clone(),
                attempt: phase.and_then(JobPhase::attempt).unwrap_or(0),
                max_attempts: u32::from(job.retries) + 1,
                job_id: latest.map(|r| r.id.clone()),
                attempt_job_ids: tries.iter().map(|r| r.id.clone()).collect(),
                reason,
                exit_code: latest.and_then(|r| r.exit_code),
                started_ms: latest.and_then(|r| r.started_ms),
                ended_ms: latest.and_then(|r| r.ended_ms),
                retry_at_ms,
                gpu_count: u32::try_from(job.resources.gpu_count.unwrap_or(0)).unwrap_or(u32::MAX),
                gpu_indices: latest.and_then(|r| gpus(&r.id)).unwrap_or_default(),
                runtime: latest
                    .and_then(|r| r.spec.runtime.clone())
                    .or_else(|| job.runtime.clone())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn need_name(need: Need) -> String {
    need.as_str().to_owned()
}
