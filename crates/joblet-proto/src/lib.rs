//! Joblet's gRPC API (`proto/joblet.proto`): the generated tonic/prost types,
//! conversions between them and [`joblet_core`] types, and [`ApiError`], the
//! one mapping from what can go wrong in a handler to a gRPC status, and
//! [`client_file`], the `rnx-config.yml` format daemon and clients share.
//!
//! Depends only on the core; the daemon and `rnx` both use it.

#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("joblet.v1");
}

pub mod client_file;
mod convert;
mod error;

pub use client_file::{ClientConfigFile, ClientFileError, NodeEntry, ResolvedNode};
pub use convert::{job_request_from_pb, state_from_pb, state_to_pb, upload_from_pb, upload_to_pb};
pub use error::ApiError;
pub use pb::gpu_service_client::GpuServiceClient;
pub use pb::gpu_service_server::{GpuService, GpuServiceServer};
pub use pb::job_service_client::JobServiceClient;
pub use pb::job_service_server::{JobService, JobServiceServer};
