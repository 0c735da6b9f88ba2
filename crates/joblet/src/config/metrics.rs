//! `metrics:`: the Prometheus `/metrics` listener.
//!
//! ```yaml
//! metrics:
//!   enabled: true              # default
//!   address: "127.0.0.1:9400"  # dcgm-exporter's port; loopback by default
//!   tls: false                 # true: HTTPS with the node's server certificate
//! ```
//!
//! The listener is the daemon's own (not the gRPC port). A node whose
//! metrics listener cannot bind does not start.

use std::net::SocketAddr;

use serde::Deserialize;

use super::de::de_addr;

/// `metrics:`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics`. Off: no listener at all.
    pub enabled: bool,
    /// `host:port` of the listener; port 0 picks a free port (written to
    /// `server.json` as `metrics`).
    #[serde(deserialize_with = "de_addr")]
    pub address: SocketAddr,
    /// Serve HTTPS with the node's server certificate (`pki/server.crt`,
    /// signed by the node's CA); Prometheus verifies it with `ca.crt`.
    pub tls: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            address: SocketAddr::from(([127, 0, 0, 1], 9400)),
            tls: false,
        }
    }
}
