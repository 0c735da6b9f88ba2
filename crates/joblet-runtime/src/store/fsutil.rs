//! Filesystem helpers of the store: durable writes, and removing a directory tree without
//! ever leaving it through a mount point.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::{umount2, MntFlags};

use super::StoreError;

/// fsyncs a directory, so the entries renamed into it survive a crash.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("fsync", dir))
}

/// Writes `bytes` to `dest` atomically: a file in `scratch` (same filesystem), fsynced,
/// renamed over `dest`, then `dest`'s directory fsynced.
pub(crate) fn write_atomic(scratch: &Path, dest: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut tmp = tempfile::Builder::new()
        .prefix("write-")
        .tempfile_in(scratch)
        .map_err(StoreError::io("create a file in", scratch))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(StoreError::io("write", tmp.path()))?;
    tmp.persist(dest)
        .map_err(|e| StoreError::io("rename into place", dest)(e.error))?;
    fsync_dir(dest.parent().unwrap_or(Path::new(".")))
}

/// Mount points at or below `dir` in this mount namespace, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_octal(field)))
        .filter(|mount| mount.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes `dir` and everything below it, never crossing into another filesystem: mounts
/// below it (a build tool killed mid-way may leave `/proc` or `/sys` mounted in its
/// chroot) are detached first, and a directory on another device is refused rather than
/// descended into. A missing `dir` is not an error.
pub(crate) fn remove_tree(dir: &Path) -> Result<(), StoreError> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("inspect", dir)(e)),
    };
    if !meta.is_dir() {
        return fs::remove_file(dir).map_err(StoreError::io("remove", dir));
    }
    for mount in mounts_under(dir) {
        if let Err(e) = umount2(&mount, MntFlags::MNT_DETACH) {
            tracing::warn!(mount = %mount.display(), error = %e, "cannot detach a mount inside a directory being removed");
        }
    }
    remove_dir_on(dir, meta.dev())
}

fn remove_dir_on(dir: &Path, dev: u64) -> Result<(), StoreError> {
    let meta = fs::symlink_metadata(dir).map_err(StoreError::io("inspect", dir))?;
    if meta.dev() != dev {
        return Err(StoreError::MountInside {
            path: dir.to_path_buf(),
            mount: dir.to_path_buf(),
        });
    }
    // Without root, a read-only directory's entries cannot be removed: open it up first.
    if meta.mode() & 0o700 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(StoreError::io("change permissions of", dir))?;
    }
    for entry in fs::read_dir(dir).map_err(StoreError::io("read", dir))? {
        let entry = entry.map_err(StoreError::io("read", dir))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(StoreError::io("inspect", &path))?;
        if kind.is_dir() {
            remove_dir_on(&path, dev)?;
        } else {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path)(e)),
            }
        }
    }
    fs::remove_dir(dir).map_err(StoreError::io("remove", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_fields() {
        assert_eq!(unescape_octal(r"/a\040b\134c"), r"/a b\c");
        assert_eq!(unescape_octal("/plain"), "/plain");
    }

    #[test]
    fn removes_read_only_trees_and_missing_paths() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("t");
        fs::create_dir_all(top.join("a/b")).unwrap();
        fs::write(top.join("a/b/f"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", top.join("a/link")).unwrap();
        fs::set_permissions(top.join("a"), fs::Permissions::from_mode(0o555)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(Path::new("/etc").exists());
        remove_tree(&top).unwrap();
    }
}
