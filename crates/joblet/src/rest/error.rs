//! The REST API's one error shape, `{"error": {"code", "message", "field"?}}`,
//! and the one place where errors get their HTTP status and stable code:
//! [`ApiError`]s as the service layer returns them, bad input the handlers
//! refuse before calling it (bodies, query strings), and refused
//! credentials or CSRF checks.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use joblet_core::id::PrefixError;
use joblet_core::FieldError;
use serde::Serialize;
use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};
use utoipa::ToSchema;

use crate::service::{ApiError, LogError};

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_argument`, `unauthenticated`,
    /// `permission_denied`, `not_found`, `already_exists`,
    /// `failed_precondition`, `internal`, `unavailable`,
    /// `resource_exhausted`.
    pub code: String,
    /// For people: what is wrong and what to do.
    pub message: String,
    /// The request field at fault (`resources.gpu_count`, `limit`), when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Why a REST call failed.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// What the service layer refused or failed with (boxed: errors stay
    /// small on the success path).
    #[error(transparent)]
    Api(Box<ApiError>),
    /// A log stream that ended early.
    #[error(transparent)]
    Log(Box<LogError>),
    /// A cookie-authenticated change without the session's CSRF token, or
    /// from another origin.
    #[error("{0}")]
    Csrf(&'static str),
    /// No route here.
    #[error("no such endpoint: {method} {path}; see /api/v1/openapi.json")]
    NoRoute { method: String, path: String },
}

impl From<ApiError> for RestError {
    fn from(e: ApiError) -> RestError {
        RestError::Api(Box::new(e))
    }
}

impl From<LogError> for RestError {
    fn from(e: LogError) -> RestError {
        RestError::Log(Box::new(e))
    }
}

impl From<FieldError> for RestError {
    fn from(e: FieldError) -> RestError {
        ApiError::InvalidField(e).into()
    }
}

impl From<crate::service::CredentialError> for RestError {
    fn from(e: crate::service::CredentialError) -> RestError {
        ApiError::Unauthenticated(e).into()
    }
}

/// The HTTP status and stable code of a service error.
pub fn api_status(e: &ApiError) -> (StatusCode, &'static str) {
    match e {
        ApiError::InvalidField(_) | ApiError::InvalidWorkflow(_) => {
            (StatusCode::BAD_REQUEST, "invalid_argument")
        }
        ApiError::JobRef(PrefixError::NotFound(_))
        | ApiError::GpuRef(_)
        | ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        ApiError::JobRef(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
        ApiError::Unsupported(_)
        | ApiError::WrongState { .. }
        | ApiError::WorkflowState { .. }
        | ApiError::NotAllowed { .. }
        | ApiError::GpusDisabled
        | ApiError::GpuRequest(_)
        | ApiError::GpuAdmin(_)
        | ApiError::InUse(_)
        | ApiError::NodeCannot(_) => (StatusCode::CONFLICT, "failed_precondition"),
        ApiError::AlreadyExists(_) => (StatusCode::CONFLICT, "already_exists"),
        ApiError::PermissionDenied { .. } => (StatusCode::FORBIDDEN, "permission_denied"),
        ApiError::BadIdentity(_) | ApiError::Unauthenticated(_) => {
            (StatusCode::UNAUTHORIZED, "unauthenticated")
        }
        ApiError::Transition { .. } | ApiError::Internal(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        }
        ApiError::ShuttingDown | ApiError::Cluster(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        ApiError::DiskFull(_) => (StatusCode::INSUFFICIENT_STORAGE, "resource_exhausted"),
    }
}

impl RestError {
    /// Its status and body.
    pub fn parts(&self) -> (StatusCode, ErrorBody) {
        let (status, code, field) = match self {
            RestError::Api(e) => {
                let (s, c) = api_status(e);
                let field = match e.as_ref() {
                    ApiError::InvalidField(f) => Some(f.field.clone()),
                    _ => None,
                };
                (s, c, field)
            }
            RestError::Log(e) => match e.as_ref() {
                LogError::Deleted { .. } => (StatusCode::NOT_FOUND, "not_found", None),
                LogError::Remote { .. } => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", None),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal", None),
            },
            RestError::Csrf(_) => (StatusCode::FORBIDDEN, "permission_denied", None),
            RestError::NoRoute { .. } => (StatusCode::NOT_FOUND, "not_found", None),
        };
        let message = match self {
            // The field is said apart; the message still reads alone.
            RestError::Api(e) => e.to_string(),
            other => other.to_string(),
        };
        (
            status,
            ErrorBody {
                error: ErrorDetail {
                    code: code.to_owned(),
                    message,
                    field,
                },
            },
        )
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let (status, body) = self.parts();
        if status.is_server_error() {
            tracing::warn!(status = %status, error = %self, "REST request failed");
        }
        let mut resp = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"joblet\""),
            );
        }
        resp
    }
}

/// The error responses every operation declares in the OpenAPI document
/// (status → when), each with the [`ErrorBody`] shape.
pub const DECLARED: [(u16, &str); 8] = [
    (
        400,
        "Bad input: a body, path or query value; `field` names it",
    ),
    (
        401,
        "No credentials, or an unknown, revoked or expired token or session",
    ),
    (
        403,
        "The caller's role may not do this, or a CSRF check failed",
    ),
    (404, "No such job, GPU, workflow, volume, runtime or token"),
    (
        409,
        "Not possible in the current state (a running job, GPUs off, a name taken)",
    ),
    (500, "The node failed to carry the request out"),
    (
        503,
        "Shutting down, or cluster mode could not reach another node or etcd",
    ),
    (507, "The node's state disk is full"),
];

/// [`DECLARED`] for `responses(...)` of `#[utoipa::path]`.
pub struct Errors;

impl utoipa::IntoResponses for Errors {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
        DECLARED
            .iter()
            .map(|(code, when)| {
                let resp = ResponseBuilder::new()
                    .description(*when)
                    .content(
                        "application/json",
                        Content::new(Some(Ref::from_schema_name("ErrorBody"))),
                    )
                    .build();
                (code.to_string(), RefOr::T(resp))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use joblet_core::FieldError;

    use super::*;
    use crate::service::tokens::secret::Form;
    use crate::service::CredentialError;

    fn parts(e: impl Into<RestError>) -> (u16, String, Option<String>) {
        let (s, b) = e.into().parts();
        (s.as_u16(), b.error.code, b.error.field)
    }

    #[test]
    fn each_error_has_its_status_code_and_field() {
        assert_eq!(
            parts(ApiError::InvalidField(FieldError::new(
                "resources.gpu_count",
                "too many"
            ))),
            (
                400,
                "invalid_argument".into(),
                Some("resources.gpu_count".into())
            )
        );
        assert_eq!(
            parts(ApiError::JobRef(PrefixError::NotFound("ab".into()))).0,
            404
        );
        assert_eq!(parts(ApiError::JobRef(PrefixError::Empty)).0, 400);
        assert_eq!(
            parts(ApiError::PermissionDenied {
                name: "bob".into(),
                role: "viewer".into(),
                action: "run jobs"
            }),
            (403, "permission_denied".into(), None)
        );
        assert_eq!(
            parts(CredentialError::Rejected(Form::Token)),
            (401, "unauthenticated".into(), None)
        );
        assert_eq!(
            parts(ApiError::AlreadyExists("x".into())).1,
            "already_exists"
        );
        assert_eq!(parts(ApiError::GpusDisabled).0, 409);
        assert_eq!(parts(ApiError::ShuttingDown).0, 503);
        assert_eq!(parts(ApiError::Internal("disk".into())).0, 500);
        assert_eq!(parts(RestError::Csrf("no token")).0, 403);
    }

    #[test]
    fn every_status_the_mapping_gives_is_declared() {
        let declared: Vec<u16> = DECLARED.iter().map(|(c, _)| *c).collect();
        for e in [
            ApiError::InvalidField(FieldError::new("a", "b")),
            ApiError::JobRef(PrefixError::Empty),
            ApiError::NotFound("x".into()),
            ApiError::GpusDisabled,
            ApiError::AlreadyExists("x".into()),
            ApiError::Unauthenticated(CredentialError::Missing),
            ApiError::Internal("x".into()),
            ApiError::Cluster("x".into()),
        ] {
            let s = api_status(&e).0.as_u16();
            assert!(declared.contains(&s), "{e}: {s}");
        }
    }

    #[test]
    fn the_body_is_the_documented_json() {
        let (_, body) = RestError::from(FieldError::new("limit", "must be positive")).parts();
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            serde_json::json!({"error": {"code": "invalid_argument", "message": "limit: must be positive", "field": "limit"}})
        );
    }
}
