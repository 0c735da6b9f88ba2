//! Joblet's mutual-TLS identities.
//!
//! On first start the daemon creates a CA ([`CertificateAuthority::generate`]),
//! its server certificate and an `admin` client identity; later starts reload
//! the CA with [`CertificateAuthority::from_pem`]. A client's role is its
//! certificate's Organizational Unit (`admin` or `viewer`) and its name the
//! Common Name ([`identity_from_der`]). Connections are TLS 1.3 only, and the
//! server requires a client certificate chaining to our CA ([`server_config`],
//! [`client_config`]); webpki refuses expired and not-yet-valid certificates.
//!
//! This crate knows nothing about jobs, gRPC or async runtimes: it must not
//! depend on tokio, tonic or the other joblet crates. Its only filesystem
//! access is [`write_pem_files`]/[`read_pem_files`], which take their
//! directory as a parameter.

mod ca;
mod error;
mod files;
mod identity;
mod tls;

pub use ca::{CertPem, CertificateAuthority, Validity, ORGANIZATION};
pub use error::PkiError;
pub use files::{read_pem_files, write_pem_files};
pub use identity::{identity_from_der, validate_name, Identity, Role, MAX_NAME_LEN};
pub use tls::{client_config, server_config, ALPN_H2};
