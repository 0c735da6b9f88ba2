//! `WorkflowService`: workflow runs.

use joblet_proto::{pb, WorkflowService};
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::caller;
use crate::service::{WorkflowInfo, WorkflowJobInfo, WorkflowSubmission, Workflows};
use crate::uploads::UploadStreamError;

/// The `WorkflowService` of one node.
pub struct WorkflowApi {
    workflows: Workflows,
}

impl WorkflowApi {
    pub fn new(workflows: Workflows) -> WorkflowApi {
        WorkflowApi { workflows }
    }
}

/// RunWorkflow's messages after the first: file data only.
fn upload_data(m: Result<pb::RunWorkflowMessage, Status>) -> Result<Vec<u8>, UploadStreamError> {
    match m {
        Ok(pb::RunWorkflowMessage {
            msg: Some(pb::run_workflow_message::Msg::Data(d)),
        }) => Ok(d.data),
        Ok(_) => Err(UploadStreamError::WorkflowNotData),
        Err(status) => Err(UploadStreamError::Broken(status.message().to_owned())),
    }
}

fn job_pb(j: WorkflowJobInfo) -> pb::WorkflowJob {
    pb::WorkflowJob {
        name: j.name,
        state: j.state,
        requires: j
            .requires
            .into_iter()
            .map(|(job, state, holds)| pb::WorkflowRequirement { job, state, holds })
            .collect(),
        command: j.command,
        args: j.args,
        attempt: j.attempt,
        max_attempts: j.max_attempts,
        job_id: j.job_id.map(|id| id.to_string()).unwrap_or_default(),
        attempt_job_ids: j.attempt_job_ids.iter().map(ToString::to_string).collect(),
        reason: j.reason,
        exit_code: j.exit_code,
        started_unix_ms: j.started_ms.unwrap_or(0),
        ended_unix_ms: j.ended_ms.unwrap_or(0),
        retry_at_unix_ms: j.retry_at_ms.unwrap_or(0),
        gpu_count: j.gpu_count,
        gpu_indices: j.gpu_indices,
        runtime: j.runtime,
    }
}

fn workflow_pb(w: WorkflowInfo) -> pb::Workflow {
    pb::Workflow {
        id: w.id,
        name: w.name,
        description: w.description,
        file: w.file,
        owner: w.owner,
        state: w.state,
        stopping: w.stopping,
        outcome: w.outcome,
        created_unix_ms: w.created_ms,
        ended_unix_ms: w.ended_ms.unwrap_or(0),
        shared_volume: w.shared_volume,
        jobs: w.jobs.into_iter().map(job_pb).collect(),
    }
}

#[tonic::async_trait]
impl WorkflowService for WorkflowApi {
    async fn run_workflow(
        &self,
        req: Request<Streaming<pb::RunWorkflowMessage>>,
    ) -> Result<Response<pb::Workflow>, Status> {
        let submission = self.workflows.submission(&caller(&req)?)?;
        let mut stream = req.into_inner();
        let first = match stream.message().await? {
            Some(pb::RunWorkflowMessage {
                msg: Some(pb::run_workflow_message::Msg::Workflow(w)),
            }) => w,
            _ => {
                return Err(Status::invalid_argument(
                    "workflow: RunWorkflow must start with the workflow (a RunWorkflowRequest), then file data",
                ))
            }
        };
        let sub = WorkflowSubmission {
            yaml: first.yaml,
            file: first.file,
            uploads: first
                .uploads
                .into_iter()
                .map(joblet_proto::upload_from_pb)
                .collect(),
            validate_only: first.validate_only,
        };
        let w = submission.run(sub, stream.map(upload_data)).await?;
        Ok(Response::new(workflow_pb(w)))
    }

    async fn get_workflow(
        &self,
        req: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::Workflow>, Status> {
        let who = caller(&req)?;
        let w = self.workflows.status(&who, &req.into_inner().workflow_id)?;
        Ok(Response::new(workflow_pb(w)))
    }

    async fn list_workflows(
        &self,
        req: Request<pb::ListWorkflowsRequest>,
    ) -> Result<Response<pb::ListWorkflowsResponse>, Status> {
        let who = caller(&req)?;
        let list = self.workflows.list(&who, req.into_inner().limit)?;
        Ok(Response::new(pb::ListWorkflowsResponse {
            workflows: list.into_iter().map(workflow_pb).collect(),
        }))
    }

    async fn stop_workflow(
        &self,
        req: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::Workflow>, Status> {
        let who = caller(&req)?;
        let w = self
            .workflows
            .stop(&who, &req.into_inner().workflow_id)
            .await?;
        Ok(Response::new(workflow_pb(w)))
    }

    async fn delete_workflow(
        &self,
        req: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::DeleteWorkflowResponse>, Status> {
        let who = caller(&req)?;
        let (workflow_id, jobs_deleted) = self
            .workflows
            .delete(&who, &req.into_inner().workflow_id)
            .await?;
        Ok(Response::new(pb::DeleteWorkflowResponse {
            workflow_id,
            jobs_deleted,
        }))
    }
}
