//! The config's extra binds and masks, applied by pid 1 once `/dev` and
//! `/proc` are built, so that a target may overlay a single procfs file.
//!
//! - [`Bind`]: the source is resolved as the host sees it (absolute symlinks
//!   included: `openat2(RESOLVE_IN_ROOT)` under the parked host root) and
//!   bound nosuid, nodev at its target, read-only unless it is `writable`
//!   (a volume). Missing directories up
//!   to the target, and the target itself, are created in the job's root
//!   tmpfs; an existing file or directory (say inside a read-only mount) is
//!   bound over. A missing source is an error: the daemon only asks for
//!   what it found, so the sandbox fails closed.
//! - masks: a directory gets an empty read-only tmpfs over it, anything
//!   else (a file, a device node) an empty read-only regular file
//!   ([`EMPTY`], in the root tmpfs that becomes read-only with `/`).
//!   Missing paths and symlinks (never followed) are skipped.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, openat2, OFlag, OpenHow, ResolveFlag};
use nix::mount::MsFlags;
use nix::sys::stat::{fstat, Mode, SFlag};

use super::config::{Bind, InitConfig};
use super::error::Stage;
use super::hostfds::{fd_path, unopenable, Host, Source};
use super::report::{Context, SetupError};
use super::rootfs::{
    attach, bind_readonly, bind_recursive, host, mkdir_p, set_bind_flags, tmpfs, touch, OLD_ROOT,
};

/// The empty read-only regular file bound over masked files.
pub(crate) const EMPTY: &str = "/.joblet-empty";

/// Options of the tmpfs over a masked directory (mounted read-only).
const MASK_DIR_OPTS: &str = "size=4k,mode=0555";

/// Applies `config.binds` (parents before children), then `config.masks`.
pub(crate) fn apply(config: &InitConfig, host: &Host) -> Result<(), SetupError> {
    apply_binds(&config.binds, host)?;
    apply_masks(&config.masks).map(drop)
}

/// Applies `binds`, parents before children (also a warm sandbox's, made
/// before its job comes: see `InitConfig::job_part`).
pub(crate) fn apply_binds(binds: &[Bind], host: &Host) -> Result<(), SetupError> {
    for (index, b) in ordered(binds, |b| &b.target) {
        bind(index, b, host)?;
    }
    Ok(())
}

/// Applies `masks`; returns the paths it mounted over (missing paths and
/// symlinks are skipped), for [`remove_masks`].
pub(crate) fn apply_masks(masks: &[PathBuf]) -> Result<Vec<PathBuf>, SetupError> {
    let mut empty_made = false;
    let mut done = Vec::new();
    for (_, path) in ordered(masks, |p| p) {
        if mask(path, &mut empty_made)? {
            done.push(path.clone());
        }
    }
    Ok(done)
}

/// Takes back masks [`apply_masks`] mounted (a warm sandbox's, built for a
/// CPU job, when its job is not one), children first.
pub(crate) fn remove_masks(masked: &[PathBuf]) -> Result<(), SetupError> {
    for path in masked.iter().rev() {
        nix::mount::umount2(path.as_path(), nix::mount::MntFlags::empty())
            .stage(Stage::Masks, || {
                format!("unmounting the warm sandbox's mask over {}", path.display())
            })?;
    }
    Ok(())
}

/// `items` with their config index, sorted by the depth of `path` (then
/// the path), duplicates of a path dropped.
fn ordered<T>(items: &[T], path: impl Fn(&T) -> &PathBuf) -> Vec<(usize, &T)> {
    let mut v: Vec<(usize, &T)> = items.iter().enumerate().collect();
    v.sort_by(|(ia, a), (ib, b)| {
        let (a, b) = (path(a), path(b));
        a.components()
            .count()
            .cmp(&b.components().count())
            .then(a.cmp(b))
            .then(ia.cmp(ib))
    });
    v.dedup_by(|(_, a), (_, b)| path(a) == path(b));
    v
}

fn bind(index: usize, b: &Bind, host: &Host) -> Result<(), SetupError> {
    let name = || {
        format!(
            "binds[{index}] ({} -> {})",
            b.source.display(),
            b.target.display()
        )
    };
    if let Some(tree) = host.bind(index) {
        return bind_tree(tree.stage(Stage::Binds, name)?, b, &name);
    }
    let fd = open_source(&b.source).map_err(|e| {
        let why = unopenable(&io::Error::from(e));
        SetupError::new(Stage::Binds, format!("{}: {why}", name()))
    })?;
    let is_dir = fstat(&fd)
        .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
        .stage(Stage::Binds, || format!("{}: stat of the source", name()))?;
    mount_point(&b.target, is_dir)
        .map_err(|m| SetupError::new(Stage::Binds, format!("{}: {m}", name())))?;
    // The descriptor stands for the host file; the magic link binds exactly
    // it, with no second path lookup.
    let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    bind_recursive(&source, &b.target, b.writable, Stage::Binds)
        .map_err(|e| SetupError::new(e.stage, format!("{}: {}", name(), e.message)))
}

/// Attaches the detached copy of a bind's source the shim made (a warm
/// sandbox, see `hostfds`), nosuid, nodev, and read-only unless the bind
/// is writable.
fn bind_tree(tree: &OwnedFd, b: &Bind, name: &dyn Fn() -> String) -> Result<(), SetupError> {
    let is_dir = fstat(tree)
        .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
        .stage(Stage::Binds, || format!("{}: stat of the source", name()))?;
    mount_point(&b.target, is_dir)
        .map_err(|m| SetupError::new(Stage::Binds, format!("{}: {m}", name())))?;
    attach(&Source::Tree(tree), &b.target, true)
        .stage(Stage::Binds, || format!("{}: attaching the source", name()))?;
    set_bind_flags(&b.target, &fd_path(tree), b.writable, Stage::Binds)
        .map_err(|e| SetupError::new(e.stage, format!("{}: {}", name(), e.message)))
}

/// An `O_PATH` descriptor of the host path `source`, every symlink on the
/// way resolved against the host root (kernels without `openat2`: through
/// the parked root, absolute symlinks then resolve in the job's tree).
fn open_source(source: &Path) -> Result<OwnedFd, Errno> {
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    let root = open(
        OLD_ROOT,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let relative = match source.strip_prefix("/") {
        Ok(r) if !r.as_os_str().is_empty() => r,
        _ => Path::new("."),
    };
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT);
    match openat2(&root, relative, how) {
        Err(Errno::ENOSYS) => open(&host(source), flags, Mode::empty()),
        r => r,
    }
}

/// Makes sure something of the right kind exists at `target` to mount on;
/// the error text says what to do.
fn mount_point(target: &Path, is_dir: bool) -> Result<(), String> {
    let kind = |d: bool| if d { "a directory" } else { "not a directory" };
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err("the target is a symlink in the job; give the path it points to".to_owned())
        }
        Ok(meta) if meta.is_dir() != is_dir => Err(format!(
            "the source is {} but the existing target is {}; give a target of the same kind",
            kind(is_dir),
            kind(meta.is_dir())
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let made = if is_dir {
                mkdir_p(target)
            } else {
                touch(target)
            };
            made.map_err(|e| cannot_create(target, &e))
        }
        Err(e) => Err(format!("cannot stat the target in the job: {e}")),
    }
}

fn cannot_create(target: &Path, e: &io::Error) -> String {
    let read_only = matches!(
        e.raw_os_error(),
        Some(libc::EROFS | libc::ENOENT | libc::EACCES | libc::EPERM)
    );
    if !read_only {
        return format!("cannot create the target in the job: {e}");
    }
    let existing = target
        .ancestors()
        .skip(1)
        .find(|a| fs::symlink_metadata(a).is_ok())
        .unwrap_or(Path::new("/"));
    format!(
        "cannot create the target ({e}): the target's parent is inside a read-only mount \
         ({} exists there, the rest does not); choose a target outside the sandbox's mounts, \
         e.g. under /run, or one that exists",
        existing.display()
    )
}

/// Hides `path` if it exists in the job and is not a symlink; `Ok(true)`
/// when it did.
fn mask(path: &Path, empty_made: &mut bool) -> Result<bool, SetupError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(false)
        }
        Err(e) => {
            return Err(SetupError::new(
                Stage::Masks,
                format!("mask {}: cannot stat it in the job: {e}", path.display()),
            ))
        }
    };
    if meta.file_type().is_symlink() {
        return Ok(false);
    }
    if meta.is_dir() {
        return tmpfs(
            path,
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            MASK_DIR_OPTS,
        )
        .map(|()| true)
        .stage(Stage::Masks, || {
            format!("mask {}: mounting an empty read-only tmpfs", path.display())
        });
    }
    if !*empty_made {
        make_empty()?;
        *empty_made = true;
    }
    bind_readonly(Path::new(EMPTY), path, Stage::Masks)
        .map(|()| true)
        .map_err(|e| SetupError::new(e.stage, format!("mask {}: {}", path.display(), e.message)))
}

/// Creates [`EMPTY`] (mode 0444) in the root tmpfs, unless a warm
/// sandbox's masks made it already.
fn make_empty() -> Result<(), SetupError> {
    let what = || format!("creating {EMPTY}");
    let f = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(EMPTY)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e).stage(Stage::Masks, what),
    };
    // The umask may have taken bits off; set the mode exactly.
    f.set_permissions(fs::Permissions::from_mode(0o444))
        .stage(Stage::Masks, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_are_ordered_parents_first_keeping_their_index() {
        let b = |t: &str| Bind {
            source: "/s".into(),
            target: t.into(),
            writable: false,
        };
        let binds = [b("/run/a/b"), b("/run"), b("/proc/x"), b("/run/a")];
        let got: Vec<(usize, &str)> = ordered(&binds, |b| &b.target)
            .into_iter()
            .map(|(i, b)| (i, b.target.to_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [(1, "/run"), (2, "/proc/x"), (3, "/run/a"), (0, "/run/a/b")]
        );
    }

    #[test]
    fn masks_are_ordered_without_duplicates() {
        let masks: Vec<PathBuf> = ["/a/b", "/c", "/a/b", "/a"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let got: Vec<(usize, &str)> = ordered(&masks, |p| p)
            .into_iter()
            .map(|(i, p)| (i, p.to_str().unwrap()))
            .collect();
        assert_eq!(got, [(3, "/a"), (1, "/c"), (0, "/a/b")]);
    }

    #[test]
    fn a_missing_target_under_a_read_only_place_says_what_to_do() {
        let e = io::Error::from_raw_os_error(libc::EROFS);
        let m = cannot_create(Path::new("/proc/no/such/joblet/x"), &e);
        assert!(m.contains("inside a read-only mount"), "{m}");
        assert!(m.contains("(/proc exists there"), "{m}");
        assert!(
            m.contains("choose a target outside the sandbox's mounts"),
            "{m}"
        );
        let e = io::Error::from_raw_os_error(libc::ENOSPC);
        let m = cannot_create(Path::new("/run/x"), &e);
        assert!(!m.contains("read-only"), "{m}");
    }
}
