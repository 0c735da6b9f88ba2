//! The REST listener's TLS: the node's server certificate; a client
//! certificate is asked for but not required (browsers and scripts use
//! tokens and sessions), and one that does not chain to the node's CA
//! fails the handshake. Handshakes run in tasks of their own, so a slow
//! client cannot stall the others; axum gets the streams through
//! [`RestListener`], each with its peer ([`RestPeer`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use joblet_pki::CertPem;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

use crate::tls::PeerIdentity;

/// Why the REST listener's TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RestTlsError {
    #[error("{what}: {source}")]
    Pem {
        what: &'static str,
        source: rustls_pki_types::pem::Error,
    },
    #[error("{what}: {source}")]
    Rustls {
        what: &'static str,
        source: rustls::Error,
    },
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// TLS 1.2 and 1.3 with the node's server certificate; client
/// certificates optional, checked against `ca_pem` when sent; ALPN
/// `http/1.1`.
pub fn server_config(ca_pem: &str, cert: &CertPem) -> Result<ServerConfig, RestTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let c = c.map_err(|source| RestTlsError::Pem {
            what: "CA certificate",
            source,
        })?;
        roots.add(c).map_err(|source| RestTlsError::Rustls {
            what: "trust anchor from the CA certificate",
            source,
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()?;
    let chain = CertificateDer::pem_slice_iter(cert.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| RestTlsError::Pem {
            what: "server certificate",
            source,
        })?;
    let key =
        PrivateKeyDer::from_pem_slice(cert.key.as_bytes()).map_err(|source| RestTlsError::Pem {
            what: "server private key",
            source,
        })?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| RestTlsError::Rustls {
            what: "server config (TLS 1.2 and 1.3, ring)",
            source,
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|source| RestTlsError::Rustls {
            what: "server config from the server certificate and key",
            source,
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Who is on the other end of a REST connection.
#[derive(Debug, Clone)]
pub struct RestPeer {
    pub addr: SocketAddr,
    /// `None`: no client certificate. `Some(Err)`: a certificate of the
    /// node's CA without a usable name or role.
    pub identity: PeerIdentity,
}

/// Completed TLS connections, for `axum::serve`.
pub struct RestListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, RestPeer)>,
    local: SocketAddr,
}

impl RestListener {
    /// Accepts on `listener` in a task of its own ([`crate::tls::accept_tls`]).
    pub fn start(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(128);
        crate::tls::accept_tls(listener, config, "REST", move |tls, addr, identity| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((tls, RestPeer { addr, identity })).await;
            }
        });
        Ok(RestListener { rx, local })
    }
}

impl axum::serve::Listener for RestListener {
    type Io = TlsStream<TcpStream>;
    type Addr = RestPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task is gone (the runtime is shutting down).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<RestPeer> {
        Ok(RestPeer {
            addr: self.local,
            identity: None,
        })
    }
}

impl Connected<IncomingStream<'_, RestListener>> for RestPeer {
    fn connect_info(stream: IncomingStream<'_, RestListener>) -> RestPeer {
        stream.remote_addr().clone()
    }
}
