//! Start-up cleanup: removes job cgroups a previous daemon left behind
//! empty, and reports (without touching) those that still hold processes.

use std::path::{Path, PathBuf};

use super::error::CgroupError;
use super::files;
use super::job::check_component;
use super::layout::Layout;

/// Removes every job cgroup under `<hierarchy>/<base>` that holds no
/// process (children first), in every hierarchy of `layout`, except the
/// jobs `keep` names (by job cgroup name: the daemon's own jobs). Kills
/// nothing: directories that still hold processes (a job whose shim
/// survived a daemon restart, or someone else's) are left alone and
/// returned, as are directories that could not be removed (logged). The
/// base directories themselves stay.
///
/// Directories may vanish or appear while it runs (a shim of an earlier
/// daemon removes its job's cgroup as its job ends): one that is gone is
/// simply not there, never an error.
pub fn cleanup_stale(
    layout: &Layout,
    base: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<PathBuf>, CgroupError> {
    base.split('/')
        .try_for_each(|c| check_component("base", c))?;
    let mut kept = Vec::new();
    for hdir in layout.dirs_for(base) {
        if !hdir.is_dir() {
            continue;
        }
        for child in subdirs(&hdir)? {
            let name = child.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if keep(name) {
                continue;
            }
            sweep(&child, &mut kept)?;
        }
    }
    Ok(kept)
}

/// Removes `dir` if it and all its descendants are empty of processes.
/// `Ok(true)` when it was removed (or is gone).
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

/// The subdirectories of `dir`, sorted; none when `dir` (or an entry) is
/// gone by the time it is read.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let list = |source| CgroupError::ListDir {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(list(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(list(e)),
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() => out.push(entry.path()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(list(e)),
        }
    }
    out.sort();
    Ok(out)
}
