//! The `/metrics` listener: its own TCP socket (`metrics.address`), plain
//! HTTP or, with `metrics.tls`, HTTPS with the node's server certificate
//! (TLS 1.2/1.3, no client certificate: Prometheus checks the server
//! against the node's CA). Served by axum; each scrape is collected and
//! encoded on the blocking pool, so a scrape never holds up the async
//! runtime the gRPC API and the engine run on.
//!
//! [`bind`] runs early in start-up, so a node whose metrics port is taken
//! or wrong does not start; [`MetricsListener::serve`] starts answering
//! once the daemon's services exist.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::prometheus_text;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::Exporter;
use crate::config::MetricsConfig;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot listen on {address} (metrics.address): {source}; set metrics.address to a free IP:PORT (port 0 picks one) or metrics.enabled: false")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("metrics.tls: the node's server certificate: {0}")]
    Certificate(String),
}

/// A bound, not yet serving, metrics listener.
pub struct MetricsListener {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    address: SocketAddr,
}

impl std::fmt::Debug for MetricsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsListener")
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Binds `metrics.address` (and prepares TLS from the node's server
/// certificate `cert_pem`/`key_pem` when `metrics.tls`).
pub async fn bind(
    cfg: &MetricsConfig,
    cert_pem: &str,
    key_pem: &str,
) -> Result<MetricsListener, MetricsError> {
    let tls = if cfg.tls {
        Some(TlsAcceptor::from(Arc::new(tls_config(cert_pem, key_pem)?)))
    } else {
        None
    };
    let bind_err = |source| MetricsError::Bind {
        address: cfg.address,
        source,
    };
    let listener = TcpListener::bind(cfg.address).await.map_err(bind_err)?;
    let address = listener.local_addr().map_err(bind_err)?;
    Ok(MetricsListener {
        listener,
        tls,
        address,
    })
}

/// Server-side TLS with the node's certificate, no client certificates.
fn tls_config(cert_pem: &str, key_pem: &str) -> Result<rustls::ServerConfig, MetricsError> {
    let bad = |e: &dyn std::fmt::Display| MetricsError::Certificate(e.to_string());
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| bad(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl MetricsListener {
    /// The address bound (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Whether it serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves `/metrics` until the process ends.
    pub fn serve(self, exporter: Arc<Exporter>) -> tokio::task::JoinHandle<()> {
        let app = router(exporter);
        let address = self.address;
        tokio::spawn(async move {
            let served = match self.tls {
                None => axum::serve(self.listener, app).await,
                Some(tls) => axum::serve(TlsListener::start(self.listener, tls), app).await,
            };
            if let Err(e) = served {
                tracing::error!(%address, error = %e, "the metrics listener stopped");
            }
        })
    }
}

/// `/metrics` and nothing else.
pub fn router(exporter: Arc<Exporter>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(exporter)
}

async fn scrape(State(exporter): State<Arc<Exporter>>) -> impl IntoResponse {
    match tokio::task::spawn_blocking(move || exporter.scrape()).await {
        Ok(Ok(body)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
            body,
        ),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "metrics: encoding failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "encoding the metrics failed\n".to_owned(),
            )
        }
        Err(e) => {
            tracing::error!(error = %e, "metrics: the scrape task failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the scrape failed\n".to_owned(),
            )
        }
    }
}

/// Accepted TLS connections: handshakes run in their own tasks (a slow
/// client cannot stall others), failed ones are logged and dropped.
struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    address: SocketAddr,
}

impl TlsListener {
    fn start(listener: TcpListener, tls: TlsAcceptor) -> TlsListener {
        let (tx, ready) = mpsc::channel(64);
        let address = listener.local_addr().unwrap_or(([0, 0, 0, 0], 0).into());
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "metrics: TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "metrics: TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, address }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task ends only with the runtime.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.address)
    }
}
