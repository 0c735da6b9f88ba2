//! Device-node awareness: which GPUs of the description the caller may open, as the real driver decides.

use std::io;
use std::path::Path;

use crate::model::Node;

/// What opening a device node said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Opened, or `ENXIO`/`ENODEV` (a node with no driver behind it: the
    /// device cgroup let the open through).
    Openable,
    /// `EPERM`/`EACCES`: denied (device cgroup or permissions).
    Denied,
    /// No such node.
    Missing,
}

/// Try `open(O_RDWR)` on `path` and classify the result.
pub fn probe(path: &Path) -> Access {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(_) => Access::Openable,
        Err(e) => classify(&e),
    }
}

fn classify(e: &io::Error) -> Access {
    match e.raw_os_error() {
        Some(libc::ENXIO) | Some(libc::ENODEV) => Access::Openable,
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Access::Missing,
        _ => Access::Denied,
    }
}

/// Which GPUs the caller sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Positions (into `Node::gpus`) of the visible GPUs, in file order.
    Gpus(Vec<usize>),
    /// `<dev>/nvidiactl` exists but may not be opened.
    ControlDenied,
}

/// Decide visibility under `dev_dir`: without `nvidiactl` every GPU is
/// visible (a GPU-less host simulating a node); with it only GPUs whose
/// `nvidia<minor>` is openable, and none with an unknown minor.
pub fn visible_gpus(node: &Node, dev_dir: &Path) -> Visibility {
    let ctl = dev_dir.join("nvidiactl");
    match probe(&ctl) {
        Access::Missing => return Visibility::Gpus((0..node.gpus.len()).collect()),
        Access::Denied => return Visibility::ControlDenied,
        Access::Openable => {}
    }
    Visibility::Gpus(
        node.gpus
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.minor_number.is_some_and(|minor| {
                    probe(&dev_dir.join(format!("nvidia{minor}"))) == Access::Openable
                })
            })
            .map(|(i, _)| i)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_classes() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify(&e(libc::ENXIO)), Access::Openable);
        assert_eq!(classify(&e(libc::EPERM)), Access::Denied);
        assert_eq!(classify(&e(libc::EACCES)), Access::Denied);
        assert_eq!(classify(&e(libc::ENOENT)), Access::Missing);
    }

    #[test]
    fn probes_real_paths() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(probe(&dir.path().join("none")), Access::Missing);
        let f = dir.path().join("file");
        std::fs::write(&f, b"").unwrap();
        assert_eq!(probe(&f), Access::Openable);
    }
}
