//! `rest:`: the HTTPS REST API and the web console, on a listener of their
//! own (docs/observability.md, "REST API").
//!
//! ```yaml
//! rest:
//!   enabled: true              # default
//!   address: "127.0.0.1:8443"  # default; port 0 picks a free port (server.json says which)
//! ```
//!
//! TLS uses the node's server certificate; clients authenticate with an
//! API token, a console session, or a client certificate of the node's CA.

use std::net::SocketAddr;

use serde::Deserialize;

use super::de::de_addr;

/// `rest:`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RestConfig {
    /// Serve the REST API and the console.
    pub enabled: bool,
    /// `host:port` of the HTTPS listener.
    #[serde(deserialize_with = "de_addr")]
    pub address: SocketAddr,
}

impl Default for RestConfig {
    fn default() -> Self {
        RestConfig {
            enabled: true,
            address: SocketAddr::from(([127, 0, 0, 1], 8443)),
        }
    }
}
