//! Who a client is: its name (certificate CN) and role (certificate OU).

use std::fmt;
use std::str::FromStr;

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

use crate::error::PkiError;

/// Longest accepted client name.
pub const MAX_NAME_LEN: usize = 64;

/// What a client may do: an admin may run and stop jobs, a viewer only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Viewer,
}

impl Role {
    /// The role as written in the certificate's OU and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Viewer => "viewer",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = PkiError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Role::Admin),
            "viewer" => Ok(Role::Viewer),
            other => Err(PkiError::UnknownRole {
                found: other.to_owned(),
            }),
        }
    }
}

/// An authenticated client: the name is recorded as a job's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub role: Role,
}

/// Accepts names matching `[A-Za-z0-9._@-]{1,64}`.
pub fn validate_name(name: &str) -> Result<(), PkiError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(PkiError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// Reads the client's name (CN) and role (OU) out of a DER certificate.
///
/// This does not verify the certificate: call it on a peer certificate that
/// the TLS handshake has already verified against the CA.
pub fn identity_from_der(cert_der: &[u8]) -> Result<Identity, PkiError> {
    let (_, cert) = X509Certificate::from_der(cert_der).map_err(|source| PkiError::X509 {
        what: "client certificate",
        source,
    })?;
    let subject = cert.subject();
    let name = single_attribute(subject.iter_common_name(), "CN")?;
    let ou = single_attribute(subject.iter_organizational_unit(), "OU")?;
    validate_name(name)?;
    let role = ou.parse()?;
    Ok(Identity {
        name: name.to_owned(),
        role,
    })
}

/// The one string value of a subject attribute; none or several is an error.
fn single_attribute<'a>(
    mut values: impl Iterator<Item = &'a AttributeTypeAndValue<'a>>,
    field: &'static str,
) -> Result<&'a str, PkiError> {
    let first = values.next().ok_or(PkiError::MissingField { field })?;
    if values.next().is_some() {
        return Err(PkiError::DuplicateField { field });
    }
    first
        .as_str()
        .map_err(|source| PkiError::UnreadableField { field, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn self_signed(subject: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn role_round_trips_through_strings() {
        for role in [Role::Admin, Role::Viewer] {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(role.to_string(), role.as_str());
        }
        let err = "root".parse::<Role>().unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("root") && msg.contains("admin") && msg.contains("viewer"),
            "{msg}"
        );
        assert!("Admin".parse::<Role>().is_err(), "roles are case-sensitive");
    }

    #[test]
    fn names_of_the_accepted_form_pass() {
        for name in [
            "admin",
            "alice@example.com",
            "ci-bot_2.0",
            "a",
            &"x".repeat(64),
        ] {
            validate_name(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn other_names_are_refused_with_the_accepted_form() {
        for name in [
            "",
            "has space",
            "slash/y",
            "semi;colon",
            "ünïcode",
            "new\nline",
            &"x".repeat(65),
        ] {
            let err = validate_name(name).unwrap_err();
            assert!(matches!(&err, PkiError::InvalidName { name: n } if n == name));
            assert!(err.to_string().contains("A-Z a-z 0-9"), "{err}");
        }
    }

    #[test]
    fn reads_name_and_role() {
        let der = self_signed(&[
            (DnType::OrganizationName, "joblet"),
            (DnType::OrganizationalUnitName, "viewer"),
            (DnType::CommonName, "bob"),
        ]);
        let id = identity_from_der(&der).unwrap();
        assert_eq!(
            id,
            Identity {
                name: "bob".into(),
                role: Role::Viewer
            }
        );
    }

    #[test]
    fn unknown_ou_is_refused_listing_accepted_roles() {
        let der = self_signed(&[
            (DnType::OrganizationalUnitName, "superuser"),
            (DnType::CommonName, "mallory"),
        ]);
        let err = identity_from_der(&der).unwrap_err();
        assert!(matches!(&err, PkiError::UnknownRole { found } if found == "superuser"));
        let msg = err.to_string();
        assert!(msg.contains("admin") && msg.contains("viewer"), "{msg}");
    }

    #[test]
    fn missing_ou_is_refused() {
        let der = self_signed(&[(DnType::CommonName, "carol")]);
        let err = identity_from_der(&der).unwrap_err();
        assert!(
            matches!(err, PkiError::MissingField { field: "OU" }),
            "{err}"
        );
        assert!(err.to_string().contains("OU=admin|viewer"), "{err}");
    }

    #[test]
    fn missing_cn_is_refused() {
        let der = self_signed(&[(DnType::OrganizationalUnitName, "admin")]);
        let err = identity_from_der(&der).unwrap_err();
        assert!(
            matches!(err, PkiError::MissingField { field: "CN" }),
            "{err}"
        );
    }

    #[test]
    fn two_ous_are_refused() {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "dave");
        // DistinguishedName::push replaces same-typed entries, so add the second OU
        // under its raw OID.
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, "viewer");
        params
            .distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 11]), "admin");
        let key = KeyPair::generate().unwrap();
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let err = identity_from_der(&der).unwrap_err();
        assert!(
            matches!(err, PkiError::DuplicateField { field: "OU" }),
            "{err}"
        );
    }

    #[test]
    fn cn_outside_the_name_form_is_refused() {
        let der = self_signed(&[
            (DnType::OrganizationalUnitName, "admin"),
            (DnType::CommonName, "evil name; rm -rf"),
        ]);
        let err = identity_from_der(&der).unwrap_err();
        assert!(matches!(err, PkiError::InvalidName { .. }), "{err}");
    }

    #[test]
    fn garbage_der_is_refused() {
        let err = identity_from_der(b"not a certificate").unwrap_err();
        assert!(matches!(err, PkiError::X509 { .. }), "{err}");
    }
}
