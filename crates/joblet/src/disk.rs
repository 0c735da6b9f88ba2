//! The state disk: where the store and the jobs' directories (their output
//! logs, uploads and exit records) live. A job can fill it with output;
//! the node must survive that without losing anyone's outcome:
//!
//! - new jobs are refused while less than `jobs.min_free_disk_mb` is free
//!   ([`StateDisk::admit`]), before anything is recorded;
//! - a reserve file of `jobs.state_reserve_mb` is kept in the state dir
//!   while there is room; when the store cannot commit for want of space,
//!   the engine removes it ([`StateDisk::release_reserve`]) and commits
//!   again, so a job's end and its GPUs' release are recorded even on a
//!   full disk (and retried until they are); once there is room again the
//!   reserve is made again;
//! - each shim keeps room for its job's exit record from the start (see
//!   `joblet_shim`), so the outcome also survives a daemon restart.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Free and total bytes of a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// What an unprivileged writer may still use (`f_bavail`).
    pub free: u64,
    pub total: u64,
}

/// Free and total space of the filesystem holding `path`.
pub fn space(path: &Path) -> std::io::Result<Space> {
    let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let frag = st.fragment_size().max(1) as u64;
    Ok(Space {
        free: st.blocks_available() as u64 * frag,
        total: st.blocks() as u64 * frag,
    })
}

/// Why a new job is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("No room for new jobs: the node's state disk ({path}) has {free_mb} MiB free, below the {need_mb} MiB it keeps free for jobs' output and records (jobs.min_free_disk_mb); delete finished jobs with `rnx job delete`, or ask an admin to free space")]
pub struct DiskFull {
    pub path: String,
    pub free_mb: u64,
    pub need_mb: u64,
}

/// The state disk and its reserve.
#[derive(Debug)]
pub struct StateDisk {
    root: PathBuf,
    reserve: PathBuf,
    reserve_bytes: u64,
    min_free_bytes: u64,
    /// The reserve was given up to let the store commit on a full disk.
    released: bool,
}

const MIB: u64 = 1024 * 1024;

impl StateDisk {
    /// The state dir `root`, with a reserve of `reserve_mb` and new jobs
    /// refused below `min_free_mb` free.
    pub fn new(root: &Path, reserve_mb: u64, min_free_mb: u64) -> StateDisk {
        StateDisk {
            root: root.to_owned(),
            reserve: root.join("reserve"),
            reserve_bytes: reserve_mb.saturating_mul(MIB),
            min_free_bytes: min_free_mb.saturating_mul(MIB),
            released: false,
        }
    }

    /// Makes the reserve file when it is missing and there is room for it
    /// beyond what jobs need free; a partial one is removed.
    pub fn ensure_reserve(&mut self) {
        if self.reserve_bytes == 0 {
            return;
        }
        let have = std::fs::metadata(&self.reserve).map_or(0, |m| m.len());
        if have >= self.reserve_bytes {
            self.released = false;
            return;
        }
        let room = space(&self.root).map_or(0, |s| s.free);
        if room < self.reserve_bytes.saturating_add(self.min_free_bytes) {
            return;
        }
        match write_reserve(&self.reserve, self.reserve_bytes) {
            Ok(()) => {
                if self.released {
                    tracing::info!(path = %self.reserve.display(), "state disk has room again; its reserve is back");
                }
                self.released = false;
            }
            Err(e) => {
                let _ = std::fs::remove_file(&self.reserve);
                tracing::warn!(path = %self.reserve.display(), error = %e, "cannot make the state disk's reserve");
            }
        }
    }

    /// The reserve was given up (or could not be made yet).
    pub fn reserve_missing(&self) -> bool {
        self.released
            || (self.reserve_bytes > 0
                && std::fs::metadata(&self.reserve).map_or(true, |m| m.len() < self.reserve_bytes))
    }

    /// Gives the reserve up so the store can commit; whether there was one.
    pub fn release_reserve(&mut self) -> bool {
        match std::fs::remove_file(&self.reserve) {
            Ok(()) => {
                tracing::warn!(path = %self.reserve.display(), mb = self.reserve_bytes / MIB, "state disk full: its reserve is released so jobs' outcomes are recorded; new jobs are refused until there is room");
                self.released = true;
                true
            }
            Err(_) => false,
        }
    }

    /// Refuses a new job when the state disk is (nearly) full.
    pub fn admit(&self) -> Result<(), DiskFull> {
        let free = space(&self.root).map_or(u64::MAX, |s| s.free);
        if self.released || free < self.min_free_bytes {
            return Err(DiskFull {
                path: self.root.display().to_string(),
                free_mb: free / MIB,
                need_mb: self.min_free_bytes / MIB,
            });
        }
        Ok(())
    }
}

/// Writes `bytes` of filler to `path` (real blocks, not a sparse file).
fn write_reserve(path: &Path, bytes: u64) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    let chunk = vec![0u8; MIB as usize];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(MIB) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_made_released_and_refuses_new_jobs_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = StateDisk::new(dir.path(), 1, 0);
        disk.ensure_reserve();
        assert_eq!(
            std::fs::metadata(dir.path().join("reserve")).unwrap().len(),
            MIB
        );
        assert_eq!(disk.admit(), Ok(()));
        assert!(disk.release_reserve());
        assert!(!dir.path().join("reserve").exists());
        let e = disk.admit().unwrap_err().to_string();
        assert!(e.starts_with("No room for new jobs"), "{e}");
        assert!(!disk.release_reserve(), "released once");
        disk.ensure_reserve();
        assert_eq!(disk.admit(), Ok(()));
    }

    #[test]
    fn a_disk_below_the_free_floor_takes_no_new_job() {
        let dir = tempfile::tempdir().unwrap();
        let disk = StateDisk::new(dir.path(), 0, u64::MAX / MIB);
        let e = disk.admit().unwrap_err();
        assert!(e.to_string().contains("jobs.min_free_disk_mb"), "{e}");
    }
}
