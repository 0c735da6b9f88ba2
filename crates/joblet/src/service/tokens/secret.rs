//! The text of a credential and how its secret is checked, pure: a credential is
//! `PREFIX_ID_SECRET`, where `ID` (8 random bytes, hex) finds its stored row and `SECRET`
//! (32 random bytes, 256 bits, hex) proves it; only the SHA-256 of `SECRET` is stored,
//! and it is compared in constant time.

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Hex digits of a credential's id and of its secret.
const ID_HEX: usize = 16;
const SECRET_HEX: usize = 64;

/// What a credential is, by the prefix of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// An API token (`jbt_…`), sent as `Authorization: Bearer jbt_…`.
    Token,
    /// A console sign-in code (`jbc_…`), the `code` of a sign-in link.
    Login,
    /// A console session (`jbs_…`), the `joblet_session` cookie.
    Session,
}

impl Form {
    pub fn prefix(self) -> &'static str {
        match self {
            Form::Token => "jbt",
            Form::Login => "jbc",
            Form::Session => "jbs",
        }
    }

    /// What the user calls it, in errors.
    pub fn what(self) -> &'static str {
        match self {
            Form::Token => "API token",
            Form::Login => "console sign-in code",
            Form::Session => "console session",
        }
    }
}

/// A freshly made credential: its text (shown once) and what is stored of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    pub id: String,
    pub text: String,
    pub sha256: [u8; 32],
}

/// Makes a credential of `form` with randomness from `rng`.
pub fn mint(form: Form, rng: &mut impl RngCore) -> Minted {
    let mut id = [0u8; ID_HEX / 2];
    let mut secret = [0u8; SECRET_HEX / 2];
    rng.fill_bytes(&mut id);
    rng.fill_bytes(&mut secret);
    let (id, secret) = (hex::encode(id), hex::encode(secret));
    Minted {
        text: format!("{}_{id}_{secret}", form.prefix()),
        sha256: sha256(&secret),
        id,
    }
}

/// A random value for a session's CSRF token (256 bits, hex).
pub fn random_hex(rng: &mut impl RngCore) -> String {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    hex::encode(b)
}

/// A credential as presented: the id that finds it and the secret to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presented<'a> {
    pub id: &'a str,
    pub secret: &'a str,
}

/// Why a presented credential's text is not one of `form`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {} is malformed: expected {}_ then {ID_HEX} and {SECRET_HEX} lowercase hex digits separated by _, as `rnx token create` or `rnx console` printed it", .0.what(), .0.prefix())]
pub struct Malformed(pub Form);

/// Splits `text` into id and secret, checking its form.
pub fn parse(form: Form, text: &str) -> Result<Presented<'_>, Malformed> {
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let rest = text
        .strip_prefix(form.prefix())
        .and_then(|r| r.strip_prefix('_'))
        .ok_or(Malformed(form))?;
    let (id, secret) = rest.split_once('_').ok_or(Malformed(form))?;
    if !hex(id, ID_HEX) || !hex(secret, SECRET_HEX) {
        return Err(Malformed(form));
    }
    Ok(Presented { id, secret })
}

/// SHA-256 of a secret's text.
pub fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether `secret` is the one whose hash is `stored`, in constant time.
pub fn matches(secret: &str, stored: &[u8; 32]) -> bool {
    sha256(secret).ct_eq(stored).into()
}

/// Whether two texts are equal, in time that depends only on their lengths.
pub fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn a_minted_credential_parses_back_and_its_secret_matches() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let m = mint(Form::Token, &mut rng);
        assert!(m.text.starts_with("jbt_"), "{}", m.text);
        assert_eq!(m.text.len(), 4 + 16 + 1 + 64);
        let p = parse(Form::Token, &m.text).unwrap();
        assert_eq!(p.id, m.id);
        assert!(matches(p.secret, &m.sha256));
        // Another secret, or the same one of another form, does not.
        let other = mint(Form::Token, &mut rng);
        assert_ne!(other.id, m.id);
        assert!(!matches(
            parse(Form::Token, &other.text).unwrap().secret,
            &m.sha256
        ));
        assert_eq!(parse(Form::Session, &m.text), Err(Malformed(Form::Session)));
    }

    #[test]
    fn malformed_texts_are_refused() {
        let good = format!("jbt_{}_{}", "a".repeat(16), "b".repeat(64));
        assert!(parse(Form::Token, &good).is_ok());
        for bad in [
            String::new(),
            "jbt".into(),
            "jbt_".into(),
            format!("jbt_{}", "a".repeat(16)),
            format!("jbt_{}_{}", "a".repeat(15), "b".repeat(64)),
            format!("jbt_{}_{}", "a".repeat(16), "b".repeat(63)),
            format!("jbt_{}_{}", "A".repeat(16), "b".repeat(64)),
            format!("jbt_{}_{}x", "a".repeat(16), "b".repeat(64)),
            format!("jbt_{}_{}_", "a".repeat(16), "b".repeat(64)),
            format!("Bearer jbt_{}_{}", "a".repeat(16), "b".repeat(64)),
        ] {
            let e = parse(Form::Token, &bad).unwrap_err();
            assert!(
                e.to_string().contains("API token is malformed"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn the_stored_hash_is_sha256_of_the_secret() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            hex::encode(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(same_text("abc", "abc"));
        assert!(!same_text("abc", "abd"));
        assert!(!same_text("abc", "abcd"));
    }
}
