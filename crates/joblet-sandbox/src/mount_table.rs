//! The host's mount table as a warm sandbox saw it when it was built, and
//! a cheap way to tell whether it changed since.
//!
//! A warm sandbox binds host paths as they were mounted when it was built,
//! so it only serves jobs while the table is unchanged (an MPS control
//! daemon's new `/dev/shm`, an admin's new filesystem would be missing).
//! Reading and comparing the whole table costs ~0.15 ms on a job's start;
//! instead the file the table was read from stays open, and the kernel
//! flags it (`POLLERR | POLLPRI` on `/proc/<pid>/mountinfo`) when a mount
//! is made or removed in its namespace: only then is it read again and
//! compared. A file that is not on procfs (a test's stand-in) is always
//! read again.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC};

/// A mount table read from `path`, kept open to watch for changes.
#[derive(Debug)]
pub struct MountTable {
    path: PathBuf,
    file: File,
    text: String,
    on_procfs: bool,
    /// The kernel flagged a change once: the flag is consumed by the look,
    /// so from then on the table is always read again.
    flagged_once: Cell<bool>,
}

impl MountTable {
    /// Reads the table at `path` (e.g. `/proc/self/mountinfo`).
    pub fn read(path: &Path) -> io::Result<MountTable> {
        let mut file = File::open(path)?;
        let on_procfs = fstatfs(&file).is_ok_and(|s| s.filesystem_type() == PROC_SUPER_MAGIC);
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        Ok(MountTable {
            path: path.to_path_buf(),
            file,
            text,
            on_procfs,
            flagged_once: Cell::new(false),
        })
    }

    /// The table as read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the table differs now from when it was read. A mount made
    /// and removed again since reads as unchanged; a table that cannot be
    /// read again counts as changed.
    pub fn changed(&self) -> bool {
        if self.on_procfs && !self.flagged_once.get() {
            if !self.flagged() {
                return false;
            }
            self.flagged_once.set(true);
        }
        match std::fs::read_to_string(&self.path) {
            Ok(now) => now != self.text,
            Err(_) => true,
        }
    }

    /// Whether the kernel flagged a mount or unmount in the table's
    /// namespace since the last look (an error counts as flagged).
    fn flagged(&self) -> bool {
        let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => false,
            Ok(_) => fds[0]
                .revents()
                .is_none_or(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR)),
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_file_is_compared_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(&path, "1 0 0:1 / / rw - ext4 /dev/x rw\n").unwrap();
        let table = MountTable::read(&path).unwrap();
        assert_eq!(table.text(), "1 0 0:1 / / rw - ext4 /dev/x rw\n");
        assert!(!table.changed());
        std::fs::write(
            &path,
            "1 0 0:1 / / rw - ext4 /dev/x rw\n2 1 0:2 / /mnt rw\n",
        )
        .unwrap();
        assert!(table.changed());
        std::fs::remove_file(&path).unwrap();
        assert!(table.changed(), "unreadable counts as changed");
    }

    #[test]
    fn this_processs_table_is_unchanged_without_a_mount() {
        let table = MountTable::read(Path::new("/proc/self/mountinfo")).unwrap();
        assert!(table.on_procfs);
        assert!(!table.changed());
    }
}
