//! The one place where handler errors become gRPC statuses.

use joblet_core::id::PrefixError;
use joblet_core::{FieldError, JobState, TransitionError, Unsupported};
use tonic::{Code, Status};

/// Everything an API call can fail with, each case carrying what the user
/// needs to fix it.
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
    /// The caller's role does not allow the call.
    #[error("{name} has role {role:?}, which may not {action}; ask an admin for an admin certificate (`joblet cert issue --role admin`)")]
    PermissionDenied {
        name: String,
        role: String,
        action: &'static str,
    },
    /// The client certificate lacks what Joblet needs.
    #[error("client certificate rejected: {0}")]
    BadIdentity(String),
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
    GpuRef(String),
    /// An admin command the GPU's state does not allow.
    #[error("{0}")]
    GpuAdmin(#[from] joblet_core::gpu::AdminError),
    /// The daemon is shutting down or restarting.
    #[error("the joblet daemon is shutting down; retry in a moment")]
    ShuttingDown,
    /// Storage or process failure on the node, with what failed.
    #[error("internal error on the node: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn code(&self) -> Code {
        match self {
            ApiError::InvalidField(_) => Code::InvalidArgument,
            ApiError::JobRef(PrefixError::NotFound(_)) => Code::NotFound,
            ApiError::JobRef(_) => Code::InvalidArgument,
            ApiError::Unsupported(_)
            | ApiError::WrongState { .. }
            | ApiError::NotAllowed { .. }
            | ApiError::GpusDisabled
            | ApiError::GpuRequest(_)
            | ApiError::GpuAdmin(_) => Code::FailedPrecondition,
            ApiError::GpuRef(_) => Code::NotFound,
            ApiError::PermissionDenied { .. } => Code::PermissionDenied,
            ApiError::BadIdentity(_) => Code::Unauthenticated,
            ApiError::Transition { .. } | ApiError::Internal(_) => Code::Internal,
            ApiError::ShuttingDown => Code::Unavailable,
        }
    }
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let s: Status =
            ApiError::InvalidField(FieldError::new("resources.max_cpu", "must not be negative"))
                .into();
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(s.message(), "resources.max_cpu: must not be negative");
        let s: Status = ApiError::JobRef(PrefixError::NotFound("ab".into())).into();
        assert_eq!(s.code(), Code::NotFound);
        let s: Status = ApiError::PermissionDenied {
            name: "bob".into(),
            role: "viewer".into(),
            action: "run jobs",
        }
        .into();
        assert_eq!(s.code(), Code::PermissionDenied);
        assert!(s.message().contains("viewer"));
    }
}
