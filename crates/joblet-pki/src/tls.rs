//! rustls configurations for both ends of joblet's mutual-TLS connections: TLS 1.3 only, our CA only, ALPN h2.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::ca::CertPem;
use crate::error::PkiError;

/// The only application protocol spoken: gRPC over HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";

/// The ring provider, named explicitly so no process-wide default is needed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(pem: &str, what: &'static str) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| PkiError::Pem { what, source })?;
    if certs.is_empty() {
        return Err(PkiError::Pem {
            what,
            source: rustls_pki_types::pem::Error::NoItemsFound,
        });
    }
    Ok(certs)
}

fn key(pem: &str, what: &'static str) -> Result<PrivateKeyDer<'static>, PkiError> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|source| PkiError::Pem { what, source })
}

fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, PkiError> {
    let mut roots = RootCertStore::empty();
    for cert in certs(ca_pem, "CA certificate")? {
        roots.add(cert).map_err(|source| PkiError::Rustls {
            what: "trust anchor from the CA certificate",
            source,
        })?;
    }
    Ok(Arc::new(roots))
}

/// Server side: TLS 1.3 only, a client certificate chaining to `ca_pem` is
/// required, ALPN `h2`.
pub fn server_config(ca_pem: &str, cert: &CertPem) -> Result<ServerConfig, PkiError> {
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider.clone())
        .build()
        .map_err(|source| PkiError::Verifier { source })?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|source| PkiError::Rustls {
            what: "server config (TLS 1.3 with the ring provider)",
            source,
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            certs(&cert.cert, "server certificate")?,
            key(&cert.key, "server private key")?,
        )
        .map_err(|source| PkiError::Rustls {
            what: "server config from the server certificate and key",
            source,
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// Client side: TLS 1.3 only, trusts only `ca_pem` (no system roots),
/// presents `cert`, ALPN `h2`.
pub fn client_config(ca_pem: &str, cert: &CertPem) -> Result<ClientConfig, PkiError> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|source| PkiError::Rustls {
            what: "client config (TLS 1.3 with the ring provider)",
            source,
        })?
        .with_root_certificates(roots(ca_pem)?)
        .with_client_auth_cert(
            certs(&cert.cert, "client certificate")?,
            key(&cert.key, "client private key")?,
        )
        .map_err(|source| PkiError::Rustls {
            what: "client config from the client certificate and key",
            source,
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CertificateAuthority, Role, Validity};

    #[test]
    fn configs_build_and_advertise_h2() {
        let ca = CertificateAuthority::generate("ca", Validity::days_from_now(1)).unwrap();
        let server = ca
            .issue_server(&["localhost".into()], Validity::days_from_now(1))
            .unwrap();
        let client = ca
            .issue_client("admin", Role::Admin, Validity::days_from_now(1))
            .unwrap();
        let s = server_config(ca.cert_pem(), &server).unwrap();
        assert_eq!(s.alpn_protocols, vec![b"h2".to_vec()]);
        let c = client_config(ca.cert_pem(), &client).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec()]);
    }

    #[test]
    fn bad_pem_names_what_was_wrong() {
        let ca = CertificateAuthority::generate("ca", Validity::days_from_now(1)).unwrap();
        let client = ca
            .issue_client("admin", Role::Admin, Validity::days_from_now(1))
            .unwrap();
        let err = client_config("", &client).unwrap_err();
        assert!(
            matches!(
                err,
                PkiError::Pem {
                    what: "CA certificate",
                    ..
                }
            ),
            "{err}"
        );
        let no_key = CertPem {
            cert: client.cert.clone(),
            key: String::new(),
        };
        let err = client_config(ca.cert_pem(), &no_key).unwrap_err();
        assert!(
            matches!(
                err,
                PkiError::Pem {
                    what: "client private key",
                    ..
                }
            ),
            "{err}"
        );
        let swapped = CertPem {
            cert: client.cert.clone(),
            key: ca.key_pem(),
        };
        let err = server_config(ca.cert_pem(), &swapped).unwrap_err();
        assert!(matches!(err, PkiError::Rustls { .. }), "{err}");
    }
}
