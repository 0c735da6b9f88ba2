//! API tokens, console sign-in codes and console sessions: who may mint
//! them (admins), how they are checked, and the [`Caller`] each acts as.
//! Transport-neutral: gRPC (`TokenService`) mints, lists and revokes; the
//! REST API ([`crate::rest`]) authenticates with them and signs in.
//!
//! Secrets are 256 random bits, stored as their SHA-256 only and checked
//! in constant time ([`secret`]). A token acts as `Caller { name, role }`
//! of its own name: the jobs it runs are owned by that name.

pub mod secret;

use std::sync::Arc;

use joblet_core::{FieldError, UnixMillis};
use joblet_pki::Role;
use joblet_store::{CredentialKind, CredentialRecord, Store, StoreError};

use super::{store_error, Access, ApiError, Caller};
use secret::{Form, Malformed};

/// How long a console sign-in link works.
pub const LOGIN_CODE_TTL_MS: i64 = 5 * 60 * 1000;
/// How long a console session lasts.
pub const SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;
/// The longest life a token may be given (ten years).
pub const MAX_TOKEN_TTL_SECONDS: i64 = 10 * 366 * 24 * 3600;
/// A token's last use is written at most this often.
const TOUCH_EVERY_MS: i64 = 60 * 1000;

/// Why a request's credentials were not accepted (HTTP 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("no credentials: send an API token (`Authorization: Bearer jbt_…`, from `rnx token create`), present a client certificate signed by this node's CA, or sign in to the console (`rnx console`)")]
    Missing,
    #[error("the Authorization header must be `Bearer TOKEN` (a token from `rnx token create`)")]
    NotBearer,
    #[error(transparent)]
    Malformed(#[from] Malformed),
    #[error("this {} is unknown, revoked, used already or expired; ask an admin for a new one", .0.what())]
    Rejected(Form),
}

/// A token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub created_by: String,
    pub created_ms: UnixMillis,
    pub expires_ms: Option<UnixMillis>,
    pub last_used_ms: Option<UnixMillis>,
}

/// A token just made: `secret` is its full text, shown this once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub info: TokenInfo,
    pub secret: String,
}

/// A console sign-in code, for a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginCode {
    pub code: String,
    /// Who signs in with it.
    pub caller: Caller,
    pub expires_ms: UnixMillis,
}

/// A console session: who it acts as and the CSRF token its changes carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub caller: Caller,
    pub csrf: String,
    pub expires_ms: UnixMillis,
}

/// A session just made from a sign-in code; `cookie` is its full text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub cookie: String,
    pub session: Session,
}

/// The credentials of one node.
pub struct Tokens {
    store: Arc<Store>,
    now: fn() -> UnixMillis,
}

/// `role` as a request gives it (`field` names it in the refusal).
pub fn parse_role(field: &str, role: &str) -> Result<Role, FieldError> {
    role.parse().map_err(|_| {
        FieldError::new(
            field,
            format!(
                "{:?} is not a role; expected admin or viewer",
                joblet_core::text::clip(role)
            ),
        )
    })
}

fn info(rec: &CredentialRecord) -> Result<TokenInfo, ApiError> {
    Ok(TokenInfo {
        id: rec.id.clone(),
        name: rec.name.clone(),
        role: stored_role(rec)?,
        created_by: rec.created_by.clone(),
        created_ms: rec.created_ms,
        expires_ms: rec.expires_ms,
        last_used_ms: rec.last_used_ms,
    })
}

fn stored_role(rec: &CredentialRecord) -> Result<Role, ApiError> {
    rec.role.parse().map_err(|_| {
        store_error(StoreError::Credential {
            id: rec.id.clone(),
            what: format!("stored role {:?} is unknown; the row is corrupt", rec.role),
        })
    })
}

fn live(rec: &CredentialRecord, kind: CredentialKind, now: UnixMillis) -> bool {
    rec.kind == kind && rec.expires_ms.is_none_or(|e| now < e)
}

impl Tokens {
    pub fn new(store: Arc<Store>, now: fn() -> UnixMillis) -> Tokens {
        Tokens { store, now }
    }

    /// Mints a token named `name` with `role`, expiring after
    /// `expires_seconds` (0: never).
    pub fn create(
        &self,
        caller: &Caller,
        name: &str,
        role: &str,
        expires_seconds: i64,
    ) -> Result<NewToken, ApiError> {
        caller.check(Access::Admin("create API tokens"))?;
        joblet_pki::validate_name(name).map_err(|e| FieldError::new("name", e.to_string()))?;
        let role = parse_role("role", role)?;
        if !(0..=MAX_TOKEN_TTL_SECONDS).contains(&expires_seconds) {
            return Err(FieldError::new(
                "expires_seconds",
                format!("{expires_seconds} is out of range; expected 0 (never) to {MAX_TOKEN_TTL_SECONDS} seconds (ten years)"),
            )
            .into());
        }
        let now = (self.now)();
        let minted = secret::mint(Form::Token, &mut rand::rngs::OsRng);
        let rec = CredentialRecord {
            id: minted.id,
            kind: CredentialKind::Token,
            name: name.to_owned(),
            role: role.to_string(),
            secret_sha256: minted.sha256,
            csrf: String::new(),
            created_by: caller.name.clone(),
            created_ms: now,
            expires_ms: (expires_seconds > 0).then(|| now.saturating_add(expires_seconds * 1000)),
            last_used_ms: None,
        };
        self.store.insert_credential(&rec).map_err(|e| match e {
            e @ StoreError::CredentialExists(_) => ApiError::AlreadyExists(e.to_string()),
            other => store_error(other),
        })?;
        tracing::info!(token = %rec.name, id = %rec.id, role = %role, by = %caller.name, "API token created");
        Ok(NewToken {
            info: info(&rec)?,
            secret: minted.text,
        })
    }

    /// Every token, oldest first (expired ones too, until pruned).
    pub fn list(&self, caller: &Caller) -> Result<Vec<TokenInfo>, ApiError> {
        caller.check(Access::Admin("list API tokens"))?;
        self.store
            .list_credentials(CredentialKind::Token)
            .map_err(store_error)?
            .iter()
            .map(info)
            .collect()
    }

    /// Revokes the token `reference` names (its name or id): it stops
    /// working at once.
    pub fn revoke(&self, caller: &Caller, reference: &str) -> Result<TokenInfo, ApiError> {
        caller.check(Access::Admin("revoke API tokens"))?;
        let tokens = self
            .store
            .list_credentials(CredentialKind::Token)
            .map_err(store_error)?;
        let rec = tokens
            .iter()
            .find(|t| t.name == reference || t.id == reference)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "no token named {:?} or with that id (`rnx token list`)",
                    joblet_core::text::clip(reference)
                ))
            })?;
        self.store.delete_credential(&rec.id).map_err(store_error)?;
        tracing::info!(token = %rec.name, id = %rec.id, by = %caller.name, "API token revoked");
        info(rec)
    }

    /// A one-time console sign-in code for the caller, acting with `role`
    /// (empty: the caller's own).
    pub fn console_code(&self, caller: &Caller, role: &str) -> Result<LoginCode, ApiError> {
        caller.check(Access::Admin("create console sign-in links"))?;
        let role = if role.is_empty() {
            caller.role
        } else {
            parse_role("role", role)?
        };
        let now = (self.now)();
        // Expired codes and sessions go now and then: here.
        let pruned = self.store.prune_credentials(now).map_err(store_error)?;
        tracing::debug!(pruned, "expired credentials deleted");
        let minted = secret::mint(Form::Login, &mut rand::rngs::OsRng);
        let expires_ms = now + LOGIN_CODE_TTL_MS;
        self.store
            .insert_credential(&CredentialRecord {
                id: minted.id,
                kind: CredentialKind::Login,
                name: caller.name.clone(),
                role: role.to_string(),
                secret_sha256: minted.sha256,
                csrf: String::new(),
                created_by: caller.name.clone(),
                created_ms: now,
                expires_ms: Some(expires_ms),
                last_used_ms: None,
            })
            .map_err(store_error)?;
        Ok(LoginCode {
            code: minted.text,
            caller: Caller {
                name: caller.name.clone(),
                role,
            },
            expires_ms,
        })
    }

    /// The caller an `Authorization: Bearer` token acts as.
    pub fn authenticate(&self, token: &str) -> Result<Caller, ApiError> {
        let p = secret::parse(Form::Token, token).map_err(CredentialError::from)?;
        let now = (self.now)();
        let rec = self
            .store
            .credential(p.id)
            .map_err(store_error)?
            .filter(|r| {
                live(r, CredentialKind::Token, now) && secret::matches(p.secret, &r.secret_sha256)
            })
            .ok_or(CredentialError::Rejected(Form::Token))?;
        if rec.last_used_ms.is_none_or(|t| now - t >= TOUCH_EVERY_MS) {
            if let Err(e) = self.store.touch_credential(&rec.id, now) {
                tracing::warn!(token = %rec.name, error = %e, "could not note the token's use");
            }
        }
        Ok(Caller {
            role: stored_role(&rec)?,
            name: rec.name,
        })
    }

    /// Signs in with a one-time code: the code is used up (even by a
    /// second request racing this one) and a session made.
    pub fn sign_in(&self, code: &str) -> Result<NewSession, ApiError> {
        let p = secret::parse(Form::Login, code).map_err(CredentialError::from)?;
        let now = (self.now)();
        let rec = self
            .store
            .take_credential(p.id, |r| {
                live(r, CredentialKind::Login, now) && secret::matches(p.secret, &r.secret_sha256)
            })
            .map_err(store_error)?
            .ok_or(CredentialError::Rejected(Form::Login))?;
        let role = stored_role(&rec)?;
        let minted = secret::mint(Form::Session, &mut rand::rngs::OsRng);
        let csrf = secret::random_hex(&mut rand::rngs::OsRng);
        let expires_ms = now + SESSION_TTL_MS;
        self.store
            .insert_credential(&CredentialRecord {
                id: minted.id,
                kind: CredentialKind::Session,
                name: rec.name.clone(),
                role: role.to_string(),
                secret_sha256: minted.sha256,
                csrf: csrf.clone(),
                created_by: rec.created_by,
                created_ms: now,
                expires_ms: Some(expires_ms),
                last_used_ms: None,
            })
            .map_err(store_error)?;
        tracing::info!(name = %rec.name, role = %role, "console session started");
        Ok(NewSession {
            cookie: minted.text,
            session: Session {
                caller: Caller {
                    name: rec.name,
                    role,
                },
                csrf,
                expires_ms,
            },
        })
    }

    /// The session a `joblet_session` cookie names.
    pub fn session(&self, cookie: &str) -> Result<Session, ApiError> {
        let p = secret::parse(Form::Session, cookie).map_err(CredentialError::from)?;
        let now = (self.now)();
        let rec = self
            .store
            .credential(p.id)
            .map_err(store_error)?
            .filter(|r| {
                live(r, CredentialKind::Session, now) && secret::matches(p.secret, &r.secret_sha256)
            })
            .ok_or(CredentialError::Rejected(Form::Session))?;
        Ok(Session {
            caller: Caller {
                role: stored_role(&rec)?,
                name: rec.name,
            },
            csrf: rec.csrf,
            expires_ms: rec.expires_ms.unwrap_or(now),
        })
    }

    /// Ends the session a cookie names (after checking it is one).
    pub fn sign_out(&self, cookie: &str) -> Result<(), ApiError> {
        self.session(cookie)?;
        let p = secret::parse(Form::Session, cookie).map_err(CredentialError::from)?;
        self.store.delete_credential(p.id).map_err(store_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
