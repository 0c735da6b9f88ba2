//! The certificate authority: creates itself, reloads from PEM, and issues server and client certificates.

use std::net::IpAddr;

use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType, PKCS_ECDSA_P256_SHA256,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::error::PkiError;
use crate::identity::{validate_name, Role};

/// Organization (O) written into every certificate this CA issues.
pub const ORGANIZATION: &str = "joblet";

/// A certificate and its private key, both PEM-encoded.
#[derive(Debug, Clone)]
pub struct CertPem {
    pub cert: String,
    pub key: String,
}

/// When a certificate is valid.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// Valid from one hour ago (tolerating clock skew between hosts) until `days` from now.
    pub fn days_from_now(days: u32) -> Self {
        let now = OffsetDateTime::now_utc();
        Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(i64::from(days)),
        }
    }

    fn check(&self) -> Result<(), PkiError> {
        if self.not_after > self.not_before {
            Ok(())
        } else {
            Err(PkiError::InvalidValidity {
                not_before: self.not_before,
                not_after: self.not_after,
            })
        }
    }

    fn apply(&self, params: &mut CertificateParams) {
        params.not_before = self.not_before;
        params.not_after = self.not_after;
    }
}

/// Joblet's own CA: an ECDSA P-256 key and a self-signed certificate that
/// may sign end-entity certificates only (path length 0).
#[derive(Debug)]
pub struct CertificateAuthority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl CertificateAuthority {
    /// Creates a new CA with subject `CN=<common_name>, O=joblet`.
    pub fn generate(common_name: &str, validity: Validity) -> Result<Self, PkiError> {
        validity.check()?;
        let key = new_key("CA private key")?;
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(common_name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity.apply(&mut params);
        let cert = params.self_signed(&key).map_err(|source| PkiError::Rcgen {
            what: format!("self-signed CA certificate {common_name:?}"),
            source,
        })?;
        Ok(CertificateAuthority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Reloads a CA written earlier (`cert_pem()` / `key_pem()`), checking
    /// that the certificate is a CA and that the key belongs to it.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(|source| PkiError::Rcgen {
            what: "CA key pair from its PEM (expected an unencrypted PKCS#8 \"PRIVATE KEY\")"
                .to_owned(),
            source,
        })?;
        let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|source| {
            PkiError::Pem {
                what: "CA certificate",
                source,
            }
        })?;
        let (_, x509) = X509Certificate::from_der(&der).map_err(|source| PkiError::X509 {
            what: "CA certificate",
            source,
        })?;
        let subject = x509.subject().to_string();
        if !x509.is_ca() {
            return Err(PkiError::NotCa { subject });
        }
        if x509.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(PkiError::KeyMismatch { subject });
        }
        let issuer = Issuer::from_ca_cert_der(&der, key).map_err(|source| PkiError::Rcgen {
            what: format!("issuer from the CA certificate {subject:?}"),
            source,
        })?;
        Ok(CertificateAuthority {
            cert_pem: cert_pem.to_owned(),
            issuer,
        })
    }

    /// The CA certificate, PEM-encoded: the trust anchor for both sides.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, PEM-encoded (PKCS#8). Store it with mode 0600.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// Server cert: SANs = each host as IP address if it parses as one, else DNS name; EKU serverAuth.
    pub fn issue_server(&self, hosts: &[String], validity: Validity) -> Result<CertPem, PkiError> {
        validity.check()?;
        let first = hosts.first().ok_or(PkiError::NoHosts)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(first, None);
        params.subject_alt_names = hosts
            .iter()
            .map(|host| san(host))
            .collect::<Result<_, _>>()?;
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
        validity.apply(&mut params);
        self.sign_leaf(params, "server certificate")
    }

    /// Client cert: subject CN=name, OU=role, O="joblet"; EKU clientAuth.
    /// Name must match `[A-Za-z0-9._@-]{1,64}`.
    pub fn issue_client(
        &self,
        name: &str,
        role: Role,
        validity: Validity,
    ) -> Result<CertPem, PkiError> {
        validate_name(name)?;
        validity.check()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(name, Some(role));
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
        validity.apply(&mut params);
        self.sign_leaf(params, "client certificate")
    }

    /// Gives `params` a fresh key, the leaf key usage and an authority key
    /// identifier, and signs it with the CA key.
    fn sign_leaf(
        &self,
        mut params: CertificateParams,
        what: &'static str,
    ) -> Result<CertPem, PkiError> {
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let key = new_key(what)?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|source| PkiError::Rcgen {
                what: what.to_owned(),
                source,
            })?;
        Ok(CertPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

fn new_key(what: &str) -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|source| PkiError::Rcgen {
        what: format!("ECDSA P-256 key for the {what}"),
        source,
    })
}

fn subject(common_name: &str, role: Option<Role>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORGANIZATION);
    if let Some(role) = role {
        dn.push(DnType::OrganizationalUnitName, role.as_str());
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

fn san(host: &str) -> Result<SanType, PkiError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        return Err(PkiError::InvalidHost {
            host: host.to_owned(),
        });
    }
    let name = Ia5String::try_from(host).map_err(|source| PkiError::Rcgen {
        what: format!("DNS subject alternative name {host:?}"),
        source,
    })?;
    Ok(SanType::DnsName(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;

    fn parse(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    fn ca() -> CertificateAuthority {
        CertificateAuthority::generate("joblet test CA", Validity::days_from_now(30)).unwrap()
    }

    /// Asserts that `leaf_pem` carries a valid signature by `ca_pem`'s key.
    fn assert_signed_by(leaf_pem: &str, ca_pem: &str) {
        let leaf_der = parse(leaf_pem);
        let ca_der = parse(ca_pem);
        let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        leaf.verify_signature(Some(ca.public_key())).unwrap();
        assert_eq!(leaf.issuer(), ca.subject());
    }

    #[test]
    fn ca_is_a_p256_ca_with_cert_sign() {
        let ca = ca();
        let der = parse(ca.cert_pem());
        let (_, x509) = X509Certificate::from_der(&der).unwrap();
        assert!(x509.is_ca());
        let bc = x509.basic_constraints().unwrap().unwrap().value;
        assert_eq!(bc.path_len_constraint, Some(0));
        let ku = x509.key_usage().unwrap().unwrap().value;
        assert!(ku.key_cert_sign());
        assert_eq!(
            x509.public_key()
                .algorithm
                .parameters
                .as_ref()
                .map(|p| p.as_oid().unwrap().to_id_string()),
            Some("1.2.840.10045.3.1.7".to_owned()),
            "P-256 curve"
        );
        assert_eq!(
            x509.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "joblet test CA"
        );
        assert!(ca.key_pem().contains("BEGIN PRIVATE KEY"));
    }

    #[test]
    fn server_cert_has_ip_and_dns_sans_and_server_auth() {
        let ca = ca();
        let pem = ca
            .issue_server(
                &["localhost".into(), "127.0.0.1".into(), "::1".into()],
                Validity::days_from_now(1),
            )
            .unwrap();
        assert_signed_by(&pem.cert, ca.cert_pem());
        let der = parse(&pem.cert);
        let (_, x509) = X509Certificate::from_der(&der).unwrap();
        let sans = &x509
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names;
        assert_eq!(sans.len(), 3);
        assert!(matches!(sans[0], GeneralName::DNSName("localhost")));
        assert!(matches!(sans[1], GeneralName::IPAddress(ip) if ip == [127, 0, 0, 1]));
        assert!(matches!(sans[2], GeneralName::IPAddress(ip) if ip.len() == 16));
        let eku = x509.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        assert!(!x509.is_ca());
    }

    #[test]
    fn server_cert_needs_valid_hosts() {
        let ca = ca();
        let err = ca
            .issue_server(&[], Validity::days_from_now(1))
            .unwrap_err();
        assert!(matches!(err, PkiError::NoHosts), "{err}");
        for bad in ["", "bad host", "a..b", "émoji.example"] {
            let err = ca
                .issue_server(
                    &["localhost".into(), bad.into()],
                    Validity::days_from_now(1),
                )
                .unwrap_err();
            assert!(
                matches!(&err, PkiError::InvalidHost { host } if host == bad),
                "{err}"
            );
        }
    }

    #[test]
    fn client_cert_has_cn_ou_o_and_client_auth() {
        let ca = ca();
        for (name, role) in [("admin", Role::Admin), ("alice@example.com", Role::Viewer)] {
            let pem = ca
                .issue_client(name, role, Validity::days_from_now(1))
                .unwrap();
            assert_signed_by(&pem.cert, ca.cert_pem());
            let der = parse(&pem.cert);
            let id = crate::identity_from_der(&der).unwrap();
            assert_eq!(id.name, name);
            assert_eq!(id.role, role);
            let (_, x509) = X509Certificate::from_der(&der).unwrap();
            let o = x509.subject().iter_organization().next().unwrap();
            assert_eq!(o.as_str().unwrap(), "joblet");
            let eku = x509.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.client_auth && !eku.server_auth);
        }
    }

    #[test]
    fn client_names_are_validated() {
        let ca = ca();
        let err = ca
            .issue_client("bad name", Role::Admin, Validity::days_from_now(1))
            .unwrap_err();
        assert!(matches!(err, PkiError::InvalidName { .. }), "{err}");
    }

    #[test]
    fn validity_must_end_after_it_starts() {
        let ca = ca();
        let now = OffsetDateTime::now_utc();
        let backwards = Validity {
            not_before: now,
            not_after: now - Duration::days(1),
        };
        let err = ca.issue_client("x", Role::Admin, backwards).unwrap_err();
        assert!(matches!(err, PkiError::InvalidValidity { .. }), "{err}");
        let err = CertificateAuthority::generate("ca", backwards).unwrap_err();
        assert!(matches!(err, PkiError::InvalidValidity { .. }), "{err}");
    }

    #[test]
    fn days_from_now_tolerates_skew() {
        let before = OffsetDateTime::now_utc();
        let v = Validity::days_from_now(10);
        assert!(v.not_before <= before - Duration::minutes(59));
        assert!(v.not_after >= before + Duration::days(10));
        assert!(v.not_after <= OffsetDateTime::now_utc() + Duration::days(10));
    }

    #[test]
    fn reloaded_ca_issues_certs_that_chain_to_the_original() {
        let ca = ca();
        let reloaded = CertificateAuthority::from_pem(ca.cert_pem(), &ca.key_pem()).unwrap();
        assert_eq!(reloaded.cert_pem(), ca.cert_pem());
        assert_eq!(reloaded.key_pem(), ca.key_pem());
        let client = reloaded
            .issue_client("viewer1", Role::Viewer, Validity::days_from_now(1))
            .unwrap();
        assert_signed_by(&client.cert, ca.cert_pem());
        // The authority key identifier must still name the CA's key.
        let leaf_der = parse(&client.cert);
        let ca_der = parse(ca.cert_pem());
        let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
        let (_, ca_x509) = X509Certificate::from_der(&ca_der).unwrap();
        let ski = ca_x509
            .iter_extensions()
            .find_map(|e| match e.parsed_extension() {
                x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => {
                    Some(k.0.to_vec())
                }
                _ => None,
            })
            .unwrap();
        let aki = leaf
            .iter_extensions()
            .find_map(|e| match e.parsed_extension() {
                x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(k) => {
                    k.key_identifier.as_ref().map(|k| k.0.to_vec())
                }
                _ => None,
            })
            .unwrap();
        assert_eq!(aki, ski);
    }

    #[test]
    fn from_pem_refuses_a_key_of_another_ca() {
        let a = ca();
        let b = ca();
        let err = CertificateAuthority::from_pem(a.cert_pem(), &b.key_pem()).unwrap_err();
        assert!(matches!(err, PkiError::KeyMismatch { .. }), "{err}");
    }

    #[test]
    fn from_pem_refuses_a_leaf_certificate() {
        let ca = ca();
        let leaf = ca
            .issue_client("x", Role::Admin, Validity::days_from_now(1))
            .unwrap();
        let err = CertificateAuthority::from_pem(&leaf.cert, &leaf.key).unwrap_err();
        assert!(matches!(err, PkiError::NotCa { .. }), "{err}");
    }

    #[test]
    fn from_pem_refuses_garbage() {
        let ca = ca();
        let err = CertificateAuthority::from_pem("nonsense", &ca.key_pem()).unwrap_err();
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
        let err = CertificateAuthority::from_pem(ca.cert_pem(), "nonsense").unwrap_err();
        assert!(matches!(err, PkiError::Rcgen { .. }), "{err}");
    }
}
