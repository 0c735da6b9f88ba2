//! What a service call can fail with ([`ApiError`]), and the store's errors
//! in those terms ([`store_error`]). Transports map it to their own status
//! (gRPC: `crate::grpc::status`).

use joblet_core::id::PrefixError;
use joblet_core::{FieldError, JobState, TransitionError, Unsupported};
use joblet_store::StoreError;

use super::caller::IdentityError;
use crate::gpu::resolve::GpuRefError;
use crate::uploads::UploadError;

/// Everything a service call can fail with, each case carrying what the
/// user needs to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A request field has a bad value.
    #[error("{0}")]
    InvalidField(#[from] FieldError),
    /// A valid request this node cannot enforce.
    #[error("{0}")]
    Unsupported(#[from] Unsupported),
    /// A job id or prefix that names no job, or more than one.
    #[error("{0}")]
    JobRef(#[from] PrefixError),
    /// The request's API token, sign-in code or session is missing, malformed,
    /// unknown, revoked or expired.
    #[error("{0}")]
    Unauthenticated(#[from] super::tokens::CredentialError),
    /// The caller's role does not allow the call.
    #[error("{name} has role {role:?}, which may not {action}; ask an admin for an admin certificate (`joblet cert issue --role admin`)")]
    PermissionDenied {
        name: String,
        role: String,
        action: &'static str,
    },
    /// The caller could not be identified: its client certificate lacks
    /// what Joblet needs, or a local-socket peer is not root.
    #[error("client certificate rejected: {0}")]
    BadIdentity(#[from] IdentityError),
    /// A valid request this node's configuration does not allow.
    #[error(
        "{what} are not allowed on this node; an admin can enable {setting} in joblet-config.yml"
    )]
    NotAllowed {
        what: &'static str,
        setting: &'static str,
    },
    /// The job is in a state where the call makes no sense.
    #[error("job {id} is {state}: {hint}")]
    WrongState {
        id: String,
        state: JobState,
        hint: &'static str,
    },
    /// A state change the state machine refuses (a daemon bug if it happens).
    #[error("job {id}: {source}")]
    Transition { id: String, source: TransitionError },
    /// GPU calls on a node that runs without GPU support.
    #[error("GPU support is off on this node (gpu.enabled: false); an admin can turn it on in joblet-config.yml and restart joblet")]
    GpusDisabled,
    /// A GPU request this node cannot serve (seed 001's "No GPUs
    /// available", "Insufficient GPU memory", "CUDA libraries not
    /// accessible"), with the reason and what to do.
    #[error("{0}")]
    GpuRequest(String),
    /// A GPU id that names no GPU, or more than one.
    #[error("{0}")]
    GpuRef(#[from] GpuRefError),
    /// An admin command the GPU's state does not allow.
    #[error("{0}")]
    GpuAdmin(#[from] joblet_core::gpu::AdminError),
    /// The node's state disk has no room for another job.
    #[error(transparent)]
    DiskFull(#[from] crate::disk::DiskFull),
    /// A runtime or volume that does not exist here; the text says how to
    /// see what does, or make it.
    #[error("{0}")]
    NotFound(String),
    /// A runtime or volume that exists already.
    #[error("{0}")]
    AlreadyExists(String),
    /// A runtime or volume that jobs use, or that belongs to someone
    /// else: the text names them and what to do.
    #[error("{0}")]
    InUse(String),
    /// The node could not carry the request out (a build, a loop device,
    /// mkfs); nothing was left half-done, and the text says why.
    #[error("{0}")]
    NodeCannot(String),
    /// A workflow file that is not acceptable: the text names the file,
    /// line and column and the accepted form.
    #[error("{0}")]
    InvalidWorkflow(String),
    /// A workflow in a state where the call makes no sense.
    #[error("workflow {id} is {state}: {hint}")]
    WorkflowState {
        id: String,
        state: String,
        hint: &'static str,
    },
    /// Cluster mode: etcd or another node could not serve the request
    /// (unreachable, its quota used up); the text says which and what to do.
    #[error("{0}")]
    Cluster(String),
    /// The daemon is shutting down or restarting.
    #[error("the joblet daemon is shutting down; retry in a moment")]
    ShuttingDown,
    /// Storage or process failure on the node, with what failed.
    #[error("internal error on the node: {0}")]
    Internal(String),
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> ApiError {
        match e {
            UploadError::Invalid(f) => ApiError::InvalidField(f),
            io @ UploadError::Io { .. } => ApiError::Internal(io.to_string()),
        }
    }
}

/// The store's errors in API terms: bad or unknown ids are the caller's
/// problem, everything else is the node's.
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::JobRef(p) => ApiError::JobRef(p),
        StoreError::NotFound(id) => ApiError::JobRef(PrefixError::NotFound(id.to_string())),
        StoreError::NotFinished { id, state } => ApiError::WrongState {
            id: id.to_string(),
            state,
            hint: "stop it first with `rnx job stop`",
        },
        StoreError::Transition { id, source } => ApiError::Transition {
            id: id.to_string(),
            source,
        },
        e @ StoreError::WorkflowNotFound(_) => ApiError::NotFound(e.to_string()),
        StoreError::WorkflowRef(why) => FieldError::new("workflow_id", why).into(),
        StoreError::WorkflowNotFinished { id, state } => ApiError::WorkflowState {
            id,
            state,
            hint: "stop it first (`rnx workflow stop`) and let its jobs end",
        },
        other => ApiError::Internal(other.to_string()),
    }
}
