//! Index records: `installed/<name>@<version>.json`, one per installed runtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// An installed runtime, as its index record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub name: String,
    pub version: String,
    pub description: String,
    /// The tree's digest, `sha256:<hex>` ([`crate::store`] says what it covers).
    pub digest: String,
    /// The runtime's root directory, `<store>/trees/<hex>`: a complete Debian root to
    /// bind-mount read-only. Not stored; filled in from the store's root when read.
    #[serde(skip)]
    pub root: PathBuf,
    /// Apparent size of the tree: the sum of its regular files' sizes, each path counted.
    pub size_bytes: u64,
    /// Number of regular files in the tree.
    pub files: u64,
    /// When the record was written, seconds since the Unix epoch.
    pub installed_at: u64,
    /// Environment a job in this runtime starts with (before its own variables).
    pub environment: BTreeMap<String, String>,
    /// The CUDA version (`major.minor`) the node's driver must support, if the runtime
    /// carries CUDA libraries.
    pub cuda: Option<String>,
    /// The argv `rnx runtime test` runs inside the runtime.
    pub self_check: Vec<String>,
    /// `(name, version)` of every Python package installed from the lock files.
    pub python_packages: Vec<(String, String)>,
    /// `name=version` of every Debian package in the tree (from its dpkg status).
    pub debian_packages: Vec<String>,
    /// The optional Python package sets (manifest `python.extras`) that were installed.
    pub extras: Vec<String>,
    /// Digest of what the tree was built from (base, packages, lock contents, extras);
    /// a build with the same inputs reuses the tree.
    pub inputs_digest: String,
}

impl Installed {
    /// The hex part of [`Installed::digest`], the tree's directory name.
    pub fn digest_hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }
}

/// The record's file name: `<name>@<version>.json`.
pub(crate) fn file_name(name: &str, version: &str) -> String {
    format!("{name}@{version}.json")
}

/// Reads one record and fills in its root from the store's `trees` directory.
pub(crate) fn read(path: &Path, trees: &Path) -> Result<Installed, super::StoreError> {
    let bytes = std::fs::read(path).map_err(super::StoreError::io("read", path))?;
    let mut record: Installed =
        serde_json::from_slice(&bytes).map_err(|source| super::StoreError::Record {
            path: path.to_path_buf(),
            source,
        })?;
    record.root = trees.join(record.digest_hex());
    Ok(record)
}
