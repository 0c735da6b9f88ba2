//! A workflow run's files on the node: what `rnx workflow run` uploaded
//! (the workflow file's directory, or the jobs' `uploads:`), kept at
//! `STATE/workflows/ID/files` for the run's life, and each job attempt's
//! copy of it, which becomes that attempt's `/work`.
//!
//! Each attempt gets its own copy, so jobs running side by side never see
//! each other's scratch files and a retry starts from the files as
//! uploaded. What a job hands on to the jobs after it goes to the run's
//! shared volume (`$JOBLET_WORKFLOW_SHARED`), not to `/work`.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The uploaded files of the run whose directory is `run_dir`.
pub fn files_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("files")
}

/// Moves a staged upload in as run `run_dir`'s files.
pub fn keep(staged: &Path, run_dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run_dir)?;
    fs::rename(staged, files_dir(run_dir))
}

/// A fresh copy, in a new directory under `staging`, of the run's files:
/// all of them, or only `uploads` (paths relative to the workflow file's
/// directory, as the job's `uploads:` lists them). A listed path the
/// upload lacks is an error naming it. Nothing is left behind on error.
pub fn stage_copy(run_dir: &Path, uploads: &[String], staging: &Path) -> io::Result<PathBuf> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(staging)?;
    let dest = staging.join(uuid::Uuid::new_v4().to_string());
    DirBuilder::new().mode(0o700).create(&dest)?;
    let from = files_dir(run_dir);
    let copied = if uploads.is_empty() {
        copy_children(&from, &dest)
    } else {
        uploads
            .iter()
            .try_for_each(|u| copy_listed(&from, &dest, u))
    };
    match copied {
        Ok(()) => Ok(dest),
        Err(e) => {
            let _ = fs::remove_dir_all(&dest);
            Err(e)
        }
    }
}

/// Copies `from/rel` to `dest/rel`, making the directories above it.
fn copy_listed(from: &Path, dest: &Path, rel: &str) -> io::Result<()> {
    let rel = rel.trim_start_matches("./").trim_end_matches('/');
    let src = from.join(rel);
    if fs::symlink_metadata(&src).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("uploads: {rel:?} was not uploaded with the workflow"),
        ));
    }
    let target = dest.join(rel);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    copy_entry(&src, &target)
}

fn copy_children(from: &Path, dest: &Path) -> io::Result<()> {
    if !from.exists() {
        return Ok(());
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        copy_entry(&entry.path(), &dest.join(entry.file_name()))?;
    }
    Ok(())
}

/// Copies one entry as it is: a directory with what it holds, a file with
/// its mode, a symlink as a symlink (the upload checked that it stays in
/// `/work`).
fn copy_entry(src: &Path, dest: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(src)?, dest)
    } else if kind.is_dir() {
        DirBuilder::new()
            .mode(meta.permissions().mode() | 0o700)
            .create(dest)?;
        copy_children(src, dest)
    } else {
        fs::copy(src, dest)?;
        fs::set_permissions(dest, fs::Permissions::from_mode(meta.permissions().mode()))
    }
}

/// Removes a run's files (its record is being deleted).
pub fn remove(run_dir: &Path) {
    if let Err(e) = fs::remove_dir_all(run_dir) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(dir = %run_dir.display(), error = %e, "cannot remove a workflow's files");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with_files() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let files = files_dir(&tmp.path().join("run"));
        fs::create_dir_all(files.join("data")).unwrap();
        fs::write(files.join("train.py"), "print(1)").unwrap();
        fs::set_permissions(files.join("train.py"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(files.join("data/x.csv"), "a,b").unwrap();
        std::os::unix::fs::symlink("data/x.csv", files.join("link")).unwrap();
        let run = tmp.path().join("run");
        (tmp, run)
    }

    #[test]
    fn a_copy_holds_every_file_with_its_mode_and_links() {
        let (tmp, run) = run_with_files();
        let copy = stage_copy(&run, &[], &tmp.path().join("staging")).unwrap();
        assert_eq!(fs::read_to_string(copy.join("data/x.csv")).unwrap(), "a,b");
        let mode = fs::metadata(copy.join("train.py"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            fs::read_link(copy.join("link")).unwrap(),
            Path::new("data/x.csv")
        );
        // A copy, not the same file: writing one leaves the run's files alone.
        fs::write(copy.join("train.py"), "changed").unwrap();
        assert_eq!(
            fs::read_to_string(files_dir(&run).join("train.py")).unwrap(),
            "print(1)"
        );
    }

    #[test]
    fn listed_uploads_copy_only_those_and_a_missing_one_is_named() {
        let (tmp, run) = run_with_files();
        let staging = tmp.path().join("staging");
        let copy = stage_copy(&run, &["data/x.csv".into()], &staging).unwrap();
        assert!(copy.join("data/x.csv").exists());
        assert!(!copy.join("train.py").exists());
        let e = stage_copy(&run, &["nope.py".into()], &staging).unwrap_err();
        assert!(e.to_string().contains("nope.py"), "{e}");
        // Only the good copy is left in staging.
        assert_eq!(fs::read_dir(&staging).unwrap().count(), 1);
    }
}
