//! Garbage collection: trees no index record references, then objects no tree links.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{fsutil, StoreError};

/// What a collection removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    pub trees: u64,
    pub objects: u64,
    pub bytes: u64,
}

/// Removes every tree in `trees` whose name is not in `keep` (moving it to `scratch` first,
/// so a crash half-way leaves no partial tree in `trees/`), then every object whose only
/// link is its name in `objects/` (link count 1). Runs under the store's lock.
pub(crate) fn collect(
    trees: &Path,
    objects: &Path,
    scratch: &Path,
    keep: &BTreeSet<String>,
) -> Result<Collected, StoreError> {
    let mut collected = Collected::default();
    for entry in fs::read_dir(trees).map_err(StoreError::io("read", trees))? {
        let entry = entry.map_err(StoreError::io("read", trees))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.contains(&name) {
            continue;
        }
        let doomed = scratch.join(format!("gc-{name}"));
        fsutil::remove_tree(&doomed)?;
        fs::rename(entry.path(), &doomed).map_err(StoreError::io("move out", entry.path()))?;
        fsutil::remove_tree(&doomed)?;
        tracing::info!(digest = %name, "removed an unreferenced runtime tree");
        collected.trees += 1;
    }
    for shard in fs::read_dir(objects).map_err(StoreError::io("read", objects))? {
        let shard = shard.map_err(StoreError::io("read", objects))?.path();
        for entry in fs::read_dir(&shard).map_err(StoreError::io("read", &shard))? {
            let path = entry.map_err(StoreError::io("read", &shard))?.path();
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("inspect", &path)(e)),
            };
            if meta.nlink() == 1 {
                fs::remove_file(&path).map_err(StoreError::io("remove", &path))?;
                collected.objects += 1;
                collected.bytes += meta.len();
            }
        }
        // An emptied shard goes too; a shard still in use refuses (ENOTEMPTY), fine.
        let _ = fs::remove_dir(&shard);
    }
    Ok(collected)
}
