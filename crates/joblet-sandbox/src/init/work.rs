//! The job's `/work`: either the host work directory bound read-write
//! (`work_size_mb: 0`, unlimited, kept on the host after the job), or a
//! tmpfs of `work_size_mb` MiB owned by the job's user, into which pid 1
//! copies what the host work directory holds (the job's uploads) once the
//! init is in the job's cgroups, so their pages are charged to the job.
//!
//! A sized `/work` is scratch space: what the job writes there goes with
//! its mount namespace, and its pages count against `--max-memory` like
//! the job's `/tmp`.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use nix::mount::MsFlags;

use super::config::InitConfig;
use super::error::Stage;
use super::hostfds::Host;
use super::report::{Context, SetupError};
use super::rootfs::{bind_work, mkdir_p, tmpfs};

/// Where the work directory appears in the job.
pub(crate) const WORK: &str = "/work";

/// Whether `a` and `b` ask for the same sized `/work` tmpfs.
pub(crate) fn same_tmpfs(a: &InitConfig, b: &InitConfig) -> bool {
    (a.work_size_mb, a.uid, a.gid) == (b.work_size_mb, b.uid, b.gid)
}

/// Mounts `/work` (run before release, with the host root parked; a warm
/// sandbox's sized one, which needs no host directory, before its job).
pub(crate) fn mount(config: &InitConfig, host: &Host) -> Result<(), SetupError> {
    if config.work_size_mb == 0 {
        let tree = host.work(&config.work_dir).stage(Stage::Rootfs, || {
            format!("work directory {}", config.work_dir.display())
        })?;
        return bind_work(&config.work_dir, tree);
    }
    let target = Path::new(WORK);
    mkdir_p(target).stage(Stage::Rootfs, || "creating /work".into())?;
    tmpfs(
        target,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        &format!(
            "size={}m,mode=0755,uid={},gid={}",
            config.work_size_mb, config.uid, config.gid
        ),
    )
    .stage(Stage::Rootfs, || {
        format!("mounting a {} MiB tmpfs on /work", config.work_size_mb)
    })
}

/// Copies the host work directory into a sized `/work` (run by pid 1,
/// before the host root is detached); nothing to do for a bound one.
pub(crate) fn fill(config: &InitConfig, host: &Host) -> Result<(), SetupError> {
    if config.work_size_mb == 0 {
        return Ok(());
    }
    let source = host
        .work(&config.work_dir)
        .stage(Stage::Rootfs, || {
            format!("work directory {}", config.work_dir.display())
        })?
        .path();
    let meta = fs::metadata(&source).stage(Stage::Rootfs, || {
        format!("work directory {}", config.work_dir.display())
    })?;
    if !meta.is_dir() {
        return Err(SetupError::new(
            Stage::Rootfs,
            format!(
                "work directory {} is not a directory",
                config.work_dir.display()
            ),
        ));
    }
    copy_tree(&source, Path::new(WORK), config.uid, config.gid).stage(Stage::Rootfs, || {
        format!(
            "copying {} into the job's {} MiB /work",
            config.work_dir.display(),
            config.work_size_mb
        )
    })
}

/// Copies the directories, regular files and symlinks under `from` into
/// the existing directory `to`, owned by `uid:gid`, with their permission
/// bits. Symlinks are recreated, never followed; anything else (the
/// daemon's upload checks let none through) is an error.
fn copy_tree(from: &Path, to: &Path, uid: u32, gid: u32) -> io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let kind = meta.file_type();
        if kind.is_dir() {
            fs::create_dir(&dst)?;
            copy_tree(&src, &dst, uid, gid)?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else {
            return Err(io::Error::other(format!(
                "{} is neither a file, a directory nor a symlink",
                src.display()
            )));
        }
        std::os::unix::fs::lchown(&dst, Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_symlinks_with_their_modes() {
        let from = tempfile::tempdir().unwrap();
        let to = tempfile::tempdir().unwrap();
        fs::create_dir(from.path().join("data")).unwrap();
        fs::set_permissions(from.path().join("data"), fs::Permissions::from_mode(0o750)).unwrap();
        fs::write(from.path().join("data/a.txt"), "alpha").unwrap();
        fs::write(from.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(
            from.path().join("run.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("data/a.txt", from.path().join("link")).unwrap();
        let me = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        copy_tree(from.path(), to.path(), me.0, me.1).unwrap();
        assert_eq!(
            fs::read_to_string(to.path().join("data/a.txt")).unwrap(),
            "alpha"
        );
        assert_eq!(
            fs::metadata(to.path().join("data")).unwrap().mode() & 0o777,
            0o750
        );
        assert_eq!(
            fs::metadata(to.path().join("run.sh")).unwrap().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_link(to.path().join("link")).unwrap(),
            Path::new("data/a.txt")
        );
    }

    #[test]
    fn a_fifo_is_refused() {
        let from = tempfile::tempdir().unwrap();
        let to = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&from.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = copy_tree(from.path(), to.path(), 0, 0).unwrap_err();
        assert!(err.to_string().contains("neither a file"), "{err}");
    }
}
