//! Python lock files: the `uv pip compile --generate-hashes` output a manifest points at.
//!
//! Only what a runtime needs is read: every requirement must be pinned with `==` and carry
//! at least one `--hash`, so `uv pip install --require-hashes` installs exactly what was
//! locked. The pins become [`crate::Installed::python_packages`]; the pin of NVIDIA's CUDA
//! runtime wheel tells which CUDA major version the packages were built for.

use std::fmt;

use sha2::{Digest, Sha256};

/// A parsed lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// sha256 of the file's bytes, hex.
    pub sha256: String,
    /// `(name, version)` of every pin, names normalised (PEP 503), in file order.
    pub packages: Vec<(String, String)>,
}

/// Why a lock file was refused; `line` is 1-based, the line a requirement starts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct LockError {
    pub line: usize,
    pub problem: LockProblem,
}

/// What is wrong with one line of a lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockProblem {
    NotUtf8,
    NotPinned(String),
    NoHash(String),
    UnsupportedOption(String),
}

impl fmt::Display for LockProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const RELOCK: &str =
            "regenerate it with `uv pip compile --generate-hashes` (runtimes/README.md)";
        match self {
            LockProblem::NotUtf8 => write!(f, "the lock file is not UTF-8 text"),
            LockProblem::NotPinned(req) => {
                write!(f, "`{req}` is not pinned with `==`; {RELOCK}")
            }
            LockProblem::NoHash(req) => write!(f, "`{req}` has no `--hash`; {RELOCK}"),
            LockProblem::UnsupportedOption(opt) => write!(
                f,
                "option `{opt}` is not allowed in a lock (only `--index-url` and \
                 `--extra-index-url` lines are); {RELOCK}"
            ),
        }
    }
}

impl Lock {
    /// Parses a lock file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Lock, LockError> {
        let text = std::str::from_utf8(bytes).map_err(|_| LockError {
            line: 1,
            problem: LockProblem::NotUtf8,
        })?;
        let mut packages = Vec::new();
        for (line, logical) in logical_lines(text) {
            let logical = strip_comment(&logical);
            let logical = logical.trim();
            if logical.is_empty() {
                continue;
            }
            if logical.starts_with('-') {
                let option = logical.split([' ', '=']).next().unwrap_or(logical);
                if option == "--index-url" || option == "--extra-index-url" || option == "-i" {
                    continue;
                }
                return Err(LockError {
                    line,
                    problem: LockProblem::UnsupportedOption(option.to_string()),
                });
            }
            let mut words = logical.split_whitespace();
            let requirement = words.next().unwrap_or_default();
            let has_hash = words.any(|w| w.starts_with("--hash=") || w == "--hash");
            let spec = requirement.split(';').next().unwrap_or(requirement);
            let Some((name, version)) = spec.split_once("==") else {
                return Err(LockError {
                    line,
                    problem: LockProblem::NotPinned(requirement.to_string()),
                });
            };
            if !has_hash {
                return Err(LockError {
                    line,
                    problem: LockProblem::NoHash(requirement.to_string()),
                });
            }
            let name = name.split('[').next().unwrap_or(name);
            packages.push((normalize(name), version.trim().to_string()));
        }
        Ok(Lock {
            sha256: hex::encode(Sha256::digest(bytes)),
            packages,
        })
    }

    /// The `major.minor` CUDA version of NVIDIA's CUDA runtime wheel in the lock
    /// (`nvidia-cuda-runtime` for CUDA 13 on, `nvidia-cuda-runtime-cuXX` before), if any.
    pub fn cuda_runtime(&self) -> Option<(u32, u32)> {
        self.packages
            .iter()
            .find(|(name, _)| {
                name == "nvidia-cuda-runtime"
                    || name
                        .strip_prefix("nvidia-cuda-runtime-cu")
                        .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            })
            .and_then(|(_, version)| {
                let mut parts = version.split('.');
                let major = parts.next()?.parse().ok()?;
                let minor = parts.next()?.parse().ok()?;
                Some((major, minor))
            })
    }
}

/// PEP 503 normalisation: lower case, runs of `-`, `_`, `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Joins `\`-continued lines; yields each logical line with the number of its first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let (start, mut acc) = current.take().unwrap_or((index + 1, String::new()));
        match raw.trim_end().strip_suffix('\\') {
            Some(head) => {
                acc.push_str(head);
                acc.push(' ');
                current = Some((start, acc));
            }
            None => {
                acc.push_str(raw);
                out.push((start, acc));
            }
        }
    }
    if let Some(last) = current {
        out.push(last);
    }
    out
}

/// Drops a `#` comment: one at the start of the line or after whitespace.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const UV_OUTPUT: &str = "\
# This file was autogenerated by uv via the following command:
#    uv pip compile requirements.in --generate-hashes
numpy==2.4.6 \\
    --hash=sha256:aaaa \\
    --hash=sha256:bbbb
    # via torch
nvidia-cuda-runtime==13.2.86 \\
    --hash=sha256:cccc
    # via cuda-toolkit
Typing_Extensions==4.16.0 --hash=sha256:dddd
";

    #[test]
    fn reads_pins_of_uv_output() {
        let lock = Lock::parse(UV_OUTPUT.as_bytes()).unwrap();
        assert_eq!(
            lock.packages,
            vec![
                ("numpy".to_string(), "2.4.6".to_string()),
                ("nvidia-cuda-runtime".to_string(), "13.2.86".to_string()),
                ("typing-extensions".to_string(), "4.16.0".to_string()),
            ]
        );
        assert_eq!(lock.cuda_runtime(), Some((13, 2)));
        assert_eq!(lock.sha256.len(), 64);
    }

    #[test]
    fn empty_lock_has_no_packages() {
        let lock = Lock::parse(b"# nothing\n\n").unwrap();
        assert!(lock.packages.is_empty());
        assert_eq!(lock.cuda_runtime(), None);
    }

    #[test]
    fn cuda_12_wheel_names_carry_the_major() {
        let lock = Lock::parse(b"nvidia-cuda-runtime-cu12==12.9.79 --hash=sha256:ab\n").unwrap();
        assert_eq!(lock.cuda_runtime(), Some((12, 9)));
    }

    #[test]
    fn refuses_unpinned_unhashed_and_options() {
        let err = Lock::parse(b"# c\nnumpy>=2 --hash=sha256:aa\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(matches!(err.problem, LockProblem::NotPinned(_)));

        let err = Lock::parse(b"numpy==2.0\n").unwrap_err();
        assert!(matches!(err.problem, LockProblem::NoHash(_)));
        assert_eq!(
            err.to_string(),
            "line 1: `numpy==2.0` has no `--hash`; regenerate it with \
             `uv pip compile --generate-hashes` (runtimes/README.md)"
        );

        let err = Lock::parse(b"-r other.txt\n").unwrap_err();
        assert_eq!(err.problem, LockProblem::UnsupportedOption("-r".into()));

        assert!(Lock::parse(b"--index-url https://example/simple\n").is_ok());
    }

    #[test]
    fn normalises_names() {
        assert_eq!(normalize("Scikit_Learn"), "scikit-learn");
        assert_eq!(normalize("zope.interface"), "zope-interface");
        assert_eq!(normalize("a__-b"), "a-b");
    }
}
