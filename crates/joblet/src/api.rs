//! gRPC handlers. Each one only translates: check the caller's role,
//! convert the request, call the store (reads) or the engine (changes),
//! convert the answer. Errors go through [`ApiError`]'s one mapping.

use std::sync::Arc;
use std::time::Duration;

use joblet_core::{JobId, NodeCapabilities};
use joblet_pki::{Identity, Role};
use joblet_proto::{pb, state_from_pb, state_to_pb, ApiError};
use joblet_store::{JobRecord, Store};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::engine::EngineHandle;
use crate::state_dir::StateDir;
use crate::tls::PeerInfo;
use crate::{logs, store_error};

pub struct Api {
    /// `sandbox.allow_host_network`.
    pub allow_host_network: bool,
    /// `jobs.max_upload_mb` in bytes.
    pub max_upload_bytes: u64,
    /// `filesystem.work_size_mb` in bytes when jobs get a sized `/work`
    /// (sandbox on, not 0): uploads must fit in it.
    pub work_size_bytes: Option<u64>,
    pub store: Arc<Store>,
    pub engine: EngineHandle,
    pub dirs: StateDir,
    pub caps: NodeCapabilities,
    /// `jobs.default_timeout`; `None` = no limit.
    pub default_timeout: Option<Duration>,
}

/// The caller, as its client certificate says.
pub(crate) fn caller<T>(req: &Request<T>) -> Result<Identity, ApiError> {
    let peer = req
        .extensions()
        .get::<PeerInfo>()
        .ok_or_else(|| ApiError::BadIdentity("no TLS peer information".into()))?;
    peer.identity.clone().map_err(ApiError::BadIdentity)
}

pub(crate) fn require_admin<T>(
    req: &Request<T>,
    action: &'static str,
) -> Result<Identity, ApiError> {
    let who = caller(req)?;
    if who.role != Role::Admin {
        return Err(ApiError::PermissionDenied {
            name: who.name,
            role: who.role.to_string(),
            action,
        });
    }
    Ok(who)
}

impl Api {
    fn resolve(&self, prefix: &str) -> Result<JobId, ApiError> {
        self.store.resolve(prefix.trim()).map_err(store_error)
    }

    fn job_pb(&self, rec: &JobRecord, with_transitions: bool) -> Result<pb::Job, ApiError> {
        let transitions = if with_transitions {
            self.store
                .transitions(&rec.id)
                .map_err(store_error)?
                .into_iter()
                .map(|t| pb::Transition {
                    from: t.from.map(|s| state_to_pb(s) as i32).unwrap_or(0),
                    to: state_to_pb(t.to) as i32,
                    at_unix_ms: t.at_ms,
                    reason: t.reason,
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(to_pb(
            rec,
            transitions,
            logs::log_bytes(&self.dirs, &rec.id),
            crate::audit_api::job_gpus(&self.store, rec)?,
        ))
    }
}

/// A job record on the wire, with the GPUs it holds or held (`gpus`).
/// Secret values never leave the node: only their names, each with "***".
pub fn to_pb(
    rec: &JobRecord,
    transitions: Vec<pb::Transition>,
    log_bytes: u64,
    gpus: Option<pb::JobGpus>,
) -> pb::Job {
    let r = &rec.spec.resources;
    pb::Job {
        id: rec.id.to_string(),
        command: rec.spec.command.clone(),
        args: rec.spec.args.clone(),
        state: state_to_pb(rec.state) as i32,
        owner: rec.owner.clone(),
        resources: Some(pb::Resources {
            max_cpu: r.max_cpu_percent.map(i64::from).unwrap_or(0),
            cpu_cores: r
                .cpu_cores
                .as_deref()
                .map(joblet_core::parse::format_cpu_list)
                .unwrap_or_default(),
            max_memory_mb: r.max_memory_mb.map(|v| v as i64).unwrap_or(0),
            max_iobps: r.max_iobps.map(|v| v as i64).unwrap_or(0),
            gpu_count: i64::from(r.gpu_count),
            gpu_memory_mb: r.gpu_memory_mb.map(|v| v as i64).unwrap_or(0),
            gpu_time_seconds: r
                .gpu_time
                .map(|t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX)),
        }),
        env: rec.spec.env.clone().into_iter().collect(),
        secret_env: rec
            .spec
            .secret_env_keys
            .iter()
            .map(|k| (k.clone(), "***".to_owned()))
            .collect(),
        exit_code: rec.exit_code,
        reason: rec.reason.clone(),
        created_unix_ms: rec.created_ms,
        started_unix_ms: rec.started_ms.unwrap_or(0),
        ended_unix_ms: rec.ended_ms.unwrap_or(0),
        timeout_seconds: rec.spec.timeout.map(|t| t.as_secs() as i64).unwrap_or(0),
        runtime: rec.spec.runtime.clone().unwrap_or_default(),
        transitions,
        log_bytes,
        network: rec.spec.network.as_str().to_owned(),
        gpus,
        cuda_version: rec.spec.cuda.clone().unwrap_or_default(),
        mig_profile: r.mig_profile.clone().unwrap_or_default(),
        gpu_profiling: rec.spec.gpu_profiling,
    }
}

fn grace(secs: Option<i64>) -> Result<Option<Duration>, ApiError> {
    match secs {
        None => Ok(None),
        Some(s) if (0..=24 * 3600).contains(&s) => Ok(Some(Duration::from_secs(s as u64))),
        Some(s) => Err(joblet_core::FieldError::new(
            "grace_seconds",
            format!("invalid value {s}: expected 0 to 86400 seconds"),
        )
        .into()),
    }
}

impl Api {
    /// A RunJob or RunJobFollow request from an admin, checked: its owner,
    /// spec and secret env.
    fn accept_run(
        &self,
        req: Request<pb::RunJobRequest>,
    ) -> Result<
        (
            String,
            joblet_core::JobSpec,
            std::collections::BTreeMap<String, String>,
        ),
        ApiError,
    > {
        let who = require_admin(&req, "run jobs")?;
        let raw = joblet_proto::job_request_from_pb(req.into_inner());
        if !raw.uploads.is_empty() {
            return Err(joblet_core::FieldError::new("uploads", "RunJob carries no file data: send jobs with uploads through SubmitJob (rnx --upload does)").into());
        }
        let (spec, secrets) = self.accept(&raw)?;
        Ok((who.name, spec, secrets))
    }

    /// Checks a job request the same way for RunJob and SubmitJob.
    fn accept(
        &self,
        raw: &joblet_core::JobRequest,
    ) -> Result<
        (
            joblet_core::JobSpec,
            std::collections::BTreeMap<String, String>,
        ),
        ApiError,
    > {
        let (mut spec, secrets) = raw.validate()?;
        let total = joblet_core::upload::check_manifest(&raw.uploads, self.max_upload_bytes)?;
        if let Some(work) = self.work_size_bytes.filter(|&w| total > w) {
            return Err(joblet_core::FieldError::new(
                "uploads",
                format!(
                    "{total} bytes in total do not fit in the job's /work ({work} bytes, filesystem.work_size_mb); upload less, or ask an admin for a larger filesystem.work_size_mb"
                ),
            )
            .into());
        }
        spec.check_supported(&self.caps)?;
        if spec.network == joblet_core::Network::Host && !self.allow_host_network {
            return Err(ApiError::NotAllowed {
                what: "network host: jobs on the host network",
                setting: "sandbox.allow_host_network",
            });
        }
        if raw.uses_default_timeout() {
            spec.timeout = self.default_timeout;
        }
        Ok((spec, secrets))
    }
}

#[tonic::async_trait]
impl joblet_proto::JobService for Api {
    async fn submit_job(
        &self,
        req: Request<tonic::Streaming<pb::SubmitJobMessage>>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let who = require_admin(&req, "run jobs")?;
        let mut stream = req.into_inner();
        let first = stream.message().await?;
        let Some(pb::SubmitJobMessage {
            msg: Some(pb::submit_job_message::Msg::Job(job)),
        }) = first
        else {
            return Err(ApiError::from(joblet_core::FieldError::new(
                "job",
                "SubmitJob must start with the job (a RunJobRequest), then file data",
            ))
            .into());
        };
        let raw = joblet_proto::job_request_from_pb(job);
        let (spec, secrets) = self.accept(&raw)?;
        let staged = crate::uploads::receive(
            &raw.uploads,
            stream,
            &crate::uploads::staging_root(self.dirs.root()),
        )
        .await?;
        let rec = self
            .engine
            .submit(who.name, spec, secrets, Some(staged))
            .await?;
        Ok(Response::new(pb::RunJobResponse {
            job: Some(self.job_pb(&rec, false)?),
        }))
    }

    async fn run_job(
        &self,
        req: Request<pb::RunJobRequest>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let (owner, spec, secrets) = self.accept_run(req)?;
        let rec = self.engine.submit(owner, spec, secrets, None).await?;
        Ok(Response::new(pb::RunJobResponse {
            job: Some(self.job_pb(&rec, false)?),
        }))
    }

    type RunJobFollowStream = ReceiverStream<Result<pb::LogEvent, Status>>;

    async fn run_job_follow(
        &self,
        req: Request<pb::RunJobRequest>,
    ) -> Result<Response<Self::RunJobFollowStream>, Status> {
        let (owner, spec, secrets) = self.accept_run(req)?;
        // Before the job exists: its end cannot be announced unheard.
        let ended = self.engine.subscribe_ended();
        let rec = self.engine.submit(owner, spec, secrets, None).await?;
        let accepted = pb::LogEvent {
            event: Some(pb::log_event::Event::Accepted(self.job_pb(&rec, false)?)),
        };
        let stream = logs::follow_new_job(self.store.clone(), ended, &self.dirs, rec.id, accepted)?;
        Ok(Response::new(stream))
    }

    async fn get_job_status(&self, req: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        caller(&req)?;
        let id = self.resolve(&req.get_ref().job_id)?;
        let rec =
            self.store.get(&id).map_err(store_error)?.ok_or_else(|| {
                ApiError::JobRef(joblet_core::PrefixError::NotFound(id.to_string()))
            })?;
        Ok(Response::new(self.job_pb(&rec, true)?))
    }

    async fn list_jobs(
        &self,
        req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        caller(&req)?;
        let r = req.into_inner();
        let states = r
            .states
            .iter()
            .map(|&s| {
                state_from_pb(s).ok_or_else(|| {
                    joblet_core::FieldError::new(
                        "states",
                        format!(
                            "unknown job state number {s}; expected 1 (PENDING) to 7 (PREEMPTED)"
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(ApiError::from)?;
        if r.limit < 0 {
            return Err(ApiError::from(joblet_core::FieldError::new(
                "limit",
                format!(
                    "invalid value {}: expected 0 (all) or a positive number",
                    r.limit
                ),
            ))
            .into());
        }
        let limit = (r.limit > 0).then_some(r.limit as usize);
        let jobs = self.store.list(&states, limit).map_err(store_error)?;
        let jobs = jobs
            .iter()
            .map(|j| self.job_pb(j, false))
            .collect::<Result<_, _>>()?;
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }

    type GetJobLogsStream = ReceiverStream<Result<pb::LogEvent, Status>>;

    async fn get_job_logs(
        &self,
        req: Request<pb::GetJobLogsRequest>,
    ) -> Result<Response<Self::GetJobLogsStream>, Status> {
        caller(&req)?;
        let r = req.into_inner();
        let id = self.resolve(&r.job_id)?;
        let stream = logs::stream(
            self.store.clone(),
            self.engine.clone(),
            &self.dirs,
            id,
            r.from_seq,
            r.follow,
        )?;
        Ok(Response::new(stream))
    }

    async fn stop_job(
        &self,
        req: Request<pb::StopJobRequest>,
    ) -> Result<Response<pb::Job>, Status> {
        require_admin(&req, "stop jobs")?;
        let id = self.resolve(&req.get_ref().job_id)?;
        let grace = grace(req.get_ref().grace_seconds)?;
        let rec = self.engine.stop(id, grace, false).await?;
        Ok(Response::new(self.job_pb(&rec, false)?))
    }

    async fn kill_job(&self, req: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        require_admin(&req, "kill jobs")?;
        let id = self.resolve(&req.get_ref().job_id)?;
        let rec = self.engine.stop(id, None, true).await?;
        Ok(Response::new(self.job_pb(&rec, false)?))
    }

    async fn delete_job(
        &self,
        req: Request<pb::JobRef>,
    ) -> Result<Response<pb::DeleteJobResponse>, Status> {
        require_admin(&req, "delete jobs")?;
        let id = self.resolve(&req.get_ref().job_id)?;
        self.engine.delete(id.clone()).await?;
        Ok(Response::new(pb::DeleteJobResponse { id: id.to_string() }))
    }

    async fn who_am_i(
        &self,
        req: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let who = caller(&req)?;
        Ok(Response::new(pb::WhoAmIResponse {
            name: who.name,
            role: who.role.to_string(),
            node_version: env!("CARGO_PKG_VERSION").to_owned(),
            supported: self
                .caps
                .supported_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }))
    }

    async fn list_audit(
        &self,
        req: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        require_admin(&req, "read the GPU audit log (it needs role admin)")?;
        Ok(Response::new(crate::audit_api::list(
            &self.store,
            req.get_ref(),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::{JobRequest, JobState};

    fn record(req: JobRequest) -> JobRecord {
        JobRecord {
            id: JobId::parse("3f2a1b4c-0000-4000-8000-000000000001").unwrap(),
            seq: 1,
            owner: "alice".into(),
            spec: req.validate().unwrap().0,
            state: JobState::Running,
            reason: String::new(),
            exit_code: None,
            created_ms: 1,
            started_ms: Some(2),
            ended_ms: None,
            shim_pid: None,
        }
    }

    #[test]
    fn a_jobs_mig_profile_and_gpu_profiling_reach_the_wire() {
        let job = to_pb(
            &record(JobRequest {
                command: "python".into(),
                gpu_count: 2,
                mig_profile: "1g.10gb".into(),
                gpu_profiling: true,
                ..Default::default()
            }),
            Vec::new(),
            0,
            None,
        );
        assert_eq!(job.mig_profile, "1g.10gb");
        assert!(job.gpu_profiling);
        let plain = to_pb(
            &record(JobRequest {
                command: "python".into(),
                gpu_count: 1,
                ..Default::default()
            }),
            Vec::new(),
            0,
            None,
        );
        assert_eq!(plain.mig_profile, "");
        assert!(!plain.gpu_profiling);
    }
}
