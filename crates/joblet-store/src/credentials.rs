//! Credentials of the REST API and the web console (schema step "credentials"): API
//! tokens an admin mints for scripts, one-time console sign-in codes, and console sessions.
//!
//! Only the SHA-256 of each secret is kept ([`CredentialRecord::secret_sha256`]); the
//! secret itself is shown once, to whoever asked for it. What a credential's text looks
//! like, how its secret is checked and who may mint one is the daemon's business
//! (`joblet::service::tokens`); the store keeps the rows and takes a single-use one out
//! atomically ([`Store::take_credential`]).

use std::path::Path;

use joblet_core::UnixMillis;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::{SqlContext, Store, StoreError};

/// What a credential is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// A bearer token (`rnx token create`); its `name` is unique among tokens.
    Token,
    /// A one-time console sign-in code (`rnx console`).
    Login,
    /// A console session, made from a sign-in code.
    Session,
}

impl CredentialKind {
    /// The name stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Token => "token",
            CredentialKind::Login => "login",
            CredentialKind::Session => "session",
        }
    }

    fn parse(s: &str) -> Option<CredentialKind> {
        match s {
            "token" => Some(CredentialKind::Token),
            "login" => Some(CredentialKind::Login),
            "session" => Some(CredentialKind::Session),
            _ => None,
        }
    }
}

/// One stored credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRecord {
    /// Random, public: the part of the credential's text that finds its row.
    pub id: String,
    pub kind: CredentialKind,
    /// Who the credential acts as (a token's name; the admin a code or session is for).
    pub name: String,
    /// `admin` or `viewer`, as the daemon writes roles.
    pub role: String,
    /// SHA-256 of the secret part.
    pub secret_sha256: [u8; 32],
    /// A session's anti-CSRF token; empty for the other kinds.
    pub csrf: String,
    /// The caller that minted it.
    pub created_by: String,
    pub created_ms: UnixMillis,
    /// After this it no longer authenticates; `None` = never expires (tokens only).
    pub expires_ms: Option<UnixMillis>,
    /// When it last authenticated a request (tokens; coarse).
    pub last_used_ms: Option<UnixMillis>,
}

const COLUMNS: &str =
    "id, kind, name, role, secret_sha256, csrf, created_by, created_ms, expires_ms, last_used_ms";

fn corrupt(id: &str, what: impl Into<String>) -> StoreError {
    StoreError::Credential {
        id: id.to_owned(),
        what: what.into(),
    }
}

/// A row before its kind and hash are checked.
struct RawCredential {
    id: String,
    kind: String,
    name: String,
    role: String,
    secret_sha256: Vec<u8>,
    csrf: String,
    created_by: String,
    created_ms: i64,
    expires_ms: Option<i64>,
    last_used_ms: Option<i64>,
}

impl RawCredential {
    /// Reads the columns in [`COLUMNS`] order.
    fn from_row(r: &Row<'_>) -> rusqlite::Result<RawCredential> {
        Ok(RawCredential {
            id: r.get(0)?,
            kind: r.get(1)?,
            name: r.get(2)?,
            role: r.get(3)?,
            secret_sha256: r.get(4)?,
            csrf: r.get(5)?,
            created_by: r.get(6)?,
            created_ms: r.get(7)?,
            expires_ms: r.get(8)?,
            last_used_ms: r.get(9)?,
        })
    }

    fn into_record(self) -> Result<CredentialRecord, StoreError> {
        let kind = CredentialKind::parse(&self.kind).ok_or_else(|| {
            corrupt(
                &self.id,
                format!("stored kind {:?} is unknown; the row is corrupt", self.kind),
            )
        })?;
        let secret_sha256: [u8; 32] = self.secret_sha256.as_slice().try_into().map_err(|_| {
            corrupt(
                &self.id,
                format!(
                    "stored hash has {} bytes, not 32; the row is corrupt",
                    self.secret_sha256.len()
                ),
            )
        })?;
        Ok(CredentialRecord {
            id: self.id,
            kind,
            name: self.name,
            role: self.role,
            secret_sha256,
            csrf: self.csrf,
            created_by: self.created_by,
            created_ms: self.created_ms,
            expires_ms: self.expires_ms,
            last_used_ms: self.last_used_ms,
        })
    }
}

fn read(conn: &Connection, path: &Path, id: &str) -> Result<Option<CredentialRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM credentials WHERE id = ?1"))
        .and_then(|mut stmt| stmt.query_row([id], RawCredential::from_row).optional())
        .during(path, || "read a credential".into())?
        .map(RawCredential::into_record)
        .transpose()
}

impl Store {
    /// Records a credential. A token whose name another token has is refused
    /// ([`StoreError::CredentialExists`]).
    pub fn insert_credential(&self, rec: &CredentialRecord) -> Result<(), StoreError> {
        let inserted = self
            .lock()
            .prepare_cached(&format!(
                "INSERT INTO credentials ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT DO NOTHING"
            ))
            .and_then(|mut stmt| {
                stmt.execute(params![
                    rec.id,
                    rec.kind.as_str(),
                    rec.name,
                    rec.role,
                    &rec.secret_sha256[..],
                    rec.csrf,
                    rec.created_by,
                    rec.created_ms,
                    rec.expires_ms,
                    rec.last_used_ms,
                ])
            })
            .during(&self.path, || format!("record {} {}", rec.kind.as_str(), rec.name))?;
        if inserted == 0 {
            return Err(StoreError::CredentialExists(rec.name.clone()));
        }
        tracing::debug!(kind = rec.kind.as_str(), name = %rec.name, role = %rec.role, "recorded credential");
        Ok(())
    }

    /// The credential with id `id`, if any (expired or not).
    pub fn credential(&self, id: &str) -> Result<Option<CredentialRecord>, StoreError> {
        read(&self.lock(), &self.path, id)
    }

    /// Every credential of `kind`, oldest first.
    pub fn list_credentials(
        &self,
        kind: CredentialKind,
    ) -> Result<Vec<CredentialRecord>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let op = || format!("list {} credentials", kind.as_str());
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM credentials WHERE kind = ?1 ORDER BY created_ms, id"
            ))
            .during(path, op)?;
        let rows = stmt
            .query_map([kind.as_str()], RawCredential::from_row)
            .during(path, op)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.during(path, op)?.into_record()?);
        }
        Ok(out)
    }

    /// Deletes credential `id`; true if there was one.
    pub fn delete_credential(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .prepare_cached("DELETE FROM credentials WHERE id = ?1")
            .and_then(|mut stmt| stmt.execute([id]))
            .during(&self.path, || "delete a credential".into())?;
        Ok(n > 0)
    }

    /// Takes single-use credential `id` out of the store if `accept` says its record is
    /// the one asked for (the caller checks the secret): read, check and delete under one
    /// lock, so two requests cannot both take it. `None`: no such row, or `accept` said no
    /// (the row is then left as it was).
    pub fn take_credential(
        &self,
        id: &str,
        accept: impl FnOnce(&CredentialRecord) -> bool,
    ) -> Result<Option<CredentialRecord>, StoreError> {
        let conn = self.lock();
        let Some(rec) = read(&conn, &self.path, id)? else {
            return Ok(None);
        };
        if !accept(&rec) {
            return Ok(None);
        }
        conn.prepare_cached("DELETE FROM credentials WHERE id = ?1")
            .and_then(|mut stmt| stmt.execute([id]))
            .during(&self.path, || "take a single-use credential".into())?;
        Ok(Some(rec))
    }

    /// Notes that credential `id` authenticated a request at `now`.
    pub fn touch_credential(&self, id: &str, now: UnixMillis) -> Result<(), StoreError> {
        self.lock()
            .prepare_cached("UPDATE credentials SET last_used_ms = ?2 WHERE id = ?1")
            .and_then(|mut stmt| stmt.execute(params![id, now]))
            .during(&self.path, || "note a credential's use".into())?;
        Ok(())
    }

    /// Deletes every credential that expired before `now`; returns how many.
    pub fn prune_credentials(&self, now: UnixMillis) -> Result<usize, StoreError> {
        self.lock()
            .prepare_cached(
                "DELETE FROM credentials WHERE expires_ms IS NOT NULL AND expires_ms <= ?1",
            )
            .and_then(|mut stmt| stmt.execute([now]))
            .during(&self.path, || "delete expired credentials".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &dir.path().join("k")).unwrap();
        (dir, store)
    }

    fn rec(
        id: &str,
        kind: CredentialKind,
        name: &str,
        expires_ms: Option<i64>,
    ) -> CredentialRecord {
        CredentialRecord {
            id: id.into(),
            kind,
            name: name.into(),
            role: "viewer".into(),
            secret_sha256: [7; 32],
            csrf: String::new(),
            created_by: "alice".into(),
            created_ms: 1,
            expires_ms,
            last_used_ms: None,
        }
    }

    #[test]
    fn tokens_are_unique_by_name_and_read_back() {
        let (_d, s) = store();
        s.insert_credential(&rec("a1", CredentialKind::Token, "ci", None))
            .unwrap();
        let e = s
            .insert_credential(&rec("a2", CredentialKind::Token, "ci", None))
            .unwrap_err();
        assert!(
            matches!(e, StoreError::CredentialExists(ref n) if n == "ci"),
            "{e}"
        );
        // Sessions of the same person do not collide.
        s.insert_credential(&rec("s1", CredentialKind::Session, "ci", Some(10)))
            .unwrap();
        s.insert_credential(&rec("s2", CredentialKind::Session, "ci", Some(10)))
            .unwrap();
        assert_eq!(s.credential("a1").unwrap().unwrap().secret_sha256, [7; 32]);
        let tokens = s.list_credentials(CredentialKind::Token).unwrap();
        assert_eq!(tokens.len(), 1);
        s.touch_credential("a1", 99).unwrap();
        assert_eq!(s.credential("a1").unwrap().unwrap().last_used_ms, Some(99));
        assert!(s.delete_credential("a1").unwrap());
        assert!(!s.delete_credential("a1").unwrap());
        assert_eq!(s.prune_credentials(10).unwrap(), 2);
    }

    #[test]
    fn a_single_use_credential_is_taken_once_and_only_when_accepted() {
        let (_d, s) = store();
        s.insert_credential(&rec("c1", CredentialKind::Login, "alice", Some(100)))
            .unwrap();
        assert!(s.take_credential("c1", |_| false).unwrap().is_none());
        assert!(s.take_credential("c1", |_| true).unwrap().is_some());
        assert!(s.take_credential("c1", |_| true).unwrap().is_none());
    }
}
