//! The `rnx` binary against an in-process fake node speaking the real API
//! over mutual TLS: output formats, error mapping, exit codes, and
//! exactly-once output across a dropped connection.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use joblet_pki::{CertPem, CertificateAuthority, Role, Validity};
use joblet_proto::pb::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use joblet_proto::pb::volume_service_server::{VolumeService, VolumeServiceServer};
use joblet_proto::pb::{self, log_event::Event};
use joblet_proto::{ClientConfigFile, JobService, JobServiceServer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::{Request, Response, Status};

#[path = "fake_node/cluster.rs"]
mod cluster;
#[path = "fake_node/workflow.rs"]
mod workflow;

const JOB_ID: &str = "abc123de-f456-7890-1234-567890abcdef";
const LOST: &str = "rnx: lost connection to the node; reconnecting…\n";

/// The fake job's whole output, in order.
const LOG: &[(pb::LogStream, &[u8])] = &[
    (pb::LogStream::Stdout, b"epoch 1\n"),
    (pb::LogStream::Stderr, b"warning: slow\n"),
    (pb::LogStream::Stdout, b"epoch 2\n"),
    (pb::LogStream::Stdout, b"epoch 3 "),
    (pb::LogStream::Stdout, b"done\n"),
];

fn expected(stream: pb::LogStream) -> Vec<u8> {
    LOG.iter()
        .filter(|(s, _)| *s == stream)
        .flat_map(|(_, d)| d.to_vec())
        .collect()
}

#[derive(Default)]
struct Fake {
    /// Clones of the accepted sockets, to cut every connection.
    sockets: Arc<Mutex<Vec<std::net::TcpStream>>>,
    /// Tells the accept loop to stop listening for a while (a restart).
    restart: Arc<tokio::sync::Notify>,
    /// Cut the connection during the first followed log stream.
    break_first_follow: bool,
    /// `(call, from_seq, follow)` of each GetJobLogs or RunJobFollow call.
    log_calls: Mutex<Vec<(&'static str, u64, bool)>>,
    /// Answer RunJobFollow as a node older than it does (Unimplemented).
    no_run_follow: bool,
    last_run: Mutex<Option<pb::RunJobRequest>>,
    /// The job and the file bytes of the last SubmitJob.
    last_upload: Mutex<Option<(pb::RunJobRequest, Vec<u8>)>>,
    /// What the JobEnded event reports.
    exit_code: Option<i32>,
    /// The last ListAudit request.
    last_audit: Mutex<Option<pb::ListAuditRequest>>,
    /// Answer ListAudit as to a viewer.
    audit_denied: bool,
    /// Answer the runtime and volume changes as to a viewer.
    changes_denied: bool,
    /// End install/build streams without the event carrying the runtime.
    progress_without_done: bool,
    last_list_runtimes: Mutex<Option<pb::ListRuntimesRequest>>,
    last_install: Mutex<Option<pb::InstallRuntimeRequest>>,
    last_build: Mutex<Option<pb::BuildRuntimeRequest>>,
    last_runtime_ref: Mutex<Option<pb::RuntimeRef>>,
    last_create_volume: Mutex<Option<pb::CreateVolumeRequest>>,
    last_remove_volume: Mutex<Option<pb::RemoveVolumeRequest>>,
    last_set_shared: Mutex<Option<pb::SetVolumeSharedRequest>>,
    /// The fake WorkflowService's state (tests/fake_node/workflow.rs).
    workflows: workflow::FakeWorkflows,
    /// The fake NodeService's and GpuService's (tests/fake_node/cluster.rs).
    cluster: cluster::FakeCluster,
}

fn job(state: pb::JobState) -> pb::Job {
    pb::Job {
        id: JOB_ID.into(),
        command: "python".into(),
        args: vec!["train.py".into()],
        state: state as i32,
        owner: "admin".into(),
        resources: Some(pb::Resources {
            gpu_count: 1,
            gpu_memory_mb: 8192,
            ..Default::default()
        }),
        secret_env: [("TOKEN".to_owned(), "***".to_owned())].into(),
        created_unix_ms: 1_735_787_045_000,
        executor: "native".into(),
        // Placed once it runs; waiting before.
        gpus: (state == pb::JobState::Running).then(|| pb::JobGpus {
            indices: vec![3],
            uuids: vec!["GPU-3c4d5e6f-0000-1111-2222-333344445555".into()],
            memory_mb_per_gpu: 8192,
            sharing: "exclusive".into(),
            peak_memory_mb: 2048,
        }),
        ..Default::default()
    }
}

fn find(id: &str) -> Result<pb::Job, Status> {
    if JOB_ID.starts_with(id) {
        Ok(job(pb::JobState::Running))
    } else {
        Err(Status::not_found(format!(
            "no job with id or prefix {id:?} (see `rnx job list`)"
        )))
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<pb::LogEvent, Status>> + Send>>;

fn chunks_from(from_seq: u64, limit: usize) -> Vec<Result<pb::LogEvent, Status>> {
    let mut seq = 0u64;
    let mut out = Vec::new();
    for (stream, data) in LOG {
        let len = data.len() as u64;
        // Like a real node may, resend the chunk that ends at from_seq.
        if seq + len >= from_seq && out.len() < limit {
            out.push(Ok(pb::LogEvent {
                event: Some(Event::Chunk(pb::LogChunk {
                    seq,
                    stream: *stream as i32,
                    data: data.to_vec(),
                    unix_ms: 0,
                })),
            }));
        }
        seq += len;
    }
    out
}

fn total() -> u64 {
    LOG.iter().map(|(_, d)| d.len() as u64).sum()
}

impl Fake {
    /// The job's output from `from_seq` (then its end when following), as
    /// GetJobLogs and RunJobFollow stream it; recorded in `log_calls`.
    fn log_events(&self, call: &'static str, from_seq: u64, follow: bool) -> Events {
        let first_follow = {
            let mut calls = self.log_calls.lock().unwrap();
            calls.push((call, from_seq, follow));
            follow && calls.iter().filter(|(_, _, f)| *f).count() == 1
        };
        if first_follow && self.break_first_follow {
            // Send two chunks, then go away as a restarting daemon would:
            // stop listening and cut every connection.
            let sockets = self.sockets.clone();
            let restart = self.restart.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                restart.notify_one();
                for s in sockets.lock().unwrap().drain(..) {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            });
            return Box::pin(
                futures::stream::iter(chunks_from(from_seq, 2)).chain(futures::stream::pending()),
            );
        }
        let mut events = chunks_from(from_seq, usize::MAX);
        if follow {
            events.push(Ok(pb::LogEvent {
                event: Some(Event::Ended(pb::JobEnded {
                    state: pb::JobState::Failed as i32,
                    exit_code: self.exit_code,
                    reason: match self.exit_code {
                        Some(c) => format!("exited with code {c}"),
                        None => "failed to start: python: no such file or directory".into(),
                    },
                    total_bytes: total(),
                })),
            }));
        }
        Box::pin(futures::stream::iter(events))
    }
}

#[tonic::async_trait]
impl JobService for Fake {
    async fn submit_job(
        &self,
        request: Request<tonic::Streaming<pb::SubmitJobMessage>>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        let mut stream = request.into_inner();
        let mut first = None;
        let mut bytes = Vec::new();
        while let Some(m) = stream.message().await? {
            match m.msg {
                Some(pb::submit_job_message::Msg::Job(j)) => first = Some(j),
                Some(pb::submit_job_message::Msg::Data(d)) => bytes.extend(d.data),
                None => {}
            }
        }
        let job_req = first.ok_or_else(|| Status::invalid_argument("no job"))?;
        *self.last_upload.lock().unwrap() = Some((job_req, bytes));
        Ok(Response::new(pb::RunJobResponse {
            job: Some(job(pb::JobState::Queued)),
        }))
    }

    async fn run_job(
        &self,
        request: Request<pb::RunJobRequest>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        *self.last_run.lock().unwrap() = Some(request.into_inner());
        Ok(Response::new(pb::RunJobResponse {
            job: Some(job(pb::JobState::Queued)),
        }))
    }

    type RunJobFollowStream = Events;
    type AttachJobStream = Events;
    type ExecJobStream =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::ExecOutput, Status>> + Send>>;

    async fn exec_job(
        &self,
        _request: Request<tonic::Streaming<pb::ExecInput>>,
    ) -> Result<Response<Self::ExecJobStream>, Status> {
        Err(Status::unimplemented("the fake node has no exec"))
    }

    async fn list_execs(
        &self,
        _request: Request<pb::JobRef>,
    ) -> Result<Response<pb::ListExecsResponse>, Status> {
        Err(Status::unimplemented("the fake node has no exec"))
    }

    async fn attach_job(
        &self,
        _request: Request<tonic::Streaming<pb::AttachInput>>,
    ) -> Result<Response<Events>, Status> {
        Err(Status::unimplemented(
            "the fake node has no interactive jobs",
        ))
    }

    async fn run_job_follow(
        &self,
        request: Request<pb::RunJobRequest>,
    ) -> Result<Response<Events>, Status> {
        if self.no_run_follow {
            return Err(Status::unimplemented(""));
        }
        *self.last_run.lock().unwrap() = Some(request.into_inner());
        let accepted = futures::stream::iter([Ok(pb::LogEvent {
            event: Some(Event::Accepted(job(pb::JobState::Queued))),
        })]);
        let output = self.log_events("RunJobFollow", 0, true);
        Ok(Response::new(Box::pin(accepted.chain(output))))
    }

    async fn get_job_status(&self, r: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        let j = find(&r.into_inner().job_id)?;
        Ok(Response::new(cluster::placed(self, j)))
    }

    async fn list_jobs(
        &self,
        _: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        Ok(Response::new(pb::ListJobsResponse {
            jobs: vec![cluster::placed(self, job(pb::JobState::Running))],
        }))
    }

    type GetJobLogsStream = Events;

    async fn get_job_logs(
        &self,
        r: Request<pb::GetJobLogsRequest>,
    ) -> Result<Response<Events>, Status> {
        let r = r.into_inner();
        find(&r.job_id)?;
        Ok(Response::new(self.log_events(
            "GetJobLogs",
            r.from_seq,
            r.follow,
        )))
    }

    async fn stop_job(&self, r: Request<pb::StopJobRequest>) -> Result<Response<pb::Job>, Status> {
        let mut j = find(&r.into_inner().job_id)?;
        j.state = pb::JobState::Stopped as i32;
        Ok(Response::new(j))
    }

    async fn kill_job(&self, _: Request<pb::JobRef>) -> Result<Response<pb::Job>, Status> {
        Err(Status::permission_denied(
            "bob has role \"viewer\", which may not kill jobs; ask an admin for an admin certificate (`joblet cert issue --role admin`)",
        ))
    }

    async fn delete_job(
        &self,
        r: Request<pb::JobRef>,
    ) -> Result<Response<pb::DeleteJobResponse>, Status> {
        let j = find(&r.into_inner().job_id)?;
        Ok(Response::new(pb::DeleteJobResponse { id: j.id }))
    }

    async fn list_audit(
        &self,
        r: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        if self.audit_denied {
            return Err(Status::permission_denied(
                "bob has role \"viewer\", which may not read the GPU audit log (it needs role admin); ask an admin for an admin certificate (`joblet cert issue --role admin`)",
            ));
        }
        *self.last_audit.lock().unwrap() = Some(r.into_inner());
        Ok(Response::new(pb::ListAuditResponse {
            records: vec![
                pb::AuditRecord {
                    job_id: JOB_ID.into(),
                    owner: "admin".into(),
                    gpu_uuids: vec!["GPU-aaaa".into(), "GPU-bbbb".into()],
                    gpu_indices: vec![0, 1],
                    memory_mb_per_gpu: 8192,
                    sharing: "exclusive".into(),
                    start_ms: 1_735_787_045_000,
                    end_ms: 1_735_787_105_000,
                    duration_ms: 60_000,
                    peak_memory_mb: 4096,
                    ended: "COMPLETED".into(),
                    reason: "exited with code 0".into(),
                },
                pb::AuditRecord {
                    job_id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
                    owner: "alice".into(),
                    gpu_uuids: vec!["GPU-cccc".into()],
                    gpu_indices: vec![2],
                    sharing: "exclusive".into(),
                    start_ms: 1_735_787_165_000,
                    ..Default::default()
                },
            ],
        }))
    }

    async fn who_am_i(
        &self,
        _: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::WhoAmIResponse>, Status> {
        Ok(Response::new(pb::WhoAmIResponse {
            name: "admin".into(),
            role: "admin".into(),
            node_version: "test".into(),
            supported: vec!["env".into(), "secret_env".into(), "timeout".into()],
            state_disk: None,
            executors: vec![
                pb::ExecutorInfo {
                    name: "native".into(),
                    kind: "native".into(),
                    capabilities: vec!["gpu".into(), "oom-events".into(), "device-cgroup".into()],
                    allowed: true,
                    ..Default::default()
                },
                pb::ExecutorInfo {
                    name: "runsc".into(),
                    kind: "runsc".into(),
                    binary: "/usr/bin/runsc".into(),
                    version: "release-20221219.0".into(),
                    capabilities: vec!["oom-events".into()],
                    gpu_unavailable: "runsc release 20221219 has no nvproxy".into(),
                    allowed: false,
                },
            ],
            default_executor: "native".into(),
        }))
    }
}

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn runtime_info() -> pb::RuntimeInfo {
    pb::RuntimeInfo {
        name: "python-3.11-ml".into(),
        version: "1.0".into(),
        description: "Python 3.11 with PyTorch".into(),
        installed: true,
        digest: DIGEST.into(),
        size_bytes: 5_905_580_032,
        files: 48_213,
        installed_at_unix_ms: 1_735_787_045_000,
        cuda: "12.1".into(),
        environment: [("PYTHONNOUSERSITE".to_owned(), "1".to_owned())].into(),
        self_check: vec!["python -c 'import torch'".into()],
        debian_packages: vec!["libgomp1".into()],
        python_packages: vec!["numpy==1.26.4".into(), "torch==2.3.1".into()],
        extras: vec![],
        jobs: vec![JOB_ID.into()],
    }
}

fn available_runtime() -> pb::RuntimeInfo {
    pb::RuntimeInfo {
        name: "cuda-12.4-base".into(),
        version: "2".into(),
        description: "CUDA 12.4 runtime libraries".into(),
        ..Default::default()
    }
}

const VIEWER: &str = "bob has role \"viewer\", which may not change runtimes or volumes (it needs role admin); ask an admin for an admin certificate (`joblet cert issue --role admin`)";

type Progress = Pin<Box<dyn Stream<Item = Result<pb::RuntimeProgress, Status>> + Send>>;

impl Fake {
    fn progress(&self) -> Result<Response<Progress>, Status> {
        if self.changes_denied {
            return Err(Status::permission_denied(VIEWER));
        }
        let ev = |phase: &str, done, total, message: &str| pb::RuntimeProgress {
            phase: phase.into(),
            done,
            total,
            message: message.into(),
            installed: None,
        };
        let mut events = vec![
            ev("base", 0, 0, "debootstrap bookworm"),
            ev("python", 1, 2, "numpy==1.26.4"),
            ev("python", 2, 2, "torch==2.3.1"),
            ev("ingest", 100, 48_213, "storing files"),
            ev("ingest", 48_213, 48_213, "storing files"),
        ];
        if !self.progress_without_done {
            events.push(pb::RuntimeProgress {
                installed: Some(runtime_info()),
                ..ev("done", 0, 0, "")
            });
        }
        Ok(Response::new(Box::pin(futures::stream::iter(
            events.into_iter().map(Ok),
        ))))
    }
}

#[tonic::async_trait]
impl RuntimeService for Fake {
    async fn list_runtimes(
        &self,
        r: Request<pb::ListRuntimesRequest>,
    ) -> Result<Response<pb::ListRuntimesResponse>, Status> {
        let r = r.into_inner();
        let mut runtimes = vec![runtime_info()];
        if r.include_available {
            runtimes.push(available_runtime());
        }
        *self.last_list_runtimes.lock().unwrap() = Some(r);
        Ok(Response::new(pb::ListRuntimesResponse { runtimes }))
    }

    async fn get_runtime(
        &self,
        r: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RuntimeInfo>, Status> {
        let r = r.into_inner();
        *self.last_runtime_ref.lock().unwrap() = Some(r.clone());
        match r.name.as_str() {
            "python-3.11-ml" | "python-3.11-ml@1.0" => Ok(Response::new(runtime_info())),
            "cuda-12.4-base" => Ok(Response::new(available_runtime())),
            other => Err(Status::not_found(format!(
                "no runtime {other:?} installed or in the node's catalog (see `rnx runtime list --all`)"
            ))),
        }
    }

    type InstallRuntimeStream = Progress;

    async fn install_runtime(
        &self,
        r: Request<pb::InstallRuntimeRequest>,
    ) -> Result<Response<Progress>, Status> {
        *self.last_install.lock().unwrap() = Some(r.into_inner());
        self.progress()
    }

    type BuildRuntimeStream = Progress;

    async fn build_runtime(
        &self,
        r: Request<pb::BuildRuntimeRequest>,
    ) -> Result<Response<Progress>, Status> {
        *self.last_build.lock().unwrap() = Some(r.into_inner());
        self.progress()
    }

    async fn remove_runtime(
        &self,
        r: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RuntimeInfo>, Status> {
        if self.changes_denied {
            return Err(Status::permission_denied(VIEWER));
        }
        *self.last_runtime_ref.lock().unwrap() = Some(r.into_inner());
        Ok(Response::new(pb::RuntimeInfo {
            jobs: vec![],
            ..runtime_info()
        }))
    }

    async fn test_runtime(
        &self,
        r: Request<pb::RuntimeRef>,
    ) -> Result<Response<pb::RunJobResponse>, Status> {
        *self.last_runtime_ref.lock().unwrap() = Some(r.into_inner());
        Ok(Response::new(pb::RunJobResponse {
            job: Some(job(pb::JobState::Queued)),
        }))
    }
}

fn volume(name: &str) -> pb::Volume {
    pb::Volume {
        name: name.into(),
        r#type: "filesystem".into(),
        size_bytes: 1 << 30,
        used_bytes: Some(120 << 20),
        owner: "admin".into(),
        shared: false,
        created_at_unix_ms: 1_735_787_045_000,
        jobs: vec![JOB_ID.into()],
        status: "mounted".into(),
    }
}

#[tonic::async_trait]
impl VolumeService for Fake {
    async fn create_volume(
        &self,
        r: Request<pb::CreateVolumeRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        if self.changes_denied {
            return Err(Status::permission_denied(VIEWER));
        }
        let r = r.into_inner();
        *self.last_create_volume.lock().unwrap() = Some(r.clone());
        Ok(Response::new(pb::Volume {
            r#type: r.r#type,
            size_bytes: r.size_bytes as u64,
            shared: r.shared,
            used_bytes: Some(0),
            jobs: vec![],
            ..volume(&r.name)
        }))
    }

    async fn list_volumes(
        &self,
        _: Request<pb::ListVolumesRequest>,
    ) -> Result<Response<pb::ListVolumesResponse>, Status> {
        Ok(Response::new(pb::ListVolumesResponse {
            volumes: vec![
                volume("data-lake"),
                pb::Volume {
                    r#type: "memory".into(),
                    size_bytes: 512 << 20,
                    used_bytes: None,
                    owner: "alice".into(),
                    shared: true,
                    jobs: vec![],
                    status: "not mounted".into(),
                    ..volume("scratch")
                },
            ],
        }))
    }

    async fn get_volume(&self, r: Request<pb::VolumeRef>) -> Result<Response<pb::Volume>, Status> {
        match r.into_inner().name.as_str() {
            "data-lake" => Ok(Response::new(volume("data-lake"))),
            other => Err(Status::not_found(format!(
                "no volume {other:?} (see `rnx volume list`)"
            ))),
        }
    }

    async fn remove_volume(
        &self,
        r: Request<pb::RemoveVolumeRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let r = r.into_inner();
        *self.last_remove_volume.lock().unwrap() = Some(r.clone());
        if !r.force {
            return Err(Status::failed_precondition(format!(
                "volume {:?} is used by job {JOB_ID}; stop it first, or remove with --force to kill it",
                r.name
            )));
        }
        Ok(Response::new(volume(&r.name)))
    }

    async fn set_volume_shared(
        &self,
        r: Request<pb::SetVolumeSharedRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let r = r.into_inner();
        *self.last_set_shared.lock().unwrap() = Some(r.clone());
        Ok(Response::new(pb::Volume {
            shared: r.shared,
            ..volume(&r.name)
        }))
    }
}

/// A server-side TLS connection tonic can serve.
struct Conn(tokio_rustls::server::TlsStream<TcpStream>);

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

struct Node {
    addr: SocketAddr,
    ca: CertificateAuthority,
    client: CertPem,
    fake: Arc<Fake>,
    dir: tempfile::TempDir,
}

async fn start(fake: Fake) -> Node {
    let ca = CertificateAuthority::generate("test-ca", Validity::days_from_now(1)).unwrap();
    let server = ca
        .issue_server(
            &["localhost".into(), "127.0.0.1".into()],
            Validity::days_from_now(1),
        )
        .unwrap();
    let client = ca
        .issue_client("admin", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    let tls = joblet_pki::server_config(ca.cert_pem(), &server).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = Arc::new(fake);
    let sockets = fake.sockets.clone();
    let restart = fake.restart.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Conn, io::Error>>(16);
    tokio::spawn(async move {
        let mut listener = listener;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = restart.notified() => {
                    // Down for a while: connections are refused.
                    drop(listener);
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    listener = TcpListener::bind(addr).await.unwrap();
                    continue;
                }
            };
            let Ok((tcp, _)) = accepted else {
                return;
            };
            let std = tcp.into_std().unwrap();
            sockets.lock().unwrap().push(std.try_clone().unwrap());
            let tcp = TcpStream::from_std(std).unwrap();
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                // Handshake failures (a client with a foreign CA) just drop.
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = tx.send(Ok(Conn(tls))).await;
                }
            });
        }
    });
    let svc = JobServiceServer::from_arc(fake.clone());
    // A build may send 64 MiB of files in its one message: the daemon must
    // raise tonic's default 4 MiB limit the same way.
    let runtimes = RuntimeServiceServer::from_arc(fake.clone()).max_decoding_message_size(80 << 20);
    let volumes = VolumeServiceServer::from_arc(fake.clone());
    let workflows = joblet_proto::WorkflowServiceServer::from_arc(fake.clone());
    let (nodes, gpus) = cluster::services(&fake);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .add_service(runtimes)
            .add_service(volumes)
            .add_service(workflows)
            .add_service(nodes)
            .add_service(gpus)
            .serve_with_incoming(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap();
    });
    Node {
        addr,
        ca,
        client,
        fake,
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Node {
    fn config(&self, name: &str, ca: &str, cert: &CertPem, addr: &str) -> PathBuf {
        let file =
            ClientConfigFile::single("default", addr, "localhost", ca, &cert.cert, &cert.key);
        let path = self.dir.path().join(name);
        std::fs::write(&path, file.to_yaml()).unwrap();
        path
    }

    fn good_config(&self) -> PathBuf {
        self.config(
            "good.yml",
            self.ca.cert_pem(),
            &self.client,
            &self.addr.to_string(),
        )
    }

    async fn rnx(&self, args: &[&str]) -> Output {
        rnx_with(&self.good_config(), self.dir.path(), args).await
    }
}

async fn rnx_with(config: &Path, home: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_rnx"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .output()
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_prints_the_id_and_sends_the_request() {
    let node = start(Fake::default()).await;
    let out = node
        .rnx(&[
            "job",
            "run",
            "--gpu=1",
            "--gpu-memory=8GB",
            "--gpu-time=1h30m",
            "--cuda=12.2",
            "-s",
            "TOKEN=hunter2",
            "-e",
            "A=1",
            "python",
            "train.py",
            "--epochs",
            "3",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{JOB_ID}\n"));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let sent = node.fake.last_run.lock().unwrap().clone().unwrap();
    assert_eq!(sent.command, "python");
    assert_eq!(sent.args, ["train.py", "--epochs", "3"]);
    let res = sent.resources.unwrap();
    assert_eq!((res.gpu_count, res.gpu_memory_mb), (1, 8192));
    assert_eq!(res.gpu_time_seconds, Some(5400));
    assert_eq!(sent.cuda_version, "12.2");
    assert_eq!(sent.secret_env["TOKEN"], "hunter2");
    assert_eq!(sent.env["A"], "1");
    assert_eq!(sent.timeout_seconds, None);

    let out = node.rnx(&["--json", "job", "run", "true"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["id"], JOB_ID);
    assert_eq!(v["secret_env"]["TOKEN"], "***");
    assert_eq!(v["executor"], "native");
    assert_eq!(v["devices"], serde_json::json!([]));
    let sent = node.fake.last_run.lock().unwrap().clone().unwrap();
    assert_eq!((sent.executor.as_str(), sent.devices.len()), ("", 0));

    let out = node
        .rnx(&[
            "job",
            "run",
            "--executor=runc",
            "--device",
            "nvidia.com/gpu=0",
            "--device=vendor.example/fpga=all",
            "--",
            "id",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = node.fake.last_run.lock().unwrap().clone().unwrap();
    assert_eq!(sent.executor, "runc");
    assert_eq!(
        sent.devices,
        ["nvidia.com/gpu=0", "vendor.example/fpga=all"]
    );
    assert_eq!(sent.command, "id");

    // Bad forms are usage errors, before anything is sent.
    for (flag, says) in [
        ("--executor=run c", "expected an executor name"),
        (
            "--device=nvidia.com/gpu",
            "expected a CDI device name vendor.com/class=name",
        ),
    ] {
        let out = node.rnx(&["job", "run", flag, "id"]).await;
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let e = text(&out.stderr);
        assert!(e.contains(says), "{flag}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_stream_the_manifest_then_the_bytes() {
    let node = start(Fake::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dataset");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("a.csv"), "1,2\n").unwrap();
    std::fs::write(dir.path().join("model.py"), "print(1)\n").unwrap();
    let model = dir.path().join("model.py");
    let up1 = format!("--upload={}", model.display());
    let up2 = format!("--upload={}/", data.display());
    let out = node
        .rnx(&["job", "run", &up1, &up2, "python", "model.py"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (job, bytes) = node.fake.last_upload.lock().unwrap().clone().unwrap();
    let paths: Vec<&str> = job.uploads.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["model.py", "dataset", "dataset/a.csv"]);
    assert_eq!(job.command, "python");
    assert_eq!(bytes, b"print(1)\n1,2\n");
    assert!(
        node.fake.last_run.lock().unwrap().is_none(),
        "uploads go through SubmitJob"
    );

    // A symlink out of the upload is refused before anything is sent.
    std::os::unix::fs::symlink("/etc/shadow", data.join("shadow")).unwrap();
    let out = node.rnx(&["job", "run", &up2, "true"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("symlink to /etc/shadow"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn status_list_whoami_stop_delete() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["job", "status", "abc1"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.starts_with(&format!("UUID: {JOB_ID}\nStatus: RUNNING\n")),
        "{s}"
    );
    assert!(
        s.contains("GPUs: [3] (1 GPU allocated)\nGPU Memory: 8192 MB required per GPU\n"),
        "{s}"
    );
    assert!(
        s.contains("GPU UUIDs: GPU-3c4d5e6f-0000-1111-2222-333344445555\n"),
        "{s}"
    );
    assert!(s.contains("GPU Peak Memory: 2048 MB\n"), "{s}");
    assert!(s.contains("Executor: native\n"), "{s}");
    assert!(!s.contains("Devices:"), "{s}");

    let out = node.rnx(&["--json", "job", "status", "abc1"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"]["indices"], serde_json::json!([3]));
    assert_eq!(v["gpus"]["peak_memory_mb"], 2048);
    assert!(s.contains("  TOKEN=***\n"), "{s}");

    let out = node.rnx(&["job", "list", "--json"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["state"], "RUNNING");
    assert_eq!(v[0]["resources"]["gpu_count"], 1);

    let out = node.rnx(&["job", "list"]).await;
    let s = text(&out.stdout);
    assert!(
        s.starts_with("ID        STATUS   EXIT  OWNER  CREATED"),
        "{s}"
    );
    assert!(s.contains("abc123de  RUNNING  -     admin"), "{s}");

    let out = node.rnx(&["whoami"]).await;
    let s = text(&out.stdout);
    assert!(s.contains("Enforces: env, secret_env, timeout"), "{s}");
    assert!(
        s.contains(
            "Executors:
  NAME              KIND    CAPABILITIES                  VERSION
  native (default)  native  gpu,oom-events,device-cgroup  -
  runsc             runsc   oom-events                    release-20221219.0
"
        ),
        "{s}"
    );
    assert!(
        s.contains("  runsc: you may not use it on this node (ask its admin)\n  runsc: no GPU jobs: runsc release 20221219 has no nvproxy\n"),
        "{s}"
    );
    let out = node.rnx(&["--json", "whoami"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["default_executor"], "native");
    assert_eq!(v["executors"][1]["name"], "runsc");
    assert_eq!(v["executors"][1]["allowed"], false);

    let out = node.rnx(&["job", "stop", "abc", "--grace=5s"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("(state: STOPPED)"));

    let out = node.rnx(&["--json", "job", "delete", "abc"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"id": JOB_ID, "deleted": true}));
}

#[tokio::test(flavor = "multi_thread")]
async fn node_refusals_exit_1_with_the_nodes_message() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["job", "status", "ffff"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "rnx: error: no job with id or prefix \"ffff\" (see `rnx job list`)\n"
    );
    assert!(out.stdout.is_empty());

    let out = node.rnx(&["job", "kill", "abc"]).await;
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.starts_with("rnx: error: permission denied: bob has role \"viewer\""),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn log_without_follow_keeps_streams_apart() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["job", "log", "abc"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(out.stdout, expected(pb::LogStream::Stdout));
    assert_eq!(out.stderr, expected(pb::LogStream::Stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_survives_a_dropped_connection_exactly_once() {
    // A node with RunJobFollow starts and streams the job in one call; an
    // older one gets RunJob, then GetJobLogs. Either way the output is
    // resumed with GetJobLogs after the two chunks already written (8 + 14
    // bytes).
    for (no_run_follow, first) in [(false, "RunJobFollow"), (true, "GetJobLogs")] {
        let node = start(Fake {
            break_first_follow: true,
            exit_code: Some(7),
            no_run_follow,
            ..Default::default()
        })
        .await;
        let out = node
            .rnx(&["job", "run", "--follow", "python", "train.py"])
            .await;
        // The job's exit code is rnx's.
        assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), text(&expected(pb::LogStream::Stdout)));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.matches(LOST).count(), 1, "{stderr}");
        assert_eq!(
            stderr.replace(LOST, ""),
            text(&expected(pb::LogStream::Stderr))
        );
        let calls = node.fake.log_calls.lock().unwrap().clone();
        assert_eq!(calls, vec![(first, 0, true), ("GetJobLogs", 22, true)]);
        let sent = node.fake.last_run.lock().unwrap().clone().unwrap();
        assert_eq!(
            (sent.command.as_str(), sent.args),
            ("python", vec!["train.py".to_owned()])
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_problems_exit_3_with_an_explanation() {
    let node = start(Fake::default()).await;

    // Nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let cfg = node.config("closed.yml", node.ca.cert_pem(), &node.client, &closed_addr);
    let out = rnx_with(&cfg, node.dir.path(), &["job", "list"]).await;
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(
        e.starts_with(&format!(
            "rnx: error: cannot reach joblet at {closed_addr}: "
        )),
        "{e}"
    );
    assert!(e.contains("Is the daemon running?"), "{e}");

    // A config from another node: its CA does not know this server.
    let other = CertificateAuthority::generate("other-ca", Validity::days_from_now(1)).unwrap();
    let other_client = other
        .issue_client("admin", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    let addr = node.addr.to_string();
    let cfg = node.config("other.yml", other.cert_pem(), &other_client, &addr);
    let out = rnx_with(&cfg, node.dir.path(), &["job", "list"]).await;
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(
        e.starts_with(&format!("rnx: error: TLS handshake with {addr} failed: ")),
        "{e}"
    );
    assert!(
        e.contains("check that the config's CA and certificate belong to this node"),
        "{e}"
    );

    // The right CA but a client certificate the node did not issue.
    let cfg = node.config("foreign-cert.yml", node.ca.cert_pem(), &other_client, &addr);
    let out = rnx_with(&cfg, node.dir.path(), &["job", "list"]).await;
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(
        e.contains(&format!("TLS handshake with {addr} failed: ")),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_without_an_exit_code_exits_125_with_the_reason() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["job", "run", "-f", "python", "train.py"]).await;
    assert_eq!(out.status.code(), Some(125));
    let stderr = text(&out.stderr);
    assert!(
        stderr.ends_with(&format!(
            "rnx: job {JOB_ID} ended FAILED without an exit code: failed to start: python: no such file or directory\n"
        )),
        "{stderr}"
    );
    // `job log -f` reports the output, not the job's fate.
    let out = node.rnx(&["job", "log", "-f", "abc"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, expected(pb::LogStream::Stdout));
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_table_json_and_filters() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["audit"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 3, "{s}");
    assert!(
        lines[0].starts_with("JOB       OWNER  GPUS  START")
            && lines[0].ends_with("PEAK MEM  ENDED"),
        "{s}"
    );
    assert!(
        lines[1].starts_with("abc123de  admin  0,1   2025-01-02T03:04:05Z"),
        "{s}"
    );
    assert!(lines[1].ends_with("1m        4096 MB   COMPLETED"), "{s}");
    assert!(lines[2].starts_with("0f0e0d0c  alice  2 "), "{s}");
    let sent = node.fake.last_audit.lock().unwrap().clone().unwrap();
    assert_eq!(sent, pb::ListAuditRequest::default());

    let out = node
        .rnx(&[
            "--json",
            "audit",
            "--since=2025-01-02T00:00:00Z",
            "--owner",
            "alice",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = v.as_array().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["job_id"], JOB_ID);
    assert_eq!(
        records[0]["gpu_uuids"],
        serde_json::json!(["GPU-aaaa", "GPU-bbbb"])
    );
    assert_eq!(records[0]["end"], "2025-01-02T03:05:05.000Z");
    assert_eq!(records[0]["end_ms"], 1_735_787_105_000_i64);
    assert_eq!(records[1]["end"], serde_json::Value::Null);
    let sent = node.fake.last_audit.lock().unwrap().clone().unwrap();
    assert_eq!(sent.since_ms, 1_735_776_000_000);
    assert_eq!(sent.owner, "alice");

    // A duration is taken back from now.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let out = node.rnx(&["audit", "--since", "2h"]).await;
    assert_eq!(out.status.code(), Some(0));
    let since = node
        .fake
        .last_audit
        .lock()
        .unwrap()
        .clone()
        .unwrap()
        .since_ms;
    assert!(
        (before - 7_200_000 - 1_000..=before - 7_200_000 + 60_000).contains(&since),
        "{since} vs {before}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_as_a_viewer_exits_1_naming_the_role() {
    let node = start(Fake {
        audit_denied: true,
        ..Default::default()
    })
    .await;
    let out = node.rnx(&["audit"]).await;
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.starts_with("rnx: error: permission denied: bob has role \"viewer\", which may not read the GPU audit log (it needs role admin)"),
        "{e}"
    );
    assert!(out.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn run_sends_read_only_volumes_and_runtime_versions() {
    let node = start(Fake::default()).await;
    let out = node
        .rnx(&[
            "job",
            "run",
            "--volume=datasets:ro",
            "--volume=out:rw",
            "--runtime=python-3.11-ml@1.0",
            "python",
            "train.py",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = node.fake.last_run.lock().unwrap().clone().unwrap();
    assert_eq!(sent.volumes, ["datasets:ro", "out"]);
    assert_eq!(sent.runtime, "python-3.11-ml@1.0");
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_list_and_info() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["runtime", "list"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[0],
        "NAME            VERSION  DIGEST        SIZE     INSTALLED   JOBS"
    );
    assert!(
        lines[1].starts_with("python-3.11-ml  1.0      0123456789ab  5.5 GiB  2025-01-02  1"),
        "{s}"
    );
    assert_eq!(lines.len(), 2, "{s}");
    let sent = node.fake.last_list_runtimes.lock().unwrap().unwrap();
    assert!(!sent.include_available);

    let out = node.rnx(&["runtime", "list", "--all"]).await;
    let s = text(&out.stdout);
    assert!(
        s.lines()
            .any(|l| l == "cuda-12.4-base  2        -             -        available   -"),
        "{s}"
    );
    assert!(
        node.fake
            .last_list_runtimes
            .lock()
            .unwrap()
            .unwrap()
            .include_available
    );

    let out = node.rnx(&["--json", "runtime", "list", "--all"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["reference"], "python-3.11-ml@1.0");
    assert_eq!(v[0]["digest"], DIGEST);
    assert_eq!(v[1]["installed"], false);

    let out = node.rnx(&["runtime", "info", "python-3.11-ml@1.0"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.starts_with("Name: python-3.11-ml\nVersion: 1.0\n"), "{s}");
    assert!(
        s.contains("Python Packages (2):\n  numpy==1.26.4\n  torch==2.3.1\n"),
        "{s}"
    );
    assert_eq!(
        node.fake
            .last_runtime_ref
            .lock()
            .unwrap()
            .clone()
            .unwrap()
            .name,
        "python-3.11-ml@1.0"
    );
    let out = node
        .rnx(&["--json", "runtime", "info", "cuda-12.4-base"])
        .await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["installed"], false);
    assert_eq!(v["size_bytes"], serde_json::Value::Null);

    let out = node.rnx(&["runtime", "info", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("rnx: error: no runtime \"nope\""),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_install_shows_progress_then_one_summary_line() {
    let node = start(Fake::default()).await;
    let out = node
        .rnx(&[
            "runtime",
            "install",
            "python-3.11-ml@1.0",
            "--extra",
            "tensorflow",
            "--rebuild",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("installed python-3.11-ml@1.0 sha256:0123456789ab 5.5 GiB in "),
        "{stdout}"
    );
    // stderr is not a terminal here: a line per change of phase or message.
    assert_eq!(
        text(&out.stderr),
        "[base] debootstrap bookworm\n[python] 1/2 numpy==1.26.4\n[python] 2/2 torch==2.3.1\n[ingest] 100/48213 storing files\n"
    );
    let sent = node.fake.last_install.lock().unwrap().clone().unwrap();
    assert_eq!(
        sent,
        pb::InstallRuntimeRequest {
            name: "python-3.11-ml@1.0".into(),
            extras: vec!["tensorflow".into()],
            rebuild: true,
        }
    );

    let out = node
        .rnx(&["--json", "runtime", "install", "python-3.11-ml"])
        .await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runtime"]["reference"], "python-3.11-ml@1.0");
    assert!(v["elapsed_ms"].is_u64(), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_install_without_its_last_event_is_an_error() {
    let node = start(Fake {
        progress_without_done: true,
        ..Default::default()
    })
    .await;
    let out = node.rnx(&["runtime", "install", "python-3.11-ml"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let e = text(&out.stderr);
    assert!(
        e.ends_with("rnx: error: the node's InstallRuntime answer has no last event with the installed runtime (the stream ended without one); is the daemon the same version as rnx?\n"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_build_sends_the_manifest_directory() {
    let node = start(Fake::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("my-runtime");
    std::fs::create_dir_all(d.join("files")).unwrap();
    std::fs::create_dir_all(d.join(".git")).unwrap();
    std::fs::write(d.join("runtime.yml"), "name: mine\n").unwrap();
    std::fs::write(d.join("files/pip.conf"), "[global]\n").unwrap();
    std::fs::write(d.join(".git/HEAD"), "ref").unwrap();
    // More than tonic's default 4 MiB message.
    let big = vec![7u8; 5 << 20];
    std::fs::write(d.join("wheel.whl"), &big).unwrap();
    let path = d.to_str().unwrap();
    let out = node
        .rnx(&["runtime", "build", path, "--extra=tensorflow"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("installed python-3.11-ml@1.0 sha256:0123456789ab"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).starts_with(&format!("rnx: sending 3 files (5.0 MiB) from {path}\n")),
        "{}",
        text(&out.stderr)
    );
    let sent = node.fake.last_build.lock().unwrap().take().unwrap();
    let mut names: Vec<&str> = sent.files.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["files/pip.conf", "runtime.yml", "wheel.whl"]);
    assert_eq!(sent.files["runtime.yml"], b"name: mine\n");
    assert_eq!(sent.files["wheel.whl"], big);
    assert_eq!(sent.extras, ["tensorflow"]);
    assert!(!sent.rebuild);

    // The manifest file itself names the same directory.
    let manifest = d.join("runtime.yml");
    let out = node
        .rnx(&["runtime", "build", manifest.to_str().unwrap(), "--rebuild"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = node.fake.last_build.lock().unwrap().take().unwrap();
    assert_eq!(sent.files.len(), 3);
    assert!(sent.rebuild);

    // A symlink out of the directory: refused before anything is sent.
    std::os::unix::fs::symlink("/etc/passwd", d.join("files/passwd")).unwrap();
    let out = node.rnx(&["runtime", "build", path]).await;
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(
        e.contains("files/passwd: it is a symlink to /etc/passwd, outside"),
        "{e}"
    );
    assert!(node.fake.last_build.lock().unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_test_follows_the_self_check_and_exits_with_its_code() {
    let node = start(Fake {
        exit_code: Some(7),
        ..Default::default()
    })
    .await;
    let out = node.rnx(&["runtime", "test", "python-3.11-ml@1.0"]).await;
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(out.stdout, expected(pb::LogStream::Stdout));
    let e = text(&out.stderr);
    let first = format!("rnx: self-check of runtime python-3.11-ml@1.0 runs as job {JOB_ID}\n");
    assert!(e.starts_with(&first), "{e}");
    assert!(
        e.ends_with("rnx: self-check of runtime python-3.11-ml@1.0 failed (exit code 7)\n"),
        "{e}"
    );
    // The job's own stderr between the two lines, untouched.
    assert_eq!(
        e[first.len()..].lines().next(),
        Some("warning: slow"),
        "{e}"
    );
    assert_eq!(
        node.fake
            .last_runtime_ref
            .lock()
            .unwrap()
            .clone()
            .unwrap()
            .name,
        "python-3.11-ml@1.0"
    );
    let calls = node.fake.log_calls.lock().unwrap().clone();
    assert_eq!(calls, vec![("GetJobLogs", 0, true)]);

    let node = start(Fake {
        exit_code: Some(0),
        ..Default::default()
    })
    .await;
    let out = node.rnx(&["runtime", "test", "python-3.11-ml"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).ends_with("python-3.11-ml passed\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_calls_as_a_viewer_exit_1_with_the_nodes_message() {
    let node = start(Fake {
        changes_denied: true,
        ..Default::default()
    })
    .await;
    for args in [
        &["runtime", "install", "python-3.11-ml"][..],
        &["runtime", "remove", "python-3.11-ml@1.0"],
        &["volume", "create", "v", "--size=16MB"],
    ] {
        let out = node.rnx(args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!("rnx: error: permission denied: {VIEWER}\n"),
            "{args:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn volume_commands_send_bytes_and_print_what_changed() {
    let node = start(Fake::default()).await;
    let out = node
        .rnx(&["volume", "create", "data-lake", "--size=1GB", "--shared"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "created volume data-lake (filesystem, 1.0 GiB, shared); jobs mount it with --volume=data-lake\n"
    );
    let sent = node
        .fake
        .last_create_volume
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(
        sent,
        pb::CreateVolumeRequest {
            name: "data-lake".into(),
            size_bytes: 1 << 30,
            r#type: "filesystem".into(),
            shared: true,
        }
    );
    let out = node
        .rnx(&[
            "--json",
            "volume",
            "create",
            "scratch",
            "--size=16MB",
            "--type=memory",
        ])
        .await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "memory");
    assert_eq!(v["size_bytes"], 16 << 20);
    assert_eq!(v["mount_path"], "/volumes/scratch");
    let sent = node
        .fake
        .last_create_volume
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(
        (sent.size_bytes, sent.r#type.as_str()),
        (16 << 20, "memory")
    );

    let out = node.rnx(&["volume", "list"]).await;
    let s = text(&out.stdout);
    assert_eq!(
        s,
        "NAME       TYPE        SIZE       USED       OWNER  SHARED  JOBS  STATUS\n\
         data-lake  filesystem  1.0 GiB    120.0 MiB  admin  no      1     mounted\n\
         scratch    memory      512.0 MiB  -          alice  yes     0     not mounted\n"
    );
    let out = node.rnx(&["--json", "volume", "list"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[1]["used_bytes"], serde_json::Value::Null);

    let out = node.rnx(&["volume", "inspect", "data-lake"]).await;
    let s = text(&out.stdout);
    assert!(s.contains("Used: 120.0 MiB (11%)\n"), "{s}");
    assert!(s.contains(&format!("Jobs (1):\n  {JOB_ID}\n")), "{s}");
    let out = node.rnx(&["volume", "inspect", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));

    let out = node.rnx(&["volume", "remove", "data-lake"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("stop it first, or remove with --force"),
        "{}",
        text(&out.stderr)
    );
    let out = node
        .rnx(&["volume", "remove", "data-lake", "--force"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "removed volume data-lake\n");
    let sent = node
        .fake
        .last_remove_volume
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert!(sent.force);

    let out = node.rnx(&["volume", "share", "data-lake"]).await;
    assert_eq!(
        text(&out.stdout),
        "volume data-lake is shared: every caller's jobs may mount it\n"
    );
    assert!(
        node.fake
            .last_set_shared
            .lock()
            .unwrap()
            .clone()
            .unwrap()
            .shared
    );
    let out = node
        .rnx(&["--json", "volume", "unshare", "data-lake"])
        .await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["shared"], false);
    assert!(
        !node
            .fake
            .last_set_shared
            .lock()
            .unwrap()
            .clone()
            .unwrap()
            .shared
    );
}
