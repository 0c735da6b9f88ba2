//! Start-up cleanup: removes job cgroups a previous daemon left behind
//! empty, and reports (without touching) those that still hold processes.

use std::path::{Path, PathBuf};

use super::error::CgroupError;
use super::files;
use super::job::check_component;
use super::layout::Layout;

/// Removes every job cgroup under `<hierarchy>/<base>` that holds no
/// process (children first), in every hierarchy of `layout`. Kills
/// nothing: directories that still hold processes (a job whose shim
/// survived a daemon restart, or someone else's) are left alone and
/// returned, as are directories that could not be removed (logged). The
/// base directories themselves stay.
pub fn cleanup_stale(layout: &Layout, base: &str) -> Result<Vec<PathBuf>, CgroupError> {
    base.split('/')
        .try_for_each(|c| check_component("base", c))?;
    let mut kept = Vec::new();
    for hdir in layout.dirs_for(base) {
        if !hdir.is_dir() {
            continue;
        }
        for child in subdirs(&hdir)? {
            sweep(&child, &mut kept)?;
        }
    }
    Ok(kept)
}

/// Removes `dir` if it and all its descendants are empty of processes.
/// `Ok(true)` when it was removed.
fn sweep(dir: &Path, kept: &mut Vec<PathBuf>) -> Result<bool, CgroupError> {
    let mut all_removed = true;
    for child in subdirs(dir)? {
        all_removed &= sweep(&child, kept)?;
    }
    if !all_removed {
        return Ok(false);
    }
    let pids = files::procs(dir)?;
    if !pids.is_empty() {
        tracing::info!(dir = %dir.display(), ?pids, "job cgroup still holds processes; left alone");
        kept.push(dir.to_path_buf());
        return Ok(false);
    }
    match files::rmdir(dir) {
        Ok(()) => {
            tracing::info!(dir = %dir.display(), "removed stale job cgroup");
            Ok(true)
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not remove a stale job cgroup");
            kept.push(dir.to_path_buf());
            Ok(false)
        }
    }
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let list = |source| CgroupError::ListDir {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list)? {
        let entry = entry.map_err(list)?;
        if entry.file_type().map_err(list)?.is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}
