//! `RuntimeService`: the node's runtimes.

use std::pin::Pin;

use joblet_proto::{pb, RuntimeService};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::caller;
use crate::service::{ApiError, RuntimeInfo, Runtimes};
use crate::storage::BuildEvent;

/// The `RuntimeService` of one node.
pub struct RuntimeApi {
    runtimes: Runtimes,
}

impl RuntimeApi {
    pub fn new(runtimes: Runtimes) -> RuntimeApi {
        RuntimeApi { runtimes }
    }
}

/// A build's progress on the wire.
pub type ProgressStream = Pin<Box<dyn Stream<Item = Result<pb::RuntimeProgress, Status>> + Send>>;

pub fn runtime_pb(r: RuntimeInfo) -> pb::RuntimeInfo {
    pb::RuntimeInfo {
        name: r.name,
        version: r.version,
        description: r.description,
        installed: r.installed,
        digest: r.digest,
        size_bytes: r.size_bytes,
        files: r.files,
        installed_at_unix_ms: r.installed_at_ms,
        cuda: r.cuda.unwrap_or_default(),
        environment: r.environment.into_iter().collect(),
        self_check: r.self_check,
        debian_packages: r.debian_packages,
        python_packages: r.python_packages,
        extras: r.extras,
        jobs: r.jobs,
    }
}

fn phase(p: joblet_runtime::Phase) -> &'static str {
    use joblet_runtime::Phase;
    match p {
        Phase::Wait => "wait",
        Phase::Base => "base",
        Phase::Python => "python",
        Phase::Ingest => "ingest",
        Phase::Done => "done",
    }
}

/// The build's events as a stream: progress, then the installed runtime
/// (or the build's error as the stream's status).
fn progress(mut rx: tokio::sync::mpsc::Receiver<BuildEvent>) -> ProgressStream {
    Box::pin(async_stream_from(move |tx| async move {
        while let Some(ev) = rx.recv().await {
            let item = match ev {
                BuildEvent::Progress(p) => Ok(pb::RuntimeProgress {
                    phase: phase(p.phase).into(),
                    done: p.done,
                    total: p.total,
                    message: p.message,
                    installed: None,
                }),
                BuildEvent::Done(done) => match *done {
                    Ok(i) => Ok(pb::RuntimeProgress {
                        phase: "done".into(),
                        done: 1,
                        total: 1,
                        message: format!("installed {}@{} {}", i.name, i.version, i.digest),
                        installed: Some(runtime_pb(RuntimeInfo::from_installed(i))),
                    }),
                    Err(e) => Err(Status::from(ApiError::NodeCannot(e.to_string()))),
                },
            };
            if tx.send(item).await.is_err() {
                // The client went away: dropping `rx` cancels the build.
                return;
            }
        }
    }))
}

/// A stream fed by `f` through a channel.
fn async_stream_from<F, Fut>(f: F) -> impl Stream<Item = Result<pb::RuntimeProgress, Status>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<pb::RuntimeProgress, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[tonic::async_trait]
impl RuntimeService for RuntimeApi {
    async fn list_runtimes(
        &self,
        req: Request<pb::ListRuntimesRequest>,
    ) -> Result<Response<pb::ListRuntimesResponse>, Status> {
        let who = caller(&req)?;
        let list = self.runtimes.list(&who, req.get_ref().include_available)?;
        Ok(Response::new(pb::ListRuntimesResponse {
            runtimes: list.into_iter().map(runtime_pb).collect(),
        }))
    }

    async fn get_runtime(
        &self,
        req: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RuntimeInfo>, Status> {
        let who = caller(&req)?;
        let info = self.runtimes.get(&who, &req.get_ref().name)?;
        Ok(Response::new(runtime_pb(info)))
    }

    type InstallRuntimeStream = ProgressStream;

    async fn install_runtime(
        &self,
        req: Request<pb::InstallRuntimeRequest>,
    ) -> Result<Response<Self::InstallRuntimeStream>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let rx = self.runtimes.install(&who, &r.name, r.extras, r.rebuild)?;
        Ok(Response::new(progress(rx)))
    }

    type BuildRuntimeStream = ProgressStream;

    async fn build_runtime(
        &self,
        req: Request<pb::BuildRuntimeRequest>,
    ) -> Result<Response<Self::BuildRuntimeStream>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let files = r.files.into_iter().collect();
        let rx = self.runtimes.build(&who, files, r.extras, r.rebuild)?;
        Ok(Response::new(progress(rx)))
    }

    async fn remove_runtime(
        &self,
        req: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RuntimeInfo>, Status> {
        let who = caller(&req)?;
        let info = self.runtimes.remove(&who, &req.get_ref().name).await?;
        Ok(Response::new(runtime_pb(info)))
    }

    async fn test_runtime(
        &self,
        req: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let who = caller(&req)?;
        let job = self.runtimes.test(&who, &req.get_ref().name).await?;
        Ok(Response::new(pb::RunJobResponse {
            job: Some(joblet_proto::job_to_pb(&job)),
        }))
    }
}
