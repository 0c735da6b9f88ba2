//! Cluster mode (issue 32): more than one node, on etcd.
//!
//! Every node runs `joblet server` with `cluster:` in its config. It
//! registers its inventory under a lease ([`lease`]), runs what the
//! cluster's leader assigns it ([`agent`]) and may campaign to be that
//! leader ([`leader`]); the decisions are `joblet_cluster`'s pure cores.
//! A client may ask any node: job submission, status, list and stop are
//! cluster-wide ([`ops`]), a job's status and log come from the node that
//! runs it ([`peer`]), and `rnx node list` shows every node ([`nodes`]).
//!
//! Etcd holds the small cluster-wide state (see `joblet_cluster::keys`);
//! a job's log, history and runtime data stay in the SQLite store of the
//! node that ran it. Without `cluster:` none of this runs and no etcd is
//! needed.

mod agent;
pub mod etcd;
pub mod leader;
pub mod lease;
mod nodes;
mod ops;
mod peer;

use std::sync::Arc;

pub use etcd::EtcdPool;
use etcd_client::Client;
use joblet_cluster::records::NodeRecord;
use joblet_cluster::Keys;
use joblet_engine::JobRules;
use joblet_sched::model::SchedConfig;
use joblet_store::Store;

pub use etcd::ClusterError;
pub use leader::LeaderCounters;
pub use nodes::NodeView;
pub use peer::CALL_TIMEOUT;

use crate::config::ClusterConfig;
use crate::engine::EngineHandle;

/// This node's part in the cluster, as the service layer uses it.
pub struct ClusterNode {
    pub name: String,
    /// Where this node's API is reached.
    pub address: String,
    keys: Keys,
    etcd: EtcdPool,
    counters: Arc<LeaderCounters>,
    rules: JobRules,
    peers: peer::Peers,
    /// This node's store (a run assigned here is recorded by the agent
    /// a moment after its assignment).
    store: Arc<Store>,
}

/// How long a client's request waits for etcd to be reachable again.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// What starting cluster mode needs from the daemon.
pub struct ClusterStart<'a> {
    pub cfg: &'a ClusterConfig,
    /// The node's inventory as registered.
    pub record: NodeRecord,
    pub engine: EngineHandle,
    pub store: Arc<Store>,
    /// Where the fencing deadline is published for the shims.
    pub fence_file: std::path::PathBuf,
    /// Every GPU's health now (the record is put again when it changes).
    pub health: lease::HealthNow,
    pub rules: JobRules,
    pub sched: SchedConfig,
    /// The cluster CA and this node's admin identity (for calls to other
    /// nodes).
    pub ca_pem: String,
    pub identity: joblet_pki::CertPem,
    /// What the node does as the scheduler leader, counted (`rnx node
    /// list`, and `/metrics`, which starts before the cluster does).
    pub counters: Arc<LeaderCounters>,
}

impl ClusterNode {
    /// Connects to etcd and starts membership, the agent and (with
    /// `cluster.scheduler`) the campaign for leadership.
    pub async fn start(s: ClusterStart<'_>) -> Result<Arc<ClusterNode>, ClusterError> {
        let pool = EtcdPool::connect(s.cfg).await?;
        let keys = Keys::new(&s.cfg.prefix);
        let name = s.record.name.clone();
        let address = s.record.address.clone();
        let scheduler = s.record.scheduler;
        let membership = lease::start(
            pool.clone(),
            keys.clone(),
            s.record,
            s.cfg.lease_ttl,
            s.fence_file,
            s.health,
        );
        let counters = s.counters;
        agent::start(
            pool.clone(),
            keys.clone(),
            name.clone(),
            s.engine.clone(),
            s.store.clone(),
            membership.clone(),
        );
        if scheduler {
            leader::start(
                pool.clone(),
                keys.clone(),
                name.clone(),
                membership.clone(),
                s.sched,
                counters.clone(),
            );
        }
        let peers = peer::Peers::new(&s.ca_pem, &s.identity)?;
        tracing::info!(node = %name, %address, etcd = %s.cfg.etcd.join(","), scheduler, "cluster mode");
        Ok(Arc::new(ClusterNode {
            name,
            address,
            keys,
            etcd: pool,
            counters,
            rules: s.rules,
            peers,
            store: s.store,
        }))
    }

    /// A fresh handle on the etcd client (cheap: it shares the connection).
    fn etcd(&self) -> Client {
        self.etcd.client()
    }

    /// Runs `op` on a fresh client handle, again while etcd cannot be
    /// reached (a member down, an election under way), for up to
    /// [`RETRY_FOR`]. Only for operations that may safely run twice.
    async fn retrying<T, Fut>(
        &self,
        mut op: impl FnMut(Client) -> Fut,
    ) -> Result<T, crate::service::ApiError>
    where
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = std::time::Instant::now() + RETRY_FOR;
        let mut delay = std::time::Duration::from_millis(50);
        loop {
            match op(self.etcd()).await {
                Ok(v) => return Ok(v),
                Err(e) if etcd::transient(&e) && std::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "etcd unreachable; retrying");
                    self.etcd.rotate();
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_millis(500));
                }
                Err(e) => return Err(self.failed(e)),
            }
        }
    }

    /// An etcd failure in the API's terms.
    fn failed(&self, e: etcd_client::Error) -> crate::service::ApiError {
        crate::service::ApiError::Cluster(etcd::etcd_error(&self.etcd.endpoints, e).to_string())
    }
}
