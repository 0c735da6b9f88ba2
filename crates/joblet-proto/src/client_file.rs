//! `rnx-config.yml`: how a client finds and authenticates to joblet nodes.
//!
//! The daemon writes one for its `admin` identity on first start; `joblet
//! cert issue` writes one per new identity; `rnx` reads it. PEM material is
//! either inline (`ca`, `cert`, `key`) or in files (`ca_file`, …, relative
//! paths resolved against the config file's directory).
//!
//! ```yaml
//! version: "1"
//! default_node: default
//! nodes:
//!   default:
//!     address: "127.0.0.1:50051"
//!     socket: /var/lib/joblet/joblet.sock   # admin config only: root on the node skips TLS
//!     server_name: localhost
//!     ca: |
//!       -----BEGIN CERTIFICATE-----
//!       …
//!     cert: |
//!       …
//!     key: |
//!       …
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "rnx-config.yml";
pub const VERSION: &str = "1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfigFile {
    pub version: String,
    /// Node used when `rnx --node` is not given; defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_node: Option<String>,
    pub nodes: BTreeMap<String, NodeEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// `host:port` of the joblet daemon.
    pub address: String,
    /// The daemon's local socket (`<state_dir>/joblet.sock`), in the admin
    /// config the daemon writes: on the node itself, as root, `rnx` talks
    /// to the daemon through it without TCP or TLS; elsewhere it uses
    /// `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// Name to verify in the server certificate; defaults to the host of `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
}

/// A node entry with its PEM material loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedNode {
    pub name: String,
    pub address: String,
    /// [`NodeEntry::socket`].
    pub socket: Option<PathBuf>,
    pub server_name: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientFileError {
    #[error("cannot read client config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("client config {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("client config {path}: version {found:?} is not supported; expected \"{VERSION}\"")]
    Version { path: PathBuf, found: String },
    #[error("client config {path}: no node named {name:?}; known nodes: {known}")]
    NoSuchNode {
        path: PathBuf,
        name: String,
        known: String,
    },
    #[error("client config {path}: nodes.{node}: give `{field}` (inline PEM) or `{field}_file` (a path), not both and not neither")]
    Pem {
        path: PathBuf,
        node: String,
        field: &'static str,
    },
    #[error("client config {path}: nodes.{node}.{field}: cannot read {file}: {source}")]
    PemFile {
        path: PathBuf,
        node: String,
        field: &'static str,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("client config {path}: nodes.{node}.address {address:?} is not host:port")]
    Address {
        path: PathBuf,
        node: String,
        address: String,
    },
}

impl ClientConfigFile {
    /// A one-node config with inline PEM.
    pub fn single(
        node: &str,
        address: &str,
        server_name: &str,
        ca: &str,
        cert: &str,
        key: &str,
    ) -> Self {
        let entry = NodeEntry {
            address: address.to_owned(),
            socket: None,
            server_name: Some(server_name.to_owned()),
            ca: Some(ca.to_owned()),
            cert: Some(cert.to_owned()),
            key: Some(key.to_owned()),
            ca_file: None,
            cert_file: None,
            key_file: None,
        };
        ClientConfigFile {
            version: VERSION.to_owned(),
            default_node: None,
            nodes: BTreeMap::from([(node.to_owned(), entry)]),
        }
    }

    pub fn to_yaml(&self) -> String {
        let body = serde_norway::to_string(self).unwrap_or_default();
        format!("# Joblet client configuration: use with `rnx --config <this file>` or copy to ~/.rnx/rnx-config.yml\n{body}")
    }

    pub fn load(path: &Path) -> Result<Self, ClientFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ClientFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: ClientConfigFile =
            serde_norway::from_str(&text).map_err(|e| ClientFileError::Parse {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        if file.version != VERSION {
            return Err(ClientFileError::Version {
                path: path.to_owned(),
                found: file.version,
            });
        }
        Ok(file)
    }

    /// Picks `name` (or `default_node`, or `default`) and loads its PEM material.
    pub fn resolve(
        &self,
        path: &Path,
        name: Option<&str>,
    ) -> Result<ResolvedNode, ClientFileError> {
        let name = name.or(self.default_node.as_deref()).unwrap_or("default");
        let entry = self
            .nodes
            .get(name)
            .ok_or_else(|| ClientFileError::NoSuchNode {
                path: path.to_owned(),
                name: name.to_owned(),
                known: self.nodes.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
        let host = split_host(&entry.address).ok_or_else(|| ClientFileError::Address {
            path: path.to_owned(),
            node: name.to_owned(),
            address: entry.address.clone(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let pem = |field: &'static str,
                   inline: &Option<String>,
                   file: &Option<PathBuf>|
         -> Result<String, ClientFileError> {
            match (inline, file) {
                (Some(text), None) => Ok(text.clone()),
                (None, Some(f)) => {
                    let full = base.join(f);
                    std::fs::read_to_string(&full).map_err(|source| ClientFileError::PemFile {
                        path: path.to_owned(),
                        node: name.to_owned(),
                        field,
                        file: full,
                        source,
                    })
                }
                _ => Err(ClientFileError::Pem {
                    path: path.to_owned(),
                    node: name.to_owned(),
                    field,
                }),
            }
        };
        Ok(ResolvedNode {
            name: name.to_owned(),
            address: entry.address.clone(),
            socket: entry.socket.clone(),
            server_name: entry.server_name.clone().unwrap_or_else(|| host.to_owned()),
            ca_pem: pem("ca", &entry.ca, &entry.ca_file)?,
            cert_pem: pem("cert", &entry.cert, &entry.cert_file)?,
            key_pem: pem("key", &entry.key, &entry.key_file)?,
        })
    }
}

/// The host part of `host:port` or `[v6]:port`.
fn split_host(address: &str) -> Option<&str> {
    let (host, port) = address.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let file = ClientConfigFile::single(
            "default",
            "127.0.0.1:50051",
            "localhost",
            "CA",
            "CERT",
            "KEY",
        );
        std::fs::write(&path, file.to_yaml()).unwrap();
        let back = ClientConfigFile::load(&path).unwrap();
        assert_eq!(back, file);
        let node = back.resolve(&path, None).unwrap();
        assert_eq!(
            (node.server_name.as_str(), node.ca_pem.as_str()),
            ("localhost", "CA")
        );
        assert!(matches!(
            back.resolve(&path, Some("gpu1")),
            Err(ClientFileError::NoSuchNode { .. })
        ));
    }

    #[test]
    fn pem_files_relative_to_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), "CAFILE").unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(
            &path,
            "version: \"1\"\nnodes:\n  default:\n    address: \"[::1]:7\"\n    ca_file: ca.crt\n    cert: C\n    key: K\n",
        )
        .unwrap();
        let node = ClientConfigFile::load(&path)
            .unwrap()
            .resolve(&path, None)
            .unwrap();
        assert_eq!(
            (node.ca_pem.as_str(), node.server_name.as_str()),
            ("CAFILE", "::1")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "version: \"1\"\nnodes: {}\nextra: 1\n").unwrap();
        let e = ClientConfigFile::load(&path).unwrap_err().to_string();
        assert!(e.contains("extra"), "{e}");
        std::fs::write(&path, "version: \"1\"\nnodes:\n  default:\n    address: nope\n    ca: A\n    cert: B\n    key: C\n").unwrap();
        let e = ClientConfigFile::load(&path)
            .unwrap()
            .resolve(&path, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("host:port"), "{e}");
    }
}
