//! Joblet's named volumes on the host (`rnx volume create NAME --size=1GB
//! --type=filesystem|memory`): each one a directory under a root (the daemon's
//! `<state_dir>/volumes`), with a mount at `<root>/<name>/data` that the daemon binds into
//! jobs at `/volumes/NAME`.
//!
//! - A **filesystem** volume is an ext4 filesystem in `<root>/<name>/volume.img`, whose
//!   space is reserved when it is created, mounted `nosuid,nodev` through a loop device
//!   that detaches itself when the volume is unmounted. Its content survives restarts and
//!   reboots; [`VolumeHost::attach`] mounts it again.
//! - A **memory** volume is a tmpfs of its size, `nosuid,nodev`, mode 0770. Its content is
//!   lost when it is unmounted (a reboot); [`VolumeHost::attach`] recreates it empty and
//!   says so.
//!
//! Everything fails closed: a step that fails (reserving the space, `mkfs.ext4`, the loop
//! device, the mount) fails the operation with an error naming the step, and undoes what
//! was made before it. A volume is never a plain directory without a size limit, and a job
//! should only ever get [`VolumeHost::mounted_data_dir`], which checks the mount.
//!
//! Kernel access is narrow: the mount system calls and the mount table behind
//! [`Mounter`] (a fake in tests), the programs `mkfs.ext4` and `losetup` by the paths in
//! [`Tools`], and files under the root. Parsing the mount table ([`mountinfo`]) and the
//! checks of names and sizes are pure.
//!
//! This crate knows nothing of the store, the scheduler, gRPC or tokio, and must not
//! depend on them: the daemon keeps the volume records and calls this (off its async
//! workers: calls block).

mod create;
mod error;
#[cfg(test)]
mod fake;
mod host;
#[cfg(test)]
mod host_tests;
mod kind;
mod mounter;
pub mod mountinfo;
mod tools;
mod undo;
mod validate;

pub use create::{Attach, Created};
pub use error::{Step, VolumeError};
pub use host::{Usage, VolumeHost};
pub use kind::{UnknownKind, VolumeKind};
pub use mounter::{Mounter, SysMounter};
pub use tools::Tools;
pub use validate::{
    check_fits_memory, size_range, validate_name, validate_size, MAX_FILESYSTEM_BYTES,
    MAX_MEMORY_BYTES, MAX_NAME_LEN, MIN_FILESYSTEM_BYTES, MIN_MEMORY_BYTES,
};
