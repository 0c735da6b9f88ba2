//! Who may do what: admin and viewer roles from the certificate's OU, the
//! owner recorded from its CN, and connections without a certificate from
//! our CA (none, another CA's, expired) refused during the handshake.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use joblet_e2e::{joblet_bin, rnx_bin, Node};
use joblet_pki::{CertificateAuthority, Role, Validity};

fn issue(node: &Node, name: &str, role: &str, out: &Path) {
    let o = Command::new(joblet_bin())
        .args(["cert", "issue", "--name", name, "--role", role, "--out"])
        .arg(out)
        .arg("--config")
        .arg(node.config_path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn rnx_with(config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(rnx_bin())
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn viewer_reads_but_never_changes() {
    let node = Node::start().unwrap();
    let id = node.run(&["--", "sleep", "30"]);
    let dir = node.dir.path().join("bob");
    issue(&node, "bob", "viewer", &dir);
    let cfg = dir.join("rnx-config.yml");

    for args in [
        &["job", "list"][..],
        &["job", "status", &id],
        &["job", "log", &id],
        &["whoami"],
    ] {
        let o = rnx_with(&cfg, args);
        assert!(
            o.status.success(),
            "viewer {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for args in [
        &["job", "run", "--", "true"][..],
        &["job", "stop", &id],
        &["job", "kill", &id],
        &["job", "delete", &id],
    ] {
        let o = rnx_with(&cfg, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(1),
            "viewer {args:?} must be refused: {err}"
        );
        assert!(err.contains("viewer") && err.contains("may not"), "{err}");
    }
    assert_eq!(
        node.status(&id)["state"],
        "RUNNING",
        "viewer could not stop it"
    );
    assert_eq!(
        node.rnx_json(&["job", "list"]).as_array().unwrap().len(),
        1,
        "viewer could not add a job"
    );

    // A second admin identity: its name is the owner of its jobs.
    let alice = node.dir.path().join("alice");
    issue(&node, "alice", "admin", &alice);
    let o = rnx_with(&alice.join("rnx-config.yml"), &["job", "run", "--", "true"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alice_job = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    assert_eq!(node.status(&alice_job)["owner"], "alice");
    node.rnx_ok(&["job", "kill", &id]);
}

/// Writes an rnx config for `node` with the given client certificate.
fn config_with(
    node: &Node,
    dir: &Path,
    ca_pem: &str,
    cert: &joblet_pki::CertPem,
) -> std::path::PathBuf {
    let file = joblet_proto_file(node, ca_pem, cert);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("rnx-config.yml");
    std::fs::write(&path, file).unwrap();
    path
}

fn joblet_proto_file(node: &Node, ca_pem: &str, cert: &joblet_pki::CertPem) -> String {
    let indent = |s: &str| {
        s.lines()
            .map(|l| format!("      {l}\n"))
            .collect::<String>()
    };
    format!(
        "version: \"1\"\nnodes:\n  default:\n    address: \"127.0.0.1:{}\"\n    server_name: localhost\n    ca: |\n{}    cert: |\n{}    key: |\n{}",
        node.port,
        indent(ca_pem),
        indent(&cert.cert),
        indent(&cert.key)
    )
}

#[test]
fn certificates_from_another_ca_or_expired_are_refused() {
    let node = Node::start().unwrap();
    let ca_pem = std::fs::read_to_string(node.state_dir().join("pki/ca.crt")).unwrap();
    let real = joblet_pki::read_pem_files(&node.state_dir().join("pki"), "ca").unwrap();
    let real_ca = CertificateAuthority::from_pem(&real.cert, &real.key).unwrap();

    // Another CA's admin certificate.
    let rogue = CertificateAuthority::generate("rogue CA", Validity::days_from_now(10)).unwrap();
    let rogue_cert = rogue
        .issue_client("admin", Role::Admin, Validity::days_from_now(10))
        .unwrap();
    let cfg = config_with(&node, &node.dir.path().join("rogue"), &ca_pem, &rogue_cert);
    let o = rnx_with(&cfg, &["job", "run", "--", "true"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "wrong CA: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Our CA, but expired yesterday.
    let now = time::OffsetDateTime::now_utc();
    let expired = Validity {
        not_before: now - time::Duration::days(10),
        not_after: now - time::Duration::days(1),
    };
    let old = real_ca.issue_client("admin", Role::Admin, expired).unwrap();
    let cfg = config_with(&node, &node.dir.path().join("expired"), &ca_pem, &old);
    let o = rnx_with(&cfg, &["job", "list"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "expired: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    assert_eq!(node.rnx_json(&["job", "list"]).as_array().unwrap().len(), 0);
    assert!(
        node.daemon_log().contains("TLS handshake refused"),
        "refusals are logged"
    );
}

#[test]
fn a_client_without_a_certificate_is_refused() {
    let node = Node::start().unwrap();
    let ca_pem = std::fs::read_to_string(node.state_dir().join("pki/ca.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile_certs(&ca_pem) {
        roots.add(c).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    use std::io::{Read, Write};
    // TLS 1.3: the server's verdict on our (missing) certificate arrives after our Finished.
    let _ = tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let mut buf = [0u8; 64];
    let res = tls.read(&mut buf);
    assert!(
        matches!(res, Err(_) | Ok(0)),
        "server must close on a client without certificate, got {res:?}"
    );
}

fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap())
        .collect()
}

/// Root on the node reaches the daemon through its local socket, which the
/// admin config names: no TCP, no TLS, identity `admin` from the kernel's
/// peer credentials. The same config without `socket:` goes over mutual
/// TLS as before. The socket is root's only (0600) and goes away with the
/// daemon.
#[test]
fn root_on_the_node_uses_the_local_socket() {
    let mut node = Node::start().unwrap();
    let sock = node.state_dir().join("joblet.sock");
    let text = std::fs::read_to_string(node.client_config()).unwrap();
    assert!(
        text.contains(&format!("socket: {}", sock.display())),
        "{text}"
    );
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let local = node.rnx(&["whoami"]);
    let out = String::from_utf8_lossy(&local.stdout);
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    assert!(out.contains(&format!("(unix:{})", sock.display())), "{out}");
    assert!(out.contains("Role: admin"), "{out}");
    let run = node.rnx(&["job", "run", "-f", "--", "echo", "via-socket"]);
    assert_eq!(String::from_utf8_lossy(&run.stdout), "via-socket\n");

    let tls_config = node.dir.path().join("tls-only.yml");
    let without: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("socket:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&tls_config, without).unwrap();
    let tls = rnx_with(&tls_config, &["whoami"]);
    let out = String::from_utf8_lossy(&tls.stdout);
    assert!(
        tls.status.success(),
        "{}",
        String::from_utf8_lossy(&tls.stderr)
    );
    assert!(out.contains("(127.0.0.1:"), "{out}");
    assert!(out.contains("Name: admin"), "{out}");

    // A socket that is gone (daemon stopped) makes rnx fall back to TLS,
    // which then explains that nothing listens.
    node.stop_daemon();
    assert!(
        !sock.exists(),
        "the daemon removes its socket when it stops"
    );
    let down = node.rnx(&["whoami"]);
    assert!(!down.status.success());
    assert!(
        String::from_utf8_lossy(&down.stderr).contains("cannot reach joblet at 127.0.0.1:"),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
}
