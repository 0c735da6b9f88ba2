//! The repository's runtimes (`runtimes/*`), embedded in the binary, so a daemon can
//! install any of them by name on a node without the repository.
//!
//! An entry is the runtime directory's files (manifest, lock files, wheels of a relative
//! `find_links`), in the form [`Manifest::from_files`] reads. A test checks that every
//! file a manifest names is embedded and every runtime directory is listed.

use std::collections::BTreeMap;

use crate::manifest::{Manifest, ManifestError};

/// One embedded runtime.
#[derive(Debug, Clone, Copy)]
pub struct CatalogEntry {
    /// The runtime's directory name under `runtimes/`, which is also its manifest `name`.
    pub name: &'static str,
    files: &'static [(&'static str, &'static [u8])],
}

impl CatalogEntry {
    /// The entry's files: relative path → contents.
    pub fn files(&self) -> BTreeMap<String, Vec<u8>> {
        self.files
            .iter()
            .map(|(path, bytes)| (path.to_string(), bytes.to_vec()))
            .collect()
    }

    /// The entry's manifest, checked.
    pub fn manifest(&self) -> Result<Manifest, ManifestError> {
        Manifest::from_files(&self.files())
    }
}

macro_rules! runtime_files {
    ($dir:literal: $($file:literal),+ $(,)?) => {
        &[$(($file, include_bytes!(concat!("../../../runtimes/", $dir, "/", $file)) as &[u8])),+]
    };
}

static CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        name: "python-3.11",
        files: runtime_files!("python-3.11": "runtime.yml"),
    },
    CatalogEntry {
        name: "python-3.11-ml",
        files: runtime_files!("python-3.11-ml":
            "runtime.yml",
            "requirements.lock",
            "extras/tensorflow.lock",
            "extras/jax.lock",
        ),
    },
    CatalogEntry {
        name: "test-python",
        files: runtime_files!("test-python":
            "runtime.yml",
            "requirements.lock",
            "wheels/probe-0.1.0-py3-none-any.whl",
        ),
    },
];

/// Every embedded runtime, by name.
pub fn list() -> &'static [CatalogEntry] {
    CATALOG
}

/// The embedded runtime called `name`.
pub fn get(name: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifest::collect_files;

    fn runtimes_dir() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../runtimes"))
    }

    #[test]
    fn every_runtime_directory_is_embedded_whole() {
        let mut dirs: Vec<String> = std::fs::read_dir(runtimes_dir())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().join("runtime.yml").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        let names: Vec<&str> = list().iter().map(|e| e.name).collect();
        assert_eq!(names, dirs);
        for entry in list() {
            let on_disk = collect_files(&runtimes_dir().join(entry.name)).unwrap();
            let embedded = entry.files();
            assert_eq!(
                embedded.keys().collect::<Vec<_>>(),
                on_disk.keys().collect::<Vec<_>>(),
                "{}: embedded files differ from what its manifest names",
                entry.name
            );
            for (path, bytes) in &on_disk {
                assert!(
                    embedded[path] == *bytes,
                    "{}/{path} differs from the embedded copy",
                    entry.name
                );
            }
            let manifest = entry.manifest().unwrap();
            assert_eq!(manifest.name.as_str(), entry.name);
        }
    }

    #[test]
    fn ml_runtime_declares_the_cuda_of_its_torch() {
        let manifest = get("python-3.11-ml").unwrap().manifest().unwrap();
        let python = manifest.python.as_ref().unwrap();
        let lock = manifest.lock(&python.lock).unwrap();
        assert!(lock.packages.iter().any(|(n, _)| n == "torch"));
        let (major, minor) = lock.cuda_runtime().unwrap();
        let declared = manifest.cuda.unwrap();
        assert_eq!(declared.major, major);
        assert!(declared.minor <= minor);
        let extras: Vec<&str> = python.extras.keys().map(|k| k.as_str()).collect();
        assert_eq!(extras, ["jax", "tensorflow"]);
        assert!(get("no-such-runtime").is_none());
    }
}
