//! Who a REST request is from: an API token (`Authorization: Bearer`), a
//! console session (cookie `joblet_session`, whose changes must carry the
//! session's CSRF token and come from this origin), or a client
//! certificate of the node's CA. None of these: 401. The caller then
//! meets the service layer's role checks like a gRPC caller.

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};

use super::error::RestError;
use super::tls::RestPeer;
use super::RestState;
use crate::service::tokens::secret;
use crate::service::{Caller, CredentialError, Tokens};

/// The console session cookie.
pub const SESSION_COOKIE: &str = "joblet_session";
/// The header a cookie-authenticated change carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-joblet-csrf";

/// The authenticated caller of a request.
pub struct Authed(pub Caller);

impl FromRequestParts<RestState> for Authed {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, state: &RestState) -> Result<Self, RestError> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<RestPeer>>()
            .map(|c| &c.0);
        authenticate(&parts.method, &parts.headers, peer, &state.tokens).map(Authed)
    }
}

/// The caller of a request with these headers over a connection from
/// `peer`.
pub fn authenticate(
    method: &Method,
    headers: &HeaderMap,
    peer: Option<&RestPeer>,
    tokens: &Tokens,
) -> Result<Caller, RestError> {
    if let Some(h) = headers.get(header::AUTHORIZATION) {
        let token = h
            .to_str()
            .ok()
            .and_then(bearer)
            .ok_or(CredentialError::NotBearer)?;
        return Ok(tokens.authenticate(token)?);
    }
    if let Some(cookie) = session_cookie(headers) {
        let session = tokens.session(cookie)?;
        csrf_check(method, headers, &session.csrf)?;
        return Ok(session.caller);
    }
    match peer.and_then(|p| p.identity.clone()) {
        Some(identity) => Ok(Caller::from(
            identity.map_err(crate::service::ApiError::from)?,
        )),
        None => Err(CredentialError::Missing.into()),
    }
}

/// The token of an `Authorization` header value `Bearer TOKEN`.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The value of the `joblet_session` cookie, if the request has one.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
}

/// A cookie-authenticated request that changes something must carry the
/// session's CSRF token in `X-Joblet-CSRF`, and its `Origin`, when sent,
/// must be this server (`https://` + `Host`).
pub fn csrf_check(method: &Method, headers: &HeaderMap, csrf: &str) -> Result<(), RestError> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    match sent {
        None => {
            return Err(RestError::Csrf(
                "a console session's changes must carry its CSRF token in the X-Joblet-CSRF header (from GET /api/v1/session)",
            ))
        }
        Some(sent) if !secret::same_text(sent, csrf) => {
            return Err(RestError::Csrf(
                "the X-Joblet-CSRF header is not this session's CSRF token (GET /api/v1/session)",
            ))
        }
        Some(_) => {}
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let ok = match (origin.to_str().ok(), host) {
            (Some(o), Some(h)) => o.eq_ignore_ascii_case(&format!("https://{h}")),
            _ => false,
        };
        if !ok {
            return Err(RestError::Csrf(
                "the request's Origin is not this server: console changes are accepted from the console's own pages only",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn bearer_values() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer  "), None);
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; joblet_session=jbs_x_y; b=2")]);
        assert_eq!(session_cookie(&h), Some("jbs_x_y"));
        let h = headers(&[("cookie", "a=1"), ("cookie", "joblet_session=v")]);
        assert_eq!(session_cookie(&h), Some("v"));
        assert_eq!(
            session_cookie(&headers(&[("cookie", "xjoblet_session=v")])),
            None
        );
    }

    #[test]
    fn changes_need_the_csrf_token_and_the_same_origin() {
        let csrf = "c".repeat(64);
        assert!(csrf_check(&Method::GET, &headers(&[]), &csrf).is_ok());
        assert!(matches!(
            csrf_check(&Method::POST, &headers(&[]), &csrf),
            Err(RestError::Csrf(_))
        ));
        assert!(matches!(
            csrf_check(&Method::DELETE, &headers(&[(CSRF_HEADER, "nope")]), &csrf),
            Err(RestError::Csrf(_))
        ));
        assert!(csrf_check(&Method::POST, &headers(&[(CSRF_HEADER, &csrf)]), &csrf).is_ok());
        let same = headers(&[
            (CSRF_HEADER, &csrf),
            ("host", "node1:8443"),
            ("origin", "https://node1:8443"),
        ]);
        assert!(csrf_check(&Method::POST, &same, &csrf).is_ok());
        let other = headers(&[
            (CSRF_HEADER, &csrf),
            ("host", "node1:8443"),
            ("origin", "https://evil.example"),
        ]);
        assert!(matches!(
            csrf_check(&Method::POST, &other, &csrf),
            Err(RestError::Csrf(_))
        ));
    }
}
