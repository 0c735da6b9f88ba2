//! `/api/v1/workflows`: run (or only validate) a workflow file, status,
//! list, stop, delete. A workflow run through the REST API uploads no
//! files (`uploads:` in its file is refused by the service); use `rnx
//! workflow run` for those.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{JsonBody, PathArg, QueryArgs};
use super::RestState;
use crate::service::{WorkflowInfo, WorkflowJobInfo, WorkflowSubmission};

/// A requirement of a workflow job on another.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RequirementView {
    pub job: String,
    pub state: String,
    /// Whether it holds now.
    pub holds: bool,
}

/// A job of a workflow run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkflowJobView {
    pub name: String,
    pub state: String,
    pub requires: Vec<RequirementView>,
    pub command: String,
    pub args: Vec<String>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub job_id: Option<String>,
    pub attempt_job_ids: Vec<String>,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub gpu_count: u32,
    pub runtime: String,
}

/// A workflow run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkflowView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub file: String,
    pub owner: String,
    pub state: String,
    pub stopping: bool,
    pub outcome: String,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
    pub shared_volume: String,
    pub jobs: Vec<WorkflowJobView>,
}

fn job(j: WorkflowJobInfo) -> WorkflowJobView {
    WorkflowJobView {
        name: j.name,
        state: j.state,
        requires: j
            .requires
            .into_iter()
            .map(|(job, state, holds)| RequirementView { job, state, holds })
            .collect(),
        command: j.command,
        args: j.args,
        attempt: j.attempt,
        max_attempts: j.max_attempts,
        job_id: j.job_id.map(|id| id.to_string()),
        attempt_job_ids: j.attempt_job_ids.iter().map(ToString::to_string).collect(),
        reason: j.reason,
        exit_code: j.exit_code,
        started_ms: j.started_ms,
        ended_ms: j.ended_ms,
        gpu_count: j.gpu_count,
        runtime: j.runtime,
    }
}

fn view(w: WorkflowInfo) -> WorkflowView {
    WorkflowView {
        id: w.id,
        name: w.name,
        description: w.description,
        file: w.file,
        owner: w.owner,
        state: w.state,
        stopping: w.stopping,
        outcome: w.outcome,
        created_ms: w.created_ms,
        ended_ms: w.ended_ms,
        shared_volume: w.shared_volume,
        jobs: w.jobs.into_iter().map(job).collect(),
    }
}

/// A workflow file to run.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunWorkflowBody {
    /// The workflow file's YAML.
    pub yaml: String,
    /// Its file name, for messages (default `workflow.yml`).
    #[serde(default)]
    pub file: Option<String>,
    /// Only check it; run nothing.
    #[serde(default)]
    pub validate_only: bool,
}

#[utoipa::path(post, path = "/api/v1/workflows", tag = "workflows", request_body = RunWorkflowBody,
    responses((status = 201, description = "The run (or, validate_only, the checked workflow)", body = WorkflowView), Errors))]
pub async fn run(
    State(s): State<RestState>,
    Authed(who): Authed,
    JsonBody(b): JsonBody<RunWorkflowBody>,
) -> Result<(StatusCode, Json<WorkflowView>), RestError> {
    let submission = s.workflows.submission(&who)?;
    let sub = WorkflowSubmission {
        yaml: b.yaml,
        file: b.file.unwrap_or_else(|| "workflow.yml".to_owned()),
        uploads: Vec::new(),
        validate_only: b.validate_only,
    };
    let run = submission.run(sub, futures::stream::empty()).await?;
    Ok((StatusCode::CREATED, Json(view(run))))
}

/// `GET /api/v1/workflows`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WorkflowListQuery {
    /// At most this many, newest first (default: all).
    #[serde(default)]
    #[param(minimum = 0)]
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/workflows", tag = "workflows", params(WorkflowListQuery),
    responses((status = 200, description = "Runs, newest first", body = Vec<WorkflowView>), Errors))]
pub async fn list(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<WorkflowListQuery>,
) -> Result<Json<Vec<WorkflowView>>, RestError> {
    let runs = s.workflows.list(&who, q.limit.unwrap_or(0))?;
    Ok(Json(runs.into_iter().map(view).collect()))
}

#[utoipa::path(get, path = "/api/v1/workflows/{id}", tag = "workflows",
    params(("id" = String, Path, description = "Run id or unique prefix")),
    responses((status = 200, description = "The run with its jobs", body = WorkflowView), Errors))]
pub async fn status(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<WorkflowView>, RestError> {
    Ok(Json(view(s.workflows.status(&who, &id)?)))
}

#[utoipa::path(post, path = "/api/v1/workflows/{id}/stop", tag = "workflows",
    params(("id" = String, Path, description = "Run id or unique prefix")),
    responses((status = 200, description = "The run, stopping", body = WorkflowView), Errors))]
pub async fn stop(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<WorkflowView>, RestError> {
    Ok(Json(view(s.workflows.stop(&who, &id).await?)))
}

/// A deleted run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkflowDeleted {
    pub id: String,
    /// Job records deleted with it.
    pub jobs: u32,
}

#[utoipa::path(delete, path = "/api/v1/workflows/{id}", tag = "workflows",
    params(("id" = String, Path, description = "Run id or unique prefix")),
    responses((status = 200, description = "Deleted (a finished run only)", body = WorkflowDeleted), Errors))]
pub async fn delete(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<WorkflowDeleted>, RestError> {
    let (id, jobs) = s.workflows.delete(&who, &id).await?;
    Ok(Json(WorkflowDeleted { id, jobs }))
}
