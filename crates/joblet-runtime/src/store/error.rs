//! Errors of the runtime store. Each one names the path or the runtime involved.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem operation failed; `op` says which (`create`, `rename`, …).
    #[error("runtime store: cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("runtime store: cannot lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },

    #[error(
        "runtime store: index record {} is unreadable ({source}); remove the file to drop \
         that runtime",
        path.display()
    )]
    Record {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    #[error("runtime {name}{} is not installed", version.as_deref().map(|v| format!("@{v}")).unwrap_or_default())]
    NotInstalled {
        name: String,
        version: Option<String>,
    },

    /// The operation was cancelled by its caller.
    #[error("cancelled")]
    Cancelled,

    #[error(
        "runtime store: refusing to remove {}: {mount} is a mount point that could not be \
         unmounted; unmount it, then retry",
        path.display(),
        mount = mount.display()
    )]
    MountInside { path: PathBuf, mount: PathBuf },
}

impl StoreError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { op, path, source }
    }
}
