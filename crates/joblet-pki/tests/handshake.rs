//! Real TLS handshakes between configs built by joblet-pki: who gets in, who is refused, and what the server sees.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

use joblet_pki::{
    client_config, identity_from_der, server_config, CertPem, CertificateAuthority, Identity, Role,
    Validity,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, Connection, ProtocolVersion, ServerConfig,
    ServerConnection,
};
use time::{Duration, OffsetDateTime};

struct Pki {
    ca: CertificateAuthority,
    server: CertPem,
}

fn pki() -> Pki {
    let ca = CertificateAuthority::generate("joblet test CA", Validity::days_from_now(30)).unwrap();
    let server = ca
        .issue_server(
            &["localhost".to_owned(), "127.0.0.1".to_owned()],
            Validity::days_from_now(30),
        )
        .unwrap();
    Pki { ca, server }
}

impl Pki {
    fn server_config(&self) -> ServerConfig {
        server_config(self.ca.cert_pem(), &self.server).unwrap()
    }

    fn client(&self, name: &str, role: Role, validity: Validity) -> ClientConfig {
        let cert = self.ca.issue_client(name, role, validity).unwrap();
        client_config(self.ca.cert_pem(), &cert).unwrap()
    }
}

/// Which side of the handshake failed, and why.
#[derive(Debug)]
enum Failed {
    Server(rustls::Error),
    Client(rustls::Error),
}

/// Runs a handshake entirely in memory and returns the server connection
/// once both sides are done, or the first side's error.
fn handshake(
    server: ServerConfig,
    client: ClientConfig,
    host: &str,
) -> Result<ServerConnection, Failed> {
    let name = ServerName::try_from(host.to_owned()).unwrap();
    let mut client = Connection::Client(ClientConnection::new(Arc::new(client), name).unwrap());
    let mut server = Connection::Server(ServerConnection::new(Arc::new(server)).unwrap());
    for _ in 0..20 {
        pump(&mut client, &mut server);
        server.process_new_packets().map_err(Failed::Server)?;
        pump(&mut server, &mut client);
        client.process_new_packets().map_err(Failed::Client)?;
        if !client.is_handshaking() && !server.is_handshaking() {
            // In TLS 1.3 the client finishes before the server has checked its
            // certificate; one more round makes sure the server has accepted it.
            pump(&mut client, &mut server);
            server.process_new_packets().map_err(Failed::Server)?;
            let Connection::Server(server) = server else {
                unreachable!()
            };
            return Ok(server);
        }
    }
    panic!("handshake did not finish in 20 rounds");
}

/// Moves every pending TLS record from `from` to `to`.
fn pump(from: &mut Connection, to: &mut Connection) {
    let mut buf = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut buf).unwrap();
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).unwrap();
    }
}

#[test]
fn admin_client_gets_in_and_server_sees_its_identity() {
    let pki = pki();
    let client = pki.client("admin", Role::Admin, Validity::days_from_now(1));
    let server = handshake(pki.server_config(), client, "localhost").unwrap();
    assert_eq!(server.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(server.alpn_protocol(), Some(&b"h2"[..]));
    let peer = server
        .peer_certificates()
        .expect("server saw a client certificate");
    assert_eq!(
        identity_from_der(&peer[0]).unwrap(),
        Identity {
            name: "admin".to_owned(),
            role: Role::Admin
        }
    );
}

#[test]
fn viewer_client_gets_in_with_its_role() {
    let pki = pki();
    let client = pki.client("bob@example.com", Role::Viewer, Validity::days_from_now(1));
    let server = handshake(pki.server_config(), client, "127.0.0.1").unwrap();
    let id = identity_from_der(&server.peer_certificates().unwrap()[0]).unwrap();
    assert_eq!(id.name, "bob@example.com");
    assert_eq!(id.role, Role::Viewer);
}

#[test]
fn server_name_must_be_in_the_sans() {
    let pki = pki();
    let client = pki.client("admin", Role::Admin, Validity::days_from_now(1));
    let err = handshake(pki.server_config(), client, "example.com").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Client(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn ca_reloaded_from_pem_issues_clients_the_server_accepts() {
    let pki = pki();
    let reloaded = CertificateAuthority::from_pem(pki.ca.cert_pem(), &pki.ca.key_pem()).unwrap();
    let cert = reloaded
        .issue_client("later", Role::Viewer, Validity::days_from_now(1))
        .unwrap();
    let client = client_config(reloaded.cert_pem(), &cert).unwrap();
    // The server still runs with the certificates from before the restart.
    let server = handshake(pki.server_config(), client, "localhost").unwrap();
    let id = identity_from_der(&server.peer_certificates().unwrap()[0]).unwrap();
    assert_eq!(id.name, "later");

    // And a server certificate from the reloaded CA is trusted by clients of the old one.
    let new_server = reloaded
        .issue_server(&["localhost".to_owned()], Validity::days_from_now(1))
        .unwrap();
    let server_cfg = server_config(pki.ca.cert_pem(), &new_server).unwrap();
    let client = pki.client("admin", Role::Admin, Validity::days_from_now(1));
    handshake(server_cfg, client, "localhost").unwrap();
}

#[test]
fn client_from_another_ca_is_refused() {
    let pki = pki();
    let other = CertificateAuthority::generate("other CA", Validity::days_from_now(30)).unwrap();
    let cert = other
        .issue_client("admin", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    // The client trusts our server, but its certificate is from a stranger.
    let client = client_config(pki.ca.cert_pem(), &cert).unwrap();
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Server(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn server_from_another_ca_is_refused_by_the_client() {
    let pki = pki();
    let other = CertificateAuthority::generate("other CA", Validity::days_from_now(30)).unwrap();
    let rogue = other
        .issue_server(&["localhost".to_owned()], Validity::days_from_now(1))
        .unwrap();
    let rogue_server = server_config(other.cert_pem(), &rogue).unwrap();
    let client = pki.client("admin", Role::Admin, Validity::days_from_now(1));
    let err = handshake(rogue_server, client, "localhost").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Client(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn expired_client_cert_is_refused() {
    let pki = pki();
    let now = OffsetDateTime::now_utc();
    let past = Validity {
        not_before: now - Duration::days(10),
        not_after: now - Duration::days(1),
    };
    let client = pki.client("admin", Role::Admin, past);
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Server(rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. }
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn not_yet_valid_client_cert_is_refused() {
    let pki = pki();
    let now = OffsetDateTime::now_utc();
    let future = Validity {
        not_before: now + Duration::days(1),
        not_after: now + Duration::days(10),
    };
    let client = pki.client("admin", Role::Admin, future);
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Server(rustls::Error::InvalidCertificate(
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. }
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn client_without_a_certificate_is_refused() {
    let pki = pki();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pki.ca.cert_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let client =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(err, Failed::Server(rustls::Error::NoCertificatesPresented)),
        "{err:?}"
    );
}

#[test]
fn server_cert_used_as_client_cert_is_refused() {
    // The server certificate chains to our CA but lacks the clientAuth EKU.
    let pki = pki();
    let client = client_config(pki.ca.cert_pem(), &pki.server).unwrap();
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(
            err,
            Failed::Server(rustls::Error::InvalidCertificate(
                CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. }
            ))
        ),
        "{err:?}"
    );
}

#[test]
fn tls12_only_client_is_refused() {
    let pki = pki();
    let cert = pki
        .ca
        .issue_client("admin", Role::Admin, Validity::days_from_now(1))
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(pki.ca.cert_pem().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(cert.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key.as_bytes()).unwrap();
    let client =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    let err = handshake(pki.server_config(), client, "localhost").unwrap_err();
    assert!(
        matches!(err, Failed::Server(rustls::Error::PeerIncompatible(_))),
        "{err:?}"
    );
}

#[test]
fn loopback_tcp_round_trip_carries_the_identity() {
    let pki = pki();
    let server_cfg = Arc::new(pki.server_config());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();

    let server = thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let conn = ServerConnection::new(server_cfg).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let mut line = String::new();
        BufReader::new(&mut tls).read_line(&mut line).unwrap();
        let id = identity_from_der(&tls.conn.peer_certificates().unwrap()[0]).unwrap();
        tls.write_all(format!("hello {} ({})\n", id.name, id.role).as_bytes())
            .unwrap();
        tls.conn.send_close_notify();
        tls.flush().unwrap();
        (line, id)
    });

    let client_cfg = Arc::new(pki.client("ops", Role::Viewer, Validity::days_from_now(1)));
    let conn =
        ClientConnection::new(client_cfg, ServerName::try_from("127.0.0.1").unwrap()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    tls.write_all(b"ping\n").unwrap();
    let mut reply = String::new();
    tls.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "hello ops (viewer)\n");
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"h2"[..]));

    let (line, id) = server.join().unwrap();
    assert_eq!(line, "ping\n");
    assert_eq!(
        id,
        Identity {
            name: "ops".to_owned(),
            role: Role::Viewer
        }
    );
}
