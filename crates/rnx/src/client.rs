//! Connecting to a node: a tonic channel over the daemon's local socket
//! (root on the node) or over TCP + mutual TLS (rustls), with connection
//! and handshake failures explained.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use joblet_proto::{JobServiceClient, ResolvedNode};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// How long to wait for TCP + TLS + HTTP/2 setup.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub type Client = JobServiceClient<Channel>;
pub type GpuClient = joblet_proto::GpuServiceClient<Channel>;
/// Cluster membership: `rnx node list|drain|undrain`.
pub type NodeClient = joblet_proto::pb::node_service_client::NodeServiceClient<Channel>;
/// TokenService: the REST API's tokens and console sign-in links.
pub type TokenClient = joblet_proto::TokenServiceClient<Channel>;
pub type RuntimeClient = joblet_proto::pb::runtime_service_client::RuntimeServiceClient<Channel>;
pub type VolumeClient = joblet_proto::pb::volume_service_client::VolumeServiceClient<Channel>;
pub type WorkflowClient = joblet_proto::WorkflowServiceClient<Channel>;

/// Why there is no connection to the node.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("client config, node {node:?}: its certificates cannot be used: {source}")]
    Pki {
        node: String,
        source: joblet_pki::PkiError,
    },
    #[error(
        "client config, node {node:?}: server_name {name:?} is not a valid DNS name or IP address"
    )]
    ServerName { node: String, name: String },
    #[error("client config, node {node:?}: address {address:?} is not usable: {cause}")]
    Address {
        node: String,
        address: String,
        cause: String,
    },
    #[error("cannot reach joblet at {address}: {cause}. Is the daemon running? (`joblet server --config …`)")]
    Unreachable { address: String, cause: String },
    #[error("TLS handshake with {address} failed: {cause}; check that the config's CA and certificate belong to this node")]
    Tls { address: String, cause: String },
}

impl ConnectError {
    /// True when the config file, not the network, is at fault.
    pub fn is_config_problem(&self) -> bool {
        matches!(
            self,
            ConnectError::Pki { .. }
                | ConnectError::ServerName { .. }
                | ConnectError::Address { .. }
        )
    }
}

/// The connector's own failures, so they can be told apart after tonic and
/// hyper have wrapped them.
#[derive(Debug, thiserror::Error)]
enum DialError {
    #[error("{0}")]
    Tcp(#[source] std::io::Error),
    #[error("{0}")]
    Tls(#[source] std::io::Error),
}

/// Connects to `node` and returns a client. The channel reconnects by itself
/// on later calls if the connection drops.
pub async fn connect(node: &ResolvedNode) -> Result<Client, ConnectError> {
    Ok(JobServiceClient::new(connect_channel(node).await?))
}

/// A connection to a node and what it runs over.
pub struct Connection {
    pub channel: Channel,
    /// `unix:PATH` for the node's local socket, else its `host:port`.
    pub endpoint: String,
}

/// Connects to `node` through its local socket when the config names one
/// and it accepts us (root on the node itself: no TCP, no TLS), else over
/// mutual TLS.
pub async fn connect_node(node: &ResolvedNode) -> Result<Connection, ConnectError> {
    if let Some(path) = &node.socket {
        match connect_local(path).await {
            Ok(channel) => {
                return Ok(Connection {
                    channel,
                    endpoint: format!("unix:{}", path.display()),
                })
            }
            Err(e) => {
                tracing::debug!(socket = %path.display(), error = %e, "local socket not usable; using TLS")
            }
        }
    }
    Ok(Connection {
        channel: connect_channel(node).await?,
        endpoint: node.address.clone(),
    })
}

/// A channel over the daemon's local socket (`socket:` in the admin config).
async fn connect_local(path: &std::path::Path) -> Result<Channel, tonic::transport::Error> {
    let path = path.to_owned();
    let dial = tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move {
            let stream = tokio::net::UnixStream::connect(&path).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    Endpoint::from_static("http://localhost")
        .connect_timeout(CONNECT_TIMEOUT)
        .connect_with_connector(dial)
        .await
}

/// Connects to `node` over mutual TLS and returns the channel every
/// service's client shares.
pub async fn connect_channel(node: &ResolvedNode) -> Result<Channel, ConnectError> {
    let cert = joblet_pki::CertPem {
        cert: node.cert_pem.clone(),
        key: node.key_pem.clone(),
    };
    let tls =
        joblet_pki::client_config(&node.ca_pem, &cert).map_err(|source| ConnectError::Pki {
            node: node.name.clone(),
            source,
        })?;
    let server_name =
        ServerName::try_from(node.server_name.clone()).map_err(|_| ConnectError::ServerName {
            node: node.name.clone(),
            name: node.server_name.clone(),
        })?;
    let endpoint = Endpoint::from_shared(format!("http://{}", node.address))
        .map_err(|e| ConnectError::Address {
            node: node.name.clone(),
            address: node.address.clone(),
            cause: e.to_string(),
        })?
        .connect_timeout(CONNECT_TIMEOUT);

    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let address = node.address.clone();
    let dial = tower::service_fn(move |_: Uri| {
        let connector = connector.clone();
        let address = address.clone();
        let server_name = server_name.clone();
        async move {
            let tcp = TcpStream::connect(&address).await.map_err(DialError::Tcp)?;
            // Small gRPC frames should not wait for Nagle.
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
            let tls = connector
                .connect(server_name, tcp)
                .await
                .map_err(DialError::Tls)?;
            Ok::<_, DialError>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    tracing::debug!(address = %node.address, server_name = %node.server_name, "connecting");
    let channel = endpoint
        .connect_with_connector(dial)
        .await
        .map_err(|e| explain(&node.address, &e))?;
    Ok(channel)
}

/// Turns a transport failure (from connecting or from a call) into the
/// matching explanation.
pub fn explain(address: &str, err: &(dyn StdError + 'static)) -> ConnectError {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    let mut last = err.to_string();
    while let Some(e) = current {
        if let Some(dial) = e.downcast_ref::<DialError>() {
            return match dial {
                DialError::Tcp(io) => ConnectError::Unreachable {
                    address: address.to_owned(),
                    cause: io.to_string(),
                },
                DialError::Tls(io) => ConnectError::Tls {
                    address: address.to_owned(),
                    cause: io.to_string(),
                },
            };
        }
        if let Some(cause) = tls_failure(e) {
            return ConnectError::Tls {
                address: address.to_owned(),
                cause,
            };
        }
        last = e.to_string();
        current = e.source();
    }
    ConnectError::Unreachable {
        address: address.to_owned(),
        cause: last,
    }
}

/// A TLS failure: a rustls error, directly or inside an `io::Error` (where
/// tokio-rustls puts it, and where `source()` does not reach), or the text
/// tokio-rustls leaves when the peer's alert arrives after the handshake
/// (TLS 1.3 servers reject a client certificate that way).
fn tls_failure(e: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls.to_string());
    }
    let io = e.downcast_ref::<std::io::Error>()?;
    let inner = io.get_ref()?;
    if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
        return Some(tls.to_string());
    }
    let text = inner.to_string();
    (io.kind() == std::io::ErrorKind::InvalidData && text.starts_with("received fatal alert"))
        .then_some(text)
}

/// Whether a failed call's status came from the transport (the connection
/// broke or could not be made) rather than from the node's answer; the
/// connection error is returned if so.
pub fn transport_failure(address: &str, status: &tonic::Status) -> Option<ConnectError> {
    let source = status.source()?;
    let mut current: Option<&(dyn StdError + 'static)> = Some(source);
    while let Some(e) = current {
        let transport = e.is::<DialError>()
            || e.is::<tonic::transport::Error>()
            || e.is::<std::io::Error>()
            || tls_failure(e).is_some();
        if transport {
            return Some(explain(address, source));
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dial_errors_are_found_under_wrappers() {
        #[derive(Debug, thiserror::Error)]
        #[error("transport error")]
        struct Wrapper(#[source] DialError);

        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = explain("h:1", &Wrapper(DialError::Tcp(refused)));
        let text = e.to_string();
        assert!(
            text.starts_with("cannot reach joblet at h:1: refused. Is the daemon running?"),
            "{text}"
        );

        let bad = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = explain("h:1", &bad);
        assert!(matches!(e, ConnectError::Tls { .. }), "{e}");
        assert!(e.to_string().contains("belong to this node"), "{e}");
    }

    #[test]
    fn only_transport_statuses_are_connection_problems() {
        let mut status = tonic::Status::unknown("error reading a body from connection");
        status.set_source(std::sync::Arc::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )));
        let e = transport_failure("h:1", &status).unwrap();
        assert!(matches!(e, ConnectError::Unreachable { .. }), "{e}");

        let mut decode = tonic::Status::internal("failed to decode Protobuf message");
        decode.set_source(std::sync::Arc::new(std::fmt::Error));
        assert!(transport_failure("h:1", &decode).is_none());
        assert!(transport_failure("h:1", &tonic::Status::not_found("no job")).is_none());
    }
}
