//! The console's router through real requests: content types, the
//! security headers, caching and 404s.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::Response;
use tower::Service;

use super::*;

async fn get(path: &str, if_none_match: Option<&str>) -> Response {
    let mut router: Router = routes();
    let mut req = Request::get(path);
    if let Some(tag) = if_none_match {
        req = req.header(header::IF_NONE_MATCH, tag);
    }
    router
        .call(req.body(Body::empty()).unwrap())
        .await
        .expect("the router answers")
}

fn head(res: &Response, name: header::HeaderName) -> &str {
    res.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

async fn body(res: Response) -> Vec<u8> {
    axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap()
        .to_vec()
}

fn assert_secure(res: &Response) {
    assert_eq!(head(res, header::CONTENT_SECURITY_POLICY), CSP);
    assert_eq!(head(res, header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(head(res, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    assert_eq!(head(res, header::REFERRER_POLICY), "no-referrer");
}

#[tokio::test]
async fn the_shell_is_html_with_the_security_headers() {
    let res = get("/console/", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(head(&res, header::CONTENT_TYPE), "text/html; charset=utf-8");
    assert_eq!(head(&res, header::CACHE_CONTROL), "no-cache");
    assert_secure(&res);
    let html = String::from_utf8(body(res).await).unwrap();
    assert!(
        html.contains(r#"<script type="module" src="assets/js/app.js">"#),
        "{html}"
    );
    // No inline script or style the CSP would block.
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "{html}"
    );
}

#[tokio::test]
async fn files_have_their_content_types() {
    for (path, ty) in [
        (
            "/console/assets/js/app.js",
            "text/javascript; charset=utf-8",
        ),
        ("/console/assets/console.css", "text/css; charset=utf-8"),
        (
            "/console/assets/vendor/uplot/uPlot.esm.js",
            "text/javascript; charset=utf-8",
        ),
        (
            "/console/assets/vendor/uplot/uPlot.min.css",
            "text/css; charset=utf-8",
        ),
        (
            "/console/assets/vendor/uplot/LICENSE",
            "text/plain; charset=utf-8",
        ),
    ] {
        let res = get(path, None).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert_eq!(head(&res, header::CONTENT_TYPE), ty, "{path}");
        assert_secure(&res);
        let want = assets::find(path.trim_start_matches("/console/assets/"))
            .unwrap()
            .body;
        assert_eq!(body(res).await, want, "{path}");
    }
}

#[tokio::test]
async fn unknown_files_are_404_with_the_security_headers() {
    for path in [
        "/console/assets/nope.js",
        "/console/assets/../mod.rs",
        "/console/assets/js/",
        "/console/assets/index.html.bak",
    ] {
        let res = get(path, None).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        assert_secure(&res);
    }
}

#[tokio::test]
async fn a_current_copy_is_revalidated_with_304() {
    let res = get("/console/assets/js/app.js", None).await;
    let etag = head(&res, header::ETAG).to_owned();
    let res = get("/console/assets/js/app.js", Some(&etag)).await;
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(head(&res, header::ETAG), etag);
    assert_secure(&res);
    assert!(body(res).await.is_empty());
    let res = get("/console/assets/js/app.js", Some("\"stale\"")).await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_bare_path_redirects_to_the_shell() {
    let res = get("/console", None).await;
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(head(&res, header::LOCATION), "/console/");
}
