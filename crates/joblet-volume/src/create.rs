//! Creating a volume and attaching an existing one again (after a reboot, or after
//! [`VolumeHost::detach`]). Every step that fails undoes the ones before it ([`Undo`]).

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{fallocate, FallocateFlags};

use crate::error::{Step, VolumeError};
use crate::host::{tmpfs_source, VolumeHost};
use crate::kind::VolumeKind;
use crate::undo::{Made, Undo};
use crate::validate::{check_fits_memory, validate_name, validate_size};

/// A volume just created, mounted at `data_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Where it is mounted: [`VolumeHost::data_dir`].
    pub data_dir: PathBuf,
    /// A filesystem volume's image file.
    pub image: Option<PathBuf>,
    /// The loop device a filesystem volume is mounted from (set to detach itself once the
    /// volume is unmounted everywhere).
    pub loop_device: Option<PathBuf>,
}

/// What [`VolumeHost::attach`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attach {
    /// The volume was mounted already (the daemon restarted, the node did not): nothing
    /// was done.
    AlreadyMounted,
    /// A filesystem volume's image was mounted again from this loop device; its content
    /// is as it was.
    Mounted { loop_device: PathBuf },
    /// A memory volume's tmpfs was mounted again, empty: what it held was lost when it was
    /// last unmounted (by a reboot, or [`VolumeHost::detach`]).
    RecreatedEmpty,
}

/// The tmpfs options of a memory volume: its size, and its root directory `rwxrwx---`
/// for its owner.
pub(crate) fn tmpfs_options(size_bytes: u64, uid: u32, gid: u32) -> String {
    format!("size={size_bytes},mode=0770,uid={uid},gid={gid}")
}

impl VolumeHost {
    /// Creates volume `name` of `kind` and `size_bytes`, mounted `nosuid,nodev` at
    /// [`VolumeHost::data_dir`], its root directory owned by the host's owner:
    ///
    /// - **filesystem**: an image file whose space is reserved up front (`fallocate`: no
    ///   room on the disk, no volume), an ext4 filesystem in it, mounted through a loop
    ///   device that detaches itself once the volume is unmounted;
    /// - **memory**: a tmpfs of that size (and no larger than the host's memory).
    ///
    /// Fails closed: if any step fails the error names it (with the program's standard
    /// error or the system call's errno) and everything made so far is undone. There is no
    /// fallback to a plain directory. A name that exists already is
    /// [`VolumeError::AlreadyExists`].
    pub fn create(
        &self,
        name: &str,
        kind: VolumeKind,
        size_bytes: u64,
    ) -> Result<Created, VolumeError> {
        validate_name(name)?;
        validate_size(kind, size_bytes)?;
        if kind == VolumeKind::Memory {
            match nix::sys::sysinfo::sysinfo() {
                Ok(info) => check_fits_memory(size_bytes, info.ram_total())?,
                Err(e) => {
                    tracing::warn!(volume = name, error = %e, "could not read the host's memory size; not checking the memory volume against it")
                }
            }
        }
        self.make_root(name)?;
        let dir = self.volume_dir(name);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(VolumeError::AlreadyExists {
                    name: name.to_owned(),
                    path: dir,
                })
            }
            Err(e) => return Err(self.io(name, Step::CreateDirectory, &dir, e)),
        }
        let mut undo = Undo::new(name);
        undo.push(Made::Dir(dir));
        match self.build(name, kind, size_bytes, &mut undo) {
            Ok(created) => {
                tracing::info!(volume = name, %kind, size_bytes, data = %created.data_dir.display(), "created volume");
                Ok(created)
            }
            Err(e) => Err(undo.run(&self.tools, self.mounter.as_ref(), e)),
        }
    }

    fn build(
        &self,
        name: &str,
        kind: VolumeKind,
        size_bytes: u64,
        undo: &mut Undo,
    ) -> Result<Created, VolumeError> {
        let data = self.data_dir(name);
        self.make_dir(name, &data, undo)?;
        match kind {
            VolumeKind::Filesystem => {
                let image = self.image_path(name);
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&image)
                    .map_err(|e| self.io(name, Step::ReserveImage, &image, e))?;
                undo.push(Made::Image(image.clone()));
                self.reserve(name, &image, &file, size_bytes)?;
                drop(file);
                self.tools
                    .make_filesystem(name, &image, self.owner_uid, self.owner_gid)?;
                let device = self.mount_image(name, &image, &data, undo)?;
                Ok(Created {
                    data_dir: data,
                    image: Some(image),
                    loop_device: Some(device),
                })
            }
            VolumeKind::Memory => {
                self.mount_tmpfs(name, size_bytes, &data, undo)?;
                Ok(Created {
                    data_dir: data,
                    image: None,
                    loop_device: None,
                })
            }
        }
    }

    /// Mounts volume `name` again if it is not mounted: at a daemon's start, for every
    /// volume it has a record of, with the kind and size recorded.
    ///
    /// - something of ours mounted at `data` already: [`Attach::AlreadyMounted`] (something
    ///   else: [`VolumeError::ForeignMount`]);
    /// - **filesystem**: the image must be there ([`VolumeError::ImageMissing`]) and of
    ///   `size_bytes` ([`VolumeError::ImageSize`]); its space is reserved again (a trim of
    ///   the volume's ext4 punches holes in it through the loop device), then it is mounted:
    ///   [`Attach::Mounted`];
    /// - **memory**: a new empty tmpfs: [`Attach::RecreatedEmpty`].
    ///
    /// A failed step undoes the ones before it, as in [`VolumeHost::create`].
    pub fn attach(
        &self,
        name: &str,
        kind: VolumeKind,
        size_bytes: u64,
    ) -> Result<Attach, VolumeError> {
        validate_name(name)?;
        validate_size(kind, size_bytes)?;
        if let Some(m) = self.mount_of(name)? {
            self.check_ours(name, Some(kind), &m)?;
            tracing::debug!(volume = name, "volume mounted already");
            return Ok(Attach::AlreadyMounted);
        }
        let mut undo = Undo::new(name);
        let attached = match kind {
            VolumeKind::Filesystem => self.attach_image(name, size_bytes, &mut undo),
            VolumeKind::Memory => {
                let data = self.data_dir(name);
                self.make_root(name)
                    .and_then(|()| self.make_dir(name, &self.volume_dir(name), &mut undo))
                    .and_then(|()| self.make_dir(name, &data, &mut undo))
                    .and_then(|()| self.mount_tmpfs(name, size_bytes, &data, &mut undo))
                    .map(|()| Attach::RecreatedEmpty)
            }
        };
        match attached {
            Ok(a) => {
                tracing::info!(volume = name, %kind, attached = ?a, "attached volume");
                Ok(a)
            }
            Err(e) => Err(undo.run(&self.tools, self.mounter.as_ref(), e)),
        }
    }

    fn attach_image(
        &self,
        name: &str,
        size_bytes: u64,
        undo: &mut Undo,
    ) -> Result<Attach, VolumeError> {
        let image = self.image_path(name);
        let file = match OpenOptions::new().write(true).open(&image) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(VolumeError::ImageMissing {
                    name: name.to_owned(),
                    path: image,
                })
            }
            Err(e) => return Err(self.io(name, Step::ReserveImage, &image, e)),
        };
        let found = file
            .metadata()
            .map_err(|e| self.io(name, Step::ReserveImage, &image, e))?
            .len();
        if found != size_bytes {
            return Err(VolumeError::ImageSize {
                name: name.to_owned(),
                path: image,
                found,
                expected: size_bytes,
            });
        }
        self.reserve(name, &image, &file, size_bytes)?;
        drop(file);
        let data = self.data_dir(name);
        self.make_dir(name, &data, undo)?;
        let loop_device = self.mount_image(name, &image, &data, undo)?;
        Ok(Attach::Mounted { loop_device })
    }

    /// Creates the volumes root and its parents (mode 0700) unless they exist; never
    /// undone.
    fn make_root(&self, name: &str) -> Result<(), VolumeError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(|e| self.io(name, Step::CreateDirectory, &self.root, e))
    }

    /// Creates directory `dir` (mode 0700) unless it exists; one it created is undone.
    fn make_dir(&self, name: &str, dir: &Path, undo: &mut Undo) -> Result<(), VolumeError> {
        match DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {
                undo.push(Made::Dir(dir.to_owned()));
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
            Err(e) => Err(self.io(name, Step::CreateDirectory, dir, e)),
        }
    }

    /// Allocates all of `file`'s `size_bytes` (its blocks really taken from the disk, not
    /// a sparse file that fails its writes later). A filesystem without `fallocate` fails.
    fn reserve(
        &self,
        name: &str,
        image: &Path,
        file: &fs::File,
        size_bytes: u64,
    ) -> Result<(), VolumeError> {
        let len = i64::try_from(size_bytes).map_err(|_| {
            self.io(
                name,
                Step::ReserveImage,
                image,
                io::Error::from_raw_os_error(libc::EFBIG),
            )
        })?;
        fallocate(file, FallocateFlags::empty(), 0, len)
            .map_err(|e| self.io(name, Step::ReserveImage, image, e.into()))
    }

    /// Attaches `image` to a loop device, mounts it at `data`, and sets the device to
    /// detach once unmounted. Returns the device.
    fn mount_image(
        &self,
        name: &str,
        image: &Path,
        data: &Path,
        undo: &mut Undo,
    ) -> Result<PathBuf, VolumeError> {
        let device = self.tools.attach_loop(name, image)?;
        undo.push(Made::Loop(device.clone()));
        self.mounter
            .mount(&device, data, "ext4", None)
            .map_err(|source| VolumeError::Mount {
                name: name.to_owned(),
                fstype: "ext4",
                device: device.clone(),
                target: data.to_owned(),
                source,
            })?;
        undo.push(Made::Mount(data.to_owned()));
        self.tools.detach_loop(name, Step::SetAutoclear, &device)?;
        undo.forget_loop(&device);
        tracing::debug!(volume = name, device = %device.display(), "mounted the image");
        Ok(device)
    }

    fn mount_tmpfs(
        &self,
        name: &str,
        size_bytes: u64,
        data: &Path,
        undo: &mut Undo,
    ) -> Result<(), VolumeError> {
        let options = tmpfs_options(size_bytes, self.owner_uid, self.owner_gid);
        let source = PathBuf::from(tmpfs_source(name));
        self.mounter
            .mount(&source, data, "tmpfs", Some(&options))
            .map_err(|e| VolumeError::Mount {
                name: name.to_owned(),
                fstype: "tmpfs",
                device: source,
                target: data.to_owned(),
                source: e,
            })?;
        undo.push(Made::Mount(data.to_owned()));
        Ok(())
    }
}
