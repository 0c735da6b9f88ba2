//! Who is calling ([`Caller`]), what an operation needs of them
//! ([`Access`]), and why a peer could not be identified
//! ([`IdentityError`]).

use std::sync::Arc;

use joblet_pki::{Identity, PkiError, Role};

use super::ApiError;

/// The caller of an operation, as its transport identified it: the name
/// and role of a client certificate, or root on the local socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Recorded as the owner of the jobs it runs.
    pub name: String,
    pub role: Role,
}

/// What an operation needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Any identified caller (every role may read).
    Read,
    /// Role admin; the text says what the operation does ("run jobs"), for
    /// the refusal.
    Admin(&'static str),
}

impl Caller {
    /// Refuses the operation unless the caller's role allows `access`.
    pub fn check(&self, access: Access) -> Result<(), ApiError> {
        match access {
            Access::Read => Ok(()),
            Access::Admin(_) if self.role == Role::Admin => Ok(()),
            Access::Admin(action) => Err(ApiError::PermissionDenied {
                name: self.name.clone(),
                role: self.role.to_string(),
                action,
            }),
        }
    }
}

impl From<Identity> for Caller {
    fn from(id: Identity) -> Caller {
        Caller {
            name: id.name,
            role: id.role,
        }
    }
}

/// Why the peer of a connection is not a caller. Cheap to clone (each
/// request of a connection carries it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum IdentityError {
    /// The transport attached no peer to the request.
    #[error("no TLS peer information")]
    NoPeerInfo,
    #[error("no client certificate")]
    NoCertificate,
    /// The certificate chains to the node's CA but lacks a usable name or
    /// role.
    #[error("{0}")]
    Certificate(Arc<PkiError>),
    /// Only root may use the local socket.
    #[error("uid {uid} on the local socket: only root may use it; use the TLS address with a client certificate (`joblet cert issue`)")]
    LocalNotRoot { uid: u32 },
    /// The kernel would not say who the local peer is.
    #[error("cannot tell who is on the local socket: {0}")]
    LocalPeer(Arc<std::io::Error>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewers_read_and_admins_also_change() {
        let viewer = Caller {
            name: "bob".into(),
            role: Role::Viewer,
        };
        let admin = Caller {
            name: "alice".into(),
            role: Role::Admin,
        };
        assert!(viewer.check(Access::Read).is_ok());
        assert!(admin.check(Access::Admin("run jobs")).is_ok());
        let e = viewer.check(Access::Admin("run jobs")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bob has role \"viewer\", which may not run jobs; ask an admin for an admin certificate (`joblet cert issue --role admin`)"
        );
    }
}
