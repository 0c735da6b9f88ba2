//! `joblet server`: start-up order and the serve loop.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use joblet_core::{JobId, NodeCapabilities};
use joblet_store::Store;
use tokio::net::TcpListener;

use crate::api::Api;
use crate::config::Config;
use crate::engine::{Engine, EngineConfig, EngineHandle};
use crate::gpu::api::GpuApi;
use crate::gpu::monitor::EndJobs;
use crate::gpu::simulate::Simulation;
use crate::sandbox::NodeSandbox;
use crate::state_dir::{self, StateDir};
use crate::tls;

/// What this node enforces: the limits its sandbox can apply (none when
/// jobs run unisolated), and uploads either way. Everything else a job asks
/// for is refused with "not supported yet on this node".
pub fn capabilities(sandbox: Option<&NodeSandbox>) -> NodeCapabilities {
    let limits = sandbox.map(NodeSandbox::capabilities).unwrap_or_default();
    NodeCapabilities {
        uploads: true,
        ..limits
    }
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
    let caps = capabilities(sandbox.as_ref());
    let pki = dirs.ensure_pki(&state_dir::server_hosts(
        cfg.server.address,
        &cfg.server.tls_hosts,
    ))?;
    let tls_config = joblet_pki::server_config(pki.ca.cert_pem(), &pki.server)
        .context("building the TLS server configuration")?;

    let store = Arc::new(Store::open(&dirs.db(), &dirs.secrets_key())?);
    let shim_program: PathBuf =
        std::env::current_exe().context("locating the joblet binary to run shims")?;
    let engine = Engine::start(
        store.clone(),
        dirs.clone(),
        EngineConfig {
            max_running: cfg.jobs.max_running,
            stop_grace: cfg.jobs.stop_grace_period,
            shim_program,
            shim_args: vec!["shim".into(), "--job-dir".into()],
            sandbox,
        },
    )?;

    let end_jobs = end_jobs_via(engine.clone());
    let gpus = if cfg.gpu.enabled {
        tracing::info!("GPU discovery and health monitoring on; GPU jobs are still refused as not supported yet");
        let (gpu_cfg, store, end_jobs) = (cfg.gpu.clone(), store.clone(), end_jobs.clone());
        let (shared, monitor) =
            tokio::task::spawn_blocking(move || crate::gpu::start(&gpu_cfg, sim, store, end_jobs))
                .await
                .context("GPU discovery task")??;
        Some((shared, monitor))
    } else {
        None
    };

    let listener = TcpListener::bind(cfg.server.address)
        .await
        .with_context(|| format!("cannot listen on {} (server.address)", cfg.server.address))?;
    let bound = listener.local_addr()?;
    let client_config = dirs.write_client_config(&bound.to_string(), &pki)?;
    dirs.write_server_json(&bound.to_string())?;
    tracing::info!(address = %bound, state_dir = %dirs.root().display(), client_config = %client_config.display(), "joblet listening");
    eprintln!(
        "joblet {} listening on {bound} (mTLS); admin client config: {}",
        env!("CARGO_PKG_VERSION"),
        client_config.display()
    );

    crate::uploads::clean_staging(dirs.root());
    let api = Api {
        allow_host_network: cfg.sandbox.allow_host_network,
        max_upload_bytes: cfg.jobs.max_upload_mb.saturating_mul(1024 * 1024),
        store,
        engine,
        dirs: dirs.clone(),
        caps,
        default_timeout: (!cfg.jobs.default_timeout.is_zero()).then_some(cfg.jobs.default_timeout),
    };
    let gpu_api = GpuApi {
        gpus: gpus.as_ref().map(|(shared, _)| shared.clone()),
        on_end: end_jobs,
    };
    let incoming = tls::incoming(listener, Arc::new(tls_config));
    tonic::transport::Server::builder()
        .add_service(joblet_proto::JobServiceServer::new(api))
        .add_service(joblet_proto::GpuServiceServer::new(gpu_api))
        .serve_with_incoming_shutdown(incoming, shutdown_signal())
        .await
        .context("gRPC server failed")?;
    if let Some((_, monitor)) = gpus {
        tokio::task::spawn_blocking(move || monitor.stop())
            .await
            .ok();
    }
    let _ = std::fs::remove_file(dirs.server_json());
    tracing::info!("joblet stopped; running jobs keep running under their shims");
    Ok(())
}

/// Ends the jobs a GPU failure or a forced offline takes the GPU from:
/// killed at once when the GPU failed, stopped with the grace period when
/// an admin took it offline.
fn end_jobs_via(engine: EngineHandle) -> EndJobs {
    let rt = tokio::runtime::Handle::current();
    Arc::new(move |jobs: Vec<String>, reason: String, failed: bool| {
        for job in jobs {
            let (engine, reason) = (engine.clone(), reason.clone());
            rt.spawn(async move {
                let Ok(id) = JobId::parse(&job) else {
                    tracing::error!(%job, "GPU record names a malformed job id");
                    return;
                };
                tracing::warn!(%job, %reason, failed, "ending job: its GPU left service");
                if let Err(e) = engine.stop(id, None, failed).await {
                    tracing::error!(%job, error = %e, "could not end a job whose GPU left service");
                }
            });
        }
    })
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
