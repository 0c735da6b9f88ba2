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
pub mod convert;
mod error;

pub use client_file::{ClientConfigFile, ClientFileError, NodeEntry, ResolvedNode};
pub use convert::audit::{audit_record_from_pb, audit_record_to_pb};
pub use convert::gpu::{
    admin_action_from_pb, admin_action_to_pb, gpu_event_from_pb, gpu_event_to_pb,
};
pub use convert::job::{job_from_pb, job_gpus_from_pb, job_gpus_to_pb, job_to_pb};
pub use convert::logs::{log_event_from_pb, log_event_to_pb};
pub use convert::request::{job_request_from_pb, job_request_to_pb, upload_from_pb, upload_to_pb};
pub use convert::state::{
    state_from_pb, state_to_pb, states_from_pb, states_to_pb, transition_from_pb, transition_to_pb,
};
pub use error::ApiError;
pub use pb::gpu_service_client::GpuServiceClient;
pub use pb::gpu_service_server::{GpuService, GpuServiceServer};
pub use pb::job_service_client::JobServiceClient;
pub use pb::job_service_server::{JobService, JobServiceServer};
