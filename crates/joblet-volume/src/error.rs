//! The volume errors: each names the volume, and a failed step names the step, the path or
//! program involved and what the kernel or the program said.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::kind::VolumeKind;
use crate::mountinfo::MountinfoError;
use crate::validate::NAME_FORM;

/// A step of creating, attaching, measuring or removing a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Create the volumes root, the volume's directory or its `data` mount point.
    CreateDirectory,
    /// Create the image file and reserve its space (`fallocate`).
    ReserveImage,
    /// Make the ext4 filesystem in the image (`mkfs.ext4`).
    MakeFilesystem,
    /// Attach the image to a loop device (`losetup --find`).
    AttachLoop,
    /// Mount the loop device or the tmpfs at `data`.
    Mount,
    /// Let the kernel detach the loop device once it is unmounted (`losetup --detach` on
    /// the mounted device sets its autoclear flag).
    SetAutoclear,
    /// Detach a loop device that was not mounted (`losetup --detach`).
    DetachLoop,
    /// Unmount `data`.
    Unmount,
    /// Find what is mounted at `data` (resolve the root's path).
    FindMount,
    /// Read what the volume uses (`statvfs`).
    ReadUsage,
    /// Delete the image and the directories.
    RemoveFiles,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::CreateDirectory => "create a directory",
            Step::ReserveImage => "reserve the image's space (fallocate)",
            Step::MakeFilesystem => "make the ext4 filesystem (mkfs.ext4)",
            Step::AttachLoop => "attach the image to a loop device (losetup)",
            Step::Mount => "mount the volume",
            Step::SetAutoclear => "set the loop device to detach when unmounted (losetup)",
            Step::DetachLoop => "detach the loop device (losetup)",
            Step::Unmount => "unmount the volume",
            Step::FindMount => "find what is mounted at the volume's directory",
            Step::ReadUsage => "read the volume's usage (statvfs)",
            Step::RemoveFiles => "remove the volume's files",
        })
    }
}

/// Why a volume operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("invalid volume name {name:?}: {problem}; expected {NAME_FORM}", NAME_FORM = NAME_FORM)]
    InvalidName { name: String, problem: &'static str },

    #[error("invalid size for a {kind} volume: {size_bytes} bytes is {problem}")]
    InvalidSize {
        kind: VolumeKind,
        size_bytes: u64,
        problem: String,
    },

    #[error("volume {name} already exists ({path})", path = path.display())]
    AlreadyExists { name: String, path: PathBuf },

    #[error("volume {name} does not exist on this node ({path} is missing)", path = path.display())]
    NotFound { name: String, path: PathBuf },

    /// A filesystem volume's image is gone: its data is lost.
    #[error(
        "volume {name}: its image {path} is missing, so its data is gone; remove the \
         volume and create it again",
        path = path.display()
    )]
    ImageMissing { name: String, path: PathBuf },

    /// The image is not the size the volume was created with.
    #[error(
        "volume {name}: its image {path} is {found} bytes, but the volume was created with \
         {expected}; refusing to mount an image that is not the volume's",
        path = path.display()
    )]
    ImageSize {
        name: String,
        path: PathBuf,
        found: u64,
        expected: u64,
    },

    /// A system call or file operation of a step failed.
    #[error("volume {name}: could not {step}: {path}: {source}", path = path.display())]
    Io {
        name: String,
        step: Step,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The mount system call failed.
    #[error(
        "volume {name}: could not {step}: {fstype} {device} at {target}: {source}{hint}",
        step = Step::Mount,
        device = .device.display(),
        target = .target.display(),
        hint = mount_hint(.fstype, .source)
    )]
    Mount {
        name: String,
        fstype: &'static str,
        device: PathBuf,
        target: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A program of a step could not be started.
    #[error("volume {name}: could not {step}: could not run {program}: {source}", program = program.display())]
    ToolSpawn {
        name: String,
        step: Step,
        program: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A program of a step failed (or printed what it should not).
    #[error("volume {name}: could not {step}: {program} {outcome}: {stderr}", program = program.display())]
    ToolFailed {
        name: String,
        step: Step,
        program: PathBuf,
        /// `exited with status 1`, `was killed by signal 9`, ...
        outcome: String,
        /// What it wrote to standard error (or, for unexpected output, to standard output).
        stderr: String,
    },

    /// Unmounting failed with `EBUSY`.
    #[error(
        "volume {name} is still in use: a process has a file open or its working directory \
         in {path}; stop it and try again",
        path = path.display()
    )]
    InUse { name: String, path: PathBuf },

    /// A measurement or a job bind mount of a volume that is not mounted.
    #[error(
        "volume {name} is not mounted at {path} (attach it first)",
        path = path.display()
    )]
    NotMounted { name: String, path: PathBuf },

    /// Something other than the volume is mounted at its `data` directory.
    #[error(
        "volume {name}: {path} has a {fstype} mount of {source_name}, not the volume; \
         refusing to touch it",
        path = path.display()
    )]
    ForeignMount {
        name: String,
        path: PathBuf,
        fstype: String,
        source_name: String,
    },

    /// `data` is still a mount point after unmounting it (mounts stacked on it): nothing
    /// was deleted.
    #[error(
        "volume {name}: {path} is still a mount point after unmounting it (another mount \
         was stacked on it); nothing was deleted",
        path = path.display()
    )]
    StillMounted { name: String, path: PathBuf },

    /// The mount table could not be read.
    #[error(transparent)]
    MountTable(#[from] MountinfoError),

    /// A step failed, and undoing the steps before it failed too: what is listed is left
    /// on the host.
    #[error("{cause}; cleaning up after it failed too, left behind: {}", left.join("; "))]
    CleanupFailed {
        cause: Box<VolumeError>,
        left: Vec<String>,
    },
}

/// What an ext4 mount's `EINVAL` means.
fn mount_hint(fstype: &str, err: &io::Error) -> &'static str {
    match (fstype, err.raw_os_error()) {
        ("ext4", Some(libc::EINVAL)) => {
            " (the image holds no ext4 filesystem the kernel can mount; the kernel log says more)"
        }
        _ => "",
    }
}

impl VolumeError {
    /// The step that failed, if the error is a failed step.
    pub fn step(&self) -> Option<Step> {
        match self {
            VolumeError::Mount { .. } => Some(Step::Mount),
            VolumeError::Io { step, .. }
            | VolumeError::ToolSpawn { step, .. }
            | VolumeError::ToolFailed { step, .. } => Some(*step),
            VolumeError::CleanupFailed { cause, .. } => cause.step(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_names_the_volume_the_step_the_program_and_its_stderr() {
        let err = VolumeError::ToolFailed {
            name: "data-lake".into(),
            step: Step::MakeFilesystem,
            program: "/usr/sbin/mkfs.ext4".into(),
            outcome: "exited with status 1".into(),
            stderr: "mkfs.ext4: Device size reported to be zero.".into(),
        };
        assert_eq!(
            err.to_string(),
            "volume data-lake: could not make the ext4 filesystem (mkfs.ext4): \
             /usr/sbin/mkfs.ext4 exited with status 1: mkfs.ext4: Device size reported to \
             be zero."
        );
        let wrapped = VolumeError::CleanupFailed {
            cause: Box::new(err),
            left: vec!["loop device /dev/loop3".into(), "directory /v/x".into()],
        };
        assert_eq!(wrapped.step(), Some(Step::MakeFilesystem));
        assert!(wrapped
            .to_string()
            .ends_with("left behind: loop device /dev/loop3; directory /v/x"));
    }

    #[test]
    fn an_io_step_names_the_path_and_the_errno() {
        let err = VolumeError::Io {
            name: "scratch".into(),
            step: Step::ReserveImage,
            path: "/v/scratch/volume.img".into(),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "volume scratch: could not reserve the image's space (fallocate): \
                 /v/scratch/volume.img: "
            ),
            "{msg}"
        );
        assert!(msg.contains("os error 28"), "{msg}");
    }
}
