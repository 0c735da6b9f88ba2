//! Receiving uploaded files for a job. The manifest has already been
//! checked in full (`joblet_core::upload::check_manifest`); this writes the
//! entries into a fresh private staging directory, in manifest order:
//! directories and files are created new (never opened if they exist, never
//! through a symlink), each file gets exactly its announced size, symlinks
//! come last so no write can pass through one. Any failure removes the
//! staging directory: nothing half-uploaded survives.
//!
//! The data arrives as a stream of byte chunks ([`UploadData`]) that the
//! transport decoded; this knows nothing of gRPC.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use futures::{Stream, StreamExt};
use joblet_core::{FieldError, UploadEntry, UploadKind};

/// Where uploads wait until their job is recorded.
pub fn staging_root(state: &Path) -> PathBuf {
    state.join("uploads")
}

/// Removes staging dirs a crashed daemon left (their jobs were never recorded).
pub fn clean_staging(state: &Path) {
    let root = staging_root(state);
    if let Err(e) = fs::remove_dir_all(&root) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %root.display(), error = %e, "cannot clear old upload staging");
        }
    }
}

/// Why an upload's data stream did not deliver file data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadStreamError {
    /// The transport failed; its message.
    #[error("the upload stream broke: {0}")]
    Broken(String),
    /// Something other than file data followed the job.
    #[error("only file data may follow the job in SubmitJob")]
    NotData,
    /// Something other than file data followed the workflow.
    #[error("only file data may follow the workflow in RunWorkflow")]
    WorkflowNotData,
}

/// The chunks of an upload's file data, in manifest order (empty chunks
/// are skipped).
pub trait UploadData: Stream<Item = Result<Vec<u8>, UploadStreamError>> + Unpin {}
impl<S: Stream<Item = Result<Vec<u8>, UploadStreamError>> + Unpin> UploadData for S {}

/// Why an upload was not staged; the staging directory is gone either way.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The data did not match the manifest, or the stream broke (field
    /// `uploads`): the client's problem.
    #[error("{0}")]
    Invalid(#[from] FieldError),
    /// Writing the staged files failed on the node.
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn bad(problem: impl Into<String>) -> UploadError {
    joblet_core::FieldError::new("uploads", problem).into()
}

fn io_err(what: &'static str, path: &Path, source: std::io::Error) -> UploadError {
    UploadError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Receives the file contents for `manifest` from `data` into a new
/// directory under `staging`; returns it.
pub async fn receive(
    manifest: &[UploadEntry],
    data: impl UploadData,
    staging: &Path,
) -> Result<PathBuf, UploadError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(staging)
        .map_err(|e| io_err("cannot create", staging, e))?;
    let dir = staging.join(uuid::Uuid::new_v4().to_string());
    DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| io_err("cannot create", &dir, e))?;
    match write_all(manifest, data, &dir).await {
        Ok(()) => Ok(dir),
        Err(e) => {
            if let Err(rm) = fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %rm, "cannot remove a failed upload");
            }
            Err(e)
        }
    }
}

async fn write_all(
    manifest: &[UploadEntry],
    mut data: impl UploadData,
    dir: &Path,
) -> Result<(), UploadError> {
    let mut pending: Vec<u8> = Vec::new();
    for e in manifest {
        let path = dir.join(&e.path);
        match e.kind {
            UploadKind::Dir => DirBuilder::new()
                .mode(e.mode | 0o700)
                .create(&path)
                .map_err(|err| io_err("cannot create", &path, err))?,
            UploadKind::File => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .mode(e.mode)
                    .open(&path)
                    .map_err(|err| io_err("cannot create", &path, err))?;
                let mut left = e.size;
                while left > 0 {
                    if pending.is_empty() {
                        pending = next_chunk(&mut data).await?.ok_or_else(|| {
                            bad(format!(
                                "the upload ended before {:?} was complete ({left} bytes missing)",
                                e.path
                            ))
                        })?;
                    }
                    let take = pending
                        .len()
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    write_chunk(&mut file, &pending[..take], &path)?;
                    pending.drain(..take);
                    left -= take as u64;
                }
            }
            UploadKind::Symlink | UploadKind::Unknown => {}
        }
    }
    if !pending.is_empty() || next_chunk(&mut data).await?.is_some() {
        return Err(bad("more data than the manifest announced"));
    }
    for e in manifest.iter().filter(|e| e.kind == UploadKind::Symlink) {
        let path = dir.join(&e.path);
        std::os::unix::fs::symlink(&e.target, &path)
            .map_err(|err| io_err("cannot create symlink", &path, err))?;
    }
    Ok(())
}

fn write_chunk(file: &mut File, bytes: &[u8], path: &Path) -> Result<(), UploadError> {
    file.write_all(bytes)
        .map_err(|e| io_err("cannot write", path, e))
}

async fn next_chunk(data: &mut impl UploadData) -> Result<Option<Vec<u8>>, UploadError> {
    loop {
        match data.next().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(bad(e.to_string())),
            Some(Ok(d)) if d.is_empty() => continue,
            Some(Ok(d)) => return Ok(Some(d)),
        }
    }
}

/// Gives everything under `dir` (not following symlinks) to `uid:gid`.
pub fn chown_tree(dir: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    let (u, g) = (
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    );
    let own = |p: &Path| {
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            p,
            u,
            g,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(std::io::Error::from)
    };
    own(dir)?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            chown_tree(&path, uid, gid)?;
        } else {
            own(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(bytes: &[u8]) -> Result<Vec<u8>, UploadStreamError> {
        Ok(bytes.to_vec())
    }
    fn entry(path: &str, kind: UploadKind, size: u64, target: &str) -> UploadEntry {
        UploadEntry {
            path: path.into(),
            kind,
            mode: 0o640,
            size,
            target: target.into(),
        }
    }

    #[tokio::test]
    async fn a_tree_lands_byte_exact_with_chunks_spanning_files() {
        let tmp = tempfile::tempdir().unwrap();
        let m = vec![
            entry("a.txt", UploadKind::File, 3, ""),
            entry("d", UploadKind::Dir, 0, ""),
            entry("d/b.txt", UploadKind::File, 4, ""),
            entry("d/link", UploadKind::Symlink, 0, "b.txt"),
            entry("empty", UploadKind::File, 0, ""),
        ];
        let data = futures::stream::iter(vec![msg(b"ab"), msg(b"cwx"), msg(b"yz")]);
        let dir = receive(&m, data, tmp.path()).await.unwrap();
        assert_eq!(fs::read(dir.join("a.txt")).unwrap(), b"abc");
        assert_eq!(fs::read(dir.join("d/b.txt")).unwrap(), b"wxyz");
        assert_eq!(
            fs::read_link(dir.join("d/link")).unwrap(),
            Path::new("b.txt")
        );
        assert_eq!(fs::read(dir.join("empty")).unwrap(), b"");
    }

    #[tokio::test]
    async fn short_or_long_uploads_leave_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let m = vec![entry("a", UploadKind::File, 5, "")];
        let short = futures::stream::iter(vec![msg(b"abc")]);
        let e = receive(&m, short, tmp.path()).await.unwrap_err();
        assert!(e.to_string().contains("2 bytes missing"), "{e}");
        let long = futures::stream::iter(vec![msg(b"abcdef")]);
        let e = receive(&m, long, tmp.path()).await.unwrap_err();
        assert!(e.to_string().contains("more data"), "{e}");
        let broken = futures::stream::iter(vec![
            msg(b""),
            Err(UploadStreamError::Broken("reset".into())),
        ]);
        let e = receive(&m, broken, tmp.path()).await.unwrap_err();
        assert_eq!(e.to_string(), "uploads: the upload stream broke: reset");
        let other = futures::stream::iter(vec![msg(b"abcde"), Err(UploadStreamError::NotData)]);
        let e = receive(&m, other, tmp.path()).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "uploads: only file data may follow the job in SubmitJob"
        );
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "failed uploads removed"
        );
    }
}
