//! Writing and reading `{base}.crt` / `{base}.key` pairs with owner-only permissions.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::ca::CertPem;
use crate::error::PkiError;

const DIR_MODE: u32 = 0o700;
const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;

/// Writes `{base}.crt` (mode 0644) and `{base}.key` (mode 0600) into `dir`,
/// creating `dir` with mode 0700 if it is missing. Each file is replaced
/// atomically. Returns `(cert_path, key_path)`.
pub fn write_pem_files(
    dir: &Path,
    base: &str,
    pem: &CertPem,
) -> Result<(PathBuf, PathBuf), PkiError> {
    check_base(base)?;
    create_private_dir(dir)?;
    let cert_path = dir.join(format!("{base}.crt"));
    let key_path = dir.join(format!("{base}.key"));
    write_atomic(&key_path, pem.key.as_bytes(), KEY_MODE)?;
    write_atomic(&cert_path, pem.cert.as_bytes(), CERT_MODE)?;
    Ok((cert_path, key_path))
}

/// Reads back the pair that [`write_pem_files`] wrote.
pub fn read_pem_files(dir: &Path, base: &str) -> Result<CertPem, PkiError> {
    check_base(base)?;
    let read = |path: PathBuf| {
        fs::read_to_string(&path).map_err(|source| PkiError::Io {
            action: "cannot read",
            path,
            source,
        })
    };
    Ok(CertPem {
        cert: read(dir.join(format!("{base}.crt")))?,
        key: read(dir.join(format!("{base}.key")))?,
    })
}

fn check_base(base: &str) -> Result<(), PkiError> {
    if base.is_empty() || base == "." || base == ".." || base.contains(['/', '\0']) {
        return Err(PkiError::InvalidFileBase {
            base: base.to_owned(),
        });
    }
    Ok(())
}

fn create_private_dir(dir: &Path) -> Result<(), PkiError> {
    if dir.is_dir() {
        return Ok(());
    }
    let io = |source| PkiError::Io {
        action: "cannot create directory",
        path: dir.to_owned(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io)?;
    // The umask may have removed bits; make the mode exact.
    fs::set_permissions(dir, Permissions::from_mode(DIR_MODE)).map_err(io)
}

/// Writes `data` to a temporary file with `mode` (set before any data is
/// written, whatever the umask), syncs it and renames it over `path`.
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), PkiError> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp"));
    let io = |action: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| PkiError::Io {
            action,
            path,
            source,
        }
    };
    let _ = fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io("cannot create", &tmp))?;
    file.set_permissions(Permissions::from_mode(mode))
        .map_err(io("cannot set permissions of", &tmp))?;
    file.write_all(data).map_err(io("cannot write", &tmp))?;
    file.sync_all().map_err(io("cannot sync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io("cannot move the new file into place at", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn pem() -> CertPem {
        CertPem {
            cert: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
            key: "-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\n".into(),
        }
    }

    #[test]
    fn writes_files_with_owner_only_key_and_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state").join("tls");
        let (crt, key) = write_pem_files(&dir, "server", &pem()).unwrap();
        assert_eq!(crt, dir.join("server.crt"));
        assert_eq!(key, dir.join("server.key"));
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&crt), 0o644);
        assert_eq!(fs::read_to_string(&crt).unwrap(), pem().cert);
        assert_eq!(fs::read_to_string(&key).unwrap(), pem().key);
        let back = read_pem_files(&dir, "server").unwrap();
        assert_eq!((back.cert, back.key), (pem().cert, pem().key));
        let leftovers: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 2, "no temporary files left behind");
    }

    #[test]
    fn overwriting_a_loose_key_file_tightens_it() {
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("ca.key");
        fs::write(&key, "old").unwrap();
        fs::set_permissions(&key, Permissions::from_mode(0o666)).unwrap();
        write_pem_files(tmp.path(), "ca", &pem()).unwrap();
        assert_eq!(mode(&key), 0o600);
        assert_eq!(fs::read_to_string(&key).unwrap(), pem().key);
    }

    #[test]
    fn existing_directory_is_used_as_is() {
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), Permissions::from_mode(0o750)).unwrap();
        write_pem_files(tmp.path(), "admin", &pem()).unwrap();
        assert_eq!(mode(tmp.path()), 0o750);
    }

    #[test]
    fn bad_bases_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for base in ["", ".", "..", "a/b", "../x"] {
            let err = write_pem_files(tmp.path(), base, &pem()).unwrap_err();
            assert!(
                matches!(&err, PkiError::InvalidFileBase { base: b } if b == base),
                "{err}"
            );
        }
    }

    #[test]
    fn errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let err = read_pem_files(tmp.path(), "missing").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("missing.crt"), "{msg}");
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        let err = write_pem_files(&file.join("sub"), "x", &pem()).unwrap_err();
        assert!(err.to_string().contains("file/sub"), "{err}");
    }
}
