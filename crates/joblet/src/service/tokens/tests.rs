//! Tokens, sign-in codes and sessions against a store in a temp dir, with
//! a clock the test moves.

use std::cell::Cell;

use super::*;

thread_local! {
    /// Each test runs on a thread of its own: its own clock.
    static NOW: Cell<i64> = const { Cell::new(1_000_000) };
}

fn now() -> UnixMillis {
    NOW.with(Cell::get)
}

fn advance(ms: i64) {
    NOW.with(|n| n.set(n.get() + ms));
}

fn tokens() -> (tempfile::TempDir, Tokens) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("j.db"), &dir.path().join("k")).unwrap();
    (dir, Tokens::new(Arc::new(store), now))
}

fn admin() -> Caller {
    Caller {
        name: "alice".into(),
        role: Role::Admin,
    }
}

fn viewer() -> Caller {
    Caller {
        name: "bob".into(),
        role: Role::Viewer,
    }
}

#[test]
fn a_token_acts_as_its_name_and_role_until_revoked() {
    let (_d, t) = tokens();
    let new = t.create(&admin(), "ci-bot", "viewer", 0).unwrap();
    assert_eq!(new.info.name, "ci-bot");
    assert_eq!(new.info.created_by, "alice");
    assert_eq!(new.info.expires_ms, None);
    let who = t.authenticate(&new.secret).unwrap();
    assert_eq!(
        who,
        Caller {
            name: "ci-bot".into(),
            role: Role::Viewer
        }
    );
    // Listed without the secret, with its last use.
    let list = t.list(&admin()).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].last_used_ms, Some(now()));
    assert!(!format!("{:?}", list).contains(&new.secret[21..]));
    // A second token of that name is refused.
    let e = t.create(&admin(), "ci-bot", "admin", 0).unwrap_err();
    assert!(matches!(e, ApiError::AlreadyExists(_)), "{e}");
    t.revoke(&admin(), "ci-bot").unwrap();
    let e = t.authenticate(&new.secret).unwrap_err();
    assert!(
        matches!(
            e,
            ApiError::Unauthenticated(CredentialError::Rejected(Form::Token))
        ),
        "{e}"
    );
    let e = t.revoke(&admin(), "ci-bot").unwrap_err();
    assert!(matches!(e, ApiError::NotFound(_)), "{e}");
}

#[test]
fn a_wrong_secret_a_malformed_text_and_an_expired_token_are_refused() {
    let (_d, t) = tokens();
    let new = t.create(&admin(), "short", "admin", 60).unwrap();
    assert_eq!(new.info.expires_ms, Some(now() + 60_000));
    // Same id, another secret.
    let forged = format!("{}{}", &new.secret[..21], "0".repeat(64));
    assert!(matches!(
        t.authenticate(&forged),
        Err(ApiError::Unauthenticated(CredentialError::Rejected(_)))
    ));
    assert!(matches!(
        t.authenticate("hunter2"),
        Err(ApiError::Unauthenticated(CredentialError::Malformed(_)))
    ));
    let id_only = t.list(&admin()).unwrap()[0].id.clone();
    t.revoke(&admin(), &id_only).unwrap();
    let new = t.create(&admin(), "short", "admin", 1).unwrap();
    advance(1_000);
    assert!(matches!(
        t.authenticate(&new.secret),
        Err(ApiError::Unauthenticated(CredentialError::Rejected(_)))
    ));
}

#[test]
fn only_admins_mint_list_and_revoke_and_bad_values_name_their_field() {
    let (_d, t) = tokens();
    for e in [
        t.create(&viewer(), "x", "viewer", 0).unwrap_err(),
        t.list(&viewer()).unwrap_err(),
        t.revoke(&viewer(), "x").unwrap_err(),
        t.console_code(&viewer(), "").unwrap_err(),
    ] {
        assert!(matches!(e, ApiError::PermissionDenied { .. }), "{e}");
    }
    for (name, role, secs, field) in [
        ("", "viewer", 0, "name"),
        ("a b", "viewer", 0, "name"),
        ("ok", "root", 0, "role"),
        ("ok", "viewer", -1, "expires_seconds"),
        ("ok", "viewer", MAX_TOKEN_TTL_SECONDS + 1, "expires_seconds"),
    ] {
        match t.create(&admin(), name, role, secs) {
            Err(ApiError::InvalidField(f)) => assert_eq!(f.field, field, "{f}"),
            other => panic!("{name:?} {role:?} {secs}: {other:?}"),
        }
    }
}

#[test]
fn a_sign_in_code_works_once_and_makes_a_session_with_a_csrf_token() {
    let (_d, t) = tokens();
    let code = t.console_code(&admin(), "viewer").unwrap();
    assert_eq!(code.caller.role, Role::Viewer);
    let s = t.sign_in(&code.code).unwrap();
    assert_eq!(s.session.caller.name, "alice");
    assert_eq!(s.session.caller.role, Role::Viewer);
    assert_eq!(s.session.csrf.len(), 64);
    assert!(matches!(
        t.sign_in(&code.code),
        Err(ApiError::Unauthenticated(CredentialError::Rejected(
            Form::Login
        )))
    ));
    assert_eq!(t.session(&s.cookie).unwrap(), s.session);
    // A session is not a token, nor the other way round.
    assert!(t.authenticate(&s.cookie).is_err());
    t.sign_out(&s.cookie).unwrap();
    assert!(t.session(&s.cookie).is_err());
}

#[test]
fn an_expired_sign_in_code_is_refused() {
    let (_d, t) = tokens();
    let code = t.console_code(&admin(), "").unwrap();
    assert_eq!(code.caller.role, Role::Admin);
    advance(LOGIN_CODE_TTL_MS + 1);
    assert!(t.sign_in(&code.code).is_err());
}
