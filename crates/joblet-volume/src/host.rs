//! [`VolumeHost`]: the volumes under one root directory, where they are, whether they are
//! mounted, what they use, and unmounting and removing them. Creating and attaching are in
//! `create.rs`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Step, VolumeError};
use crate::kind::VolumeKind;
use crate::mounter::{Mounter, SysMounter};
use crate::mountinfo::{self, MountEntry, MountinfoError};
use crate::tools::Tools;
use crate::validate::validate_name;

/// The image file of a filesystem volume, in its directory.
pub(crate) const IMAGE_FILE: &str = "volume.img";
/// The mount point of a volume, in its directory: what jobs get bound at `/volumes/NAME`.
pub(crate) const DATA_DIR: &str = "data";

/// What a mounted volume holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The capacity of its filesystem (for a filesystem volume somewhat less than its size:
    /// ext4 keeps its journal and tables in it).
    pub size_bytes: u64,
    /// How much of it is used.
    pub used_bytes: u64,
}

/// The volumes under `root`: `<root>/<name>/volume.img` (a filesystem volume's ext4 image)
/// and `<root>/<name>/data` (where the volume is mounted). Directories are created mode
/// 0700 for root; the mounted volume's own root directory belongs to the owner given to
/// [`VolumeHost::new`].
///
/// Every call blocks (a `mkfs.ext4` of a large image takes seconds): call it off an async
/// runtime's workers. Calls for the same name must not run concurrently.
#[derive(Debug)]
pub struct VolumeHost {
    pub(crate) root: PathBuf,
    pub(crate) owner_uid: u32,
    pub(crate) owner_gid: u32,
    pub(crate) tools: Tools,
    pub(crate) mounter: Box<dyn Mounter>,
}

impl VolumeHost {
    /// Volumes under `root` (created when the first volume is), owned by `owner_uid:owner_gid`,
    /// made with `tools` and mounted with the real system calls.
    pub fn new(root: PathBuf, owner_uid: u32, owner_gid: u32, tools: Tools) -> VolumeHost {
        VolumeHost::with_mounter(
            root,
            owner_uid,
            owner_gid,
            tools,
            Box::new(SysMounter::new()),
        )
    }

    /// [`VolumeHost::new`] with another [`Mounter`] (a fake in tests).
    pub fn with_mounter(
        root: PathBuf,
        owner_uid: u32,
        owner_gid: u32,
        tools: Tools,
        mounter: Box<dyn Mounter>,
    ) -> VolumeHost {
        VolumeHost {
            root,
            owner_uid,
            owner_gid,
            tools,
            mounter,
        }
    }

    /// The directory the volumes are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where volume `name` is mounted (`<root>/<name>/data`), mounted or not: the source of
    /// a job's bind mount at `/volumes/NAME`. `name` must be valid
    /// ([`crate::validate_name`]); use [`VolumeHost::mounted_data_dir`] for a job, which
    /// also checks that the volume is mounted there.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.volume_dir(name).join(DATA_DIR)
    }

    /// A filesystem volume's image file (`<root>/<name>/volume.img`).
    pub fn image_path(&self, name: &str) -> PathBuf {
        self.volume_dir(name).join(IMAGE_FILE)
    }

    pub(crate) fn volume_dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Whether something is mounted at volume `name`'s `data` directory, by the mount table
    /// (not by the directory's existence).
    pub fn is_mounted(&self, name: &str) -> Result<bool, VolumeError> {
        validate_name(name)?;
        Ok(self.mount_of(name)?.is_some())
    }

    /// Volume `name`'s `data` directory if the volume of `kind` is mounted there: what the
    /// daemon binds into a job. [`VolumeError::NotMounted`] if nothing is mounted there (a
    /// job must never get the plain directory below, which has no size limit),
    /// [`VolumeError::ForeignMount`] if something else is.
    pub fn mounted_data_dir(&self, name: &str, kind: VolumeKind) -> Result<PathBuf, VolumeError> {
        validate_name(name)?;
        let data = self.data_dir(name);
        match self.mount_of(name)? {
            None => Err(VolumeError::NotMounted {
                name: name.to_owned(),
                path: data,
            }),
            Some(m) => {
                self.check_ours(name, Some(kind), &m)?;
                Ok(data)
            }
        }
    }

    /// What mounted volume `name` holds (`statvfs` of its `data`).
    pub fn usage(&self, name: &str) -> Result<Usage, VolumeError> {
        validate_name(name)?;
        let data = self.data_dir(name);
        let Some(m) = self.mount_of(name)? else {
            return Err(VolumeError::NotMounted {
                name: name.to_owned(),
                path: data,
            });
        };
        self.check_ours(name, None, &m)?;
        let st = nix::sys::statvfs::statvfs(&data).map_err(|e| VolumeError::Io {
            name: name.to_owned(),
            step: Step::ReadUsage,
            path: data.clone(),
            source: e.into(),
        })?;
        let frag = st.fragment_size();
        let (blocks, free) = (st.blocks(), st.blocks_free());
        Ok(Usage {
            size_bytes: blocks.saturating_mul(frag),
            used_bytes: blocks.saturating_sub(free).saturating_mul(frag),
        })
    }

    /// Unmounts volume `name`; true if it was mounted. [`VolumeError::InUse`] while a
    /// process on the host has a file open or its working directory in it. A memory
    /// volume's content is gone once it is unmounted. A job's own bind mount of the volume
    /// (in the job's mount namespace) does not make it busy: the volume stays alive for
    /// that job until it ends.
    pub fn detach(&self, name: &str) -> Result<bool, VolumeError> {
        validate_name(name)?;
        self.unmount_data(name)
    }

    /// Unmounts volume `name` (if mounted) and deletes its image and directories.
    /// [`VolumeError::InUse`] if it is busy, and then nothing is changed;
    /// [`VolumeError::NotFound`] if it has no directory.
    pub fn remove(&self, name: &str) -> Result<(), VolumeError> {
        validate_name(name)?;
        let dir = self.volume_dir(name);
        match fs::symlink_metadata(&dir) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(VolumeError::NotFound {
                    name: name.to_owned(),
                    path: dir,
                })
            }
            Err(source) => return Err(self.io(name, Step::RemoveFiles, &dir, source)),
        }
        self.unmount_data(name)?;
        // Not remove_dir_all: nothing is mounted at `data` now, so it is empty; if it is
        // not, something unexpected wrote there and a person should look.
        for (path, is_dir) in [
            (self.image_path(name), false),
            (self.data_dir(name), true),
            (dir, true),
        ] {
            let result = if is_dir {
                fs::remove_dir(&path)
            } else {
                fs::remove_file(&path)
            };
            match result {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(self.io(name, Step::RemoveFiles, &path, source)),
            }
        }
        tracing::info!(volume = name, "removed volume");
        Ok(())
    }

    /// Unmounts `data` if something of ours is mounted there; true if it was. Checks that
    /// nothing is left mounted there after.
    fn unmount_data(&self, name: &str) -> Result<bool, VolumeError> {
        let data = self.data_dir(name);
        let Some(m) = self.mount_of(name)? else {
            return Ok(false);
        };
        self.check_ours(name, None, &m)?;
        self.mounter.unmount(&data).map_err(|source| {
            if source.raw_os_error() == Some(libc::EBUSY) {
                VolumeError::InUse {
                    name: name.to_owned(),
                    path: data.clone(),
                }
            } else {
                self.io(name, Step::Unmount, &data, source)
            }
        })?;
        if self.mount_of(name)?.is_some() {
            return Err(VolumeError::StillMounted {
                name: name.to_owned(),
                path: data,
            });
        }
        tracing::info!(volume = name, fstype = %m.fstype, source = %m.source, "unmounted volume");
        Ok(true)
    }

    /// The topmost mount at volume `name`'s `data` directory, if any.
    pub(crate) fn mount_of(&self, name: &str) -> Result<Option<MountEntry>, VolumeError> {
        // The kernel lists mount points by their resolved path.
        let root = match fs::canonicalize(&self.root) {
            Ok(root) => root,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(self.io(name, Step::FindMount, &self.root, source)),
        };
        let data = root.join(name).join(DATA_DIR);
        let text = self
            .mounter
            .mountinfo()
            .map_err(|source| MountinfoError::Read {
                path: self.mounter.mountinfo_path(),
                source,
            })?;
        let table = mountinfo::parse(&text)?;
        Ok(mountinfo::mount_at(&table, &data).cloned())
    }

    /// Checks that mount `m` at volume `name`'s `data` is one of this crate's volume mounts
    /// (of `kind`, if given).
    pub(crate) fn check_ours(
        &self,
        name: &str,
        kind: Option<VolumeKind>,
        m: &MountEntry,
    ) -> Result<(), VolumeError> {
        let found = mount_kind(name, m);
        if found.is_some() && (kind.is_none() || found == kind) {
            return Ok(());
        }
        Err(VolumeError::ForeignMount {
            name: name.to_owned(),
            path: self.data_dir(name),
            fstype: m.fstype.clone(),
            source_name: m.source.clone(),
        })
    }

    pub(crate) fn io(&self, name: &str, step: Step, path: &Path, source: io::Error) -> VolumeError {
        VolumeError::Io {
            name: name.to_owned(),
            step,
            path: path.to_owned(),
            source,
        }
    }
}

/// The mount source of memory volume `name`'s tmpfs, which tells it from other tmpfs
/// mounts in the mount table.
pub(crate) fn tmpfs_source(name: &str) -> String {
    format!("joblet-volume:{name}")
}

/// Which kind of volume `name`'s mount `m` is, if it is one: an ext4 on a loop device, or
/// a tmpfs with the volume's source.
fn mount_kind(name: &str, m: &MountEntry) -> Option<VolumeKind> {
    match m.fstype.as_str() {
        "ext4" if m.source.starts_with("/dev/loop") => Some(VolumeKind::Filesystem),
        "tmpfs" if m.source == tmpfs_source(name) => Some(VolumeKind::Memory),
        _ => None,
    }
}
