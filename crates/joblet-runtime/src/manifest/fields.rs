//! Checked field types of a manifest. Each one is checked while the YAML scalar (or
//! sequence) is read, inside its own `deserialize`, so serde_norway reports a bad value
//! with its own line, column and field path, followed by the form that is accepted.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Why a field's value was refused; the text is what the user sees after the location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(String);

/// A runtime or extra name: 1 to 64 letters, digits, `.`, `-`, `_`, not starting with `.`
/// or `-`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct Name(String);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Name {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        if is_name(&value) {
            Ok(Name(value))
        } else {
            Err(FieldError(format!(
                "invalid name `{value}`: use 1 to 64 letters, digits, `.`, `-` or `_`, \
                 not starting with `.` or `-` (e.g. `python-3.11-ml`)"
            )))
        }
    }
}

/// A runtime version: 1 to 64 letters, digits, `.`, `-`, `_`, `+`, starting with a digit
/// (e.g. `1`, `2.0.1`, `2025.11-rc1`). Versions compare as in [`crate::version`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct Version(String);

impl Version {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Version {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        if is_version(&value) {
            Ok(Version(value))
        } else {
            Err(FieldError(format!(
                "invalid version `{value}`: use 1 to 64 letters, digits, `.`, `-`, `_` or `+`, \
                 starting with a digit (e.g. `1.0`)"
            )))
        }
    }
}

/// A Debian suite or codename (`bookworm`, `stable`, `trixie`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct Suite(String);

impl Suite {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Suite {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Suite(value))
        } else {
            Err(FieldError(format!(
                "invalid suite `{value}`: use a Debian suite or codename such as `bookworm`"
            )))
        }
    }
}

/// A Debian package name (Debian policy 5.6.1): lower-case letters, digits, `+`, `-`, `.`,
/// at least two characters, starting with a letter or digit. Versions and apt patterns are
/// not accepted: what a runtime contains is what its manifest names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct DebPackage(String);

impl DebPackage {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for DebPackage {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        let ok = value.len() >= 2
            && value.len() <= 128
            && value
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && value.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.')
            });
        if ok {
            Ok(DebPackage(value))
        } else {
            Err(FieldError(format!(
                "invalid Debian package name `{value}`: use a plain package name such as \
                 `python3` (lower-case letters, digits, `+`, `-`, `.`; no versions or patterns)"
            )))
        }
    }
}

/// The CUDA version a runtime's packages need, `major.minor` (e.g. `13.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

impl TryFrom<String> for CudaVersion {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        let parsed = value.split_once('.').and_then(|(major, minor)| {
            let digits =
                |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
            if digits(major) && digits(minor) {
                Some(CudaVersion {
                    major: major.parse().ok()?,
                    minor: minor.parse().ok()?,
                })
            } else {
                None
            }
        });
        parsed.ok_or_else(|| {
            FieldError(format!(
                "invalid CUDA version `{value}`: use `major.minor` as a string, e.g. \"13.0\""
            ))
        })
    }
}

impl From<CudaVersion> for String {
    fn from(v: CudaVersion) -> String {
        v.to_string()
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// An environment variable name: a letter or `_`, then letters, digits, `_`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct EnvName(String);

impl EnvName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EnvName {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        let ok = value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(EnvName(value))
        } else {
            Err(FieldError(format!(
                "invalid environment variable name `{value}`: use letters, digits and `_`, \
                 not starting with a digit"
            )))
        }
    }
}

/// A path relative to the manifest's directory that stays inside it: no `..`, not absolute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct RelPath(String);

impl RelPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl TryFrom<String> for RelPath {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        if is_inside_relative(&value) {
            Ok(RelPath(value))
        } else {
            Err(FieldError(format!(
                "invalid path `{value}`: use a path relative to the manifest's directory, \
                 without `..` (e.g. `requirements.lock`)"
            )))
        }
    }
}

/// A wheel directory for `uv --find-links`: absolute (a directory on the node), or relative
/// to the manifest's directory without `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct FindLinks(String);

impl FindLinks {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Where the directory is, given the manifest's directory.
    pub fn resolve(&self, manifest_dir: &Path) -> PathBuf {
        manifest_dir.join(&self.0)
    }

    pub fn is_relative(&self) -> bool {
        !Path::new(&self.0).is_absolute()
    }
}

impl TryFrom<String> for FindLinks {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        let path = Path::new(&value);
        let ok = if path.is_absolute() {
            !path.components().any(|c| c == Component::ParentDir)
        } else {
            is_inside_relative(&value)
        };
        if ok {
            Ok(FindLinks(value))
        } else {
            Err(FieldError(format!(
                "invalid find_links `{value}`: use an absolute directory on the node or a \
                 directory relative to the manifest, without `..`"
            )))
        }
    }
}

/// The argv of a runtime's self-check: at least one word, the first one not empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "Vec<String>")]
pub struct Argv(Vec<String>);

impl Argv {
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

impl TryFrom<Vec<String>> for Argv {
    type Error = FieldError;
    fn try_from(value: Vec<String>) -> Result<Self, FieldError> {
        if value.first().is_some_and(|p| !p.is_empty()) && value.iter().all(|w| !w.contains('\0')) {
            Ok(Argv(value))
        } else {
            Err(FieldError(
                "expected the command as a non-empty list of words, \
                 e.g. [\"python3\", \"-c\", \"import numpy\"]"
                    .to_string(),
            ))
        }
    }
}

macro_rules! into_string {
    ($($t:ty),*) => {$(
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )*};
}
into_string!(Name, Version, Suite, DebPackage, EnvName, RelPath, FindLinks);

/// `Deserialize` through `TryFrom<String>`, failing inside the scalar's own deserialize
/// (serde's `try_from` attribute fails after it, where the location is the enclosing
/// mapping's).
macro_rules! deserialize_checked {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Checked;
                impl Visitor<'_> for Checked {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: de::Error>(self, value: &str) -> Result<$t, E> {
                        <$t>::try_from(value.to_string()).map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Checked)
            }
        }
    )*};
}
deserialize_checked!(
    Name,
    Version,
    Suite,
    DebPackage,
    CudaVersion,
    EnvName,
    RelPath,
    FindLinks
);

impl<'de> Deserialize<'de> for Argv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Words;
        impl<'de> Visitor<'de> for Words {
            type Value = Argv;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of words")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Argv, A::Error> {
                let mut words = Vec::new();
                while let Some(word) = seq.next_element::<String>()? {
                    words.push(word);
                }
                Argv::try_from(words).map_err(de::Error::custom)
            }
        }
        deserializer.deserialize_seq(Words)
    }
}

impl From<Argv> for Vec<String> {
    fn from(v: Argv) -> Vec<String> {
        v.0
    }
}

/// Letters, digits, `.`, `-`, `_`; 1 to 64 bytes; not starting with `.` or `-`.
pub fn is_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && !value.starts_with(['.', '-'])
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The version rule of [`Version`].
pub fn is_version(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

/// A relative path of normal components only (no `..`, `.`-only or empty paths, not
/// absolute, no NUL).
pub fn is_inside_relative(value: &str) -> bool {
    let path = Path::new(value);
    !value.is_empty()
        && !value.contains('\0')
        && !path.is_absolute()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["python-3.11", "a", "x_y.Z-1"] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "-opt", "a b", "a/b", "a@b", &"x".repeat(65)] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn versions() {
        for ok in ["1", "1.0", "2025.11-rc1", "1.0+local"] {
            assert!(is_version(ok), "{ok}");
        }
        for bad in ["", "v1", "1 0", "1/2", "1@2"] {
            assert!(!is_version(bad), "{bad}");
        }
    }

    #[test]
    fn relative_paths_stay_inside() {
        assert!(is_inside_relative("extras/tf.lock"));
        for bad in ["", "/etc/passwd", "../x", "a/../../b", "./"] {
            assert!(!is_inside_relative(bad), "{bad}");
        }
    }

    #[test]
    fn cuda_versions() {
        let v = CudaVersion::try_from("13.0".to_string()).unwrap();
        assert_eq!((v.major, v.minor), (13, 0));
        assert_eq!(v.to_string(), "13.0");
        for bad in ["13", "13.0.1", "x.y", ""] {
            assert!(CudaVersion::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }
}
