//! The `GpuService` handlers: read the shared GPU state, or hand an admin
//! command to the pool and persist what it decided.

use joblet_core::gpu::AdminAction;
use joblet_proto::{pb, ApiError};
use tonic::{Request, Response, Status};

use super::view::{gpu_pb, resolve_gpu, status_pb};
use super::SharedGpus;
use crate::api::{caller, require_admin};
use crate::clock::now_ms;
use crate::store_error;

/// History lines `GetGpuHealth` returns.
const HISTORY: u32 = 50;

pub struct GpuApi {
    /// `None` when the node runs with `gpu.enabled: false`.
    pub gpus: Option<SharedGpus>,
}

impl GpuApi {
    fn gpus(&self) -> Result<&SharedGpus, ApiError> {
        self.gpus.as_ref().ok_or(ApiError::GpusDisabled)
    }
}

#[tonic::async_trait]
impl joblet_proto::GpuService for GpuApi {
    async fn get_gpu_status(
        &self,
        req: Request<pb::GpuStatusRequest>,
    ) -> Result<Response<pb::GpuStatusResponse>, Status> {
        caller(&req)?;
        let gpus = self.gpus()?;
        let node = gpus.lock();
        Ok(Response::new(status_pb(&node)))
    }

    async fn get_gpu_health(
        &self,
        req: Request<pb::GpuRef>,
    ) -> Result<Response<pb::GpuHealth>, Status> {
        caller(&req)?;
        let gpus = self.gpus()?;
        let (gpu, uuid) = {
            let node = gpus.lock();
            let uuid = resolve_gpu(&node, &req.get_ref().gpu_id).map_err(ApiError::GpuRef)?;
            let info = node
                .inventory
                .gpus
                .iter()
                .find(|g| g.uuid == uuid)
                .ok_or_else(|| ApiError::GpuRef(format!("GPU {uuid} vanished")))?;
            (gpu_pb(info, node.pool.get(&uuid)), uuid)
        };
        let history = gpus
            .store()
            .gpu_history(&uuid, HISTORY)
            .map_err(store_error)?
            .into_iter()
            .map(|h| pb::GpuEvent {
                at_unix_ms: h.at_ms,
                kind: h.kind,
                from_state: h.from.map(|s| s.as_str().to_string()).unwrap_or_default(),
                to_state: h.to.map(|s| s.as_str().to_string()).unwrap_or_default(),
                message: h.message,
            })
            .collect();
        Ok(Response::new(pb::GpuHealth {
            gpu: Some(gpu),
            history,
        }))
    }

    async fn set_gpu_state(
        &self,
        req: Request<pb::SetGpuStateRequest>,
    ) -> Result<Response<pb::Gpu>, Status> {
        let who = require_admin(&req, "change GPU states")?;
        let gpus = self.gpus()?;
        let r = req.get_ref();
        let action = match pb::GpuAction::try_from(r.action) {
            Ok(pb::GpuAction::Drain) => AdminAction::Drain,
            Ok(pb::GpuAction::Offline) => AdminAction::Offline { force: r.force },
            Ok(pb::GpuAction::Online) => AdminAction::Online,
            _ => {
                return Err(ApiError::InvalidField(joblet_core::FieldError::new(
                    "action",
                    format!(
                        "invalid value {}: expected GPU_ACTION_DRAIN, GPU_ACTION_OFFLINE or GPU_ACTION_ONLINE",
                        r.action
                    ),
                ))
                .into())
            }
        };
        let now = now_ms();
        let reply = {
            let mut node = gpus.lock();
            let uuid = resolve_gpu(&node, &r.gpu_id).map_err(ApiError::GpuRef)?;
            let updates = node
                .pool
                .admin(&uuid, action, &who.name, now)
                .map_err(ApiError::from)?;
            gpus.commit(&node, &updates, now);
            let info = node
                .inventory
                .gpus
                .iter()
                .find(|g| g.uuid == uuid)
                .ok_or_else(|| ApiError::GpuRef(format!("GPU {uuid} vanished")))?;
            gpu_pb(info, node.pool.get(&uuid))
        };
        Ok(Response::new(reply))
    }
}
