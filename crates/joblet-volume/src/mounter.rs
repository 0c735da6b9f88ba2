//! The mount system calls a [`crate::VolumeHost`] makes, behind a narrow trait so its
//! steps and their undoing can be tested with a fake, without root.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

/// Mounting, unmounting and reading the mount table.
pub trait Mounter: fmt::Debug + Send + Sync {
    /// Mounts `source`, a filesystem of type `fstype` with filesystem options `options`,
    /// at `target`, always `nosuid,nodev`.
    fn mount(
        &self,
        source: &Path,
        target: &Path,
        fstype: &str,
        options: Option<&str>,
    ) -> io::Result<()>;

    /// Unmounts `target`, not lazily: fails with `EBUSY` while a process has a file open or
    /// its working directory in it.
    fn unmount(&self, target: &Path) -> io::Result<()>;

    /// The mount table of this process's mount namespace, in `/proc/self/mountinfo`'s
    /// format.
    fn mountinfo(&self) -> io::Result<String>;

    /// Where [`Mounter::mountinfo`] reads from, for messages.
    fn mountinfo_path(&self) -> PathBuf;
}

/// The real system calls, on the mount namespace of the calling process.
#[derive(Debug, Clone)]
pub struct SysMounter {
    mountinfo: PathBuf,
}

impl SysMounter {
    /// Reads the mount table from `/proc/self/mountinfo`.
    pub fn new() -> SysMounter {
        SysMounter::with_mountinfo("/proc/self/mountinfo".into())
    }

    /// Reads the mount table from `path` (a `/proc` mounted elsewhere).
    pub fn with_mountinfo(path: PathBuf) -> SysMounter {
        SysMounter { mountinfo: path }
    }
}

impl Default for SysMounter {
    fn default() -> SysMounter {
        SysMounter::new()
    }
}

impl Mounter for SysMounter {
    fn mount(
        &self,
        source: &Path,
        target: &Path,
        fstype: &str,
        options: Option<&str>,
    ) -> io::Result<()> {
        nix::mount::mount(
            Some(source),
            target,
            Some(fstype),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            options,
        )
        .map_err(io::Error::from)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        nix::mount::umount2(target, MntFlags::empty()).map_err(io::Error::from)
    }

    fn mountinfo(&self) -> io::Result<String> {
        std::fs::read_to_string(&self.mountinfo)
    }

    fn mountinfo_path(&self) -> PathBuf {
        self.mountinfo.clone()
    }
}
