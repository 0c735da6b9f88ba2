//! `VolumeService`: the node's volumes.

use joblet_proto::{pb, VolumeService};
use tonic::{Request, Response, Status};

use super::caller;
use crate::service::{VolumeInfo, Volumes};

/// The `VolumeService` of one node.
pub struct VolumeApi {
    volumes: Volumes,
}

impl VolumeApi {
    pub fn new(volumes: Volumes) -> VolumeApi {
        VolumeApi { volumes }
    }
}

fn volume_pb(v: VolumeInfo) -> pb::Volume {
    let r = v.state.record;
    pb::Volume {
        name: r.name,
        r#type: r.kind,
        size_bytes: r.size_bytes,
        used_bytes: v.state.usage.map(|u| u.used_bytes),
        owner: r.owner,
        shared: r.shared,
        created_at_unix_ms: r.created_ms,
        jobs: v.jobs,
        status: v.state.status,
    }
}

#[tonic::async_trait]
impl VolumeService for VolumeApi {
    async fn create_volume(
        &self,
        req: Request<pb::CreateVolumeRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let v = self
            .volumes
            .create(&who, &r.name, r.size_bytes, &r.r#type, r.shared)
            .await?;
        Ok(Response::new(volume_pb(v)))
    }

    async fn list_volumes(
        &self,
        req: Request<pb::ListVolumesRequest>,
    ) -> Result<Response<pb::ListVolumesResponse>, Status> {
        let who = caller(&req)?;
        let list = self.volumes.list(&who)?;
        Ok(Response::new(pb::ListVolumesResponse {
            volumes: list.into_iter().map(volume_pb).collect(),
        }))
    }

    async fn get_volume(
        &self,
        req: Request<pb::VolumeRef>,
    ) -> Result<Response<pb::Volume>, Status> {
        let who = caller(&req)?;
        let v = self.volumes.get(&who, &req.get_ref().name)?;
        Ok(Response::new(volume_pb(v)))
    }

    async fn remove_volume(
        &self,
        req: Request<pb::RemoveVolumeRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let who = caller(&req)?;
        let r = req.get_ref();
        let v = self.volumes.remove(&who, &r.name, r.force).await?;
        Ok(Response::new(volume_pb(v)))
    }

    async fn set_volume_shared(
        &self,
        req: Request<pb::SetVolumeSharedRequest>,
    ) -> Result<Response<pb::Volume>, Status> {
        let who = caller(&req)?;
        let r = req.get_ref();
        let v = self.volumes.set_shared(&who, &r.name, r.shared)?;
        Ok(Response::new(volume_pb(v)))
    }
}
