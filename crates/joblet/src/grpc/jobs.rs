//! `JobService`: jobs and the GPU audit log.

use std::pin::Pin;

use joblet_proto::{pb, JobService};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::caller;
use super::input::Wire;
use crate::service::{ApiError, Audit, AuditQuery, Input, JobFilter, Jobs, LogStream};
use crate::uploads::UploadStreamError;

/// The `JobService` of one node.
pub struct JobApi {
    jobs: std::sync::Arc<Jobs>,
    audit: Audit,
}

impl JobApi {
    pub fn new(jobs: std::sync::Arc<Jobs>, audit: Audit) -> JobApi {
        JobApi { jobs, audit }
    }
}

/// A job's output on the wire.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::LogEvent, Status>> + Send>>;

fn events(output: LogStream) -> impl Stream<Item = Result<pb::LogEvent, Status>> {
    ReceiverStream::new(output).map(|e| e.map(joblet_proto::log_event_to_pb).map_err(Status::from))
}

/// SubmitJob's messages after the first: file data only.
fn upload_data(m: Result<pb::SubmitJobMessage, Status>) -> Result<Vec<u8>, UploadStreamError> {
    match m {
        Ok(pb::SubmitJobMessage {
            msg: Some(pb::submit_job_message::Msg::Data(d)),
        }) => Ok(d.data),
        Ok(_) => Err(UploadStreamError::NotData),
        Err(status) => Err(UploadStreamError::Broken(status.message().to_owned())),
    }
}

#[tonic::async_trait]
impl JobService for JobApi {
    async fn submit_job(
        &self,
        req: Request<Streaming<pb::SubmitJobMessage>>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let submission = self.jobs.submission(&caller(&req)?)?;
        let mut stream = req.into_inner();
        let job = match stream.message().await? {
            Some(pb::SubmitJobMessage {
                msg: Some(pb::submit_job_message::Msg::Job(job)),
            }) => Some(joblet_proto::job_request_from_pb(job)),
            _ => None,
        };
        let job = submission.submit(job, stream.map(upload_data)).await?;
        Ok(Response::new(pb::RunJobResponse {
            job: Some(joblet_proto::job_to_pb(&job)),
        }))
    }

    async fn run_job(
        &self,
        req: Request<pb::RunJobRequest>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let who = caller(&req)?;
        let job = joblet_proto::job_request_from_pb(req.into_inner());
        let job = self.jobs.run(&who, job).await?;
        Ok(Response::new(pb::RunJobResponse {
            job: Some(joblet_proto::job_to_pb(&job)),
        }))
    }

    type RunJobFollowStream = EventStream;

    async fn run_job_follow(
        &self,
        req: Request<pb::RunJobRequest>,
    ) -> Result<Response<Self::RunJobFollowStream>, Status> {
        let who = caller(&req)?;
        let job = joblet_proto::job_request_from_pb(req.into_inner());
        let (job, output) = self.jobs.run_follow(&who, job).await?;
        let accepted = pb::LogEvent {
            event: Some(pb::log_event::Event::Accepted(joblet_proto::job_to_pb(
                &job,
            ))),
        };
        let stream = tokio_stream::once(Ok(accepted)).chain(events(output));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_job_status(&self, req: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        let who = caller(&req)?;
        let job = self.jobs.status(&who, &req.get_ref().job_id).await?;
        Ok(Response::new(joblet_proto::job_to_pb(&job)))
    }

    async fn list_jobs(
        &self,
        req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let filter = JobFilter {
            states: joblet_proto::states_from_pb(&r.states).map_err(ApiError::from)?,
            limit: r.limit,
        };
        let jobs = self.jobs.list(&who, &filter).await?;
        Ok(Response::new(pb::ListJobsResponse {
            jobs: jobs.iter().map(joblet_proto::job_to_pb).collect(),
        }))
    }

    type GetJobLogsStream = EventStream;

    async fn get_job_logs(
        &self,
        req: Request<pb::GetJobLogsRequest>,
    ) -> Result<Response<Self::GetJobLogsStream>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let output = self
            .jobs
            .logs(&who, &r.job_id, r.from_seq, r.follow)
            .await?;
        Ok(Response::new(Box::pin(events(output))))
    }

    type AttachJobStream = EventStream;
    type ExecJobStream = super::exec::ExecStream;

    async fn exec_job(
        &self,
        req: Request<Streaming<pb::ExecInput>>,
    ) -> Result<Response<Self::ExecJobStream>, Status> {
        let who = caller(&req)?;
        let stream = super::exec::exec_job(&self.jobs, &who, req.into_inner()).await?;
        Ok(Response::new(stream))
    }

    async fn list_execs(
        &self,
        req: Request<pb::JobRef>,
    ) -> Result<Response<pb::ListExecsResponse>, Status> {
        let who = caller(&req)?;
        let r = super::exec::list_execs(&self.jobs, &who, &req.get_ref().job_id)?;
        Ok(Response::new(r))
    }

    async fn attach_job(
        &self,
        req: Request<Streaming<pb::AttachInput>>,
    ) -> Result<Response<Self::AttachJobStream>, Status> {
        let who = caller(&req)?;
        let mut inputs = req.into_inner();
        let open = match inputs.message().await? {
            Some(pb::AttachInput {
                input: Some(pb::attach_input::Input::Open(open)),
            }) => open,
            _ => {
                return Err(ApiError::InvalidField(joblet_core::FieldError::new(
                    "input",
                    "the first AttachInput must be `open`, naming the job",
                ))
                .into())
            }
        };
        let size = open
            .size
            .map(|s| super::input::term_size("open.size", s))
            .transpose()?;
        let attachment = self
            .jobs
            .attach(&who, &open.job_id, open.read_only, open.replay_bytes)
            .await?;
        if let Some(input) = attachment.input {
            let first = size.map(|(rows, cols)| Input::Resize { rows, cols });
            let read = |m: pb::AttachInput| match m.input? {
                pb::attach_input::Input::Data(d) => Some(Wire::Data(d)),
                pb::attach_input::Input::Resize(s) => Some(Wire::Resize(s)),
                pb::attach_input::Input::CloseStdin(true) => Some(Wire::CloseStdin),
                _ => None,
            };
            super::input::forward(inputs, read, input, first, attachment.job.to_string());
        }
        Ok(Response::new(Box::pin(events(attachment.output))))
    }

    async fn stop_job(
        &self,
        req: Request<pb::StopJobRequest>,
    ) -> Result<Response<pb::Job>, Status> {
        let who = caller(&req)?;
        let r = req.get_ref();
        let job = self.jobs.stop(&who, &r.job_id, r.grace_seconds).await?;
        Ok(Response::new(joblet_proto::job_to_pb(&job)))
    }

    async fn kill_job(&self, req: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        let who = caller(&req)?;
        let job = self.jobs.kill(&who, &req.get_ref().job_id).await?;
        Ok(Response::new(joblet_proto::job_to_pb(&job)))
    }

    async fn delete_job(
        &self,
        req: Request<pb::JobRef>,
    ) -> Result<Response<pb::DeleteJobResponse>, Status> {
        let who = caller(&req)?;
        let id = self.jobs.delete(&who, &req.get_ref().job_id).await?;
        Ok(Response::new(pb::DeleteJobResponse { id: id.to_string() }))
    }

    async fn who_am_i(
        &self,
        req: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let me = self.jobs.whoami(&caller(&req)?);
        Ok(Response::new(pb::WhoAmIResponse {
            name: me.name,
            role: me.role.to_string(),
            node_version: me.node_version.to_owned(),
            supported: me.supported.into_iter().map(str::to_owned).collect(),
            state_disk: me.state_disk.map(|(path, space)| pb::StateDisk {
                path: path.display().to_string(),
                free_bytes: space.free,
                total_bytes: space.total,
            }),
            executors: me
                .executors
                .iter()
                .map(|e| joblet_proto::executor_to_pb(&e.info, e.allowed))
                .collect(),
            default_executor: me.default_executor,
        }))
    }

    async fn list_audit(
        &self,
        req: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let query = AuditQuery {
            since_ms: r.since_ms,
            owner: r.owner,
        };
        let records = self.audit.list(&who, &query)?;
        Ok(Response::new(pb::ListAuditResponse {
            records: records
                .iter()
                .map(joblet_proto::audit_record_to_pb)
                .collect(),
        }))
    }
}
