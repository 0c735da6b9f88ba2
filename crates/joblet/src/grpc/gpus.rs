//! `GpuService`: the node's GPUs.

use joblet_proto::{pb, GpuService};
use tonic::{Request, Response, Status};

use super::caller;
use super::gpu_pb::{gpu_pb, status_pb};
use crate::service::{Gpus, Nodes};

/// The `GpuService` of one node.
pub struct GpuApi {
    gpus: Gpus,
    /// Where another node of the cluster is (`GpuStatusRequest.node`).
    nodes: std::sync::Arc<Nodes>,
}

impl GpuApi {
    pub fn new(gpus: Gpus, nodes: std::sync::Arc<Nodes>) -> GpuApi {
        GpuApi { gpus, nodes }
    }
}

#[tonic::async_trait]
impl GpuService for GpuApi {
    async fn get_gpu_status(
        &self,
        req: Request<pb::GpuStatusRequest>,
    ) -> Result<Response<pb::GpuStatusResponse>, Status> {
        let who = caller(&req)?;
        let node = req.get_ref().node.clone();
        // Another node's GPUs: asked of it (its answer names it).
        if let Some((name, channel)) = self.nodes.other(&node).await? {
            who.check(crate::service::Access::Read)?;
            let mut c = joblet_proto::GpuServiceClient::new(channel);
            let call = c.get_gpu_status(pb::GpuStatusRequest {
                node: String::new(),
            });
            let mut r = tokio::time::timeout(crate::cluster::CALL_TIMEOUT, call)
                .await
                .map_err(|_| {
                    Status::unavailable(format!(
                        "node {name} did not answer within {:?} (down or cut off?)",
                        crate::cluster::CALL_TIMEOUT
                    ))
                })??
                .into_inner();
            r.node = name;
            return Ok(Response::new(r));
        }
        let status = self.gpus.status(&who)?;
        let mut r = status_pb(&status);
        r.node = node;
        Ok(Response::new(r))
    }

    async fn get_gpu_health(
        &self,
        req: Request<pb::GpuRef>,
    ) -> Result<Response<pb::GpuHealth>, Status> {
        let who = caller(&req)?;
        let health = self.gpus.health(&who, &req.get_ref().gpu_id)?;
        Ok(Response::new(pb::GpuHealth {
            gpu: Some(gpu_pb(&health.gpu.info, health.gpu.entry.as_ref())),
            history: health
                .history
                .iter()
                .map(joblet_proto::gpu_event_to_pb)
                .collect(),
        }))
    }

    async fn set_gpu_state(
        &self,
        req: Request<pb::SetGpuStateRequest>,
    ) -> Result<Response<pb::Gpu>, Status> {
        let who = caller(&req)?;
        let r = req.get_ref();
        let action = joblet_proto::admin_action_from_pb(r.action, r.force);
        let gpu = self.gpus.set_state(&who, &r.gpu_id, action)?;
        Ok(Response::new(gpu_pb(&gpu.info, gpu.entry.as_ref())))
    }
}
