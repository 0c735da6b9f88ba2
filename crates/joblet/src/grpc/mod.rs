//! The gRPC API: tonic services that only translate. Each handler takes
//! the caller from its connection ([`caller`]), converts the request into
//! domain values (`joblet_proto`'s conversions), calls the service
//! ([`crate::service`]) and converts the answer back; errors become
//! statuses in one place ([`status`]).

mod exec;
mod gpu_pb;
mod gpus;
mod input;
mod jobs;
mod nodes;
mod runtimes;
pub mod status;
mod tokens;
mod volumes;
mod workflows;

use tonic::Request;

pub use gpus::GpuApi;
pub use jobs::JobApi;
pub use nodes::NodeApi;
pub use runtimes::RuntimeApi;
pub use tokens::TokenApi;
pub use volumes::VolumeApi;
pub use workflows::WorkflowApi;

use crate::service::{ApiError, Caller, IdentityError};
use crate::tls::PeerInfo;

/// The caller of `req`, as its connection's peer was identified (client
/// certificate or local socket, see [`PeerInfo`]).
pub fn caller<T>(req: &Request<T>) -> Result<Caller, ApiError> {
    let peer = req
        .extensions()
        .get::<PeerInfo>()
        .ok_or(IdentityError::NoPeerInfo)?;
    Ok(Caller::from(peer.identity.clone()?))
}
