//! The one place where service errors become gRPC statuses: the code says
//! whose problem it is, the message is the error's text as is.

use joblet_core::id::PrefixError;
use tonic::{Code, Status};

use crate::service::{ApiError, LogError};

/// The status code of an [`ApiError`].
pub fn code(e: &ApiError) -> Code {
    match e {
        ApiError::InvalidField(_) | ApiError::InvalidWorkflow(_) => Code::InvalidArgument,
        ApiError::JobRef(PrefixError::NotFound(_)) => Code::NotFound,
        ApiError::JobRef(_) => Code::InvalidArgument,
        ApiError::Unsupported(_)
        | ApiError::WrongState { .. }
        | ApiError::WorkflowState { .. }
        | ApiError::NotAllowed { .. }
        | ApiError::GpusDisabled
        | ApiError::GpuRequest(_)
        | ApiError::GpuAdmin(_) => Code::FailedPrecondition,
        ApiError::GpuRef(_) | ApiError::NotFound(_) => Code::NotFound,
        ApiError::AlreadyExists(_) => Code::AlreadyExists,
        ApiError::InUse(_) | ApiError::NodeCannot(_) => Code::FailedPrecondition,
        ApiError::PermissionDenied { .. } => Code::PermissionDenied,
        ApiError::BadIdentity(_) | ApiError::Unauthenticated(_) => Code::Unauthenticated,
        ApiError::Transition { .. } | ApiError::Internal(_) => Code::Internal,
        ApiError::ShuttingDown | ApiError::Cluster(_) => Code::Unavailable,
        ApiError::DiskFull(_) => Code::ResourceExhausted,
    }
}

/// The most bytes of a status message sent. Messages echo user values
/// already cut ([`joblet_core::text::clip`]); this is the backstop, so no
/// message can outgrow the HTTP/2 header it travels in (the client would
/// see RESOURCE_EXHAUSTED instead of it).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// `message`, cut on a character to [`MAX_MESSAGE_BYTES`] with `…`.
fn bounded(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        Status::new(code(&e), bounded(e.to_string()))
    }
}

impl From<LogError> for Status {
    fn from(e: LogError) -> Status {
        let code = match e {
            LogError::Deleted { .. } => Code::NotFound,
            LogError::Store { .. } | LogError::Read { .. } => Code::Internal,
            LogError::Remote { .. } => Code::Unavailable,
        };
        Status::new(code, bounded(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use joblet_core::{FieldError, JobId};

    use super::*;
    use crate::service::IdentityError;

    #[test]
    fn messages_are_bounded() {
        let huge = "é".repeat(10_000);
        let s: Status = ApiError::Internal(huge).into();
        assert!(
            s.message().len() <= MAX_MESSAGE_BYTES,
            "{}",
            s.message().len()
        );
        assert!(s.message().ends_with('…'));
        let short: Status = ApiError::Internal("disk".into()).into();
        assert_eq!(short.message(), "internal error on the node: disk");
    }

    #[test]
    fn codes_and_messages() {
        let s: Status =
            ApiError::InvalidField(FieldError::new("resources.max_cpu", "must not be negative"))
                .into();
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(s.message(), "resources.max_cpu: must not be negative");
        let s: Status = ApiError::JobRef(PrefixError::NotFound("ab".into())).into();
        assert_eq!(s.code(), Code::NotFound);
        let s: Status = ApiError::JobRef(PrefixError::Empty).into();
        assert_eq!(s.code(), Code::InvalidArgument);
        let s: Status = ApiError::PermissionDenied {
            name: "bob".into(),
            role: "viewer".into(),
            action: "run jobs",
        }
        .into();
        assert_eq!(s.code(), Code::PermissionDenied);
        assert!(s.message().contains("viewer"));
        let s: Status = ApiError::BadIdentity(IdentityError::LocalNotRoot { uid: 1000 }).into();
        assert_eq!(s.code(), Code::Unauthenticated);
        assert!(
            s.message().starts_with(
                "client certificate rejected: uid 1000 on the local socket: only root"
            ),
            "{}",
            s.message()
        );
        let s: Status = ApiError::ShuttingDown.into();
        assert_eq!(s.code(), Code::Unavailable);
        let s: Status = ApiError::GpusDisabled.into();
        assert_eq!(s.code(), Code::FailedPrecondition);
    }

    #[test]
    fn a_deleted_job_ends_its_log_stream_with_not_found() {
        let id = JobId::parse("3f2a1b4c-0000-4000-8000-000000000001").unwrap();
        let s: Status = LogError::Deleted { id }.into();
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(
            s.message(),
            "job 3f2a1b4c-0000-4000-8000-000000000001 was deleted"
        );
    }
}
