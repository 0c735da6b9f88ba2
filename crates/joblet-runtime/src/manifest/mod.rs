//! Runtime manifests: `runtimes/<name>/runtime.yml` and the lock files it names.
//!
//! A manifest is read from a directory ([`Manifest::load`]) or from an in-memory set of
//! files, as the daemon receives them from a client ([`Manifest::from_files`]). Either way
//! every value is checked while the YAML is read (unknown fields are refused), every file
//! it names must be present, and every lock file must be fully pinned and hashed.

mod error;
pub mod fields;
mod files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use error::ManifestError;
pub use fields::{
    Argv, CudaVersion, DebPackage, EnvName, FindLinks, Name, RelPath, Suite, Version,
};
pub use files::{collect_files, write_files};

use crate::lock::Lock;

/// The manifest's file name inside a runtime directory.
pub const MANIFEST_FILE: &str = "runtime.yml";

/// A runtime's manifest, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: Name,
    pub version: Version,
    #[serde(default)]
    pub description: String,
    pub base: Base,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<Python>,
    /// Environment variables a job in this runtime gets (before the job's own).
    #[serde(default)]
    pub environment: BTreeMap<EnvName, String>,
    /// The CUDA version (`major.minor`) the node's driver must support for the runtime's
    /// GPU packages; `None` for runtimes without CUDA libraries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaVersion>,
    /// Run inside the runtime by `rnx runtime test`; exits 0 when the runtime works.
    pub self_check: Argv,
    /// The lock files named by `python`, parsed, by their path.
    #[serde(skip)]
    locks: BTreeMap<RelPath, Lock>,
    /// Where the manifest was read from, for messages.
    #[serde(skip)]
    source: PathBuf,
}

/// The Debian part of a runtime, built by mmdebstrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    /// Debian suite or codename, e.g. `bookworm`.
    pub suite: Suite,
    /// mmdebstrap's `--variant`.
    #[serde(default)]
    pub variant: Variant,
    /// Packages installed on top of the variant's set (`--include`).
    #[serde(default)]
    pub packages: Vec<DebPackage>,
}

/// mmdebstrap's package set variants (see `man mmdebstrap`, VARIANTS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// `Essential: yes` packages only.
    Essential,
    /// The essential set plus apt.
    #[default]
    Apt,
    /// Essential, `Priority: required` and apt.
    Minbase,
    /// Same set as `minbase`.
    Required,
    /// Required plus `Priority: important`.
    Important,
    /// Important plus `Priority: standard`.
    Standard,
    /// Only the listed packages (they must include dpkg and what its scripts need).
    Custom,
}

impl Variant {
    /// The name mmdebstrap takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Essential => "essential",
            Variant::Apt => "apt",
            Variant::Minbase => "minbase",
            Variant::Required => "required",
            Variant::Important => "important",
            Variant::Standard => "standard",
            Variant::Custom => "custom",
        }
    }
}

/// The Python packages of a runtime, installed by uv from hashed lock files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Python {
    /// `uv pip compile --generate-hashes` output, relative to the manifest.
    pub lock: RelPath,
    /// A wheel directory used instead of an index (`--no-index --find-links`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find_links: Option<FindLinks>,
    /// Optional package sets, installed only when a build asks for them: name → lock.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extras: BTreeMap<Name, RelPath>,
}

impl Manifest {
    /// Reads `path` (a `runtime.yml`, or a directory holding one) and the files it names.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let path = if path.is_dir() {
            path.join(MANIFEST_FILE)
        } else {
            path.to_path_buf()
        };
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let text = std::fs::read(&path).map_err(|source| ManifestError::Read {
            path: path.clone(),
            source,
        })?;
        Self::parse(
            &path,
            &text,
            &mut |rel: &Path| std::fs::read(dir.join(rel)).ok(),
            &|rel| dir.join(rel).is_dir(),
        )
    }

    /// Reads a manifest from an uploaded set of files: relative path → contents, with
    /// [`MANIFEST_FILE`] at the top. Build from them after [`write_files`] has put them in
    /// a directory.
    pub fn from_files(files: &BTreeMap<String, Vec<u8>>) -> Result<Manifest, ManifestError> {
        for key in files.keys() {
            if !fields::is_inside_relative(key) {
                return Err(ManifestError::BadUploadPath { path: key.clone() });
            }
        }
        let text = files.get(MANIFEST_FILE).ok_or(ManifestError::NoManifest {
            expected: MANIFEST_FILE,
        })?;
        let get = |rel: &Path| files.get(rel.to_str()?).cloned();
        let is_dir = |rel: &Path| {
            let prefix = format!("{}/", rel.display().to_string().trim_end_matches('/'));
            files.keys().any(|k| k.starts_with(&prefix))
        };
        Self::parse(Path::new(MANIFEST_FILE), text, &mut { get }, &is_dir)
    }

    fn parse(
        path: &Path,
        text: &[u8],
        read: &mut dyn FnMut(&Path) -> Option<Vec<u8>>,
        is_dir: &dyn Fn(&Path) -> bool,
    ) -> Result<Manifest, ManifestError> {
        let mut manifest: Manifest = serde_norway::from_slice(text).map_err(|e| {
            let location = e.location().map(|l| (l.line(), l.column()));
            let mut message = e.to_string();
            // The location goes in front, as `file:line:column:`; not twice.
            if let Some((line, column)) = location {
                let suffix = format!(" at line {line} column {column}");
                if let Some(stripped) = message.strip_suffix(&suffix) {
                    message = stripped.to_string();
                }
            }
            ManifestError::Parse {
                path: path.to_path_buf(),
                line: location.map(|l| l.0),
                column: location.map(|l| l.1),
                message,
            }
        })?;
        manifest.source = path.to_path_buf();
        manifest.check(read, is_dir)?;
        Ok(manifest)
    }

    fn check(
        &mut self,
        read: &mut dyn FnMut(&Path) -> Option<Vec<u8>>,
        is_dir: &dyn Fn(&Path) -> bool,
    ) -> Result<(), ManifestError> {
        let Some(python) = &self.python else {
            return Ok(());
        };
        if !self
            .base
            .packages
            .iter()
            .any(|p| p.as_str().starts_with("python3"))
        {
            return Err(ManifestError::Invalid {
                manifest: self.source.clone(),
                field: "base.packages",
                message: "a runtime with a `python` section needs Python from Debian: \
                          add `python3` (or `python3-minimal`)",
            });
        }
        let mut wanted = vec![("python.lock".to_string(), python.lock.clone())];
        for (name, lock) in &python.extras {
            wanted.push((format!("python.extras.{name}"), lock.clone()));
        }
        let mut locks = BTreeMap::new();
        for (field, rel) in wanted {
            let bytes = read(rel.as_path()).ok_or_else(|| ManifestError::MissingFile {
                manifest: self.source.clone(),
                field: field.clone(),
                file: rel.to_string(),
            })?;
            let lock = Lock::parse(&bytes).map_err(|source| ManifestError::Lock {
                manifest: self.source.clone(),
                field: field.clone(),
                file: rel.to_string(),
                source,
            })?;
            self.check_cuda(&rel, &lock)?;
            locks.insert(rel, lock);
        }
        if let Some(links) = &python.find_links {
            if links.is_relative() && !is_dir(Path::new(links.as_str())) {
                return Err(ManifestError::MissingFile {
                    manifest: self.source.clone(),
                    field: "python.find_links".to_string(),
                    file: links.to_string(),
                });
            }
        }
        self.locks = locks;
        Ok(())
    }

    /// A lock with NVIDIA's CUDA runtime wheel needs `cuda` set, to at least its major.
    fn check_cuda(&self, rel: &RelPath, lock: &Lock) -> Result<(), ManifestError> {
        let Some((major, minor)) = lock.cuda_runtime() else {
            return Ok(());
        };
        if self.cuda.is_some_and(|c| c.major >= major) {
            return Ok(());
        }
        let package = lock
            .packages
            .iter()
            .find(|(n, _)| n.starts_with("nvidia-cuda-runtime"))
            .map(|(n, _)| n.clone())
            .unwrap_or_default();
        Err(ManifestError::Cuda {
            manifest: self.source.clone(),
            file: rel.to_string(),
            package,
            found: format!("{major}.{minor}"),
            declared: self.cuda.map(|c| c.to_string()),
        })
    }

    /// The manifest file this was read from (`runtime.yml` for uploaded files).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The parsed lock file at `rel` (one named by `python.lock` or `python.extras`).
    pub fn lock(&self, rel: &RelPath) -> Option<&Lock> {
        self.locks.get(rel)
    }

    /// Lock files, by path.
    pub fn locks(&self) -> &BTreeMap<RelPath, Lock> {
        &self.locks
    }
}

#[cfg(test)]
mod tests;
