//! The runtime store: content-addressed root filesystems on the node.
//!
//! Layout under the root given to [`RuntimeStore::open`]:
//!
//! - `objects/<xx>/<rest>`: regular files by key, sha256 over content, mode, uid and gid
//!   ([`ingest`] defines it), so every hard link to an object has the right metadata;
//! - `trees/<hex>/`: runtime roots, named by their digest; files are hard links to objects,
//!   so trees sharing files, or a rebuild of the same content, cost no second copy;
//! - `installed/<name>@<version>.json`: index records ([`Installed`]), written atomically;
//!   a runtime exists when its record does;
//! - `tmp/`: staging and scratch, cleared when the store is opened unlocked;
//! - `cache/uv`: uv's download cache, so rebuilds do not download again;
//! - `lock`: the flock that serialises installs, removals and garbage collection.
//!
//! A build or ingest that fails or is killed leaves only `tmp/` garbage (and perhaps an
//! unreferenced tree or objects), which the next [`RuntimeStore::open`] removes; the
//! record is written last, after the tree is on disk (`syncfs`).
//!
//! Reading ([`RuntimeStore::list`], [`RuntimeStore::resolve`]) takes no lock: records
//! are replaced by rename, so a reader sees the old or the new one.

mod error;
mod fsutil;
mod gc;
pub mod ingest;
mod record;

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

pub use error::StoreError;
pub use gc::Collected;
pub use ingest::Tree;
pub use record::Installed;

use crate::version;

/// A runtime store rooted at a directory.
#[derive(Debug, Clone)]
pub struct RuntimeStore {
    root: PathBuf,
}

/// Proof that this process holds the store's exclusive lock; released on drop.
#[derive(Debug)]
pub struct StoreLock {
    _flock: Flock<File>,
}

/// A staging directory under `tmp/`, removed (without crossing mount points) on drop.
/// Build a root filesystem at [`Staging::rootfs`], then [`RuntimeStore::ingest`] it.
#[derive(Debug)]
pub struct Staging {
    dir: PathBuf,
}

impl Staging {
    /// The directory to build the root filesystem in (does not exist yet: mmdebstrap
    /// wants to create it).
    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    /// The staging directory itself, for other scratch files of the build.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = fsutil::remove_tree(&self.dir) {
            tracing::warn!(error = %e, "cannot remove a staging directory; the next open of the store will");
        }
    }
}

/// Space the store's files take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Bytes in `objects/` (each stored file once, whatever links it).
    pub object_bytes: u64,
    /// Number of objects.
    pub objects: u64,
    /// Number of trees.
    pub trees: u64,
}

impl RuntimeStore {
    /// Opens (creating if needed, mode 0700) the store at `root`. If no one holds the
    /// store's lock, leftovers of interrupted builds in `tmp/` are removed, and then
    /// whatever they left unreferenced in `trees/` and `objects/`.
    pub fn open(root: &Path) -> Result<RuntimeStore, StoreError> {
        let store = RuntimeStore {
            root: root.to_path_buf(),
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(StoreError::io("create", root))?;
        for dir in [
            store.objects(),
            store.trees(),
            store.installed(),
            store.tmp(),
            store.uv_cache(),
        ] {
            fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        }
        if let Some(lock) = store.try_lock()? {
            // Leftovers are garbage, not state: one that cannot be removed
            // now (a build tool of a killed daemon still writing there) is
            // removed at the next open.
            if let Err(e) = store.clear_tmp(&lock) {
                tracing::warn!(store = %root.display(), error = %e, "cannot remove all leftovers of interrupted builds; trying again at the next start");
            }
        }
        Ok(store)
    }

    fn clear_tmp(&self, lock: &StoreLock) -> Result<(), StoreError> {
        let tmp = self.tmp();
        let mut leftovers = 0;
        for entry in fs::read_dir(&tmp).map_err(StoreError::io("read", &tmp))? {
            let entry = entry.map_err(StoreError::io("read", &tmp))?;
            fsutil::remove_tree(&entry.path())?;
            leftovers += 1;
        }
        if leftovers > 0 {
            tracing::info!(leftovers, store = %self.root.display(), "removed leftovers of interrupted runtime builds");
            self.collect(lock)?;
        }
        Ok(())
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the tree with `digest` (`sha256:<hex>` or `<hex>`) is, or would be.
    pub fn tree_path(&self, digest: &str) -> PathBuf {
        self.trees()
            .join(digest.strip_prefix("sha256:").unwrap_or(digest))
    }

    fn objects(&self) -> PathBuf {
        self.root.join("objects")
    }

    fn trees(&self) -> PathBuf {
        self.root.join("trees")
    }

    fn installed(&self) -> PathBuf {
        self.root.join("installed")
    }

    fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// uv's cache directory, kept between builds.
    pub fn uv_cache(&self) -> PathBuf {
        self.root.join("cache").join("uv")
    }

    fn lock_file(&self) -> Result<File, StoreError> {
        let path = self.root.join("lock");
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(StoreError::io("open", &path))
    }

    /// Takes the store's exclusive lock, waiting for another holder (in this or another
    /// process) to release it.
    pub fn lock(&self) -> Result<StoreLock, StoreError> {
        let file = self.lock_file()?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map(|flock| StoreLock { _flock: flock })
            .map_err(|(_, source)| StoreError::Lock {
                path: self.root.join("lock"),
                source,
            })
    }

    /// Takes the lock if it is free; `None` if someone holds it.
    pub fn try_lock(&self) -> Result<Option<StoreLock>, StoreError> {
        let file = self.lock_file()?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(flock) => Ok(Some(StoreLock { _flock: flock })),
            Err((_, Errno::EWOULDBLOCK)) => Ok(None),
            Err((_, source)) => Err(StoreError::Lock {
                path: self.root.join("lock"),
                source,
            }),
        }
    }

    /// Waits for the lock, giving up (`None`) once `cancel` is set.
    pub fn lock_unless(&self, cancel: &AtomicBool) -> Result<Option<StoreLock>, StoreError> {
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(lock) = self.try_lock()? {
                return Ok(Some(lock));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every installed runtime, by name, then version (oldest first).
    pub fn list(&self) -> Result<Vec<Installed>, StoreError> {
        let dir = self.installed();
        let trees = self.trees();
        let mut records = Vec::new();
        for entry in fs::read_dir(&dir).map_err(StoreError::io("read", &dir))? {
            let path = entry.map_err(StoreError::io("read", &dir))?.path();
            if path.extension().is_some_and(|e| e == "json") {
                match record::read(&path, &trees) {
                    Ok(r) => records.push(r),
                    // Removed between read_dir and read: not installed any more.
                    Err(StoreError::Io { source, .. })
                        if source.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        records.sort_by(|a, b| {
            a.name
                .cmp(&b.name)
                .then_with(|| version::compare(&a.version, &b.version))
        });
        Ok(records)
    }

    /// The installed runtime `name` at `version`, or its newest version when `None`.
    pub fn resolve(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<Installed>, StoreError> {
        let mut candidates = self.list()?.into_iter().filter(|r| r.name == name);
        Ok(match version {
            Some(v) => candidates.find(|r| r.version == v),
            None => candidates.next_back(),
        })
    }

    /// An installed runtime whose tree was built from `inputs_digest` and is present.
    pub fn find_by_inputs(&self, inputs_digest: &str) -> Result<Option<Installed>, StoreError> {
        Ok(self
            .list()?
            .into_iter()
            .find(|r| r.inputs_digest == inputs_digest && r.root.is_dir()))
    }

    /// A fresh staging directory under `tmp/`.
    pub fn staging(&self, _lock: &StoreLock) -> Result<Staging, StoreError> {
        let tmp = self.tmp();
        let dir = tempfile::Builder::new()
            .prefix("stage-")
            .tempdir_in(&tmp)
            .map_err(StoreError::io("create a directory in", &tmp))?
            .keep();
        Ok(Staging { dir })
    }

    /// Ingests the root filesystem at `staging.rootfs()` into `trees/` (moving its files
    /// into `objects/`; the staging tree is consumed) and flushes the store's filesystem.
    /// `progress` gets (entries done, entries in all). On failure, what was stored half-way
    /// is collected again. Setting `cancel` stops it with [`StoreError::Cancelled`].
    pub fn ingest(
        &self,
        lock: &StoreLock,
        staging: &Staging,
        progress: &mut dyn FnMut(u64, u64),
        cancel: &AtomicBool,
    ) -> Result<Tree, StoreError> {
        let (objects, trees, tmp) = (self.objects(), self.trees(), self.tmp());
        let result = ingest::Ingest {
            objects: &objects,
            trees: &trees,
            scratch: &tmp,
            progress,
            cancel,
        }
        .run(&staging.rootfs());
        match result {
            Ok(tree) => {
                self.sync()?;
                tracing::info!(digest = %tree.digest, files = tree.files, new_objects = tree.new_objects, dropped = tree.dropped, "ingested a runtime tree");
                Ok(tree)
            }
            Err(e) => {
                if let Err(gc) = self.collect(lock) {
                    tracing::warn!(error = %gc, "cannot collect after a failed ingest");
                }
                Err(e)
            }
        }
    }

    fn sync(&self) -> Result<(), StoreError> {
        let dir = File::open(&self.root).map_err(StoreError::io("open", &self.root))?;
        nix::unistd::syncfs(&dir).map_err(|e| StoreError::io("sync", &self.root)(e.into()))
    }

    /// Writes (or replaces) `record`'s index entry, making the runtime installed.
    pub fn commit(&self, _lock: &StoreLock, record: &Installed) -> Result<(), StoreError> {
        let dest = self
            .installed()
            .join(record::file_name(&record.name, &record.version));
        let bytes = serde_json::to_vec_pretty(record).map_err(|source| StoreError::Record {
            path: dest.clone(),
            source,
        })?;
        fsutil::write_atomic(&self.tmp(), &dest, &bytes)
    }

    /// Removes `name` at `version` (its newest version when `None`), then collects the
    /// trees and objects nothing references any more. Returns the removed record.
    ///
    /// The caller must make sure no job runs in the runtime: its tree may be deleted.
    pub fn remove(&self, name: &str, version: Option<&str>) -> Result<Installed, StoreError> {
        let lock = self.lock()?;
        let record = self
            .resolve(name, version)?
            .ok_or_else(|| StoreError::NotInstalled {
                name: name.to_string(),
                version: version.map(str::to_string),
            })?;
        let path = self
            .installed()
            .join(record::file_name(&record.name, &record.version));
        fs::remove_file(&path).map_err(StoreError::io("remove", &path))?;
        fsutil::fsync_dir(&self.installed())?;
        let collected = self.collect(&lock)?;
        tracing::info!(name = %record.name, version = %record.version, trees = collected.trees, objects = collected.objects, bytes = collected.bytes, "removed runtime");
        Ok(record)
    }

    /// Removes trees no record references and objects no tree links.
    pub fn collect(&self, _lock: &StoreLock) -> Result<Collected, StoreError> {
        let keep: BTreeSet<String> = self
            .list()?
            .iter()
            .map(|r| r.digest_hex().to_string())
            .collect();
        gc::collect(&self.trees(), &self.objects(), &self.tmp(), &keep)
    }

    /// Space taken by objects (the store's real size, whatever the number of trees).
    pub fn disk_usage(&self) -> Result<DiskUsage, StoreError> {
        let mut usage = DiskUsage::default();
        let objects = self.objects();
        for shard in fs::read_dir(&objects).map_err(StoreError::io("read", &objects))? {
            let shard = shard.map_err(StoreError::io("read", &objects))?.path();
            for entry in fs::read_dir(&shard).map_err(StoreError::io("read", &shard))? {
                let entry = entry.map_err(StoreError::io("read", &shard))?;
                let meta = entry
                    .metadata()
                    .map_err(StoreError::io("inspect", entry.path()))?;
                usage.objects += 1;
                usage.object_bytes += meta.size();
            }
        }
        let trees = self.trees();
        usage.trees = fs::read_dir(&trees)
            .map_err(StoreError::io("read", &trees))?
            .count() as u64;
        Ok(usage)
    }
}

#[cfg(test)]
mod tests;
