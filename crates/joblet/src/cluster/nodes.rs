//! The cluster's nodes as `rnx node list` shows them, and drain.

use std::collections::{BTreeMap, BTreeSet};

use etcd_client::GetOptions;
use joblet_cluster::keys::Key;
use joblet_cluster::records::{decode, NodeAlloc, NodeRecord};

use super::ClusterNode;
use crate::service::ApiError;

/// One node in `rnx node list`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    pub name: String,
    pub address: String,
    /// `ready`, `drained` or `lost`.
    pub state: &'static str,
    pub leader: bool,
    pub scheduler: bool,
    pub gpus_total: u32,
    pub gpus_free: u32,
    pub jobs: u32,
    pub cpu_millis: u64,
    pub memory_mb: u64,
    pub labels: BTreeMap<String, String>,
    pub started_ms: i64,
    pub gpu_models: Vec<String>,
}

impl ClusterNode {
    /// Every node: registered ones, and those with jobs recorded on them
    /// that are registered no more (`lost`).
    pub async fn nodes(&self) -> Result<Vec<NodeView>, ApiError> {
        let prefix = format!("{}/", self.keys.prefix());
        let all = self
            .retrying(|mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let election = self.keys.election();
        let leader = self
            .retrying(|mut c| {
                let election = election.clone();
                async move {
                    match c.leader(election).await {
                        Ok(r) => Ok(r
                            .kv()
                            .map(|kv| String::from_utf8_lossy(kv.value()).to_string())),
                        // Nobody elected is an error, not an empty answer.
                        Err(e) if e.to_string().contains("no leader") => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await
            .unwrap_or(None);
        let mut records: BTreeMap<String, NodeRecord> = BTreeMap::new();
        let mut allocs: BTreeMap<String, NodeAlloc> = BTreeMap::new();
        let mut drained: BTreeSet<String> = BTreeSet::new();
        for kv in all.kvs() {
            let Ok(key) = std::str::from_utf8(kv.key()) else {
                continue;
            };
            match self.keys.parse(key) {
                Some(Key::Node(n)) => {
                    if let Ok(r) = decode::<NodeRecord>("node record", key, kv.value()) {
                        records.insert(n.to_string(), r);
                    }
                }
                Some(Key::Alloc(n)) => {
                    if let Ok(a) = decode::<NodeAlloc>("allocation record", key, kv.value()) {
                        allocs.insert(n.to_string(), a);
                    }
                }
                Some(Key::Drain(n)) => {
                    drained.insert(n.to_string());
                }
                _ => {}
            }
        }
        let names: BTreeSet<String> = records
            .keys()
            .cloned()
            .chain(
                allocs
                    .iter()
                    .filter(|(_, a)| !a.jobs.is_empty())
                    .map(|(n, _)| n.clone()),
            )
            .collect();
        Ok(names
            .into_iter()
            .map(|name| {
                let alloc = allocs.get(&name).cloned().unwrap_or_default();
                let held: BTreeSet<u32> = alloc
                    .jobs
                    .values()
                    .flat_map(|e| e.units.iter().map(|u| u.0))
                    .collect();
                let mut v = NodeView {
                    state: if !records.contains_key(&name) {
                        "lost"
                    } else if drained.contains(&name) {
                        "drained"
                    } else {
                        "ready"
                    },
                    leader: leader.as_deref() == Some(name.as_str()),
                    jobs: alloc.jobs.len() as u32,
                    ..NodeView::default()
                };
                if let Some(r) = records.get(&name) {
                    v.address = r.address.clone();
                    v.scheduler = r.scheduler;
                    v.gpus_total = r.spec.gpus.len() as u32;
                    v.gpus_free = r
                        .spec
                        .gpus
                        .iter()
                        .filter(|g| !held.contains(&g.index))
                        .count() as u32;
                    v.cpu_millis = r.spec.capacity.cpu_millis.unwrap_or(0);
                    v.memory_mb = r.spec.capacity.memory_mb.unwrap_or(0);
                    v.labels = r.labels.clone();
                    v.started_ms = r.started_at;
                    v.gpu_models = r.gpu_models.clone();
                }
                v.name = name;
                v
            })
            .collect())
    }

    /// Stops (`drain`) or resumes placing new jobs on `name`; its running
    /// jobs keep running.
    pub async fn drain(&self, name: &str, drain: bool) -> Result<NodeView, ApiError> {
        let known = self.nodes().await?;
        if !known.iter().any(|n| n.name == name) {
            let names: Vec<&str> = known.iter().map(|n| n.name.as_str()).collect();
            return Err(ApiError::NotFound(format!(
                "no node {name:?} in the cluster; its nodes are: {} (see `rnx node list`)",
                names.join(", ")
            )));
        }
        let key = self.keys.drain(name);
        self.retrying(|mut c| {
            let key = key.clone();
            async move {
                if drain {
                    c.put(key, "", None).await.map(|_| ())
                } else {
                    c.delete(key, None).await.map(|_| ())
                }
            }
        })
        .await?;
        tracing::info!(node = %name, drain, "node drain changed");
        self.nodes()
            .await?
            .into_iter()
            .find(|n| n.name == name)
            .ok_or_else(|| ApiError::Cluster(format!("node {name} left the cluster meanwhile")))
    }

    /// The leader's counters on this node (zero unless it led).
    pub fn counters(&self) -> &super::LeaderCounters {
        &self.counters
    }
}
