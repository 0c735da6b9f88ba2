//! The nodes: in cluster mode every node of the cluster (from etcd), on a
//! single node that node alone; and drain / undrain (cluster mode only).

use std::sync::Arc;

use super::{Access, ApiError, Caller, Gpus};
use crate::cluster::{ClusterNode, NodeView};

/// `ListNodes`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeList {
    pub cluster: bool,
    pub nodes: Vec<NodeView>,
    pub answered_by: String,
}

/// The node operations.
pub struct Nodes {
    cluster: Option<Arc<ClusterNode>>,
    gpus: Gpus,
    /// This node alone, as a single node describes itself.
    name: String,
    address: String,
}

impl Nodes {
    pub fn new(
        cluster: Option<Arc<ClusterNode>>,
        gpus: Gpus,
        name: String,
        address: String,
    ) -> Nodes {
        Nodes {
            cluster,
            gpus,
            name,
            address,
        }
    }

    pub async fn list(&self, caller: &Caller) -> Result<NodeList, ApiError> {
        caller.check(Access::Read)?;
        if let Some(c) = &self.cluster {
            return Ok(NodeList {
                cluster: true,
                nodes: c.nodes().await?,
                answered_by: c.name.clone(),
            });
        }
        let mut me = NodeView {
            name: self.name.clone(),
            address: self.address.clone(),
            state: "ready",
            ..NodeView::default()
        };
        // GPUs off: none to count.
        if let Ok(s) = self.gpus.status(caller) {
            me.gpus_total = s.inventory.gpus.len() as u32;
            me.gpu_models = s.inventory.gpus.iter().map(|g| g.name.clone()).collect();
            let busy = s.states.values().filter(|e| !e.jobs.is_empty()).count() as u32;
            me.gpus_free = me.gpus_total.saturating_sub(busy);
        }
        Ok(NodeList {
            cluster: false,
            nodes: vec![me],
            answered_by: self.name.clone(),
        })
    }

    pub async fn drain(
        &self,
        caller: &Caller,
        name: &str,
        drain: bool,
    ) -> Result<NodeView, ApiError> {
        caller.check(Access::Admin("drain nodes"))?;
        match &self.cluster {
            Some(c) => c.drain(name, drain).await,
            None => Err(ApiError::NotAllowed {
                what: "drain and undrain (a cluster's operations)",
                setting: "cluster mode (cluster.etcd)",
            }),
        }
    }

    /// The node `node` names, when it is another node of the cluster:
    /// where its API is. `None`: this node (or no cluster).
    pub async fn other(
        &self,
        node: &str,
    ) -> Result<Option<(String, tonic::transport::Channel)>, ApiError> {
        match &self.cluster {
            Some(c) if !node.is_empty() && node != c.name => {
                Ok(Some((node.to_string(), c.peer(node).await?)))
            }
            Some(_) => Ok(None),
            None if node.is_empty() || node == self.name => Ok(None),
            None => Err(ApiError::NotFound(format!(
                "no node {node:?}: this node ({}) is not in a cluster",
                self.name
            ))),
        }
    }
}
