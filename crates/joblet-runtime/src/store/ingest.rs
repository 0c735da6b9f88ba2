//! Ingest: turns a built root filesystem (a staging directory) into a content-addressed
//! tree under `trees/<digest>`.
//!
//! Directories are created fresh; each regular file becomes a hard link to its object in
//! `objects/` (created on first sight by moving the staging file there, so a multi-GB tree
//! is not copied); symlinks are recreated. Device nodes, fifos and sockets are dropped,
//! setuid/setgid bits cleared, and the contents of `/proc`, `/sys`, `/dev`, `/run` and
//! `/tmp` skipped (their empty directories stay: the job's mounts go there).
//!
//! The tree's digest is sha256 over a canonical listing: for every entry in depth-first
//! order, children sorted by name bytes, its type (`d`, `f`, `l`), mode, uid, gid, path,
//! and the object key (files) or link target (symlinks), each length-prefixed. Modification
//! times are not part of it, so re-ingesting the same content yields the same digest.

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use sha2::{Digest, Sha256};

use super::{fsutil, StoreError};

/// Top-level directories whose contents are never part of a runtime.
const SKIP_CONTENTS: [&str; 5] = ["dev", "proc", "run", "sys", "tmp"];

/// Version tag mixed into object keys; bump if the key's definition changes.
const OBJECT_KEY_TAG: &[u8] = b"joblet-object-v1\0";

/// A tree in the store, as an ingest produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// `sha256:<hex>`.
    pub digest: String,
    /// `<store>/trees/<hex>`.
    pub root: PathBuf,
    /// Sum of the regular files' sizes, each path counted.
    pub size_bytes: u64,
    /// Regular files in the tree.
    pub files: u64,
    /// Objects this ingest added to `objects/` (0 when every file was already stored).
    pub new_objects: u64,
    /// Device nodes, fifos and sockets left out.
    pub dropped: u64,
    /// Files and directories whose setuid/setgid bits were cleared.
    pub cleared_bits: u64,
}

/// The permission bits a tree keeps: setuid and setgid cleared, sticky kept.
pub(crate) fn clean_mode(mode: u32) -> u32 {
    mode & 0o7777 & !0o6000
}

/// The object key of a file: sha256 over a tag, its content's sha256, mode, uid and gid.
pub(crate) fn object_key(content: &[u8; 32], mode: u32, uid: u32, gid: u32) -> String {
    let mut h = Sha256::new();
    h.update(OBJECT_KEY_TAG);
    h.update(content);
    h.update(mode.to_le_bytes());
    h.update(uid.to_le_bytes());
    h.update(gid.to_le_bytes());
    hex::encode(h.finalize())
}

/// `objects/<first two hex digits>/<the rest>`.
pub(crate) fn object_path(objects: &Path, key: &str) -> PathBuf {
    objects.join(&key[..2]).join(&key[2..])
}

pub(crate) struct Ingest<'a> {
    pub objects: &'a Path,
    pub trees: &'a Path,
    pub scratch: &'a Path,
    pub progress: &'a mut dyn FnMut(u64, u64),
    pub cancel: &'a AtomicBool,
}

struct Walk<'a> {
    objects: &'a Path,
    scratch: &'a Path,
    digest: Sha256,
    done: u64,
    total: u64,
    tree: Tree,
    progress: &'a mut dyn FnMut(u64, u64),
    cancel: &'a AtomicBool,
}

impl Ingest<'_> {
    /// Ingests the root filesystem at `source` (moving its files into `objects/`).
    pub(crate) fn run(self, source: &Path) -> Result<Tree, StoreError> {
        let total = count(source, Path::new(""))?;
        let building = tempfile::Builder::new()
            .prefix("tree-")
            .tempdir_in(self.scratch)
            .map_err(StoreError::io("create a directory in", self.scratch))?
            .keep();
        let mut walk = Walk {
            objects: self.objects,
            scratch: self.scratch,
            digest: Sha256::new(),
            done: 0,
            total,
            tree: Tree {
                digest: String::new(),
                root: PathBuf::new(),
                size_bytes: 0,
                files: 0,
                new_objects: 0,
                dropped: 0,
                cleared_bits: 0,
            },
            progress: self.progress,
            cancel: self.cancel,
        };
        let result = walk.dir(source, Path::new(""), &building);
        if let Err(e) = result {
            let _ = fsutil::remove_tree(&building);
            return Err(e);
        }
        (walk.progress)(walk.done, walk.total);
        let hex = hex::encode(walk.digest.finalize());
        let dest = self.trees.join(&hex);
        if dest.exists() {
            tracing::debug!(digest = %hex, "tree already stored; dropping the copy");
            fsutil::remove_tree(&building)?;
        } else {
            fs::rename(&building, &dest).map_err(StoreError::io("rename into place", &dest))?;
            fsutil::fsync_dir(self.trees)?;
        }
        let mut tree = walk.tree;
        tree.digest = format!("sha256:{hex}");
        tree.root = dest;
        Ok(tree)
    }
}

/// Entries `visit` will produce below (and including) `dir`.
fn count(dir: &Path, rel: &Path) -> Result<u64, StoreError> {
    let mut n = 1;
    if skips_contents(rel) {
        return Ok(n);
    }
    for entry in fs::read_dir(dir).map_err(StoreError::io("read", dir))? {
        let entry = entry.map_err(StoreError::io("read", dir))?;
        let kind = entry
            .file_type()
            .map_err(StoreError::io("inspect", entry.path()))?;
        n += if kind.is_dir() {
            count(&entry.path(), &rel.join(entry.file_name()))?
        } else {
            1
        };
    }
    Ok(n)
}

fn skips_contents(rel: &Path) -> bool {
    rel.to_str().is_some_and(|r| SKIP_CONTENTS.contains(&r))
}

impl Walk<'_> {
    fn tick(&mut self) -> Result<(), StoreError> {
        self.done += 1;
        if self.done.is_multiple_of(2000) {
            (self.progress)(self.done, self.total);
            if self.cancel.load(Ordering::Relaxed) {
                return Err(StoreError::Cancelled);
            }
        }
        Ok(())
    }

    fn record(&mut self, kind: u8, mode: u32, meta: &Metadata, rel: &Path, payload: &[u8]) {
        let path = rel.as_os_str().as_bytes();
        let d = &mut self.digest;
        d.update([kind]);
        d.update(mode.to_le_bytes());
        d.update(meta.uid().to_le_bytes());
        d.update(meta.gid().to_le_bytes());
        d.update((path.len() as u64).to_le_bytes());
        d.update(path);
        d.update((payload.len() as u64).to_le_bytes());
        d.update(payload);
    }

    fn mode_of(&mut self, meta: &Metadata) -> u32 {
        let mode = clean_mode(meta.mode());
        if mode != meta.mode() & 0o7777 {
            self.tree.cleared_bits += 1;
        }
        mode
    }

    /// Recreates directory `src` at `dst` (which exists), with its contents.
    fn dir(&mut self, src: &Path, rel: &Path, dst: &Path) -> Result<(), StoreError> {
        let meta = fs::symlink_metadata(src).map_err(StoreError::io("inspect", src))?;
        let mode = self.mode_of(&meta);
        self.record(b'd', mode, &meta, rel, b"");
        self.tick()?;
        if !skips_contents(rel) {
            let mut names: Vec<_> = fs::read_dir(src)
                .map_err(StoreError::io("read", src))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(StoreError::io("read", src))?;
            names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            for name in names {
                self.entry(&src.join(&name), &rel.join(&name), &dst.join(&name))?;
            }
        }
        std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid()))
            .map_err(StoreError::io("change owner of", dst))?;
        fs::set_permissions(dst, fs::Permissions::from_mode(mode))
            .map_err(StoreError::io("change permissions of", dst))
    }

    fn entry(&mut self, src: &Path, rel: &Path, dst: &Path) -> Result<(), StoreError> {
        let meta = fs::symlink_metadata(src).map_err(StoreError::io("inspect", src))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            fs::create_dir(dst).map_err(StoreError::io("create", dst))?;
            self.dir(src, rel, dst)
        } else if kind.is_file() {
            self.file(src, rel, dst, &meta)
        } else if kind.is_symlink() {
            let target = fs::read_link(src).map_err(StoreError::io("read link", src))?;
            std::os::unix::fs::symlink(&target, dst).map_err(StoreError::io("create", dst))?;
            std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid()))
                .map_err(StoreError::io("change owner of", dst))?;
            self.record(b'l', 0o777, &meta, rel, target.as_os_str().as_bytes());
            self.tick()?;
            Ok(())
        } else {
            tracing::debug!(path = %rel.display(), "dropping a device node, fifo or socket");
            self.tree.dropped += 1;
            self.tick()?;
            Ok(())
        }
    }

    fn file(
        &mut self,
        src: &Path,
        rel: &Path,
        dst: &Path,
        meta: &Metadata,
    ) -> Result<(), StoreError> {
        let mode = self.mode_of(meta);
        let content = hash_file(src)?;
        let key = object_key(&content, mode, meta.uid(), meta.gid());
        let object = object_path(self.objects, &key);
        match fs::symlink_metadata(&object) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.create_object(src, meta, mode, &object)?;
                self.tree.new_objects += 1;
            }
            Err(e) => return Err(StoreError::io("inspect", &object)(e)),
        }
        match fs::hard_link(&object, dst) {
            Ok(()) => {}
            // The object has as many links as the filesystem allows (ext4: 65000): this
            // path gets its own copy, removed with its tree.
            Err(e) if e.raw_os_error() == Some(Errno::EMLINK as i32) => {
                copy_with_metadata(&object, dst, meta, mode)?;
            }
            Err(e) => return Err(StoreError::io("link", dst)(e)),
        }
        self.record(b'f', mode, meta, rel, key.as_bytes());
        self.tree.files += 1;
        self.tree.size_bytes += meta.len();
        self.tick()?;
        Ok(())
    }

    /// Stores `src` as `object`: moved there when it has no other link (fast, no copy),
    /// copied otherwise. Owner and mode are set before it becomes visible.
    fn create_object(
        &mut self,
        src: &Path,
        meta: &Metadata,
        mode: u32,
        object: &Path,
    ) -> Result<(), StoreError> {
        let parent = object.parent().unwrap_or(self.objects);
        fs::create_dir_all(parent).map_err(StoreError::io("create", parent))?;
        if meta.nlink() == 1 {
            // chown also drops file capabilities (security.capability), like the setuid bit.
            std::os::unix::fs::lchown(src, Some(meta.uid()), Some(meta.gid()))
                .map_err(StoreError::io("change owner of", src))?;
            fs::set_permissions(src, fs::Permissions::from_mode(mode))
                .map_err(StoreError::io("change permissions of", src))?;
            match fs::rename(src, object) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(Errno::EXDEV as i32) => {}
                Err(e) => return Err(StoreError::io("move into the store", src)(e)),
            }
        }
        let tmp = tempfile::Builder::new()
            .prefix("object-")
            .tempfile_in(self.scratch)
            .map_err(StoreError::io("create a file in", self.scratch))?;
        copy_with_metadata(src, tmp.path(), meta, mode)?;
        tmp.persist(object)
            .map_err(|e| StoreError::io("rename into place", object)(e.error))?;
        Ok(())
    }
}

/// Copies `src`'s bytes to `dst` (created or truncated) and gives it `meta`'s owner and
/// modification time and `mode`.
fn copy_with_metadata(
    src: &Path,
    dst: &Path,
    meta: &Metadata,
    mode: u32,
) -> Result<(), StoreError> {
    let mut from = File::open(src).map_err(StoreError::io("open", src))?;
    let mut to = File::create(dst).map_err(StoreError::io("create", dst))?;
    io::copy(&mut from, &mut to).map_err(StoreError::io("copy to", dst))?;
    if let Ok(mtime) = meta.modified() {
        to.set_modified(mtime)
            .map_err(StoreError::io("set the time of", dst))?;
    }
    std::os::unix::fs::fchown(&to, Some(meta.uid()), Some(meta.gid()))
        .map_err(StoreError::io("change owner of", dst))?;
    to.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(StoreError::io("change permissions of", dst))
}

fn hash_file(path: &Path) -> Result<[u8; 32], StoreError> {
    let mut file = File::open(path).map_err(StoreError::io("open", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(StoreError::io("read", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}
