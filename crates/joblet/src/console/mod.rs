//! The admin web console: plain HTML, CSS and JavaScript modules (no build
//! step, no Node.js at run time; charts by the vendored uPlot), compiled
//! into the daemon ([`assets`]) and served under `/console/` on the REST
//! listener. Its pages read everything from the REST API (`/api/v1/…`) as
//! the signed-in session; sign-in itself (`/console/login?code=…`, the
//! session cookie) is the REST layer's (`crate::rest`).
//!
//! Routes: `/console/` (the page shell, `index.html`; pages are `#/jobs`,
//! `#/gpus`, …), `/console/assets/<path>` (the files), `/console` (a
//! redirect to `/console/`). Every response carries a strict
//! Content-Security-Policy (this origin only: no inline scripts or
//! styles, no frames, no other hosts), `X-Frame-Options: DENY`,
//! `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
//! Files are sent with `Cache-Control: no-cache` and a strong `ETag`: a
//! browser keeps them and revalidates (304) on each load, so a daemon
//! upgrade is seen at once without hashed file names.
//!
//! Nothing here reads the daemon's state: it imports nothing from the
//! service layer, the engine or the store.

pub mod assets;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{middleware, Router};

use assets::Asset;

/// The console's Content-Security-Policy: scripts, styles, images and API
/// calls from this origin only; no inline scripts or styles, no plugins,
/// never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The console's routes, to merge into the REST router (any state).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/", get(index))
        .route("/console/assets/{*path}", get(asset))
        .layer(middleware::map_response(secure))
}

async fn index(headers: HeaderMap) -> Response {
    match assets::find("index.html") {
        Some(a) => serve(a, &headers),
        None => not_found("index.html"),
    }
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match assets::find(&path) {
        Some(a) => serve(a, &headers),
        None => not_found(&path),
    }
}

/// The file, or 304 when the browser's copy (`If-None-Match`) is current.
fn serve(a: &'static Asset, headers: &HeaderMap) -> Response {
    let etag = HeaderValue::from_static(a.etag());
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == a.etag() || t.trim() == "*");
    let cache = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, etag),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(a.content_type()),
        )],
        a.body,
    )
        .into_response()
}

fn not_found(path: &str) -> Response {
    tracing::debug!(path, "no such console file");
    (
        StatusCode::NOT_FOUND,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        format!(
            "the console has no file {:?}; open /console/",
            joblet_core::text::clip(path)
        ),
    )
        .into_response()
}

/// Adds the security headers to every console response.
async fn secure(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

#[cfg(test)]
mod tests;
