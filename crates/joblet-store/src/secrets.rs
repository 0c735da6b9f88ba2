//! The secret-sealing key file, and sealing/opening a job's secret values with
//! ChaCha20-Poly1305 (random 12-byte nonce, the job id as associated data).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use joblet_core::JobId;
use rand::rngs::OsRng;
use rand::RngCore;

use crate::error::StoreError;

pub const KEY_LEN: usize = 32;
pub const NONCE_LEN: usize = 12;

/// The key that seals secrets at rest. Its bytes are never printed.
pub(crate) struct SealingKey {
    cipher: ChaCha20Poly1305,
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealingKey(..)")
    }
}

fn key_err(path: &Path, problem: impl Into<String>) -> StoreError {
    StoreError::Key {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

fn io_err(path: &Path, op: &'static str, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_owned(),
        op,
        source,
    }
}

impl SealingKey {
    /// Reads the key at `path`, creating it (32 random bytes, mode 0600) if it does not exist.
    ///
    /// A key file that is not a regular file, has any group/other permission bit set, or is
    /// not exactly 32 bytes long is refused.
    pub(crate) fn load_or_create(path: &Path) -> Result<SealingKey, StoreError> {
        match fs::symlink_metadata(path) {
            Ok(_) => Self::load(path),
            Err(e) if e.kind() == ErrorKind::NotFound => Self::create(path),
            Err(e) => Err(io_err(path, "inspect the secret key file", e)),
        }
    }

    fn load(path: &Path) -> Result<SealingKey, StoreError> {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW) // the key file itself must not be a symlink
            .open(path)
            .map_err(|e| io_err(path, "open the secret key file", e))?;
        let meta = file
            .metadata()
            .map_err(|e| io_err(path, "inspect the secret key file", e))?;
        if !meta.file_type().is_file() {
            return Err(key_err(path, "is not a regular file"));
        }
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(key_err(
                path,
                format!(
                    "has mode {mode:04o}, which lets other users read or change it; \
                     run `chmod 600 {}`",
                    path.display()
                ),
            ));
        }
        if meta.len() != KEY_LEN as u64 {
            return Err(key_err(
                path,
                format!(
                    "is {} bytes long, expected exactly {KEY_LEN}; restore the original key \
                     file (secrets of queued jobs cannot be read without it)",
                    meta.len()
                ),
            ));
        }
        let mut bytes = [0u8; KEY_LEN];
        file.read_exact(&mut bytes)
            .map_err(|e| io_err(path, "read the secret key file", e))?;
        Ok(Self::from_bytes(&bytes))
    }

    /// Writes a fresh key to a temporary file beside `path`, then links it into place, so the
    /// key file is either absent or complete, and a concurrent creator's key is never replaced.
    fn create(path: &Path) -> Result<SealingKey, StoreError> {
        let mut bytes = [0u8; KEY_LEN];
        OsRng.try_fill_bytes(&mut bytes).map_err(|e| {
            key_err(
                path,
                format!("could not get random bytes for a new key: {e}"),
            )
        })?;
        let tmp = tmp_path(path);
        let result = write_new(&tmp, &bytes).and_then(|()| match fs::hard_link(&tmp, path) {
            Ok(()) => {
                sync_parent(path);
                tracing::info!(path = %path.display(), "created a new secret-sealing key");
                Ok(Self::from_bytes(&bytes))
            }
            // Someone else created it meanwhile: use theirs.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Self::load(path),
            Err(e) => Err(io_err(path, "create the secret key file", e)),
        });
        if let Err(e) = fs::remove_file(&tmp) {
            tracing::warn!(path = %tmp.display(), error = %e, "could not remove a temporary key file");
        }
        result
    }

    fn from_bytes(bytes: &[u8; KEY_LEN]) -> SealingKey {
        SealingKey {
            cipher: ChaCha20Poly1305::new(Key::from_slice(bytes)),
        }
    }

    /// Seals `secrets` (as JSON) for job `id`. Returns the nonce and the ciphertext.
    pub(crate) fn seal(
        &self,
        id: &JobId,
        secrets: &BTreeMap<String, String>,
    ) -> Result<([u8; NONCE_LEN], Vec<u8>), StoreError> {
        let plain = serde_json::to_vec(secrets).map_err(|source| StoreError::Encode {
            id: id.clone(),
            what: "the secret values",
            source,
        })?;
        let mut nonce = [0u8; NONCE_LEN];
        OsRng
            .try_fill_bytes(&mut nonce)
            .map_err(|_| StoreError::Seal { id: id.clone() })?;
        let sealed = self.cipher.encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: &plain,
                aad: id.as_str().as_bytes(),
            },
        );
        wipe(plain);
        let ciphertext = sealed.map_err(|_| StoreError::Seal { id: id.clone() })?;
        Ok((nonce, ciphertext))
    }

    /// Opens what [`SealingKey::seal`] produced for job `id`.
    pub(crate) fn open(
        &self,
        id: &JobId,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<BTreeMap<String, String>, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt {
            id: id.to_string(),
            what: what.to_owned(),
        };
        if nonce.len() != NONCE_LEN {
            return Err(corrupt(&format!(
                "sealed secrets have a {}-byte nonce, expected {NONCE_LEN}",
                nonce.len()
            )));
        }
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: id.as_str().as_bytes(),
                },
            )
            .map_err(|_| {
                corrupt(
                    "sealed secrets do not decrypt with the key file \
                     (was the key file replaced?)",
                )
            })?;
        let parsed = serde_json::from_slice(&plain)
            .map_err(|e| corrupt(&format!("decrypted secrets are not a JSON map: {e}")));
        wipe(plain);
        parsed
    }
}

/// Overwrites a plaintext buffer before freeing it (best effort; copies made by serde may
/// remain elsewhere in memory).
fn wipe(mut buf: Vec<u8>) {
    buf.iter_mut().for_each(|b| *b = 0);
    std::hint::black_box(&buf);
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

fn write_new(tmp: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    // A leftover from a crashed earlier attempt by a process with the same pid.
    match fs::remove_file(tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(tmp, "remove a stale temporary key file", e)),
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(|e| io_err(tmp, "create a temporary key file", e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_err(tmp, "write a temporary key file", e))
}

fn sync_parent(path: &Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Err(e) = fs::File::open(parent).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %parent.display(), error = %e, "could not sync the key file's directory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn id() -> JobId {
        JobId::parse("3f2a9c1e-0000-4000-8000-000000000001").unwrap()
    }

    fn secrets() -> BTreeMap<String, String> {
        BTreeMap::from([("TOKEN".to_owned(), "hunter2".to_owned())])
    }

    #[test]
    fn creates_a_0600_key_then_reads_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        let k1 = SealingKey::load_or_create(&path).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), KEY_LEN as u64);
        let (nonce, ct) = k1.seal(&id(), &secrets()).unwrap();
        let k2 = SealingKey::load_or_create(&path).unwrap();
        assert_eq!(k2.open(&id(), &nonce, &ct).unwrap(), secrets());
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn readable_by_others_is_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        SealingKey::load_or_create(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = SealingKey::load_or_create(&path).unwrap_err();
        assert!(matches!(err, StoreError::Key { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("0644") && msg.contains("chmod 600"), "{msg}");
    }

    #[test]
    fn wrong_length_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        write_new(&path, &[7u8; 31]).unwrap();
        let err = SealingKey::load_or_create(&path).unwrap_err();
        assert!(err.to_string().contains("31 bytes"), "{err}");
    }

    #[test]
    fn a_symlinked_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.key");
        write_new(&real, &[7u8; KEY_LEN]).unwrap();
        let link = dir.path().join("secret.key");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(SealingKey::load_or_create(&link).is_err());
    }

    #[test]
    fn sealed_to_one_job_does_not_open_for_another_or_with_another_key() {
        let dir = tempfile::tempdir().unwrap();
        let k1 = SealingKey::load_or_create(&dir.path().join("a.key")).unwrap();
        let k2 = SealingKey::load_or_create(&dir.path().join("b.key")).unwrap();
        let (nonce, ct) = k1.seal(&id(), &secrets()).unwrap();
        assert!(!ct.windows(7).any(|w| w == b"hunter2"));
        let other = JobId::parse("3f2a9c1e-0000-4000-8000-000000000002").unwrap();
        assert!(matches!(
            k1.open(&other, &nonce, &ct),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            k2.open(&id(), &nonce, &ct),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(k1.open(&id(), &nonce[..11], &ct).is_err());
        let (nonce2, _) = k1.seal(&id(), &secrets()).unwrap();
        assert_ne!(nonce, nonce2, "nonces must be random");
    }
}
