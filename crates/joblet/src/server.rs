//! `joblet server`: start-up order and the serve loop.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use joblet_core::NodeCapabilities;
use joblet_engine::JobRules;
use joblet_gpu::exec::SharingMode;
use joblet_store::Store;
use tokio::net::TcpListener;

use crate::agent::{AgentConfig, LocalAgent, NodeAgent};
use crate::config::Config;
use crate::engine::{Engine, EngineConfig};
use crate::gpu::allocation::NodeGpus;
use crate::gpu::node_spec::sched_config;
use crate::gpu::simulate::Simulation;
use crate::grpc::{GpuApi, JobApi, NodeApi, RuntimeApi, TokenApi, VolumeApi, WorkflowApi};
use crate::node_facts::NodeFacts;
use crate::sandbox::NodeSandbox;
use crate::service::{
    Admission, Audit, Gpus, Jobs, LogWatch, Nodes, Runtimes, Tokens, Volumes, Workflows,
};
use crate::state_dir::{self, StateDir};
use crate::storage::{NodeRuntimes, NodeStorage, NodeVolumes};
use crate::tls;
use crate::workflow::WorkflowHandle;

/// What this node enforces: the limits its sandbox can apply (none when
/// jobs run unisolated), GPUs when GPU jobs are on (they need the sandbox's
/// device control), runtimes and volumes when the node has its storage for
/// them (they are mounts in the sandbox), and uploads either way.
/// Everything else a job asks for is refused with "not supported yet on
/// this node".
pub fn capabilities(
    sandbox: Option<&NodeSandbox>,
    gpu_jobs: bool,
    storage: bool,
) -> NodeCapabilities {
    let limits = sandbox.map(NodeSandbox::capabilities).unwrap_or_default();
    NodeCapabilities {
        uploads: true,
        gpus: gpu_jobs && sandbox.is_some(),
        runtimes: storage && sandbox.is_some(),
        volumes: storage && sandbox.is_some(),
        ..limits
    }
}

/// The largest BuildRuntime request: rnx sends at most 64 MiB of files,
/// plus their framing.
const RUNTIME_BUILD_MESSAGE_BYTES: usize = 80 * 1024 * 1024;

/// The node's runtimes and volumes, when jobs run in the sandbox (they
/// are mounts in it); volumes are attached again first.
async fn open_storage(
    cfg: &Config,
    sandbox: Option<&NodeSandbox>,
    store: &Arc<Store>,
    driver_cuda: Option<(u32, u32)>,
) -> anyhow::Result<Option<Arc<NodeStorage>>> {
    let Some(sb) = sandbox else {
        return Ok(None);
    };
    let dir = cfg.runtimes_dir();
    let runtimes = NodeRuntimes::open(dir.clone())
        .with_context(|| format!("opening the runtime store {} (runtimes.dir)", dir.display()))?;
    let volumes = NodeVolumes::new(cfg.volumes_dir(), sb.uid, sb.gid, store.clone());
    let storage = Arc::new(NodeStorage {
        runtimes,
        volumes,
        gate: tokio::sync::RwLock::new(()),
        driver_cuda,
    });
    let attaching = storage.clone();
    tokio::task::spawn_blocking(move || attaching.volumes.attach_all())
        .await
        .context("volume attach task")?;
    Ok(Some(storage))
}

/// Runs the daemon. `sim`: simulated GPUs prepared by `main` before any
/// thread started (see [`crate::gpu::simulate::prepare`]).
pub async fn run(cfg: Config, sim: Option<Simulation>) -> anyhow::Result<()> {
    let dirs = StateDir::new(&cfg.server.state_dir);
    let _lock = dirs.create_and_lock()?;
    let sandbox = if cfg.sandbox.enabled {
        let sb = NodeSandbox::prepare(&cfg)?;
        tracing::info!(uid = sb.uid, gid = sb.gid, mounts = ?sb.ro_mounts, support = ?sb.support, "jobs run in the sandbox");
        Some(sb)
    } else {
        tracing::warn!("sandbox.enabled is false: jobs run unisolated as children of their shims");
        None
    };
    let cgroup_base = sandbox.as_ref().map(|sb| sb.cgroup_base.clone());
    let pki = dirs.ensure_pki(&state_dir::server_hosts(
        cfg.server.address,
        &cfg.server.tls_hosts,
    ))?;
    let tls_config = joblet_pki::server_config(pki.ca.cert_pem(), &pki.server)
        .context("building the TLS server configuration")?;
    // Bound early: a node whose metrics listener cannot bind does not start.
    let metrics = if cfg.metrics.enabled {
        let (cert, key) = (&pki.server.cert, &pki.server.key);
        Some(crate::metrics::bind(&cfg.metrics, cert, key).await?)
    } else {
        None
    };
    // The REST API and web console: bound early as well, served once the
    // services exist.
    let rest_listener =
        match cfg.rest.enabled {
            true => Some(TcpListener::bind(cfg.rest.address).await.with_context(|| {
                format!("cannot listen on {} (rest.address)", cfg.rest.address)
            })?),
            false => None,
        };
    let rest_bound = rest_listener
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()?;

    let store = Arc::new(Store::open(&dirs.db(), &dirs.secrets_key())?);
    let shim_program = locate_shim()?;

    // GPUs first: the engine's recovery needs the allocation ledger and
    // the pool.
    let gpus = if cfg.gpu.enabled {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (gpu_cfg, store) = (cfg.gpu.clone(), store.clone());
        let (shared, monitor) = tokio::task::spawn_blocking(move || {
            crate::gpu::start(&gpu_cfg, sim, store, cgroup_base, tx)
        })
        .await
        .context("GPU discovery task")??;
        Some((shared, monitor, rx))
    } else {
        None
    };
    let (job_gpus, gpus) = match gpus {
        Some((shared, monitor, rx)) => {
            let jobs = if sandbox.is_some() {
                let (gpus, specs) = NodeGpus::new(shared.clone(), &cfg.gpu).context("GPU jobs")?;
                tracing::info!(sharing = ?gpus.settings.sharing, policy = ?cfg.gpu.policy, "GPU jobs on");
                Some((gpus, specs, rx))
            } else {
                tracing::warn!("gpu.enabled but sandbox.enabled is false: GPUs are monitored, but GPU jobs are refused (their devices could not be isolated)");
                None
            };
            (jobs, Some((shared, monitor)))
        }
        None => (None, None),
    };
    let driver_cuda = job_gpus
        .as_ref()
        .and_then(|(g, _, _)| g.settings.driver_max);
    let storage = open_storage(&cfg, sandbox.as_ref(), &store, driver_cuda).await?;
    let caps = capabilities(sandbox.as_ref(), job_gpus.is_some(), storage.is_some());
    let rules = JobRules {
        gpu_sharing: cfg.gpu.sharing != SharingMode::Exclusive,
        default_gpu_time: (!cfg.gpu.default_gpu_time.is_zero()).then_some(cfg.gpu.default_gpu_time),
        gpu_memory_mb: job_gpus
            .as_ref()
            .and_then(|(_, specs, _)| specs.iter().map(|g| g.memory_mb).min()),
    };
    let rules_for_cluster = rules.clone();
    let capacity = crate::agent::capacity::detect(
        Path::new("/proc"),
        cfg.jobs.max_running,
        cfg.jobs.cpu_capacity,
    );
    tracing::info!(cpu_millis = ?capacity.cpu_millis, memory_mb = ?capacity.memory_mb, max_jobs = ?capacity.max_jobs, "node capacity for jobs");
    let facts = NodeFacts::detect(Path::new("/sys"));
    tracing::info!(job_cpus = ?facts.job_cpus().map(|c| joblet_core::parse::format_cpu_list(&c)), arg_max = ?facts.arg_max, max_arg_strlen = ?facts.max_arg_strlen, "what admission checks jobs against");
    let executors = {
        let host_driver = gpus.as_ref().and_then(|(shared, _)| {
            let node = shared.lock();
            node.inventory.driver_version.clone()
        });
        let (exec_cfg, has_sandbox, gpu_jobs) =
            (cfg.executors.clone(), sandbox.is_some(), job_gpus.is_some());
        let prepared = tokio::task::spawn_blocking(move || {
            crate::executor::NodeExecutors::for_node(&exec_cfg, has_sandbox, gpu_jobs, host_driver)
        })
        .await
        .context("executor probe task")??;
        Arc::new(prepared)
    };
    // Execs into jobs start the same shim binary (`sandbox-exec`).
    let exec_setup = sandbox.as_ref().map(|sb| crate::service::ExecSetup {
        shim: shim_program.clone(),
        sandbox: sb.clone(),
    });
    let agent = LocalAgent::new(AgentConfig {
        dirs: dirs.clone(),
        shim_program,
        shim_args: vec!["--job-dir".into()],
        warm_pool: (
            warm_pool(cfg.sandbox.warm_pool, sandbox.is_some()),
            warm_pool(cfg.gpu.warm_pool, sandbox.is_some()),
        ),
        sandbox,
        gpus: job_gpus,
        capacity,
        work_retention: (!cfg.jobs.work_retention.is_zero()).then_some(cfg.jobs.work_retention),
        mounts: storage
            .clone()
            .map(|s| s as Arc<dyn crate::agent::mounts::NodeMounts>),
        executors: executors.clone(),
    });
    let max_gpus_per_node = u32::try_from(agent.node().gpus.len()).unwrap_or(u32::MAX);
    let node_spec = agent.node();
    let gpu_models: Vec<String> = gpus
        .as_ref()
        .map(|(shared, _)| {
            let node = shared.lock();
            node.inventory.gpus.iter().map(|g| g.name.clone()).collect()
        })
        .unwrap_or_default();
    let sched = sched_config(&cfg.gpu);
    let engine = Engine::start(
        store.clone(),
        dirs.clone(),
        EngineConfig {
            sched: sched.clone(),
            stop_grace: cfg.jobs.stop_grace_period,
            rules,
            state_reserve_mb: cfg.jobs.state_reserve_mb,
            min_free_disk_mb: cfg.jobs.min_free_disk_mb,
        },
        agent,
    )
    .await
    .context("recovering jobs from the store")?;

    let listener = TcpListener::bind(cfg.server.address)
        .await
        .with_context(|| format!("cannot listen on {} (server.address)", cfg.server.address))?;
    let bound = listener.local_addr()?;
    // Root on this host skips TCP and TLS through the local socket; without
    // it (a path too long for a socket, say) everything goes through TLS.
    // Bound before the client config and `server.json` are written, so
    // whoever waits for those finds it in place (mode 0600).
    let socket = dirs.socket();
    let local = match crate::local::bind(&socket) {
        Ok(l) => {
            tracing::info!(socket = %socket.display(), "local socket for root");
            Some(l)
        }
        Err(e) => {
            tracing::warn!(socket = %socket.display(), error = %e, "no local socket: rnx on this host uses TLS");
            None
        }
    };
    // Made before the metrics listener starts; the cluster, which joins
    // later, counts into them.
    let leader_counters = cfg
        .cluster
        .enabled()
        .then(|| Arc::new(crate::cluster::LeaderCounters::default()));
    let metrics = metrics.map(|listener| {
        let gpus = gpus.as_ref().map(|(shared, _)| shared.clone());
        crate::metrics::start(listener, &cfg, store.clone(), gpus, leader_counters.clone())
    });
    let client_config = dirs.write_client_config(&bound.to_string(), &pki, local.is_some())?;
    dirs.write_server_json(&state_dir::Listeners {
        grpc: bound.to_string(),
        metrics,
        rest: rest_bound.map(|a| a.to_string()),
    })?;
    tracing::info!(address = %bound, state_dir = %dirs.root().display(), client_config = %client_config.display(), "joblet listening");
    eprintln!(
        "joblet {} listening on {bound} (mTLS); admin client config: {}",
        env!("CARGO_PKG_VERSION"),
        client_config.display()
    );

    crate::uploads::clean_staging(dirs.root());
    let cluster = if cfg.cluster.enabled() {
        let address = if cfg.cluster.advertise.is_empty() {
            bound.to_string()
        } else {
            cfg.cluster.advertise.clone()
        };
        let record = joblet_cluster::NodeRecord {
            name: cfg.cluster.name(),
            address,
            spec: node_spec,
            health: Vec::new(),
            labels: cfg.cluster.labels.clone(),
            scheduler: cfg.cluster.scheduler,
            gpu_models,
            started_at: crate::clock::now_ms(),
        };
        let node = crate::cluster::ClusterNode::start(crate::cluster::ClusterStart {
            cfg: &cfg.cluster,
            record,
            engine: engine.clone(),
            store: store.clone(),
            fence_file: dirs.cluster_fence(),
            health: {
                let shared = gpus.as_ref().map(|(shared, _)| shared.clone());
                std::sync::Arc::new(move || {
                    shared
                        .as_ref()
                        .map(crate::gpu::allocation::health_now)
                        .unwrap_or_default()
                })
            },
            rules: rules_for_cluster.clone(),
            sched,
            ca_pem: pki.ca.cert_pem().to_owned(),
            identity: pki.admin.clone(),
            counters: leader_counters.clone().unwrap_or_default(),
        })
        .await
        .context("joining the cluster (cluster.etcd)")?;
        Some(node)
    } else {
        None
    };
    let stopping = engine.clone();
    // What runs jobs on this node (admission resolves each job's executor).
    let executor_catalog = executors.catalog.clone();
    let jobs = Arc::new(
        Jobs::new(
            store.clone(),
            engine,
            dirs.clone(),
            Admission::new(&cfg, caps, facts, executor_catalog),
            storage.clone(),
            cluster.clone(),
        )
        .with_exec(exec_setup)
        .with_log_watch(LogWatch::start()),
    );
    // After the engine's recovery: the driver hears of jobs' ends from it.
    let driver = WorkflowHandle::start(
        store.clone(),
        jobs.clone(),
        dirs.clone(),
        cfg.sandbox.enabled,
    )
    .await;
    // The REST API calls the same services, made from the same parts.
    let rest_services = (
        Workflows::new(
            store.clone(),
            jobs.clone(),
            storage.clone(),
            driver.clone(),
            max_gpus_per_node,
            cfg.workflows.shared_volume_mb,
            crate::clock::now_ms,
        ),
        Runtimes::new(storage.clone(), store.clone(), jobs.clone()),
        Volumes::new(
            storage.clone(),
            store.clone(),
            jobs.clone(),
            crate::clock::now_ms,
        ),
        jobs.clone(),
        store.clone(),
    );
    let token_api = TokenApi::new(Tokens::new(store.clone(), crate::clock::now_ms), rest_bound);
    let workflow_api = WorkflowApi::new(Workflows::new(
        store.clone(),
        jobs.clone(),
        storage.clone(),
        driver,
        max_gpus_per_node,
        cfg.workflows.shared_volume_mb,
        crate::clock::now_ms,
    ));
    let runtime_api = RuntimeApi::new(Runtimes::new(storage.clone(), store.clone(), jobs.clone()));
    let volume_api = VolumeApi::new(Volumes::new(
        storage,
        store.clone(),
        jobs.clone(),
        crate::clock::now_ms,
    ));
    let api = JobApi::new(jobs, Audit::new(store));
    let shared_gpus = gpus.as_ref().map(|(shared, _)| shared.clone());
    let nodes = Arc::new(Nodes::new(
        cluster.clone(),
        Gpus::new(shared_gpus.clone(), crate::clock::now_ms),
        cluster
            .as_ref()
            .map_or_else(|| cfg.cluster.name(), |c| c.name.clone()),
        cluster
            .as_ref()
            .map_or_else(|| bound.to_string(), |c| c.address.clone()),
    ));
    let gpu_api = GpuApi::new(Gpus::new(shared_gpus, crate::clock::now_ms), nodes.clone());
    let rest = match rest_listener {
        Some(listener) => {
            let (workflows, runtimes, volumes, jobs, store) = rest_services;
            let state = Arc::new(crate::rest::RestServices {
                jobs,
                audit: Audit::new(store.clone()),
                gpus: Gpus::new(
                    gpus.as_ref().map(|(shared, _)| shared.clone()),
                    crate::clock::now_ms,
                ),
                runtimes,
                volumes,
                workflows,
                nodes: nodes.clone(),
                tokens: Tokens::new(store.clone(), crate::clock::now_ms),
                history: crate::service::History::new(
                    store,
                    gpus.as_ref().map(|(shared, _)| shared.clone()),
                    crate::clock::now_ms,
                ),
            });
            let tls = crate::rest::tls::server_config(pki.ca.cert_pem(), &pki.server)
                .context("building the REST API's TLS configuration")?;
            let router = crate::rest::router(state);
            tracing::info!(address = ?rest_bound, "REST API and web console listening (HTTPS)");
            Some(tokio::spawn(async move {
                if let Err(e) = crate::rest::serve(listener, Arc::new(tls), router).await {
                    tracing::error!(error = %e, "the REST API stopped serving");
                }
            }))
        }
        None => None,
    };
    let node_api = NodeApi::new(nodes);
    let incoming = tls::incoming(listener, Arc::new(tls_config));
    let local = local.map(crate::local::incoming);
    let incoming = tokio_stream::StreamExt::merge(
        incoming,
        futures::StreamExt::flatten(futures::stream::iter(local)),
    );
    tonic::transport::Server::builder()
        .add_service(joblet_proto::JobServiceServer::new(api))
        .add_service(joblet_proto::GpuServiceServer::new(gpu_api))
        .add_service(joblet_proto::pb::node_service_server::NodeServiceServer::new(node_api))
        // BuildRuntime carries a manifest directory (rnx caps it at 64 MiB).
        .add_service(
            joblet_proto::RuntimeServiceServer::new(runtime_api)
                .max_decoding_message_size(RUNTIME_BUILD_MESSAGE_BYTES),
        )
        .add_service(joblet_proto::VolumeServiceServer::new(volume_api))
        .add_service(joblet_proto::WorkflowServiceServer::new(workflow_api))
        .add_service(joblet_proto::TokenServiceServer::new(token_api))
        .serve_with_incoming_shutdown(incoming, shutdown_signal())
        .await
        .context("gRPC server failed")?;
    if let Some(rest) = rest {
        rest.abort();
    }
    stopping.shutdown().await;
    if let Some((_, monitor)) = gpus {
        tokio::task::spawn_blocking(move || monitor.stop())
            .await
            .ok();
    }
    let _ = std::fs::remove_file(dirs.server_json());
    let _ = std::fs::remove_file(dirs.socket());
    tracing::info!("joblet stopped; running jobs keep running under their shims");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}

/// The `joblet-shim` binary next to this one (`cargo build` and `cargo
/// install` put them side by side), checked to be this version: the
/// daemon and its shims share the spec format.
fn locate_shim() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the joblet binary")?;
    let shim = exe.with_file_name("joblet-shim");
    let hint = "joblet starts every job through the joblet-shim binary, which must sit next to it: install both from the same build (`cargo build --release` puts them side by side in target/release; or `cargo install --path crates/joblet` and `cargo install --path crates/joblet-sandbox --bin joblet-shim` into one directory)";
    let out = std::process::Command::new(&shim)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {} --version; {hint}", shim.display()))?;
    let want = format!("joblet-shim {}", env!("CARGO_PKG_VERSION"));
    let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || got != want {
        anyhow::bail!("{} says {got:?}, expected {want:?}; {hint}", shim.display());
    }
    Ok(shim)
}

/// `sandbox.warm_pool`, or none where the kernel cannot start a job in a
/// warm sandbox (before Linux 5.2, without `open_tree`): jobs then start
/// in fresh sandboxes.
fn warm_pool(configured: usize, sandboxed: bool) -> usize {
    if configured > 0 && sandboxed && !joblet_sandbox::init::warm_start_supported() {
        tracing::warn!(
            configured,
            "this kernel has no open_tree (Linux 5.2): warm sandboxes are off, every job starts in a fresh one"
        );
        return 0;
    }
    configured
}
