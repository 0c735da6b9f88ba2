//! The daemon's local socket, `<state_dir>/joblet.sock` (mode 0600): root
//! on the node reaches the API without TCP or TLS, the way `docker` talks
//! to `dockerd`. The peer is identified by the kernel (`SO_PEERCRED`), not
//! by a certificate: uid 0 is the node's `admin` (root can read the admin's
//! key in the state directory anyway), anyone else is refused.
//!
//! The admin `rnx-config.yml` the daemon writes names the socket; `rnx`
//! uses it when it can connect and falls back to mutual TLS otherwise.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use joblet_pki::{Identity, Role};
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::service::IdentityError;
use crate::tls::{PeerInfo, PeerStream};

/// The identity root gets on the local socket: the one of the admin
/// certificate the daemon created.
pub const ADMIN: &str = "admin";

/// Who a local peer is, from its uid.
pub fn identity(uid: u32) -> Result<Identity, IdentityError> {
    if uid == 0 {
        Ok(Identity {
            name: ADMIN.to_owned(),
            role: Role::Admin,
        })
    } else {
        Err(IdentityError::LocalNotRoot { uid })
    }
}

/// Binds the local socket at `path` (a stale one from an earlier daemon is
/// replaced: the state directory's lock says no other daemon uses it),
/// readable and writable by root only.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts connections on `listener` forever, each with its peer's identity.
pub fn incoming(listener: UnixListener) -> ReceiverStream<Result<PeerStream, io::Error>> {
    let (tx, rx) = mpsc::channel(128);
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the local socket failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let info = match stream.peer_cred() {
                Ok(cred) => PeerInfo {
                    peer: format!("local uid {}", cred.uid()),
                    identity: identity(cred.uid()),
                },
                Err(e) => PeerInfo {
                    peer: "local".to_owned(),
                    identity: Err(IdentityError::LocalPeer(std::sync::Arc::new(e))),
                },
            };
            if let Err(e) = &info.identity {
                tracing::warn!(peer = %info.peer, error = %e, "local socket peer refused");
            }
            if tx.send(Ok(PeerStream::local(stream, info))).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_the_admin_and_others_are_refused() {
        let root = identity(0).unwrap();
        assert_eq!((root.name.as_str(), root.role), (ADMIN, Role::Admin));
        let err = identity(1000).unwrap_err().to_string();
        assert!(
            err.contains("uid 1000") && err.contains("only root"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_socket_is_private_and_replaces_a_stale_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("joblet.sock");
        std::fs::write(&path, "stale").unwrap();
        let _l = bind(&path).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
}
