//! The REST API (`/api/v1/…`) on an HTTPS listener of its own
//! (`rest.address`), with the same identities and roles as gRPC: handlers
//! only translate HTTP into the transport-neutral service layer
//! ([`crate::service`]) and its answers into JSON, like [`crate::grpc`].
//!
//! - [`tls`]: the listener (the node's server certificate; client
//!   certificates of the node's CA optional).
//! - [`auth`]: the caller of a request: bearer token, console session
//!   (with its CSRF check), or client certificate.
//! - [`error`]: the one error shape and status mapping; [`input`]: bodies
//!   and query strings, refused as 400s naming the field.
//! - one module per area: [`jobs`], [`gpus`], [`workflows`], [`storage`]
//!   (volumes, runtimes), [`nodes`], [`session`] (console sign-in),
//!   [`history`] (the GPU and job history the console's charts read).
//! - [`openapi`]: the OpenAPI document's frame; the paths come from the
//!   handlers, and the document is served at `/api/v1/openapi.json`.
//!
//! The web console's pages ([`crate::console`]) are merged into the same
//! router ([`router`]), under `/console/`.

pub mod auth;
pub mod error;
pub mod gpus;
pub mod history;
pub mod input;
pub mod jobs;
pub mod nodes;
pub mod openapi;
pub mod session;
pub mod storage;
pub mod tls;
pub mod workflows;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::service::{Audit, Gpus, History, Jobs, Nodes, Runtimes, Tokens, Volumes, Workflows};
use error::RestError;

/// The services the REST API calls: the same ones gRPC calls.
pub struct RestServices {
    pub jobs: Arc<Jobs>,
    pub audit: Audit,
    pub gpus: Gpus,
    pub runtimes: Runtimes,
    pub volumes: Volumes,
    pub workflows: Workflows,
    pub nodes: Arc<Nodes>,
    pub tokens: Tokens,
    pub history: History,
}

/// The handlers' state.
pub type RestState = Arc<RestServices>;

/// Every `/api/v1` route, with the OpenAPI document they make.
pub fn api(state: RestState) -> (Router, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(jobs::list, jobs::run))
        .routes(routes!(jobs::status, jobs::delete))
        .routes(routes!(jobs::stop))
        .routes(routes!(jobs::kill))
        .routes(routes!(jobs::logs))
        .routes(routes!(gpus::status))
        .routes(routes!(gpus::health))
        .routes(routes!(gpus::set_state))
        .routes(routes!(gpus::audit))
        .routes(routes!(history::gpu))
        .routes(routes!(history::gpu_hours))
        .routes(routes!(history::queue_wait))
        .routes(routes!(history::failures))
        .routes(routes!(workflows::list, workflows::run))
        .routes(routes!(workflows::status, workflows::delete))
        .routes(routes!(workflows::stop))
        .routes(routes!(storage::list_volumes, storage::create_volume))
        .routes(routes!(storage::get_volume, storage::remove_volume))
        .routes(routes!(storage::share_volume))
        .routes(routes!(storage::list_runtimes))
        .routes(routes!(storage::get_runtime, storage::remove_runtime))
        .routes(routes!(storage::test_runtime))
        .routes(routes!(nodes::list))
        .routes(routes!(nodes::drain))
        .routes(routes!(nodes::whoami))
        .routes(routes!(session::current))
        .routes(routes!(session::logout))
        .routes(routes!(session::login))
        .with_state(state)
        .split_for_parts()
}

/// The whole REST listener's router: the API, its OpenAPI document, and
/// the web console's pages.
pub fn router(state: RestState) -> Router {
    let (api, doc) = api(state);
    let doc = Arc::new(doc.to_pretty_json().unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot render the OpenAPI document");
        String::from("{}")
    }));
    api.route(
        "/api/v1/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    doc.as_str().to_owned(),
                )
            }
        }),
    )
    .merge(crate::console::routes())
    .fallback(no_route)
    .layer(DefaultBodyLimit::max(input::MAX_BODY_BYTES))
}

async fn no_route(method: Method, uri: Uri) -> Response {
    RestError::NoRoute {
        method: method.to_string(),
        path: joblet_core::text::clip(uri.path()),
    }
    .into_response()
}

/// Serves `router` on `listener` with TLS `config` until the task is
/// dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
) -> std::io::Result<()> {
    let listener = tls::RestListener::start(listener, config)?;
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<tls::RestPeer>(),
    )
    .await
}

/// This host's name, for links when the listener is on every address.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The console sign-in link for `code` on a listener bound to `bound`.
pub fn login_url(bound: SocketAddr, host_name: &str, code: &str) -> String {
    let host = match bound.ip() {
        ip if ip.is_unspecified() => host_name.to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!("https://{host}:{}/console/login?code={code}", bound.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_links_name_a_host_the_certificate_has() {
        assert_eq!(
            login_url("127.0.0.1:8443".parse().unwrap(), "gpu-07", "jbc_a_b"),
            "https://127.0.0.1:8443/console/login?code=jbc_a_b"
        );
        assert_eq!(
            login_url("0.0.0.0:8443".parse().unwrap(), "gpu-07", "c"),
            "https://gpu-07:8443/console/login?code=c"
        );
        assert_eq!(
            login_url("[::1]:9".parse().unwrap(), "h", "c"),
            "https://[::1]:9/console/login?code=c"
        );
    }
}
