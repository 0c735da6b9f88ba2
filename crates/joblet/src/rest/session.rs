//! The web console's sign-in: `GET /console/login?code=` turns a one-time
//! code (`rnx console`) into a server-side session and its cookie;
//! `GET /api/v1/session` tells the console who it is and its CSRF token;
//! `POST /api/v1/session/logout` ends the session.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{csrf_check, session_cookie, SESSION_COOKIE};
use super::error::{Errors, RestError};
use super::input::QueryArgs;
use super::RestState;
use crate::service::CredentialError;

/// Where a signed-in browser goes.
pub const CONSOLE_HOME: &str = "/console/";

/// The `Set-Cookie` value of a new session: HTTPS only, out of scripts'
/// reach, never sent by other sites' requests.
pub fn session_set_cookie(value: &str) -> String {
    format!("{SESSION_COOKIE}={value}; HttpOnly; Secure; SameSite=Strict; Path=/")
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn session_clear_cookie() -> String {
    format!("{SESSION_COOKIE}=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0")
}

/// `GET /console/login`'s parameters.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LoginQuery {
    /// The one-time code of the link `rnx console` printed.
    pub code: String,
}

#[utoipa::path(get, path = "/console/login", tag = "session", params(LoginQuery), security(()),
    responses((status = 303, description = "Signed in: the session cookie is set and the browser sent to /console/",
        headers(("Set-Cookie" = String, description = "joblet_session=…; HttpOnly; Secure; SameSite=Strict; Path=/"),
                ("Location" = String, description = "/console/"))), Errors))]
pub async fn login(
    State(s): State<RestState>,
    headers: HeaderMap,
    QueryArgs(q): QueryArgs<LoginQuery>,
) -> Result<Response, RestError> {
    let new = match s.tokens.sign_in(&q.code) {
        Ok(new) => new,
        // A browser that opened a used or expired link gets the console's
        // signed-out page saying why, not a JSON body; other clients get
        // the error as JSON.
        Err(e) if wants_html(&headers) => return Ok(signed_out_redirect(&e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static(CONSOLE_HOME));
    h.insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&session_set_cookie(&new.cookie))
            .map_err(|e| crate::service::ApiError::Internal(format!("session cookie: {e}")))?,
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

/// Whether the request is a browser's page navigation.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// Sends a browser to the console's signed-out page with the reason its
/// sign-in failed (shown there as text).
fn signed_out_redirect(reason: &str) -> Response {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("signin_error", reason)
        .finish();
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("{CONSOLE_HOME}?{query}")) {
        h.insert(header::LOCATION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The console's session.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionView {
    pub name: String,
    /// `admin` or `viewer`.
    pub role: String,
    /// Send this in `X-Joblet-CSRF` with every POST, PUT and DELETE.
    pub csrf: String,
    pub expires_ms: i64,
}

#[utoipa::path(get, path = "/api/v1/session", tag = "session",
    responses((status = 200, description = "The session the cookie names", body = SessionView), Errors))]
pub async fn current(
    State(s): State<RestState>,
    headers: HeaderMap,
) -> Result<Json<SessionView>, RestError> {
    let cookie = session_cookie(&headers).ok_or(CredentialError::Missing)?;
    let session = s.tokens.session(cookie)?;
    Ok(Json(SessionView {
        name: session.caller.name,
        role: session.caller.role.to_string(),
        csrf: session.csrf,
        expires_ms: session.expires_ms,
    }))
}

#[utoipa::path(post, path = "/api/v1/session/logout", tag = "session",
    responses((status = 204, description = "Signed out; the cookie is cleared"), Errors))]
pub async fn logout(
    State(s): State<RestState>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    let cookie = session_cookie(&headers).ok_or(CredentialError::Missing)?;
    let session = s.tokens.session(cookie)?;
    csrf_check(&method, &headers, &session.csrf)?;
    s.tokens.sign_out(cookie)?;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&session_clear_cookie())
            .map_err(|e| crate::service::ApiError::Internal(format!("session cookie: {e}")))?,
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_has_exactly_the_specified_flags() {
        assert_eq!(
            session_set_cookie("jbs_a_b"),
            "joblet_session=jbs_a_b; HttpOnly; Secure; SameSite=Strict; Path=/"
        );
        assert!(session_clear_cookie().ends_with("Max-Age=0"));
    }

    #[test]
    fn a_browser_whose_sign_in_fails_is_sent_to_the_signed_out_page_with_the_reason() {
        let mut headers = HeaderMap::new();
        assert!(!wants_html(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,*/*;q=0.8"),
        );
        assert!(wants_html(&headers));
        let resp = signed_out_redirect("this link is used already & gone");
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            resp.headers()[header::LOCATION],
            "/console/?signin_error=this+link+is+used+already+%26+gone"
        );
        assert!(resp.headers().get(header::SET_COOKIE).is_none());
    }
}
