//! The one error type of this crate: every variant names what failed and on which name or path.

use std::path::PathBuf;

/// Why a PKI operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A PEM document could not be decoded.
    #[error("cannot decode the {what} PEM: {source}; expected a PEM block written by joblet")]
    Pem {
        what: &'static str,
        #[source]
        source: rustls_pki_types::pem::Error,
    },

    /// A DER certificate could not be parsed.
    #[error("cannot parse the {what} as an X.509 certificate: {source}")]
    X509 {
        what: &'static str,
        #[source]
        source: x509_parser::nom::Err<x509_parser::error::X509Error>,
    },

    /// Reading or writing a file failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A client name does not have the accepted form.
    #[error(
        "invalid client name {name:?}: expected 1 to 64 characters from A-Z a-z 0-9 '.' '_' '@' '-'"
    )]
    InvalidName { name: String },

    /// A file base name would escape the directory or is empty.
    #[error("invalid file base name {base:?}: expected a plain file name without '/' (not empty, '.' or '..')")]
    InvalidFileBase { base: String },

    /// A server certificate was requested for no host at all.
    #[error("a server certificate needs at least one host name or IP address")]
    NoHosts,

    /// A server host is neither an IP address nor a DNS name.
    #[error("invalid server host {host:?}: expected an IP address or a DNS name (letters, digits, '-', dot-separated)")]
    InvalidHost { host: String },

    /// The requested validity ends before it starts.
    #[error("invalid validity: not_after ({not_after}) is not after not_before ({not_before})")]
    InvalidValidity {
        not_before: time::OffsetDateTime,
        not_after: time::OffsetDateTime,
    },

    /// A role name is not one of the accepted roles.
    #[error("unknown role {found:?}: accepted roles are \"admin\" and \"viewer\"")]
    UnknownRole { found: String },

    /// A client certificate's subject lacks a required attribute.
    #[error("client certificate subject has no {field}: joblet client certificates carry CN=<name> and OU=admin|viewer")]
    MissingField { field: &'static str },

    /// A client certificate's subject carries a required attribute more than once.
    #[error("client certificate subject has more than one {field}; expected exactly one")]
    DuplicateField { field: &'static str },

    /// A subject attribute is not a readable string.
    #[error("client certificate subject {field} is not a UTF-8/printable string: {source}")]
    UnreadableField {
        field: &'static str,
        #[source]
        source: x509_parser::error::X509Error,
    },

    /// The certificate given as the CA is not a CA certificate.
    #[error("the CA certificate (subject {subject:?}) does not have basicConstraints CA:true; is this the right file?")]
    NotCa { subject: String },

    /// The CA key does not belong to the CA certificate.
    #[error("the CA private key does not match the CA certificate (subject {subject:?}); the state directory holds a mismatched pair")]
    KeyMismatch { subject: String },

    /// rcgen refused to generate or sign something.
    #[error("cannot generate the {what}: {source}")]
    Rcgen {
        what: String,
        #[source]
        source: rcgen::Error,
    },

    /// rustls refused a certificate, key or configuration.
    #[error("cannot build the TLS {what}: {source}")]
    Rustls {
        what: &'static str,
        #[source]
        source: rustls::Error,
    },

    /// The client-certificate verifier could not be built.
    #[error("cannot build the client certificate verifier from the CA certificate: {source}")]
    Verifier {
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
}
