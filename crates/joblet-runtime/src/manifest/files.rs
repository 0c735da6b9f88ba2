//! A runtime directory as a set of files: what a client uploads and the daemon builds from.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::{fields, Manifest, ManifestError, MANIFEST_FILE};

/// Reads a runtime directory's manifest and every file it names (its lock files, and the
/// wheels of a relative `find_links` directory) into relative path → contents, the form
/// [`Manifest::from_files`] reads.
pub fn collect_files(path: &Path) -> Result<BTreeMap<String, Vec<u8>>, ManifestError> {
    let manifest = Manifest::load(path)?;
    let dir = manifest
        .source()
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let read = |rel: &str| {
        let full = dir.join(rel);
        std::fs::read(&full).map_err(|source| ManifestError::Read { path: full, source })
    };
    let mut files = BTreeMap::new();
    files.insert(MANIFEST_FILE.to_string(), read(MANIFEST_FILE)?);
    for rel in manifest.locks().keys() {
        files.insert(rel.to_string(), read(rel.as_str())?);
    }
    if let Some(links) = manifest.python.as_ref().and_then(|p| p.find_links.as_ref()) {
        if links.is_relative() {
            let wheel_dir = dir.join(links.as_str());
            let entries = std::fs::read_dir(&wheel_dir).map_err(|source| ManifestError::Read {
                path: wheel_dir.clone(),
                source,
            })?;
            for entry in entries {
                let entry = entry.map_err(|source| ManifestError::Read {
                    path: wheel_dir.clone(),
                    source,
                })?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    let rel = format!("{}/{name}", links.as_str().trim_end_matches('/'));
                    files.insert(rel.clone(), read(&rel)?);
                }
            }
        }
    }
    Ok(files)
}

/// Writes a file set under `dir` (which must exist), creating subdirectories. Paths must be
/// relative without `..` ([`Manifest::from_files`] has checked that; checked again here).
pub fn write_files(files: &BTreeMap<String, Vec<u8>>, dir: &Path) -> io::Result<()> {
    for (rel, bytes) in files {
        if !fields::is_inside_relative(rel) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("file name `{rel}` is not a relative path inside the runtime directory"),
            ));
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
    }
    Ok(())
}
