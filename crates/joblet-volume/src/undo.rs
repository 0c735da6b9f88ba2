//! What a half-done create or attach undoes, newest first, so a failed step leaves nothing
//! behind: no mount, no loop device, no image, no directory.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Step, VolumeError};
use crate::mounter::Mounter;
use crate::tools::Tools;

/// One thing made, and how to unmake it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Made {
    /// A directory this operation created (empty once what is inside is undone).
    Dir(PathBuf),
    /// The image file.
    Image(PathBuf),
    /// A loop device attached and not yet set to autoclear.
    Loop(PathBuf),
    /// A mount at this path.
    Mount(PathBuf),
}

impl fmt::Display for Made {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Made::Dir(p) => write!(f, "directory {}", p.display()),
            Made::Image(p) => write!(f, "image {}", p.display()),
            Made::Loop(p) => write!(f, "loop device {}", p.display()),
            Made::Mount(p) => write!(f, "mount at {}", p.display()),
        }
    }
}

/// The things made so far by an operation on volume `name`.
#[derive(Debug)]
pub(crate) struct Undo {
    name: String,
    made: Vec<Made>,
}

impl Undo {
    pub(crate) fn new(name: &str) -> Undo {
        Undo {
            name: name.to_owned(),
            made: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, made: Made) {
        self.made.push(made);
    }

    /// Forgets loop device `device`: it was set to autoclear, so unmounting detaches it.
    pub(crate) fn forget_loop(&mut self, device: &Path) {
        self.made
            .retain(|m| !matches!(m, Made::Loop(d) if d == device));
    }

    /// Undoes everything made, newest first, and returns `cause`; if some of it could not
    /// be undone, a [`VolumeError::CleanupFailed`] listing what is left.
    pub(crate) fn run(
        self,
        tools: &Tools,
        mounter: &dyn Mounter,
        cause: VolumeError,
    ) -> VolumeError {
        let name = self.name;
        let mut left = Vec::new();
        for made in self.made.into_iter().rev() {
            let result = match &made {
                Made::Dir(p) => std::fs::remove_dir(p).map_err(|e| e.to_string()),
                Made::Image(p) => std::fs::remove_file(p).map_err(|e| e.to_string()),
                Made::Loop(d) => tools
                    .detach_loop(&name, Step::DetachLoop, d)
                    .map_err(|e| e.to_string()),
                Made::Mount(p) => mounter.unmount(p).map_err(|e| e.to_string()),
            };
            match result {
                Ok(()) => tracing::debug!(volume = %name, undone = %made, "undone"),
                Err(e) => {
                    tracing::error!(volume = %name, left = %made, error = %e, "could not undo");
                    left.push(format!("{made} ({e})"));
                }
            }
        }
        if left.is_empty() {
            cause
        } else {
            VolumeError::CleanupFailed {
                cause: Box::new(cause),
                left,
            }
        }
    }
}
