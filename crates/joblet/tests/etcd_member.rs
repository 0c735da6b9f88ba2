//! Cluster mode against a real etcd member of the test's own (free
//! loopback ports; Debian's etcd, which `scripts/setup.sh` installs; only
//! that member is killed):
//!
//! - over TLS (`cluster.etcd_tls`): the daemon's etcd client verifies
//!   etcd's certificate against the configured CA and presents its own
//!   when etcd checks them (`--client-cert-auth`); without one it is
//!   refused;
//! - etcd's space quota used up: the error a user gets says so and what an
//!   operator does about it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joblet::cluster::{etcd::etcd_error, ClusterError, EtcdPool};
use joblet::config::{ClusterConfig, EtcdTls};
use joblet_pki::{CertificateAuthority, Role, Validity};

struct Member(Child);

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reaches_etcd_over_tls_with_its_client_certificate_and_not_without() {
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::generate("etcd test CA", Validity::days_from_now(1)).unwrap();
    let server = ca
        .issue_server(
            &["127.0.0.1".into(), "localhost".into()],
            Validity::days_from_now(1),
        )
        .unwrap();
    let client = ca
        .issue_client("node-1", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    let ca_file = write(dir.path(), "ca.crt", ca.cert_pem());
    let (scrt, skey) = (
        write(dir.path(), "s.crt", &server.cert),
        write(dir.path(), "s.key", &server.key),
    );
    let (ccrt, ckey) = (
        write(dir.path(), "c.crt", &client.cert),
        write(dir.path(), "c.key", &client.key),
    );
    let (cport, pport) = (free_port(), free_port());
    let member = Member(
        Command::new("etcd")
            .args(["--name", "tls1", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg(format!("--listen-client-urls=https://127.0.0.1:{cport}"))
            .arg(format!("--advertise-client-urls=https://127.0.0.1:{cport}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{pport}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{pport}"
            ))
            .arg(format!("--initial-cluster=tls1=http://127.0.0.1:{pport}"))
            .arg("--client-cert-auth")
            .arg("--trusted-ca-file")
            .arg(&ca_file)
            .arg("--cert-file")
            .arg(&scrt)
            .arg("--key-file")
            .arg(&skey)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("etcd.log")).unwrap())
            .spawn()
            .expect("etcd (scripts/setup.sh installs it)"),
    );
    let endpoint = format!("https://127.0.0.1:{cport}");
    let cfg = |cert: bool| ClusterConfig {
        etcd: vec![endpoint.clone()],
        etcd_tls: Some(EtcdTls {
            ca: ca_file.clone(),
            cert: cert.then(|| ccrt.clone()),
            key: cert.then(|| ckey.clone()),
        }),
        ..ClusterConfig::default()
    };
    // With its certificate: a put and a get, once the member is up.
    let pool = EtcdPool::connect(&cfg(true)).await.expect("TLS client");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match pool.client().put("/joblet-tls/probe", "ok", None).await {
            Ok(_) => break,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no TLS put within 20 s: {e}\n{}",
                    std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let got = pool.client().get("/joblet-tls/probe", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"ok");
    // Without a client certificate etcd refuses the connection.
    let anonymous = EtcdPool::connect(&cfg(false)).await.expect("client built");
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        anonymous.client().get("/joblet-tls/probe", None),
    )
    .await
    .expect("an answer or an error within 10 s");
    assert!(
        refused.is_err(),
        "etcd served a client without a certificate"
    );
    drop(member);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_etcd_is_reported_as_such_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let (cport, pport) = (free_port(), free_port());
    let _member = Member(
        Command::new("etcd")
            .args(["--name", "q1", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{cport}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{cport}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{pport}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{pport}"
            ))
            .arg(format!("--initial-cluster=q1=http://127.0.0.1:{pport}"))
            // 2 MiB: filled in a moment.
            .arg("--quota-backend-bytes=2097152")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("etcd.log")).unwrap())
            .spawn()
            .expect("etcd (scripts/setup.sh installs it)"),
    );
    let endpoints = vec![format!("http://127.0.0.1:{cport}")];
    let pool = EtcdPool::with_endpoints(&endpoints).await.unwrap();
    let value = vec![b'x'; 256 * 1024];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0u32;
    let full = loop {
        assert!(Instant::now() < deadline, "etcd never filled up");
        match pool
            .client()
            .put(format!("/joblet-quota/{i}"), value.clone(), None)
            .await
        {
            Ok(_) => i += 1,
            Err(e) if e.to_string().contains("space exceeded") => break e,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let e = etcd_error(&endpoints, full);
    assert!(matches!(e, ClusterError::NoSpace), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("space quota is used up"), "{msg}");
    assert!(msg.contains("etcdctl alarm disarm"), "{msg}");
    assert!(msg.contains("running jobs keep running"), "{msg}");
}
