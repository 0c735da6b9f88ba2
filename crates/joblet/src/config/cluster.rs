//! `cluster:`: cluster mode. Absent (or `etcd: []`): a single node with its
//! own SQLite store and no etcd; that stays the default.
//!
//! ```yaml
//! cluster:
//!   etcd: ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
//!   node_name: gpu-07          # default: the host name
//!   advertise: "10.0.0.17:50051" # where clients and other nodes reach this node
//!   scheduler: true            # may lead the cluster's scheduler
//!   lease_ttl: 5s              # a node silent this long is lost
//!   labels: { rack: r3 }
//!   etcd_tls: { ca: /etc/joblet/etcd-ca.crt, cert: /etc/joblet/etcd.crt, key: /etc/joblet/etcd.key }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::de::de_duration;

/// `cluster:`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// etcd's client endpoints (`http://host:port`, or `https://` with
    /// `etcd_tls`); empty = no cluster.
    pub etcd: Vec<String>,
    /// This node's name, unique in the cluster; empty = the host name.
    pub node_name: String,
    /// `host:port` where clients and other nodes reach this node's API;
    /// empty = `server.address` (which must then not be 0.0.0.0).
    pub advertise: String,
    /// This node may lead the cluster's scheduler (it campaigns).
    pub scheduler: bool,
    /// The etcd key prefix everything of this cluster lives under.
    pub prefix: String,
    /// The node's etcd lease: a node whose keep-alives stop this long is
    /// lost, its jobs placed again elsewhere (per their restart policy);
    /// a node cut off from etcd kills its jobs before then.
    #[serde(deserialize_with = "de_duration")]
    pub lease_ttl: Duration,
    /// Free-form labels shown by `rnx node list`.
    pub labels: BTreeMap<String, String>,
    /// TLS to etcd (needed for `https://` endpoints).
    pub etcd_tls: Option<EtcdTls>,
}

/// `cluster.etcd_tls`: the CA that signed etcd's server certificate, and
/// this node's client certificate when etcd asks for one
/// (`--client-cert-auth`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EtcdTls {
    pub ca: PathBuf,
    #[serde(default)]
    pub cert: Option<PathBuf>,
    #[serde(default)]
    pub key: Option<PathBuf>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            etcd: Vec::new(),
            node_name: String::new(),
            advertise: String::new(),
            scheduler: true,
            prefix: "/joblet".into(),
            lease_ttl: Duration::from_secs(5),
            labels: BTreeMap::new(),
            etcd_tls: None,
        }
    }
}

impl ClusterConfig {
    /// Cluster mode is on.
    pub fn enabled(&self) -> bool {
        !self.etcd.is_empty()
    }

    /// The values serde cannot check by type: (dotted key, message).
    pub(super) fn check(&self, listen: std::net::SocketAddr) -> Result<(), (String, String)> {
        if !self.enabled() {
            return Ok(());
        }
        let bad = |key: &str, msg: String| Err((format!("cluster.{key}"), msg));
        for (i, e) in self.etcd.iter().enumerate() {
            let rest = e
                .strip_prefix("http://")
                .or_else(|| e.strip_prefix("https://"));
            let ok = rest.is_some_and(|r| {
                r.rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0))
            });
            if !ok {
                return bad(
                    &format!("etcd[{i}]"),
                    format!("{e:?} is not an etcd endpoint; expected http://HOST:PORT or https://HOST:PORT, e.g. http://10.0.0.1:2379"),
                );
            }
            if e.starts_with("https://") && self.etcd_tls.is_none() {
                return bad(
                    &format!("etcd[{i}]"),
                    format!("{e:?} is https but cluster.etcd_tls is not set; give etcd_tls.ca (and cert/key if etcd checks client certificates)"),
                );
            }
        }
        if !self.node_name.is_empty() && !valid_name(&self.node_name) {
            return bad(
                "node_name",
                format!("{:?} is not a node name; expected 1 to 63 of a-z, 0-9, '-' and '.', starting with a letter or digit", self.node_name),
            );
        }
        if self.advertise.is_empty() {
            if listen.ip().is_unspecified() {
                return bad(
                    "advertise",
                    format!("server.address is {listen}, which other nodes cannot dial; set cluster.advertise to this node's HOST:PORT"),
                );
            }
        } else if self
            .advertise
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return bad(
                "advertise",
                format!(
                    "{:?} is not HOST:PORT; expected e.g. 10.0.0.7:50051",
                    self.advertise
                ),
            );
        }
        if !self.prefix.starts_with('/') || self.prefix.len() < 2 || self.prefix.ends_with('/') {
            return bad(
                "prefix",
                format!("{:?} is not a key prefix; expected a path like /joblet (leading slash, no trailing one)", self.prefix),
            );
        }
        if self.lease_ttl < Duration::from_secs(2) || self.lease_ttl > Duration::from_secs(60) {
            return bad(
                "lease_ttl",
                format!("{} is out of range; expected 2s to 60s (etcd's shortest lease is about 2s; longer means slower recovery when a node is lost)", humantime::format_duration(self.lease_ttl)),
            );
        }
        if let Some(tls) = &self.etcd_tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return bad(
                    "etcd_tls",
                    "cert and key go together: give both (a client certificate) or neither".into(),
                );
            }
        }
        Ok(())
    }

    /// The node's name: `node_name`, or the host name.
    pub fn name(&self) -> String {
        if !self.node_name.is_empty() {
            return self.node_name.clone();
        }
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .map(|h| h.to_ascii_lowercase())
            .unwrap_or_else(|| "node".into())
    }
}

/// A DNS-label-like node name.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}
