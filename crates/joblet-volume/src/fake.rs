//! A [`Mounter`] that keeps a mount table in memory and records its calls.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::mounter::Mounter;
use crate::mountinfo::MountEntry;

#[derive(Debug, Default)]
pub(crate) struct State {
    /// Oldest first, as the kernel lists them.
    pub mounts: Vec<MountEntry>,
    /// `mount SOURCE TARGET FSTYPE OPTIONS` and `unmount TARGET`, in order.
    pub calls: Vec<String>,
    /// The errno the next mounts fail with.
    pub fail_mount: Option<i32>,
    /// Unmounts fail with `EBUSY`.
    pub busy: bool,
}

/// A handle on shared state: one goes into the host, the test keeps a clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct FakeMounter(Arc<Mutex<State>>);

impl FakeMounter {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// Adds a mount behind the host's back.
    pub fn add(&self, target: &Path, fstype: &str, source: &str) {
        self.state().mounts.push(MountEntry {
            mount_point: target.to_owned(),
            fstype: fstype.into(),
            source: source.into(),
        });
    }
}

impl Mounter for FakeMounter {
    fn mount(
        &self,
        source: &Path,
        target: &Path,
        fstype: &str,
        options: Option<&str>,
    ) -> io::Result<()> {
        let mut s = self.state();
        s.calls.push(format!(
            "mount {} {} {fstype} {}",
            source.display(),
            target.display(),
            options.unwrap_or("-")
        ));
        if let Some(errno) = s.fail_mount {
            return Err(io::Error::from_raw_os_error(errno));
        }
        s.mounts.push(MountEntry {
            mount_point: target.to_owned(),
            fstype: fstype.into(),
            source: source.to_string_lossy().into_owned(),
        });
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.calls.push(format!("unmount {}", target.display()));
        if s.busy {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        match s.mounts.iter().rposition(|m| m.mount_point == target) {
            Some(i) => {
                s.mounts.remove(i);
                Ok(())
            }
            None => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn mountinfo(&self) -> io::Result<String> {
        let s = self.state();
        let mut text = String::from("1 0 254:0 / / rw shared:1 - ext4 /dev/vda rw\n");
        for (i, m) in s.mounts.iter().enumerate() {
            let point = m.mount_point.to_str().unwrap().replace(' ', "\\040");
            text.push_str(&format!(
                "{} 1 0:{i} / {point} rw,nosuid,nodev - {} {} rw\n",
                i + 2,
                m.fstype,
                m.source
            ));
        }
        Ok(text)
    }

    fn mountinfo_path(&self) -> PathBuf {
        "(fake mount table)".into()
    }
}
