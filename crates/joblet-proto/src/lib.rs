//! Joblet's gRPC API (`proto/joblet.proto`): the generated tonic/prost types
//! ([`pb`]), the conversions between them and the domain types of
//! [`joblet_core`] ([`convert`]), and [`client_file`], the `rnx-config.yml`
//! format daemon and clients share.
//!
//! Depends only on the core (not on the store: `rnx` uses this crate and
//! must not pull in SQLite); the daemon and `rnx` both use it. What an
//! operation can fail with, and how that becomes a gRPC status, is the
//! daemon's.

#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("joblet.v1");
}

pub mod client_file;
pub mod convert;

pub use client_file::{ClientConfigFile, ClientFileError, NodeEntry, ResolvedNode};
pub use convert::audit::{audit_record_from_pb, audit_record_to_pb};
pub use convert::executor::{executor_from_pb, executor_to_pb};
pub use convert::gpu::{
    admin_action_from_pb, admin_action_to_pb, gpu_event_from_pb, gpu_event_to_pb,
};
pub use convert::job::{job_from_pb, job_gpus_from_pb, job_gpus_to_pb, job_to_pb};
pub use convert::logs::{log_event_from_pb, log_event_to_pb};
pub use convert::request::{job_request_from_pb, job_request_to_pb, upload_from_pb, upload_to_pb};
pub use convert::state::{
    state_from_pb, state_to_pb, states_from_pb, states_to_pb, transition_from_pb, transition_to_pb,
};
pub use pb::gpu_service_client::GpuServiceClient;
pub use pb::gpu_service_server::{GpuService, GpuServiceServer};
pub use pb::job_service_client::JobServiceClient;
pub use pb::job_service_server::{JobService, JobServiceServer};
pub use pb::runtime_service_client::RuntimeServiceClient;
pub use pb::runtime_service_server::{RuntimeService, RuntimeServiceServer};
pub use pb::token_service_client::TokenServiceClient;
pub use pb::token_service_server::{TokenService, TokenServiceServer};
pub use pb::volume_service_client::VolumeServiceClient;
pub use pb::volume_service_server::{VolumeService, VolumeServiceServer};
pub use pb::workflow_service_client::WorkflowServiceClient;
pub use pb::workflow_service_server::{WorkflowService, WorkflowServiceServer};
