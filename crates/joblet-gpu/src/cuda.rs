//! CUDA toolkits on disk (`gpu.cuda_paths` and their versioned siblings)
//! and their versions from `version.json` or `version.txt` (or, for
//! toolkits installed without them, the version their headers were made
//! for), and the choice of a job's toolkit against the driver's CUDA
//! version ([`select_toolkit`]).

use crate::exec::ExecError;
use crate::inventory::InventoryError;
use crate::model::{CudaToolkit, CudaVersion};
use crate::procfs::is_dotted_version;
use std::path::{Path, PathBuf};

/// Seed 001's default `gpu.cuda_paths`.
pub const DEFAULT_CUDA_PATHS: [&str; 3] = ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda"];

/// Find CUDA toolkits: each configured path, then the versioned siblings
/// next to it (`/usr/local/cuda-12.2` for `/usr/local/cuda`), newest
/// first. Directories that resolve to the same place are reported once,
/// under the path found first (`/usr/local/cuda` rather than the
/// `cuda-12.2` it links to). A configured path that does not exist is
/// skipped quietly; one without a readable version (see `read_toolkit`)
/// is a warning.
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
                    "{} has no readable version.json, version.txt, include/cuda.h or include/cuda_runtime_api.h; not counted as a CUDA toolkit",
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

/// The toolkit in `dir`, from the first of these that it has: `version.json`,
/// `version.txt`, then the `CUDA_VERSION` of `include/cuda.h` or the
/// `CUDART_VERSION` of `include/cuda_runtime_api.h` (toolkits assembled
/// from NVIDIA's redistributable archives, as some images ship them, have
/// no version file; their headers give `major.minor`). Garbled files
/// become warnings.
fn read_toolkit(dir: &Path, warnings: &mut Vec<String>) -> Option<CudaToolkit> {
    type Parser = fn(&str, &Path) -> Result<String, InventoryError>;
    let sources: [(&str, Parser); 4] = [
        ("version.json", parse_version_json),
        ("version.txt", parse_version_txt),
        ("include/cuda.h", |t, p| {
            parse_header_version(t, p, "CUDA_VERSION")
        }),
        ("include/cuda_runtime_api.h", |t, p| {
            parse_header_version(t, p, "CUDART_VERSION")
        }),
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

/// `#define CUDA_VERSION 13000` (`include/cuda.h`) or `#define
/// CUDART_VERSION 13000` (`include/cuda_runtime_api.h`): `major * 1000 +
/// minor * 10`, so `13.0`.
pub fn parse_header_version(text: &str, path: &Path, name: &str) -> Result<String, InventoryError> {
    let err = |reason: String| InventoryError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let value = text
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("#define") && words.next() == Some(name))
                .then(|| words.next().unwrap_or(""))
        })
        .ok_or_else(|| err(format!("no `#define {name} <number>` line")))?;
    match value.parse::<u32>() {
        Ok(n) if n >= 1000 => Ok(format!("{}.{}", n / 1000, n % 1000 / 10)),
        _ => Err(err(format!(
            "`#define {name} {value}` is not a version like 13000 (13.0)"
        ))),
    }
}

fn checked_version(version: &str) -> Option<String> {
    let version = version.trim();
    is_dotted_version(version).then(|| version.to_string())
}

/// NVML's CUDA driver version (`nvmlSystemGetCudaDriverVersion`, e.g.
/// `12040`) as `(12, 4)`; `None` for a value that is not a version
/// (0 or negative). Same rule as [`CudaVersion::from_nvml`].
pub fn cuda_version_from_nvml(v: i32) -> Option<(u32, u32)> {
    CudaVersion::from_nvml(v).map(|c| (c.major, c.minor))
}

/// Choose the CUDA toolkit for a job among the node's `toolkits` (as
/// [`find_toolkits`] lists them), checked against the highest CUDA
/// version the driver supports (`driver_max`, `None` when unknown: not
/// checked).
///
/// - `requested` (`--cuda=12.2`, `12`, `12.2.140`): the toolkits whose
///   version starts with those components (`12.2` matches `12.2.140`, not
///   `12.20.1`); of those the driver can run, the highest. Not installed,
///   or too new for the driver, is an error that says what to ask for.
///   The check is strict on `major.minor`: CUDA's minor-version
///   compatibility would start such a toolkit, but its PTX JIT and newer
///   APIs fail on the older driver, later and less clearly.
/// - nothing requested: the highest toolkit the driver supports; `None`
///   when there is none (the job may bring its own CUDA runtime).
///
/// Equal versions: the one listed first wins (`gpu.cuda_paths` order).
pub fn select_toolkit<'a>(
    toolkits: &'a [CudaToolkit],
    requested: Option<&str>,
    driver_max: Option<(u32, u32)>,
) -> Result<Option<&'a CudaToolkit>, ExecError> {
    let runs = |key: &[u64]| match driver_max {
        None => true,
        Some((major, minor)) => major_minor(key) <= (u64::from(major), u64::from(minor)),
    };
    let keyed: Vec<(Vec<u64>, &CudaToolkit)> = toolkits
        .iter()
        .filter_map(|t| version_key(&t.version).map(|k| (k, t)))
        .collect();
    let Some(requested) = requested else {
        let best = highest(keyed.iter().filter(|(k, _)| runs(k)));
        if best.is_none() && !toolkits.is_empty() {
            tracing::warn!(
                ?driver_max,
                "no installed CUDA toolkit runs on this driver; the job gets none"
            );
        }
        return Ok(best);
    };
    let wanted = version_key(requested.trim())
        .filter(|k| k.len() <= 3)
        .ok_or_else(|| ExecError::InvalidCudaVersion {
            value: requested.to_string(),
        })?;
    let too_old = |key: &[u64]| ExecError::CudaDriverTooOld {
        needed: format_major_minor(key),
        driver_max: driver_max
            .map(|(a, b)| format!("{a}.{b}"))
            .unwrap_or_default(),
    };
    if wanted.len() >= 2 && !runs(&wanted) {
        return Err(too_old(&wanted));
    }
    let candidates: Vec<&(Vec<u64>, &CudaToolkit)> = keyed
        .iter()
        .filter(|(k, _)| k.starts_with(&wanted))
        .collect();
    if candidates.is_empty() {
        let installed: Vec<String> = toolkits
            .iter()
            .map(|t| format!("{} at {}", t.version, t.path))
            .collect();
        return Err(ExecError::CudaNotInstalled {
            requested: requested.trim().to_string(),
            installed: if installed.is_empty() {
                "none".to_string()
            } else {
                installed.join(", ")
            },
        });
    }
    match highest(candidates.iter().copied().filter(|(k, _)| runs(k))) {
        Some(t) => Ok(Some(t)),
        None => {
            let lowest = candidates
                .iter()
                .map(|(k, _)| k)
                .min()
                .expect("candidates is not empty");
            Err(too_old(lowest))
        }
    }
}

/// The toolkit with the highest version; the first of equals.
fn highest<'a, 'b>(
    it: impl Iterator<Item = &'b (Vec<u64>, &'a CudaToolkit)>,
) -> Option<&'a CudaToolkit>
where
    'a: 'b,
{
    let mut best: Option<&(Vec<u64>, &CudaToolkit)> = None;
    for item in it {
        if best.is_none_or(|b| item.0 > b.0) {
            best = Some(item);
        }
    }
    best.map(|(_, t)| *t)
}

fn major_minor(key: &[u64]) -> (u64, u64) {
    (
        key.first().copied().unwrap_or(0),
        key.get(1).copied().unwrap_or(0),
    )
}

fn format_major_minor(key: &[u64]) -> String {
    let (a, b) = major_minor(key);
    format!("{a}.{b}")
}

#[cfg(test)]
mod select_tests {
    use super::*;

    fn tk(path: &str, version: &str) -> CudaToolkit {
        CudaToolkit {
            path: path.into(),
            version: version.into(),
            source: "version.json".into(),
        }
    }

    fn node() -> Vec<CudaToolkit> {
        vec![
            tk("/usr/local/cuda", "12.2.140"),
            tk("/usr/local/cuda-12.4", "12.4.131"),
            tk("/usr/local/cuda-12.2", "12.2.91"),
            tk("/usr/local/cuda-11.8", "11.8.89"),
            tk("/usr/local/cuda-12.20", "12.20.1"),
        ]
    }

    fn path(r: Result<Option<&CudaToolkit>, ExecError>) -> Option<String> {
        r.unwrap().map(|t| t.path.clone())
    }

    #[test]
    fn nvml_versions() {
        assert_eq!(cuda_version_from_nvml(12040), Some((12, 4)));
        assert_eq!(cuda_version_from_nvml(11080), Some((11, 8)));
        assert_eq!(cuda_version_from_nvml(0), None);
    }

    #[test]
    fn requested_prefix_highest_patch_the_driver_runs() {
        let t = node();
        let d = Some((12, 4));
        assert_eq!(
            path(select_toolkit(&t, Some("12.2"), d)).as_deref(),
            Some("/usr/local/cuda")
        );
        assert_eq!(
            path(select_toolkit(&t, Some(" 12.2.91 "), d)).as_deref(),
            Some("/usr/local/cuda-12.2")
        );
        // `12` means the highest 12.x the driver runs (not 12.20).
        assert_eq!(
            path(select_toolkit(&t, Some("12"), d)).as_deref(),
            Some("/usr/local/cuda-12.4")
        );
        assert_eq!(
            path(select_toolkit(&t, Some("11.8"), d)).as_deref(),
            Some("/usr/local/cuda-11.8")
        );
    }

    #[test]
    fn nothing_requested_takes_the_highest_supported_or_none() {
        let t = node();
        assert_eq!(
            path(select_toolkit(&t, None, Some((12, 3)))).as_deref(),
            Some("/usr/local/cuda")
        );
        assert_eq!(
            path(select_toolkit(&t, None, None)).as_deref(),
            Some("/usr/local/cuda-12.20")
        );
        assert_eq!(path(select_toolkit(&t, None, Some((10, 2)))), None);
        assert_eq!(path(select_toolkit(&[], None, Some((12, 4)))), None);
        // Equal versions: the first listed.
        let twins = [
            tk("/opt/cuda", "12.2.140"),
            tk("/usr/local/cuda", "12.2.140"),
        ];
        assert_eq!(
            path(select_toolkit(&twins, None, None)).as_deref(),
            Some("/opt/cuda")
        );
    }

    #[test]
    fn too_new_for_the_driver() {
        let t = node();
        let msg = select_toolkit(&t, Some("12.4"), Some((12, 2)))
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "CUDA libraries not accessible: CUDA 12.4 needs a driver that supports CUDA 12.4, \
             but this node's driver supports up to 12.2; ask for --cuda=12.2 or older, or \
             upgrade the driver"
        );
        // `12.20` only matches 12.20.1, which the driver cannot run.
        let msg = select_toolkit(&t, Some("12.20"), Some((12, 4)))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("CUDA 12.20 needs"), "{msg}");
        // `12` on a 11.x driver: every 12.x is too new; name the lowest.
        let msg = select_toolkit(&t, Some("12"), Some((11, 8)))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("CUDA 12.2 needs"), "{msg}");
    }

    #[test]
    fn not_installed_lists_what_is() {
        let t = vec![tk("/usr/local/cuda-12.2", "12.2.140")];
        let msg = select_toolkit(&t, Some("11.8"), Some((12, 2)))
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with(
                "CUDA libraries not accessible: CUDA 11.8 is not installed on this node \
                 (installed: 12.2.140 at /usr/local/cuda-12.2); "
            ),
            "{msg}"
        );
        assert!(msg.contains("gpu.cuda_paths"), "{msg}");
        let msg = select_toolkit(&[], Some("12.2"), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("(installed: none)"), "{msg}");
    }

    #[test]
    fn bad_versions_are_refused() {
        for bad in ["", "twelve", "12.", "12.2.1.1", "v12.2", "-1"] {
            let err = select_toolkit(&node(), Some(bad), None).unwrap_err();
            assert!(
                matches!(err, ExecError::InvalidCudaVersion { .. }),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("like 12.2"), "{err}");
        }
    }
}
