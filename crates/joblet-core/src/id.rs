//! Job ids and their unique-prefix abbreviation.

use std::fmt;

use crate::text::clip;

/// A job's id: a lowercase UUID (`8-4-4-4-12` hex digits).
///
/// The daemon generates it; the core only checks its shape (also when one
/// is read back from JSON).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl TryFrom<String> for JobId {
    type Error = PrefixError;
    fn try_from(s: String) -> Result<Self, PrefixError> {
        JobId::parse(&s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl JobId {
    /// Accepts a full lowercase hyphenated UUID.
    pub fn parse(s: &str) -> Result<Self, PrefixError> {
        let ok = s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
            });
        if ok {
            Ok(JobId(s.to_owned()))
        } else {
            Err(PrefixError::Malformed(clip(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 8 characters, as `rnx job list` prints them.
    pub fn short(&self) -> &str {
        &self.0[..8]
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a user-typed job id does not name exactly one job. The id or
/// prefix it carries is the user's as messages echo it: cut to
/// [`crate::text::ECHO_CHARS`] characters and `…`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("job id is empty: give a job id or a unique prefix of one (see `rnx job list`)")]
    Empty,
    #[error("job id {0:?} is not valid: a job id is hex digits and '-', like 3f2a9c1e-…")]
    Malformed(String),
    #[error("no job with id or prefix {0:?} (see `rnx job list`)")]
    NotFound(String),
    #[error("job id prefix {prefix:?} is ambiguous: it matches {}; type more characters", .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
}

/// Checks that `prefix` could be the start of a job id (hex digits and `-`).
pub fn check_prefix(prefix: &str) -> Result<(), PrefixError> {
    if prefix.is_empty() {
        return Err(PrefixError::Empty);
    }
    if prefix.len() > 36 || !prefix.chars().all(|c| c == '-' || c.is_ascii_hexdigit()) {
        return Err(PrefixError::Malformed(clip(prefix)));
    }
    Ok(())
}

/// Resolves `prefix` against `candidates` (the ids that start with it, as a
/// store query returns them). An exact match wins; otherwise exactly one
/// candidate must start with the prefix.
pub fn resolve_prefix<'a, I>(prefix: &str, candidates: I) -> Result<JobId, PrefixError>
where
    I: IntoIterator<Item = &'a str>,
{
    check_prefix(prefix)?;
    let prefix_lc = prefix.to_ascii_lowercase();
    let mut matches: Vec<&str> = candidates
        .into_iter()
        .filter(|id| id.starts_with(&prefix_lc))
        .collect();
    if let Some(exact) = matches.iter().find(|id| **id == prefix_lc) {
        return JobId::parse(exact);
    }
    matches.sort_unstable();
    matches.dedup();
    match matches.as_slice() {
        [] => Err(PrefixError::NotFound(clip(prefix))),
        [one] => JobId::parse(one),
        many => Err(PrefixError::Ambiguous {
            prefix: clip(prefix),
            matches: many
                .iter()
                .take(5)
                .map(|m| m[..8.min(m.len())].to_owned())
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3f2a9c1e-0000-4000-8000-000000000001";
    const B: &str = "3f2b0000-0000-4000-8000-000000000002";

    #[test]
    fn parses_only_lowercase_uuids() {
        assert!(JobId::parse(A).is_ok());
        assert!(JobId::parse(&A.to_uppercase()).is_err());
        assert!(JobId::parse("3f2a").is_err());
    }

    #[test]
    fn unique_prefix_resolves() {
        assert_eq!(resolve_prefix("3f2a", [A, B]).unwrap().as_str(), A);
        assert_eq!(resolve_prefix("3F2A", [A, B]).unwrap().as_str(), A);
    }

    #[test]
    fn ambiguous_and_missing_prefixes_are_named() {
        let err = resolve_prefix("3f2", [A, B]).unwrap_err();
        assert!(matches!(err, PrefixError::Ambiguous { .. }), "{err}");
        assert!(err.to_string().contains("3f2a9c1e"));
        assert_eq!(
            resolve_prefix("ab", [A, B]).unwrap_err(),
            PrefixError::NotFound("ab".into())
        );
        assert_eq!(resolve_prefix("", [A]).unwrap_err(), PrefixError::Empty);
        assert!(matches!(
            resolve_prefix("zz", [A]),
            Err(PrefixError::Malformed(_))
        ));
    }

    #[test]
    fn a_huge_id_is_echoed_clipped() {
        let huge = "z".repeat(100 * 1024);
        for e in [
            check_prefix(&huge).unwrap_err(),
            JobId::parse(&huge).unwrap_err(),
        ] {
            let m = e.to_string();
            assert!(
                m.len() < 200 && m.contains(&format!("{}…", "z".repeat(64))),
                "{m}"
            );
        }
    }
}
