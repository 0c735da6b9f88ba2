//! Reading a request's JSON body and query string into typed values, with
//! every refusal a 400 in the API's error shape that names the field and
//! the accepted form (axum's own rejections are plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use joblet_core::FieldError;
use serde::de::DeserializeOwned;

use super::error::RestError;

/// The largest JSON body read (a workflow file with its YAML, a job with
/// its environment).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A JSON request body.
pub struct JsonBody<T>(pub T);

/// A query string.
pub struct QueryArgs<T>(pub T);

/// A path parameter (`{id}`).
pub struct PathArg<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathArg<T> {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, RestError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathArg(p.0))
            .map_err(|e| FieldError::new("path", e.body_text()).into())
    }
}

/// The dotted path serde_path_to_error reports, or `body` for the whole.
fn field_of(path: &serde_path_to_error::Path, whole: &str) -> String {
    let p = path.to_string();
    if p.is_empty() || p == "." || p == "?" {
        whole.to_owned()
    } else {
        p
    }
}

/// `bytes` as a `T`, or a [`FieldError`] naming where it went wrong.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FieldError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_of(e.path(), "body");
        FieldError::new(
            field,
            format!(
                "{}; the body must be a JSON object as /api/v1/openapi.json describes",
                e.inner()
            ),
        )
    })
}

/// `query` as a `T`, or a [`FieldError`] naming the parameter.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, FieldError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_of(e.path(), "query");
        FieldError::new(
            field,
            format!(
                "{}; see the parameters /api/v1/openapi.json lists",
                e.inner()
            ),
        )
    })
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = RestError;

    async fn from_request(req: Request, state: &S) -> Result<Self, RestError> {
        let json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(FieldError::new(
                "Content-Type",
                "expected application/json with a JSON object body",
            )
            .into());
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| FieldError::new("body", format!("could not read the body: {e}")))?;
        if bytes.len() > MAX_BODY_BYTES {
            return Err(FieldError::new(
                "body",
                format!(
                    "{} bytes is over the {MAX_BODY_BYTES}-byte limit",
                    bytes.len()
                ),
            )
            .into());
        }
        Ok(JsonBody(parse_json(&bytes)?))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryArgs<T> {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, RestError> {
        Ok(QueryArgs(parse_query(parts.uri.query().unwrap_or(""))?))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        command: String,
        #[serde(default)]
        gpu_count: Option<i64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Q {
        #[serde(default)]
        limit: Option<i64>,
        #[serde(default)]
        follow: Option<bool>,
    }

    #[test]
    fn a_bad_json_value_names_its_field() {
        let e = parse_json::<Body>(br#"{"command": "x", "gpu_count": "two"}"#).unwrap_err();
        assert_eq!(e.field, "gpu_count");
        assert!(e.problem.contains("invalid type"), "{e}");
        let e = parse_json::<Body>(br#"{"gpu_count": 1}"#).unwrap_err();
        assert_eq!(e.field, "body");
        assert!(e.problem.contains("missing field `command`"), "{e}");
        let e = parse_json::<Body>(br#"{"command": "x", "gpus": 1}"#).unwrap_err();
        assert!(e.problem.contains("unknown field `gpus`"), "{e}");
        let e = parse_json::<Body>(b"{not json").unwrap_err();
        assert_eq!(e.field, "body");
        assert_eq!(
            parse_json::<Body>(br#"{"command": "x"}"#).unwrap(),
            Body {
                command: "x".into(),
                gpu_count: None
            }
        );
    }

    #[test]
    fn a_bad_query_value_names_its_parameter() {
        let e = parse_query::<Q>("limit=ten").unwrap_err();
        assert_eq!(e.field, "limit");
        let e = parse_query::<Q>("follow=yes").unwrap_err();
        assert_eq!(e.field, "follow");
        assert!(parse_query::<Q>("nope=1").is_err());
        assert_eq!(
            parse_query::<Q>("limit=5&follow=true").unwrap(),
            Q {
                limit: Some(5),
                follow: Some(true)
            }
        );
        assert_eq!(
            parse_query::<Q>("").unwrap(),
            Q {
                limit: None,
                follow: None
            }
        );
    }
}
