//! `NodeService`: the cluster's nodes (this node alone when it is not in
//! a cluster), drain and undrain.

use std::sync::Arc;

use joblet_proto::pb;
use joblet_proto::pb::node_service_server::NodeService;
use tonic::{Request, Response, Status};

use super::caller;
use crate::cluster::NodeView;
use crate::service::Nodes;

/// The `NodeService` of one node.
pub struct NodeApi {
    nodes: Arc<Nodes>,
}

impl NodeApi {
    pub fn new(nodes: Arc<Nodes>) -> NodeApi {
        NodeApi { nodes }
    }
}

fn node_pb(n: NodeView) -> pb::Node {
    pb::Node {
        name: n.name,
        address: n.address,
        state: n.state.to_string(),
        leader: n.leader,
        scheduler: n.scheduler,
        gpus_total: n.gpus_total,
        gpus_free: n.gpus_free,
        jobs: n.jobs,
        cpu_millis: n.cpu_millis,
        memory_mb: n.memory_mb,
        labels: n.labels.into_iter().collect(),
        started_unix_ms: n.started_ms,
        gpu_models: n.gpu_models,
    }
}

#[tonic::async_trait]
impl NodeService for NodeApi {
    async fn list_nodes(
        &self,
        req: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let list = self.nodes.list(&caller(&req)?).await?;
        Ok(Response::new(pb::ListNodesResponse {
            cluster: list.cluster,
            nodes: list.nodes.into_iter().map(node_pb).collect(),
            answered_by: list.answered_by,
        }))
    }

    async fn drain_node(
        &self,
        req: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::Node>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let node = self.nodes.drain(&who, &r.name, r.drain).await?;
        Ok(Response::new(node_pb(node)))
    }
}
