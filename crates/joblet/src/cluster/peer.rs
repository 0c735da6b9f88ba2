//! Calls to other nodes' APIs (a job's status and log from the node that
//! runs it, a node's GPUs): mutual TLS with this node's admin certificate,
//! which the cluster's one CA signed. The caller's role was checked by
//! the node it asked; the node it asks sees this node's identity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use joblet_pki::CertPem;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// How long a unary call to another node may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Connections to other nodes, by address.
pub struct Peers {
    tls: Arc<rustls::ClientConfig>,
    channels: Mutex<HashMap<String, Channel>>,
}

/// Why another node could not be reached.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach node {node} at {address}: {cause}")]
pub struct PeerError {
    pub node: String,
    pub address: String,
    pub cause: String,
}

impl Peers {
    pub fn new(ca_pem: &str, identity: &CertPem) -> Result<Peers, joblet_pki::PkiError> {
        Ok(Peers {
            tls: Arc::new(joblet_pki::client_config(ca_pem, identity)?),
            channels: Mutex::new(HashMap::new()),
        })
    }

    /// A channel to `address` (connected lazily, kept for reuse).
    pub fn channel(&self, node: &str, address: &str) -> Result<Channel, PeerError> {
        if let Some(c) = self.channels.lock().expect("peers lock").get(address) {
            return Ok(c.clone());
        }
        let err = |cause: String| PeerError {
            node: node.to_string(),
            address: address.to_string(),
            cause,
        };
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| err(e.to_string()))?
            .connect_timeout(Duration::from_secs(3))
            // A node cut off mid-call must not hang its callers: the
            // connection is found dead within seconds.
            .http2_keep_alive_interval(Duration::from_secs(2))
            .keep_alive_timeout(Duration::from_secs(3))
            .keep_alive_while_idle(true);
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let addr = address.to_string();
        let dial = tower::service_fn(move |_: Uri| {
            let connector = connector.clone();
            let addr = addr.clone();
            async move {
                let tcp = TcpStream::connect(&addr).await?;
                let _ = tcp.set_nodelay(true);
                // Every node's server certificate names localhost.
                let name = rustls_pki_types::ServerName::try_from("localhost")
                    .expect("a valid name")
                    .to_owned();
                let tls = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
            }
        });
        let channel = endpoint.connect_with_connector_lazy(dial);
        self.channels
            .lock()
            .expect("peers lock")
            .insert(address.to_string(), channel.clone());
        Ok(channel)
    }
}
