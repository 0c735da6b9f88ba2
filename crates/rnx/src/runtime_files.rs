//! `rnx runtime build PATH`: the manifest (`runtime.yml`) and every file
//! under its directory, read into the map `BuildRuntimeRequest.files`
//! carries (paths relative to the manifest's directory, `/`-separated).
//!
//! Hidden directories (`.git`, `.venv`) are skipped. A symlink is followed
//! when it points to a file inside the directory; one that leads out of it,
//! or to a directory, is refused, as are sockets, pipes and devices. The
//! whole is capped at [`MAX_TOTAL`], checked before a byte is read.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// The manifest's name on the wire.
pub const MANIFEST: &str = "runtime.yml";
/// The most a build may send, all files together.
pub const MAX_TOTAL: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BuildFilesError {
    #[error("rnx runtime build {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("rnx runtime build {dir}: no {MANIFEST} in this directory; give the manifest file or the directory holding it")]
    NoManifest { dir: PathBuf },
    #[error("rnx runtime build {path}: the manifest is sent as {MANIFEST}, but {dir} has another {MANIFEST}; give that one, or rename one of them")]
    TwoManifests { path: PathBuf, dir: PathBuf },
    #[error("rnx runtime build {path}: it is a symlink to {target}, outside {dir}; copy what it points to into the directory")]
    SymlinkEscapes {
        path: PathBuf,
        target: PathBuf,
        dir: PathBuf,
    },
    #[error("rnx runtime build {path}: it is a symlink to a directory; only symlinks to files are followed")]
    SymlinkToDir { path: PathBuf },
    #[error("rnx runtime build {path}: it is a {kind}; only regular files (and symlinks to them) can be sent")]
    Special { path: PathBuf, kind: &'static str },
    #[error("rnx runtime build {path}: the name is not UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error("rnx runtime build {dir}: {total} bytes to send ({mib} MiB), more than the {max} MiB a build may send; keep only the manifest and the files it names in its directory (large inputs belong in the runtime's packages or a volume)", mib = .total.div_ceil(1024 * 1024), max = MAX_TOTAL / (1024 * 1024))]
    TooLarge { dir: PathBuf, total: u64 },
}

/// What a build sends.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BuildFiles {
    /// The manifest's directory, as given.
    pub dir: PathBuf,
    /// Relative path → content; always has [`MANIFEST`].
    pub files: BTreeMap<String, Vec<u8>>,
    pub total: u64,
}

/// A file to read, found by the walk.
struct Found {
    name: String,
    local: PathBuf,
    size: u64,
}

/// Collects the manifest at `path` (a file, sent as [`MANIFEST`] whatever
/// its name, or a directory holding `runtime.yml`) and the files beside it.
pub fn collect(path: &Path) -> Result<BuildFiles, BuildFilesError> {
    let read = |p: &Path| {
        let p = p.to_owned();
        move |source| BuildFilesError::Read { path: p, source }
    };
    let meta = fs::metadata(path).map_err(read(path))?;
    let (dir, manifest) = if meta.is_dir() {
        let manifest = path.join(MANIFEST);
        if !manifest.is_file() {
            return Err(BuildFilesError::NoManifest {
                dir: path.to_owned(),
            });
        }
        (path.to_owned(), manifest)
    } else {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        (dir, path.to_owned())
    };
    let root = fs::canonicalize(&dir).map_err(read(&dir))?;
    // The manifest's own name in the directory: it is sent once, under
    // MANIFEST.
    let own_name = manifest
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(MANIFEST)
        .to_owned();

    let mut found = Vec::new();
    walk(&root, &dir, "", &mut found)?;
    found.retain(|f| f.name != own_name);
    if found.iter().any(|f| f.name == MANIFEST) {
        return Err(BuildFilesError::TwoManifests {
            path: manifest,
            dir,
        });
    }
    let size = fs::metadata(&manifest).map_err(read(&manifest))?.len();
    found.push(Found {
        name: MANIFEST.to_owned(),
        local: manifest,
        size,
    });

    let total: u64 = found.iter().map(|f| f.size).sum();
    if total > MAX_TOTAL {
        return Err(BuildFilesError::TooLarge { dir, total });
    }
    let mut files = BTreeMap::new();
    let mut sent = 0u64;
    for f in found {
        let data = fs::read(&f.local).map_err(read(&f.local))?;
        sent += data.len() as u64;
        // A file that grew since it was measured.
        if sent > MAX_TOTAL {
            return Err(BuildFilesError::TooLarge { dir, total: sent });
        }
        files.insert(f.name, data);
    }
    Ok(BuildFiles {
        dir,
        files,
        total: sent,
    })
}

/// Adds the files under `local` (named `prefix…`) to `found`, in name order.
fn walk(
    root: &Path,
    local: &Path,
    prefix: &str,
    found: &mut Vec<Found>,
) -> Result<(), BuildFilesError> {
    let read = |p: &Path| {
        let p = p.to_owned();
        move |source| BuildFilesError::Read { path: p, source }
    };
    let mut children: Vec<_> = fs::read_dir(local)
        .map_err(read(local))?
        .collect::<Result<_, _>>()
        .map_err(read(local))?;
    children.sort_by_key(|c| c.file_name());
    for c in children {
        let path = c.path();
        let name = c
            .file_name()
            .to_str()
            .ok_or_else(|| BuildFilesError::NotUtf8 { path: path.clone() })?
            .to_owned();
        let ft = c.file_type().map_err(read(&path))?;
        let hidden = name.starts_with('.');
        let rel = format!("{prefix}{name}");
        if ft.is_dir() {
            if !hidden {
                walk(root, &path, &format!("{rel}/"), found)?;
            }
        } else if ft.is_symlink() {
            let target = fs::read_link(&path).map_err(read(&path))?;
            let real = fs::canonicalize(&path).ok();
            match real {
                Some(real) if real.starts_with(root) => {
                    let meta = fs::metadata(&real).map_err(read(&path))?;
                    if meta.is_dir() {
                        // Skipped like the hidden directory it looks like.
                        if hidden {
                            continue;
                        }
                        return Err(BuildFilesError::SymlinkToDir { path });
                    }
                    check_special(&path, meta.file_type())?;
                    found.push(Found {
                        name: rel,
                        local: path,
                        size: meta.len(),
                    });
                }
                // Dangling, or out of the directory.
                _ => {
                    return Err(BuildFilesError::SymlinkEscapes {
                        path,
                        target,
                        dir: root.to_owned(),
                    })
                }
            }
        } else {
            check_special(&path, ft)?;
            let size = c.metadata().map_err(read(&path))?.len();
            found.push(Found {
                name: rel,
                local: path,
                size,
            });
        }
    }
    Ok(())
}

fn check_special(path: &Path, ft: fs::FileType) -> Result<(), BuildFilesError> {
    if ft.is_file() {
        return Ok(());
    }
    let kind = if ft.is_block_device() || ft.is_char_device() {
        "device file"
    } else if ft.is_socket() {
        "socket"
    } else {
        "named pipe"
    };
    Err(BuildFilesError::Special {
        path: path.to_owned(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(b: &BuildFiles) -> Vec<&str> {
        b.files.keys().map(String::as_str).collect()
    }

    /// A manifest directory: the manifest, a lock, a nested file, a hidden
    /// directory and a hidden file, a symlink to a file inside.
    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("ml");
        fs::create_dir_all(d.join("files/etc")).unwrap();
        fs::create_dir_all(d.join(".git/objects")).unwrap();
        fs::write(d.join("runtime.yml"), "name: ml\n").unwrap();
        fs::write(d.join("requirements.lock"), "numpy==1.26.4\n").unwrap();
        fs::write(d.join("files/etc/pip.conf"), "[global]\n").unwrap();
        fs::write(d.join(".git/objects/ab"), "blob").unwrap();
        fs::write(d.join(".python-version"), "3.11\n").unwrap();
        symlink("requirements.lock", d.join("latest.lock")).unwrap();
        tmp
    }

    #[test]
    fn a_directory_and_its_manifest_give_the_same_relative_files() {
        let tmp = tree();
        let d = tmp.path().join("ml");
        let want = [
            ".python-version",
            "files/etc/pip.conf",
            "latest.lock",
            "requirements.lock",
            "runtime.yml",
        ];
        let by_dir = collect(&d).unwrap();
        assert_eq!(names(&by_dir), want);
        assert_eq!(by_dir.files["runtime.yml"], b"name: ml\n");
        assert_eq!(by_dir.files["files/etc/pip.conf"], b"[global]\n");
        // The symlink is sent as the file it points to.
        assert_eq!(by_dir.files["latest.lock"], b"numpy==1.26.4\n");
        assert_eq!(by_dir.total, 9 + 14 + 9 + 5 + 14);

        let by_file = collect(&d.join("runtime.yml")).unwrap();
        assert_eq!(by_file.files, by_dir.files);
        assert_eq!(by_file.dir, d);
    }

    #[test]
    fn a_manifest_of_another_name_is_sent_as_runtime_yml() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::write(d.join("cuda.yml"), "name: cuda\n").unwrap();
        fs::write(d.join("notes.txt"), "x").unwrap();
        let b = collect(&d.join("cuda.yml")).unwrap();
        assert_eq!(names(&b), ["notes.txt", "runtime.yml"]);
        assert_eq!(b.files["runtime.yml"], b"name: cuda\n");

        fs::write(d.join("runtime.yml"), "name: other\n").unwrap();
        let e = collect(&d.join("cuda.yml")).unwrap_err().to_string();
        assert!(e.contains("has another runtime.yml"), "{e}");
    }

    #[test]
    fn a_directory_without_a_manifest_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("requirements.txt"), "x").unwrap();
        let e = collect(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("no runtime.yml in this directory"), "{e}");
        let e = collect(&tmp.path().join("missing.yml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.yml") && e.contains("No such file"),
            "{e}"
        );
    }

    #[test]
    fn symlinks_out_of_the_directory_are_refused() {
        let tmp = tree();
        let d = tmp.path().join("ml");
        fs::write(tmp.path().join("secret"), "s3cret").unwrap();
        symlink("../secret", d.join("files/leak")).unwrap();
        let e = collect(&d).unwrap_err();
        assert!(
            matches!(&e, BuildFilesError::SymlinkEscapes { path, .. } if path.ends_with("files/leak")),
            "{e}"
        );
        let e = e.to_string();
        assert!(e.contains("it is a symlink to ../secret, outside"), "{e}");
        fs::remove_file(d.join("files/leak")).unwrap();

        symlink("/etc/passwd", d.join("passwd")).unwrap();
        assert!(collect(&d).unwrap_err().to_string().contains("/etc/passwd"));
        fs::remove_file(d.join("passwd")).unwrap();

        symlink("nowhere", d.join("dangling")).unwrap();
        assert!(matches!(
            collect(&d),
            Err(BuildFilesError::SymlinkEscapes { .. })
        ));
        fs::remove_file(d.join("dangling")).unwrap();

        symlink("files", d.join("more")).unwrap();
        let e = collect(&d).unwrap_err().to_string();
        assert!(e.contains("symlink to a directory"), "{e}");
        fs::remove_file(d.join("more")).unwrap();

        // Escaping links inside hidden directories are never looked at.
        symlink("/etc/passwd", d.join(".git/passwd")).unwrap();
        assert!(collect(&d).is_ok());
    }

    #[test]
    fn more_than_64_mib_is_refused_before_reading() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::write(d.join("runtime.yml"), "name: big\n").unwrap();
        // Sparse: the size counts, no disk is used.
        let f = fs::File::create(d.join("weights.bin")).unwrap();
        f.set_len(MAX_TOTAL - 10).unwrap();
        assert_eq!(collect(d).unwrap().total, MAX_TOTAL);
        f.set_len(MAX_TOTAL - 9).unwrap();
        let e = collect(d).unwrap_err();
        assert!(
            matches!(e, BuildFilesError::TooLarge { total, .. } if total == MAX_TOTAL + 1),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("67108865 bytes to send (65 MiB), more than the 64 MiB a build may send"),
            "{e}"
        );
    }

    #[test]
    fn pipes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::write(d.join("runtime.yml"), "name: x\n").unwrap();
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here
        }
        let e = collect(d).unwrap_err().to_string();
        assert!(e.contains("it is a named pipe"), "{e}");
    }
}
