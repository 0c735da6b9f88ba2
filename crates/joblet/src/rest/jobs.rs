//! `/api/v1/jobs`: run, list (filters and paging), status, stop, kill,
//! delete, and output (JSON, or server-sent events while following).
//! Each handler translates into one [`crate::service::Jobs`] call.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use joblet_core::joblog::{JobEnd, LogEvent, Record, Stream};
use joblet_core::record::JobDetails;
use joblet_core::{FieldError, JobRequest, JobState};
use serde::{Deserialize, Serialize};
use tokio_stream::wrappers::ReceiverStream;
use utoipa::{IntoParams, ToSchema};

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{JsonBody, PathArg, QueryArgs};
use super::RestState;
use crate::service::{JobFilter, LogError};

/// The most jobs one page holds.
pub const MAX_PAGE: usize = 1000;
/// A page's size when `limit` is not given.
pub const DEFAULT_PAGE: usize = 100;

/// A job to run: `rnx job run`'s options. Files are not uploaded through
/// the REST API; use volumes or a runtime for a job's inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunJobBody {
    /// The program, looked up on the job's PATH.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// CPU limit in percent of one core (`--max-cpu`).
    #[serde(default)]
    pub max_cpu: Option<i64>,
    /// CPUs to pin to (`--cpu-cores=0-3,8`).
    #[serde(default)]
    pub cpu_cores: Option<String>,
    /// Memory limit in MiB (`--max-memory`).
    #[serde(default)]
    pub max_memory_mb: Option<i64>,
    /// Block IO limit in bytes per second (`--max-iobps`).
    #[serde(default)]
    pub max_iobps: Option<i64>,
    /// GPUs (`--gpu`).
    #[serde(default)]
    pub gpu_count: Option<i64>,
    /// GPU memory per GPU in MiB (`--gpu-memory`).
    #[serde(default)]
    pub gpu_memory_mb: Option<i64>,
    /// A share of one GPU in thousandths, 1 to 999, with `gpu_count` 1
    /// (`--gpu=0.5` is 500).
    #[serde(default)]
    pub gpu_milli: Option<i64>,
    /// GPU time limit in seconds (`--gpu-time`).
    #[serde(default)]
    pub gpu_time_seconds: Option<i64>,
    /// MIG profile (`--mig=1g.10gb`).
    #[serde(default)]
    pub mig_profile: Option<String>,
    /// CUDA version (`--cuda=12.2`).
    #[serde(default)]
    pub cuda_version: Option<String>,
    /// `--gpu-profiling`.
    #[serde(default)]
    pub gpu_profiling: bool,
    /// Environment variables (`--env`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret environment variables (`--secret-env`): never stored in clear,
    /// never shown.
    #[serde(default)]
    pub secret_env: BTreeMap<String, String>,
    /// Volumes to mount, `NAME`, `NAME:ro` or `NAME:rw` (`--volume`).
    #[serde(default)]
    pub volumes: Vec<String>,
    /// Runtime (`--runtime=python-3.11`).
    #[serde(default)]
    pub runtime: Option<String>,
    /// `none` (loopback only, the default) or `host` (`--network`).
    #[serde(default)]
    pub network: Option<String>,
    /// Time limit in milliseconds (`--timeout`).
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// Cluster mode: `never` (default) or `on-node-failure` (`--restart`).
    #[serde(default)]
    pub restart: Option<String>,
    /// What runs the job (`--executor`): `native` or an OCI runtime the
    /// node offers (`runc`, `crun`, `runsc`; `GET /api/v1/whoami` lists
    /// them). Absent: the node's default.
    #[serde(default)]
    pub executor: Option<String>,
    /// CDI devices, `vendor.com/class=name` each (`--device`, e.g.
    /// `nvidia.com/gpu=0`); needs an executor with the `cdi` capability.
    #[serde(default)]
    pub devices: Vec<String>,
}

/// The service's request for a body.
pub fn job_request(b: RunJobBody) -> JobRequest {
    JobRequest {
        command: b.command,
        args: b.args,
        max_cpu: b.max_cpu.unwrap_or(0),
        cpu_cores: b.cpu_cores.unwrap_or_default(),
        max_memory_mb: b.max_memory_mb.unwrap_or(0),
        max_iobps: b.max_iobps.unwrap_or(0),
        gpu_count: b.gpu_count.unwrap_or(0),
        gpu_memory_mb: b.gpu_memory_mb.unwrap_or(0),
        gpu_milli: b.gpu_milli.unwrap_or(0),
        env: b.env.into_iter().collect(),
        secret_env: b.secret_env.into_iter().collect(),
        uploads: Vec::new(),
        volumes: b.volumes,
        runtime: b.runtime.unwrap_or_default(),
        network: b.network.unwrap_or_default(),
        timeout_ms: b.timeout_ms,
        timeout_seconds: None,
        gpu_time_seconds: b.gpu_time_seconds,
        cuda_version: b.cuda_version.unwrap_or_default(),
        mig_profile: b.mig_profile.unwrap_or_default(),
        gpu_profiling: b.gpu_profiling,
        restart: b.restart.unwrap_or_default(),
        executor: b.executor.unwrap_or_default(),
        devices: b.devices,
        // Interactive jobs need a client attached over gRPC (`rnx job run -it`).
        interactive: false,
        tty: false,
        tty_rows: 0,
        tty_cols: 0,
    }
}

/// A job's resource limits; absent = none.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResourcesView {
    pub max_cpu_percent: Option<u32>,
    pub cpu_cores: Option<Vec<u32>>,
    pub max_memory_mb: Option<u64>,
    pub max_iobps: Option<u64>,
    pub gpu_count: u32,
    pub gpu_memory_mb: Option<u64>,
    /// A fractional GPU's share in thousandths; `null` = whole GPUs.
    pub gpu_milli: Option<u32>,
    pub gpu_time_ms: Option<u64>,
    pub mig_profile: Option<String>,
}

/// The GPUs a job holds or held.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobGpusView {
    pub indices: Vec<u32>,
    pub uuids: Vec<String>,
    pub memory_mb_per_gpu: Option<u64>,
    /// `exclusive`, `shared`, `mps` or `mig`.
    pub sharing: String,
    pub peak_memory_mb: Option<u64>,
}

/// One state change of a job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TransitionView {
    pub from: Option<String>,
    pub to: String,
    pub at_ms: i64,
    pub reason: String,
}

/// A job as status and list report it. Secret values are never shown:
/// only the names of secret variables.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobView {
    pub id: String,
    pub owner: String,
    /// `PENDING`, `QUEUED`, `RUNNING`, `STOPPING`, `COMPLETED`, `FAILED` or `STOPPED`.
    pub state: String,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub secret_env_names: Vec<String>,
    pub resources: ResourcesView,
    pub volumes: Vec<String>,
    pub runtime: Option<String>,
    pub network: String,
    /// The executor it runs on (`native`, `runc`, ...); absent for a job
    /// recorded before executors.
    pub executor: Option<String>,
    /// CDI devices it asked for, `vendor.com/class=name`.
    pub devices: Vec<String>,
    pub timeout_ms: Option<u64>,
    pub cuda_version: Option<String>,
    pub gpu_profiling: bool,
    pub created_ms: i64,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// Bytes of output so far.
    pub log_bytes: u64,
    pub gpus: Option<JobGpusView>,
    /// Workflow run and job name, for a workflow's job.
    pub workflow_id: Option<String>,
    pub workflow_job: Option<String>,
    /// Cluster mode: the node(s) it runs or ran on.
    pub nodes: Vec<String>,
    /// Its state history, oldest first (status only; empty in lists).
    pub transitions: Vec<TransitionView>,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A job of the service as the API shows it.
pub fn job_view(d: JobDetails) -> JobView {
    let rec = d.record;
    let spec = rec.spec;
    let r = spec.resources;
    JobView {
        id: rec.id.to_string(),
        owner: rec.owner,
        state: rec.state.as_str().to_owned(),
        reason: rec.reason,
        exit_code: rec.exit_code,
        command: spec.command,
        args: spec.args,
        env: spec.env,
        secret_env_names: spec.secret_env_keys,
        resources: ResourcesView {
            max_cpu_percent: r.max_cpu_percent,
            cpu_cores: r.cpu_cores,
            max_memory_mb: r.max_memory_mb,
            max_iobps: r.max_iobps,
            gpu_count: r.gpu_count,
            gpu_memory_mb: r.gpu_memory_mb,
            gpu_milli: r.gpu_milli,
            gpu_time_ms: r.gpu_time.map(millis),
            mig_profile: r.mig_profile,
        },
        volumes: spec.volumes.iter().map(ToString::to_string).collect(),
        runtime: spec.runtime,
        network: spec.network.as_str().to_owned(),
        executor: spec.executor,
        devices: spec.devices,
        timeout_ms: spec.timeout.map(millis),
        cuda_version: spec.cuda,
        gpu_profiling: spec.gpu_profiling,
        created_ms: rec.created_ms,
        started_ms: rec.started_ms,
        ended_ms: rec.ended_ms,
        log_bytes: d.log_bytes,
        gpus: d.gpus.map(|g| JobGpusView {
            indices: g.indices,
            uuids: g.uuids,
            memory_mb_per_gpu: g.memory_mb_per_gpu,
            sharing: g.sharing,
            peak_memory_mb: g.peak_memory_mb,
        }),
        workflow_id: spec.workflow.as_ref().map(|w| w.id.clone()),
        workflow_job: spec.workflow.as_ref().map(|w| w.job.clone()),
        nodes: d.cluster.map(|c| c.nodes).unwrap_or_default(),
        transitions: d
            .transitions
            .into_iter()
            .map(|t| TransitionView {
                from: t.from.map(|s| s.as_str().to_owned()),
                to: t.to.as_str().to_owned(),
                at_ms: t.at_ms,
                reason: t.reason,
            })
            .collect(),
    }
}

/// `GET /api/v1/jobs`'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobListQuery {
    /// Only jobs in these states, comma-separated (`RUNNING,QUEUED`).
    #[serde(default)]
    pub state: Option<String>,
    /// Only jobs of this owner.
    #[serde(default)]
    pub owner: Option<String>,
    /// Jobs per page, 1 to 1000 (default 100).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Where the page starts: `next_offset` of the page before (default 0).
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// One page of jobs, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobPage {
    pub jobs: Vec<JobView>,
    /// The `offset` of the next page; absent on the last page.
    pub next_offset: Option<u64>,
}

/// A list query, checked: the states, owner, page size and start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    pub states: Vec<JobState>,
    pub owner: Option<String>,
    pub limit: usize,
    pub offset: usize,
}

/// Checks a list query.
pub fn paging(q: JobListQuery) -> Result<Paging, FieldError> {
    let states = match q.state.as_deref().map(str::trim) {
        None | Some("") => Vec::new(),
        Some(s) => s
            .split(',')
            .map(|one| {
                one.trim()
                    .to_ascii_uppercase()
                    .parse::<JobState>()
                    .map_err(|_| {
                        FieldError::new(
                            "state",
                            format!(
                                "{:?} is not a job state; expected a comma-separated list of {}",
                                joblet_core::text::clip(one),
                                JobState::ALL.map(JobState::as_str).join(", ")
                            ),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let limit = match q.limit {
        None => DEFAULT_PAGE,
        Some(n) if (1..=MAX_PAGE as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(FieldError::new(
                "limit",
                format!("invalid value {n}: expected 1 to {MAX_PAGE} jobs per page"),
            ))
        }
    };
    let offset = match q.offset {
        None => 0,
        Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
        Some(n) => {
            return Err(FieldError::new(
                "offset",
                format!(
                    "invalid value {n}: expected 0 or more (the next_offset of the page before)"
                ),
            ))
        }
    };
    Ok(Paging {
        states,
        owner: q.owner.filter(|o| !o.is_empty()),
        limit,
        offset,
    })
}

/// The page of `jobs` (newest first, already filtered by state) that
/// `p` asks for, and where the next one starts.
pub fn page<T>(jobs: Vec<T>, owner_of: impl Fn(&T) -> &str, p: &Paging) -> (Vec<T>, Option<u64>) {
    let mut matching: Vec<T> = jobs
        .into_iter()
        .filter(|j| p.owner.as_deref().is_none_or(|o| owner_of(j) == o))
        .skip(p.offset)
        .take(p.limit + 1)
        .collect();
    let more = matching.len() > p.limit;
    matching.truncate(p.limit);
    let next = more.then(|| (p.offset + p.limit) as u64);
    (matching, next)
}

#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = RunJobBody,
    responses((status = 201, description = "The job, accepted", body = JobView), Errors))]
pub async fn run(
    State(s): State<RestState>,
    Authed(who): Authed,
    JsonBody(body): JsonBody<RunJobBody>,
) -> Result<(StatusCode, Json<JobView>), RestError> {
    let job = s.jobs.run(&who, job_request(body)).await?;
    Ok((StatusCode::CREATED, Json(job_view(job))))
}

#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs", params(JobListQuery),
    responses((status = 200, description = "A page of jobs, newest first", body = JobPage), Errors))]
pub async fn list(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<JobListQuery>,
) -> Result<Json<JobPage>, RestError> {
    let p = paging(q)?;
    let filter = JobFilter {
        states: p.states.clone(),
        limit: 0,
    };
    let jobs = s.jobs.list(&who, &filter).await?;
    let (jobs, next_offset) = page(jobs, |j| j.record.owner.as_str(), &p);
    Ok(Json(JobPage {
        jobs: jobs.into_iter().map(job_view).collect(),
        next_offset,
    }))
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id or unique prefix")),
    responses((status = 200, description = "The job with its history", body = JobView), Errors))]
pub async fn status(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<JobView>, RestError> {
    Ok(Json(job_view(s.jobs.status(&who, &id).await?)))
}

/// `POST /api/v1/jobs/{id}/stop`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StopQuery {
    /// Seconds between SIGTERM and SIGKILL (default: the node's `jobs.stop_grace_period`).
    #[serde(default)]
    #[param(minimum = 0)]
    pub grace_seconds: Option<i64>,
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/stop", tag = "jobs",
    params(("id" = String, Path, description = "Job id or unique prefix"), StopQuery),
    responses((status = 200, description = "The job, stopping", body = JobView), Errors))]
pub async fn stop(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
    QueryArgs(q): QueryArgs<StopQuery>,
) -> Result<Json<JobView>, RestError> {
    Ok(Json(job_view(
        s.jobs.stop(&who, &id, q.grace_seconds).await?,
    )))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/kill", tag = "jobs",
    params(("id" = String, Path, description = "Job id or unique prefix")),
    responses((status = 200, description = "The job, killed", body = JobView), Errors))]
pub async fn kill(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<JobView>, RestError> {
    Ok(Json(job_view(s.jobs.kill(&who, &id).await?)))
}

/// A deleted thing's id.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Deleted {
    pub id: String,
}

#[utoipa::path(delete, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id or unique prefix")),
    responses((status = 200, description = "Deleted (a finished job only)", body = Deleted), Errors))]
pub async fn delete(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
) -> Result<Json<Deleted>, RestError> {
    let id = s.jobs.delete(&who, &id).await?;
    Ok(Json(Deleted { id: id.to_string() }))
}

/// `GET /api/v1/jobs/{id}/logs`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// Keep the response open and send output as it comes, as server-sent
    /// events (`text/event-stream`), until the job ends.
    #[serde(default)]
    pub follow: Option<bool>,
    /// Start at this byte of the output (`seq` of a chunk; default 0).
    #[serde(default)]
    #[param(minimum = 0)]
    pub from_seq: Option<u64>,
}

/// A piece of a job's output. Server-sent event `chunk` carries one as JSON.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LogChunkView {
    /// `stdout` or `stderr`.
    pub stream: String,
    /// Its first byte's offset in the job's output.
    pub seq: u64,
    pub unix_ms: i64,
    /// The bytes, as UTF-8 (invalid sequences replaced).
    pub data: String,
}

/// How a job ended. Server-sent event `end` carries one as JSON, last.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobEndView {
    pub state: String,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub total_bytes: u64,
}

/// A job's output so far.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LogOutput {
    pub chunks: Vec<LogChunkView>,
    /// How it ended, once it has.
    pub end: Option<JobEndView>,
}

fn chunk_view(r: Record) -> LogChunkView {
    LogChunkView {
        stream: match r.stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
        .to_owned(),
        seq: r.seq,
        unix_ms: r.unix_ms,
        data: String::from_utf8_lossy(&r.data).into_owned(),
    }
}

fn end_view(e: JobEnd) -> JobEndView {
    JobEndView {
        state: e.state.as_str().to_owned(),
        exit_code: e.exit_code,
        reason: e.reason,
        total_bytes: e.total_bytes,
    }
}

/// One log event as a server-sent event.
pub fn sse_event(e: Result<LogEvent, LogError>) -> Event {
    let (name, json) = match e {
        Ok(LogEvent::Chunk(r)) => ("chunk", serde_json::to_string(&chunk_view(r))),
        Ok(LogEvent::Ended(end)) => ("end", serde_json::to_string(&end_view(end))),
        Err(e) => (
            "error",
            serde_json::to_string(&RestError::from(e).parts().1),
        ),
    };
    Event::default().event(name).data(
        json.unwrap_or_else(|e| {
            format!("{{\"error\":{{\"code\":\"internal\",\"message\":\"{e}\"}}}}")
        }),
    )
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}/logs", tag = "jobs",
    params(("id" = String, Path, description = "Job id or unique prefix"), LogQuery),
    responses((status = 200, description = "The output so far as JSON; with follow=true, server-sent events `chunk` (LogChunkView), then `end` (JobEndView) or `error` (ErrorBody)",
        content(
            (LogOutput = "application/json"),
            (String = "text/event-stream"),
        )), Errors))]
pub async fn logs(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(id): PathArg<String>,
    QueryArgs(q): QueryArgs<LogQuery>,
) -> Result<Response, RestError> {
    let follow = q.follow.unwrap_or(false);
    let output = s
        .jobs
        .logs(&who, &id, q.from_seq.unwrap_or(0), follow)
        .await?;
    if follow {
        let events = ReceiverStream::new(output).map(|e| Ok::<_, Infallible>(sse_event(e)));
        return Ok(Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let mut out = LogOutput {
        chunks: Vec::new(),
        end: None,
    };
    let mut output = ReceiverStream::new(output);
    while let Some(e) = output.next().await {
        match e? {
            LogEvent::Chunk(r) => out.chunks.push(chunk_view(r)),
            LogEvent::Ended(end) => out.end = Some(end_view(end)),
        }
    }
    Ok(Json(out).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_the_services_request() {
        let body: RunJobBody = super::super::input::parse_json(
            br#"{"command": "python3", "args": ["train.py"], "gpu_count": 2, "gpu_memory_mb": 8192,
                "max_cpu": 150, "max_memory_mb": 1024, "env": {"B": "2", "A": "1"},
                "volumes": ["data:ro"], "runtime": "python-3.11", "timeout_ms": 60000,
                "executor": "runc", "devices": ["nvidia.com/gpu=0"]}"#,
        )
        .unwrap();
        let r = job_request(body);
        assert_eq!(r.command, "python3");
        assert_eq!(r.args, ["train.py"]);
        assert_eq!((r.gpu_count, r.gpu_memory_mb), (2, 8192));
        assert_eq!((r.max_cpu, r.max_memory_mb, r.max_iobps), (150, 1024, 0));
        assert_eq!(r.env, [("A".into(), "1".into()), ("B".into(), "2".into())]);
        assert_eq!(r.volumes, ["data:ro"]);
        assert_eq!(r.runtime, "python-3.11");
        assert_eq!(r.timeout_ms, Some(60000));
        assert_eq!(r.executor, "runc");
        assert_eq!(r.devices, ["nvidia.com/gpu=0"]);
        assert!(r.uploads.is_empty());
        let bare = job_request(RunJobBody::default());
        assert_eq!(bare.gpu_count, 0);
        assert_eq!((bare.executor.as_str(), bare.devices.len()), ("", 0));
    }

    #[test]
    fn list_queries_are_checked_and_name_their_parameter() {
        let p = paging(JobListQuery {
            state: Some("running, queued".into()),
            owner: Some("alice".into()),
            limit: Some(5),
            offset: Some(10),
        })
        .unwrap();
        assert_eq!(p.states, [JobState::Running, JobState::Queued]);
        assert_eq!((p.limit, p.offset), (5, 10));
        assert_eq!(paging(JobListQuery::default()).unwrap().limit, DEFAULT_PAGE);
        for (q, field) in [
            (
                JobListQuery {
                    state: Some("RUNNING,NAPPING".into()),
                    ..Default::default()
                },
                "state",
            ),
            (
                JobListQuery {
                    limit: Some(0),
                    ..Default::default()
                },
                "limit",
            ),
            (
                JobListQuery {
                    limit: Some(1001),
                    ..Default::default()
                },
                "limit",
            ),
            (
                JobListQuery {
                    offset: Some(-1),
                    ..Default::default()
                },
                "offset",
            ),
        ] {
            assert_eq!(paging(q).unwrap_err().field, field);
        }
    }

    #[test]
    fn pages_follow_each_other_and_the_last_has_no_next() {
        let jobs: Vec<(u32, &str)> = (0..7)
            .map(|i| (i, if i % 2 == 0 { "a" } else { "b" }))
            .collect();
        let p = |offset, owner: Option<&str>| Paging {
            states: vec![],
            owner: owner.map(str::to_owned),
            limit: 3,
            offset,
        };
        let (one, next) = page(jobs.clone(), |j| j.1, &p(0, None));
        assert_eq!(one.iter().map(|j| j.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(next, Some(3));
        let (two, next) = page(jobs.clone(), |j| j.1, &p(3, None));
        assert_eq!(two.iter().map(|j| j.0).collect::<Vec<_>>(), [3, 4, 5]);
        let (three, next3) = page(jobs.clone(), |j| j.1, &p(next.unwrap() as usize, None));
        assert_eq!(three.iter().map(|j| j.0).collect::<Vec<_>>(), [6]);
        assert_eq!(next3, None);
        let (mine, next) = page(jobs, |j| j.1, &p(0, Some("a")));
        assert_eq!(mine.iter().map(|j| j.0).collect::<Vec<_>>(), [0, 2, 4]);
        assert_eq!(next, Some(3));
    }
}
