//! The daemon's etcd calls: connecting, reading the whole cluster at one
//! revision, and running a leader's plan as one fenced transaction.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, Txn, TxnOp};
use joblet_cluster::keys::Key;
use joblet_cluster::leader::{Op, Plan, Snapshot};
use joblet_cluster::records::{decode, Assignment, RecordError};
use joblet_cluster::Keys;

use crate::config::ClusterConfig;

/// Why a cluster call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("etcd ({endpoints}): {source}")]
    Etcd {
        endpoints: String,
        source: etcd_client::Error,
    },
    #[error("cannot read {path} (cluster.etcd_tls): {source}")]
    TlsFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("etcd's space quota is used up (etcd alarm NOSPACE): the cluster takes no new jobs until an operator compacts and defragments etcd and disarms the alarm (etcdctl alarm disarm); running jobs keep running")]
    NoSpace,
    #[error("this node's certificate for calls to other nodes: {0}")]
    Pki(#[from] joblet_pki::PkiError),
}

/// How a failed etcd call reads to a user.
pub fn etcd_error(endpoints: &[String], e: etcd_client::Error) -> ClusterError {
    if e.to_string().contains("mvcc: database space exceeded") {
        return ClusterError::NoSpace;
    }
    ClusterError::Etcd {
        endpoints: endpoints.join(","),
        source: e,
    }
}

/// Connects to the configured endpoints (TLS per `cluster.etcd_tls`).
pub async fn connect(cfg: &ClusterConfig) -> Result<Client, ClusterError> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
        .with_keep_alive_while_idle(true);
    if let Some(tls) = &cfg.etcd_tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|source| ClusterError::TlsFile {
                path: p.to_owned(),
                source,
            })
        };
        let mut t = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?));
        if let (Some(c), Some(k)) = (&tls.cert, &tls.key) {
            t = t.identity(etcd_client::Identity::from_pem(read(c)?, read(k)?));
        }
        opts = opts.with_tls(t);
    }
    Client::connect(&cfg.etcd, Some(opts))
        .await
        .map_err(|e| etcd_error(&cfg.etcd, e))
}

/// Reads everything under the prefix at one revision.
pub async fn snapshot(
    client: &mut Client,
    keys: &Keys,
    fence: i64,
) -> Result<Snapshot, etcd_client::Error> {
    let resp = client
        .get(
            format!("{}/", keys.prefix()),
            Some(GetOptions::new().with_prefix()),
        )
        .await?;
    let mut s = Snapshot {
        revision: resp.header().map_or(0, |h| h.revision()),
        fence,
        ..Default::default()
    };
    for kv in resp.kvs() {
        let Ok(key) = std::str::from_utf8(kv.key()) else {
            continue;
        };
        let rec = match keys.parse(key) {
            Some(k) => read_key(&mut s, key, k, kv.value(), kv.mod_revision()),
            None => Ok(()),
        };
        if let Err(e) = rec {
            // One bad value must not stop the cluster: it is skipped and said.
            tracing::error!(error = %e, "skipping an unreadable etcd value");
        }
    }
    Ok(s)
}

fn read_key(
    s: &mut Snapshot,
    key: &str,
    k: Key<'_>,
    value: &[u8],
    rev: i64,
) -> Result<(), RecordError> {
    match k {
        Key::Node(_) => s.nodes.push(decode("node record", key, value)?),
        Key::Drain(n) => s.drained.push(n.to_string()),
        Key::Job(_) => s.jobs.push((decode("job entry", key, value)?, rev)),
        Key::Alloc(n) => {
            s.allocs
                .push((n.to_string(), decode("allocation record", key, value)?, rev))
        }
        Key::Assign { node, .. } => {
            let a: Assignment = decode("assignment", key, value)?;
            s.assigns.push((node.to_string(), a.job, a.attempt));
        }
        Key::Report { job, node } => s.reports.push((
            job.to_string(),
            node.to_string(),
            decode("node report", key, value)?,
        )),
        Key::Stop(j) => s.stops.push(j.to_string()),
        Key::Leader => {}
    }
    Ok(())
}

/// Runs `plan` as one transaction, fenced by the leader key `leader_key`'s
/// create revision `fence`: `Some(revision)` when it committed, `None`
/// when a compare failed (nothing was written).
pub async fn commit(
    client: &mut Client,
    plan: &Plan,
    leader_key: &[u8],
    fence: i64,
) -> Result<Option<i64>, etcd_client::Error> {
    let mut compares = Vec::with_capacity(plan.compares.len() + 1);
    compares.push(Compare::create_revision(
        leader_key.to_vec(),
        CompareOp::Equal,
        fence,
    ));
    for c in &plan.compares {
        let joblet_cluster::leader::Compare::ModRevision { key, rev } = c;
        compares.push(Compare::mod_revision(key.as_str(), CompareOp::Equal, *rev));
    }
    let ops: Vec<TxnOp> = plan
        .ops
        .iter()
        .map(|o| match o {
            Op::Put { key, value } => TxnOp::put(key.as_str(), value.clone(), None),
            Op::Delete { key } => TxnOp::delete(key.as_str(), None),
        })
        .collect();
    let resp = client.txn(Txn::new().when(compares).and_then(ops)).await?;
    Ok(resp
        .succeeded()
        .then(|| resp.header().map_or(0, |h| h.revision())))
}

/// Clients of every etcd member, one each, and which one calls go to.
///
/// etcd-client balances one channel over all endpoints, and a request that
/// meets a dead member fails ("tcp connect error") instead of going to a
/// live one; so the daemon keeps a client per member and, when a call
/// fails as if its member were down, moves every later call to the next
/// member ([`EtcdPool::rotate`]).
#[derive(Clone)]
pub struct EtcdPool {
    clients: std::sync::Arc<Vec<Client>>,
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub endpoints: Vec<String>,
}

impl EtcdPool {
    /// Connects (lazily) to each configured endpoint.
    pub async fn connect(cfg: &ClusterConfig) -> Result<EtcdPool, ClusterError> {
        let mut clients = Vec::new();
        for ep in &cfg.etcd {
            let one = ClusterConfig {
                etcd: vec![ep.clone()],
                ..cfg.clone()
            };
            clients.push(connect(&one).await?);
        }
        Ok(EtcdPool {
            clients: std::sync::Arc::new(clients),
            current: Default::default(),
            endpoints: cfg.etcd.clone(),
        })
    }

    /// One client per endpoint in `endpoints` (tests, benchmarks).
    pub async fn with_endpoints(endpoints: &[String]) -> Result<EtcdPool, ClusterError> {
        let cfg = ClusterConfig {
            etcd: endpoints.to_vec(),
            ..ClusterConfig::default()
        };
        EtcdPool::connect(&cfg).await
    }

    /// The client calls go to now.
    pub fn client(&self) -> Client {
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        self.clients[i % self.clients.len()].clone()
    }

    /// The last call failed as if its member were down: later calls go to
    /// the next member.
    pub fn rotate(&self) {
        self.current
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Rotates when `e` looks like an unreachable member or leader.
    pub fn failed(&self, e: &etcd_client::Error) {
        if transient(e) {
            self.rotate();
        }
    }
}

/// An etcd error that another member, or a retry, may not meet.
pub fn transient(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::DeadlineExceeded
        ),
        etcd_client::Error::TransportError(_)
        | etcd_client::Error::IoError(_)
        | etcd_client::Error::LeaseKeepAliveError(_)
        | etcd_client::Error::WatchError(_)
        | etcd_client::Error::ElectError(_) => true,
        _ => false,
    }
}
