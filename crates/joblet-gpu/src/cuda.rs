//! CUDA toolkits on disk (`gpu.cuda_paths` and their versioned siblings)
//! and their versions from `version.json` or `version.txt`.

use crate::inventory::InventoryError;
use crate::model::CudaToolkit;
use crate::procfs::is_dotted_version;
use std::path::{Path, PathBuf};

/// Seed 001's default `gpu.cuda_paths`.
pub const DEFAULT_CUDA_PATHS: [&str; 3] = ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda"];

/// Find CUDA toolkits: each configured path, then the versioned siblings
/// next to it (`/usr/local/cuda-12.2` for `/usr/local/cuda`), newest
/// first. Directories that resolve to the same place are reported once,
/// under the path found first (`/usr/local/cuda` rather than the
/// `cuda-12.2` it links to). A configured path that does not exist is
/// skipped quietly; one without a readable version file is a warning.
///
/// Returns the toolkits and the warnings.
pub fn find_toolkits(paths: &[PathBuf]) -> (Vec<CudaToolkit>, Vec<String>) {
    let mut toolkits = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for configured in paths {
        let mut candidates = vec![configured.clone()];
        candidates.extend(versioned_siblings(configured));
        for dir in candidates {
            match std::fs::metadata(&dir) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    warnings.push(format!(
                        "CUDA path {} is not a directory; check gpu.cuda_paths",
                        dir.display()
                    ));
                    continue;
                }
                Err(err) => {
                    tracing::debug!(path = %dir.display(), error = %err, "no CUDA toolkit here");
                    continue;
                }
            }
            let resolved = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if seen.contains(&resolved) {
                continue;
            }
            seen.push(resolved);
            match read_toolkit(&dir, &mut warnings) {
                Some(toolkit) => toolkits.push(toolkit),
                None => warnings.push(format!(
                    "{} has no readable version.json or version.txt; not counted as a CUDA toolkit",
                    dir.display()
                )),
            }
        }
    }
    (toolkits, warnings)
}

/// `<parent>/<name>-<version>` directories next to `path`, newest first.
fn versioned_siblings(path: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let prefix = format!("{name}-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u64>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let version = file_name.to_str()?.strip_prefix(&prefix)?;
            let key = version_key(version)?;
            Some((key, entry.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, p)| p).collect()
}

/// `12.2` → `[12, 2]`; `None` unless digits separated by dots.
fn version_key(version: &str) -> Option<Vec<u64>> {
    if version.is_empty() {
        return None;
    }
    version.split('.').map(|p| p.parse::<u64>().ok()).collect()
}

/// The toolkit in `dir`, from `version.json` or else `version.txt`;
/// garbled files become warnings.
fn read_toolkit(dir: &Path, warnings: &mut Vec<String>) -> Option<CudaToolkit> {
    type Parser = fn(&str, &Path) -> Result<String, InventoryError>;
    let sources: [(&str, Parser); 2] = [
        ("version.json", parse_version_json),
        ("version.txt", parse_version_txt),
    ];
    for (file, parse) in sources {
        let path = dir.join(file);
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                warnings.push(format!("cannot read {}: {err}", path.display()));
                continue;
            }
        };
        match parse(&text, &path) {
            Ok(version) => {
                return Some(CudaToolkit {
                    path: dir.display().to_string(),
                    version,
                    source: file.to_string(),
                })
            }
            Err(err) => {
                tracing::warn!(error = %err, "unreadable CUDA version file");
                warnings.push(err.to_string());
            }
        }
    }
    None
}

/// `version.json` of CUDA ≥ 11.1: `{"cuda": {"version": "12.2.140"}}`.
pub fn parse_version_json(text: &str, path: &Path) -> Result<String, InventoryError> {
    let err = |reason: String| InventoryError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    let version = value
        .get("cuda")
        .and_then(|c| c.get("version"))
        .and_then(|v| v.as_str())
        .ok_or_else(|| err("no string at `cuda.version`".to_string()))?;
    checked_version(version)
        .ok_or_else(|| err(format!("`{version}` is not a version like `12.2.140`")))
}

/// `version.txt` of older toolkits: `CUDA Version 11.8.89`.
pub fn parse_version_txt(text: &str, path: &Path) -> Result<String, InventoryError> {
    let err = |reason: String| InventoryError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let rest = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("CUDA Version"))
        .ok_or_else(|| err("no `CUDA Version <x.y.z>` line".to_string()))?;
    let version = rest.trim();
    checked_version(version)
        .ok_or_else(|| err(format!("`{version}` is not a version like `11.8.89`")))
}

fn checked_version(version: &str) -> Option<String> {
    let version = version.trim();
    is_dotted_version(version).then(|| version.to_string())
}
