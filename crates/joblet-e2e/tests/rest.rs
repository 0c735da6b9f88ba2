//! The HTTPS REST API of a live node, driven with curl: who may do what
//! (tokens, client certificates, console sessions with their CSRF check),
//! the error shape, paging, server-sent log streams, and the whole API
//! against its own OpenAPI document under schemathesis.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use joblet_e2e::{Node, SimGpuNode};
use joblet_pki::{CertificateAuthority, Role, Validity};
use serde_json::{json, Value};

/// A response as curl saw it.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// Asserts the documented error shape with `code`.
    fn error(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "{}", self.body);
        let v = self.json();
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        v
    }
}

/// The node's REST endpoint and the CA to trust it with.
struct Rest {
    base: String,
    ca: PathBuf,
}

impl Rest {
    fn of(node: &Node) -> Rest {
        let addr = wait_for(|| node.rest_address(), "the REST address in server.json");
        Rest {
            base: format!("https://{addr}"),
            ca: node.state_dir().join("pki/ca.crt"),
        }
    }

    /// curl `method path` with `extra` arguments; `None` when curl itself
    /// failed (a refused TLS handshake).
    fn try_call(&self, method: &str, path: &str, extra: &[&str]) -> Option<Resp> {
        let out = Command::new("curl")
            .args(["-sS", "-i", "--max-time", "30", "-X", method, "--cacert"])
            .arg(&self.ca)
            .args(extra)
            .arg(format!("{}{path}", self.base))
            .output()
            .expect("running curl");
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {text}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Some(Resp {
            status,
            headers,
            body: body.to_owned(),
        })
    }

    fn call(&self, method: &str, path: &str, extra: &[&str]) -> Resp {
        self.try_call(method, path, extra)
            .unwrap_or_else(|| panic!("curl {method} {path} failed"))
    }

    fn with_token(&self, token: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
        let auth = format!("Authorization: Bearer {token}");
        let data = body.map(Value::to_string);
        let mut args = vec!["-H", &auth];
        if let Some(d) = &data {
            args.extend(["-H", "Content-Type: application/json", "--data-binary", d]);
        }
        self.call(method, path, &args)
    }
}

fn wait_for<T>(mut f: impl FnMut() -> Option<T>, what: &str) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `rnx --json token create`; returns the secret.
fn mint(node: &Node, name: &str, role: &str) -> String {
    let v = node.rnx_json(&["token", "create", "--name", name, "--role", role]);
    let secret = v["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("jbt_"), "{v}");
    assert_eq!(v["token"]["name"], name);
    secret
}

fn admin_cert(node: &Node) -> (PathBuf, PathBuf) {
    let pki = node.state_dir().join("pki");
    (pki.join("admin.crt"), pki.join("admin.key"))
}

fn wait_done(rest: &Rest, token: &str, id: &str) -> Value {
    wait_for(
        || {
            let v = rest
                .with_token(token, "GET", &format!("/api/v1/jobs/{id}"), None)
                .json();
            matches!(
                v["state"].as_str(),
                Some("COMPLETED" | "FAILED" | "STOPPED")
            )
            .then_some(v)
        },
        "the job to end",
    )
}

#[test]
fn tokens_certificates_and_roles() {
    let node = Node::start().unwrap();
    let rest = Rest::of(&node);

    // No credentials: 401 in the error shape.
    let r = rest.call("GET", "/api/v1/jobs", &[]);
    r.error(401, "unauthenticated");
    assert!(r.header("www-authenticate").is_some());

    // A client certificate of the node's CA works without a token.
    let (crt, key) = admin_cert(&node);
    let (crt, key) = (crt.display().to_string(), key.display().to_string());
    let r = rest.call("GET", "/api/v1/whoami", &["--cert", &crt, "--key", &key]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["role"], "admin");

    // A certificate from another CA: refused at the handshake, or 401.
    let dir = node.dir.path().join("other-ca");
    std::fs::create_dir_all(&dir).unwrap();
    let other = CertificateAuthority::generate("other", Validity::days_from_now(1)).unwrap();
    let mallory = other
        .issue_client("admin", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    std::fs::write(dir.join("m.crt"), &mallory.cert).unwrap();
    std::fs::write(dir.join("m.key"), &mallory.key).unwrap();
    let (mc, mk) = (
        dir.join("m.crt").display().to_string(),
        dir.join("m.key").display().to_string(),
    );
    if let Some(r) = rest.try_call("GET", "/api/v1/whoami", &["--cert", &mc, "--key", &mk]) {
        r.error(401, "unauthenticated");
    }

    // Tokens through rnx: the secret once, never in the list.
    let viewer = mint(&node, "viewer-bot", "viewer");
    let admin = mint(&node, "ops", "admin");
    let list = node.rnx_ok(&["token", "list"]);
    assert!(
        list.contains("viewer-bot") && list.contains("ops"),
        "{list}"
    );
    let list_json = node.rnx_ok(&["--json", "token", "list"]);
    for secret in [&viewer, &admin] {
        let hidden = &secret[21..];
        assert!(
            !list.contains(hidden) && !list_json.contains(hidden),
            "{list}{list_json}"
        );
    }

    // The admin token runs jobs, owned by its name.
    let job = rest.with_token(
        &admin,
        "POST",
        "/api/v1/jobs",
        Some(&json!({"command": "sleep", "args": ["30"]})),
    );
    assert_eq!(job.status, 201, "{}", job.body);
    let job = job.json();
    assert_eq!(job["owner"], "ops");
    let id = job["id"].as_str().unwrap().to_owned();

    // A viewer reads, but cannot run, stop or drain: 403 in the error shape.
    let r = rest.with_token(&viewer, "GET", &format!("/api/v1/jobs/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    rest.with_token(
        &viewer,
        "POST",
        "/api/v1/jobs",
        Some(&json!({"command": "true"})),
    )
    .error(403, "permission_denied");
    rest.with_token(&viewer, "POST", &format!("/api/v1/jobs/{id}/stop"), None)
        .error(403, "permission_denied");
    rest.with_token(
        &viewer,
        "POST",
        "/api/v1/gpus/0/state",
        Some(&json!({"action": "drain"})),
    )
    .error(403, "permission_denied");

    // Bad input: 400 naming the field.
    let v = rest
        .with_token(&admin, "POST", "/api/v1/jobs", Some(&json!({"command": 5})))
        .error(400, "invalid_argument");
    assert_eq!(v["error"]["field"], "command", "{v}");
    let v = rest
        .with_token(&admin, "GET", "/api/v1/jobs?limit=lots", None)
        .error(400, "invalid_argument");
    assert_eq!(v["error"]["field"], "limit", "{v}");
    let r = rest.call(
        "POST",
        "/api/v1/jobs",
        &[
            "-H",
            &format!("Authorization: Bearer {admin}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            "{\"command\": ",
        ],
    );
    r.error(400, "invalid_argument");
    rest.with_token(&admin, "GET", "/api/v1/jobs/ffffffff", None)
        .error(404, "not_found");

    // Paging: newest first, `next_offset` until the last page.
    for i in 0..3 {
        let r = rest.with_token(
            &admin,
            "POST",
            "/api/v1/jobs",
            Some(&json!({"command": "echo", "args": [i.to_string()]})),
        );
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let p1 = rest
        .with_token(&admin, "GET", "/api/v1/jobs?limit=2", None)
        .json();
    assert_eq!(p1["jobs"].as_array().unwrap().len(), 2, "{p1}");
    assert_eq!(p1["next_offset"], 2, "{p1}");
    let p2 = rest
        .with_token(&admin, "GET", "/api/v1/jobs?limit=2&offset=2", None)
        .json();
    assert_eq!(p2["jobs"].as_array().unwrap().len(), 2, "{p2}");
    assert!(p2["next_offset"].is_null(), "{p2}");
    let ids: Vec<&str> = p1["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .chain(p2["jobs"].as_array().unwrap())
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
        4,
        "{ids:?}"
    );
    assert_eq!(ids[3], id, "the oldest job comes last");
    let mine = rest
        .with_token(&admin, "GET", "/api/v1/jobs?owner=nobody", None)
        .json();
    assert_eq!(mine["jobs"].as_array().unwrap().len(), 0, "{mine}");
    let running = rest
        .with_token(&admin, "GET", "/api/v1/jobs?state=RUNNING", None)
        .json();
    assert!(
        running["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] == "RUNNING"),
        "{running}"
    );

    // Revoked: 401 at once.
    node.rnx_ok(&["token", "revoke", "viewer-bot"]);
    rest.with_token(&viewer, "GET", "/api/v1/jobs", None)
        .error(401, "unauthenticated");
    let r = rest.with_token(&admin, "POST", &format!("/api/v1/jobs/{id}/kill"), None);
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn console_link_works_once_and_cookie_changes_need_the_csrf_token() {
    let node = Node::start().unwrap();
    let rest = Rest::of(&node);
    let link = node.rnx_json(&["console"]);
    let url = link["url"].as_str().unwrap().to_owned();
    let path = url
        .strip_prefix(&rest.base)
        .unwrap_or_else(|| panic!("{url} is not on {}", rest.base))
        .to_owned();
    assert!(path.starts_with("/console/login?code=jbc_"), "{url}");

    let r = rest.call("GET", &path, &[]);
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/console/"));
    let cookie = r.header("set-cookie").expect("Set-Cookie").to_owned();
    let (pair, flags) = cookie.split_once("; ").unwrap();
    assert_eq!(
        flags, "HttpOnly; Secure; SameSite=Strict; Path=/",
        "{cookie}"
    );
    assert!(pair.starts_with("joblet_session=jbs_"), "{cookie}");
    // Used once: refused the second time.
    rest.call("GET", &path, &[]).error(401, "unauthenticated");

    let c = format!("Cookie: {pair}");
    let s = rest.call("GET", "/api/v1/session", &["-H", &c]);
    assert_eq!(s.status, 200, "{}", s.body);
    let s = s.json();
    assert_eq!(s["role"], "admin");
    let csrf = s["csrf"].as_str().unwrap().to_owned();

    let body = json!({"command": "true"}).to_string();
    let post = |more: &[&str]| {
        let mut args = vec![
            "-H",
            c.as_str(),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body.as_str(),
        ];
        args.extend_from_slice(more);
        rest.call("POST", "/api/v1/jobs", &args)
    };
    post(&[]).error(403, "permission_denied");
    post(&["-H", "X-Joblet-CSRF: 0000"]).error(403, "permission_denied");
    let x = format!("X-Joblet-CSRF: {csrf}");
    post(&["-H", &x, "-H", "Origin: https://evil.example"]).error(403, "permission_denied");
    let ok = post(&["-H", &x]);
    assert_eq!(ok.status, 201, "{}", ok.body);
    // Reads need no CSRF token.
    assert_eq!(rest.call("GET", "/api/v1/jobs", &["-H", &c]).status, 200);

    // A viewer console: read-only.
    let link = node.rnx_json(&["console", "--role", "viewer"]);
    let vpath = link["url"]
        .as_str()
        .unwrap()
        .strip_prefix(&rest.base)
        .unwrap()
        .to_owned();
    let vcookie = rest
        .call("GET", &vpath, &[])
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let vc = format!("Cookie: {vcookie}");
    let vcsrf = rest.call("GET", "/api/v1/session", &["-H", &vc]).json()["csrf"]
        .as_str()
        .unwrap()
        .to_owned();
    let vx = format!("X-Joblet-CSRF: {vcsrf}");
    rest.call(
        "POST",
        "/api/v1/jobs",
        &[
            "-H",
            &vc,
            "-H",
            &vx,
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &body,
        ],
    )
    .error(403, "permission_denied");

    // Logout ends the session.
    let out = rest.call("POST", "/api/v1/session/logout", &["-H", &c, "-H", &x]);
    assert_eq!(out.status, 204, "{}", out.body);
    rest.call("GET", "/api/v1/session", &["-H", &c])
        .error(401, "unauthenticated");
}

#[test]
fn server_sent_events_stream_a_running_jobs_output_until_it_ends() {
    let node = Node::start().unwrap();
    let rest = Rest::of(&node);
    let token = mint(&node, "streamer", "admin");
    let job = rest.with_token(
        &token,
        "POST",
        "/api/v1/jobs",
        Some(&json!({"command": "sh", "args": ["-c", "for i in 1 2 3; do echo line$i; sleep 0.5; done"]})),
    );
    assert_eq!(job.status, 201, "{}", job.body);
    let id = job.json()["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let auth = format!("Authorization: Bearer {token}");
    let r = rest.call(
        "GET",
        &format!("/api/v1/jobs/{id}/logs?follow=true"),
        &["-N", "-H", &auth],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream")),
        "{:?}",
        r.headers
    );
    // curl returned: the stream ended with the job, after its output.
    assert!(started.elapsed() < Duration::from_secs(25));
    let mut data = String::new();
    let mut events = Vec::new();
    for line in r.body.lines() {
        if let Some(e) = line.strip_prefix("event: ") {
            events.push(e.to_owned());
        } else if let Some(d) = line.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(d).unwrap();
            if let Some(s) = v["data"].as_str() {
                data.push_str(s);
            }
            if v["state"].is_string() {
                assert_eq!(v["state"], "COMPLETED", "{v}");
            }
        }
    }
    assert_eq!(data, "line1\nline2\nline3\n", "{}", r.body);
    assert_eq!(events.last().map(String::as_str), Some("end"), "{events:?}");
    // Without follow: the same output as JSON.
    let v = rest
        .with_token(&token, "GET", &format!("/api/v1/jobs/{id}/logs"), None)
        .json();
    assert_eq!(v["end"]["state"], "COMPLETED", "{v}");
    let _ = wait_done(&rest, &token, &id);
}

/// The pinned schemathesis of scripts/pytools.sh.
fn schemathesis() -> PathBuf {
    let venv = std::env::var_os("JOBLET_PYTOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/lib/joblet-pytools"));
    let bin = venv.join("bin/schemathesis");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup.sh (it installs the test tools with scripts/pytools.sh)",
        bin.display()
    );
    bin
}

/// Operations left out of the fuzzing (by operation id), and why:
/// creating volumes makes ext4 images and tmpfs mounts as large as the
/// fuzzer asks (minutes of mkfs, the host's memory); the runtime
/// self-test runs a runtime's jobs; a log followed (`?follow=true`) keeps
/// its response open while the job runs. Each is tested above or in
/// volumes.rs / runtimes.rs over gRPC through the same service calls.
const EXCLUDED: &[&str] = &["create_volume", "test_runtime", "logs"];

#[test]
fn the_api_matches_its_openapi_document_under_schemathesis() {
    let bin = schemathesis();
    let node = SimGpuNode::start(64, "", "").unwrap();
    let rest = Rest::of(&node);
    let token = mint(&node, "fuzzer", "admin");
    // The document itself is served and names every area.
    let doc = rest.call("GET", "/api/v1/openapi.json", &[]).json();
    for p in [
        "/api/v1/jobs",
        "/api/v1/jobs/{id}/logs",
        "/api/v1/gpus",
        "/api/v1/workflows",
        "/api/v1/volumes",
        "/api/v1/runtimes",
        "/api/v1/nodes",
        "/api/v1/whoami",
        "/api/v1/session",
    ] {
        assert!(
            doc["paths"][p].is_object(),
            "{p} missing from the OpenAPI document"
        );
    }
    let examples = std::env::var("JOBLET_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "20".into());
    let report = node.dir.path().join("schemathesis");
    let mut cmd = Command::new(&bin);
    // Its example database goes in the node's temp dir, not the source tree.
    cmd.current_dir(node.dir.path()).arg("run")
        .arg(format!("{}/api/v1/openapi.json", rest.base))
        .args(["--url", &rest.base])
        .arg("--tls-verify")
        .arg(&rest.ca)
        .args(["-H", &format!("Authorization: Bearer {token}")])
        // One request per connection. A server may close a kept-alive
        // connection after any response (RFC 9112 §9.6), and a client that
        // writes its next POST into one the server is closing reads EOF;
        // a real client retries, the fuzzer reports "Network Error". With
        // `close` every request has a connection of its own, so an EOF
        // left is the server dropping a request it was answering.
        .args(["-H", "Connection: close"])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection"])
        .args(["--max-examples", &examples])
        .args(["--seed", "1"])
        .args(["--request-timeout", "20"])
        // One worker: with two, both threads import schemathesis's lazily
        // loaded modules at once and CPython 3.11 can fail the import
        // ("AST constructor recursion depth mismatch").
        .args(["--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--generation-deterministic"])
        .args(["--no-color", "--report", "junit", "--report-dir"])
        .arg(&report);
    for id in EXCLUDED {
        cmd.args(["--exclude-operation-id", id]);
    }
    let started = std::time::Instant::now();
    let out = cmd.output().expect("running schemathesis");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // What the daemon said while it was fuzzed: a dropped connection
    // ("Network Error") leaves its reason only there.
    let said: Vec<String> = node
        .daemon_log()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked"))
        .map(str::to_owned)
        .collect();
    let said = said[said.len().saturating_sub(40)..].join("\n");
    assert!(
        out.status.success(),
        "schemathesis found problems ({:?}):\n{text}\nthe daemon's warnings and errors (last 40):\n{said}",
        started.elapsed()
    );
    eprintln!("schemathesis passed in {:?}:\n{text}", started.elapsed());
}
