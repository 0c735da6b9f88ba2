//! Joblet runtimes: immutable, self-contained Debian root filesystems that jobs run in.
//!
//! - [`manifest`]: a runtime's recipe, `runtimes/<name>/runtime.yml` and its Python lock
//!   files, read from a directory or from uploaded files;
//! - [`catalog`]: the repository's runtimes, embedded, so any node can install them;
//! - [`build()`]: mmdebstrap for the Debian part, uv for the Python packages (pinned by
//!   hash), run as child processes with progress and cancellation;
//! - [`store`]: the content-addressed store of built trees on the node
//!   (`objects/`, `trees/<digest>/`, `installed/*.json`) with garbage collection.
//!
//! The daemon bind-mounts an installed tree ([`Installed::root`]) read-only, nosuid, nodev
//! as the job's root filesystem. This crate runs the build tools and writes the store; it
//! does not mount anything, and it must not depend on the daemon, the scheduler or the API.

pub mod build;
pub mod catalog;
pub mod lock;
pub mod manifest;
pub mod store;
pub mod version;

pub use build::{build, BuildError, BuildOptions, Phase, Progress};
pub use manifest::{Manifest, ManifestError};
pub use store::{DiskUsage, Installed, RuntimeStore, StoreError};
