//! `executors:`: what runs a job's process (see `docs/executors.md`).
//!
//! ```yaml
//! executors:
//!   default: native        # the executor of a job that names none
//!   detect: true           # also offer runc, crun and runsc found on PATH
//!   state_dir: /run/joblet/oci   # the runtimes' state (--root), one dir each
//!   native:
//!     users: []            # who may use it; empty = everyone who runs jobs
//!   oci:                   # OCI runtimes, by the name --executor takes
//!     runc:
//!       binary: /usr/sbin/runc
//!     gvisor:
//!       runtime: runsc     # runc | crun | runsc; default: the entry's name
//!       platform: systrap  # runsc: default systrap where it has it, else ptrace
//!       debug_log_dir: /var/log/joblet/runsc
//!       users: [alice]
//! ```
//!
//! A runtime named here must be there: a missing binary stops start-up.
//! Detected ones are offered only when they answer `--version`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use joblet_core::executor::{ExecutorKind, NATIVE};
use serde::Deserialize;

/// `executors:`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorsConfig {
    /// The executor of a job that names none.
    pub default: String,
    /// Offer `runc`, `crun` and `runsc` found on `PATH`, with default
    /// settings, besides those under `oci`.
    pub detect: bool,
    /// Where each runtime keeps its containers' state (`--root`): a
    /// directory per executor under it.
    pub state_dir: PathBuf,
    pub native: NativeExecutorConfig,
    /// OCI runtimes, by executor name.
    pub oci: BTreeMap<String, OciExecutorConfig>,
}

impl Default for ExecutorsConfig {
    fn default() -> Self {
        ExecutorsConfig {
            default: NATIVE.into(),
            detect: true,
            state_dir: PathBuf::from("/run/joblet/oci"),
            native: NativeExecutorConfig::default(),
            oci: BTreeMap::new(),
        }
    }
}

/// `executors.native`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NativeExecutorConfig {
    /// Who may use it; empty = everyone who may run jobs.
    pub users: Vec<String>,
}

/// `executors.oci.NAME`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OciExecutorConfig {
    /// `runc`, `crun` or `runsc`; empty = the entry's name.
    pub runtime: String,
    /// The runtime's binary; empty = found on `PATH`.
    pub binary: Option<PathBuf>,
    /// runsc: `systrap`, `ptrace` or `kvm`; empty = systrap where the
    /// binary has it, else ptrace.
    pub platform: Option<String>,
    /// runsc: write its debug logs here (one set per container).
    pub debug_log_dir: Option<PathBuf>,
    /// Who may use it; empty = everyone who may run jobs.
    pub users: Vec<String>,
}

impl OciExecutorConfig {
    /// The runtime this entry runs, given its name.
    pub fn kind(&self, name: &str) -> Option<ExecutorKind> {
        let k = if self.runtime.is_empty() {
            name
        } else {
            &self.runtime
        };
        ExecutorKind::parse(k).filter(|k| k.is_oci())
    }
}

impl ExecutorsConfig {
    /// The values serde cannot check by type: (dotted key, message).
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        let bad = |key: String, msg: String| Err((format!("executors.{key}"), msg));
        if !joblet_core::is_name(&self.default) {
            return bad(
                "default".into(),
                format!("{:?} is not an executor name; expected native, runc, crun, runsc or a name under executors.oci", self.default),
            );
        }
        if !self.state_dir.is_absolute() {
            return bad(
                "state_dir".into(),
                format!(
                    "{} must be an absolute path (the runtimes' state, e.g. /run/joblet/oci)",
                    self.state_dir.display()
                ),
            );
        }
        for (name, e) in &self.oci {
            if name == NATIVE {
                return bad(
                    format!("oci.{name}"),
                    "native is joblet's own sandbox and cannot be an OCI runtime; set its users under executors.native".into(),
                );
            }
            if !joblet_core::is_name(name) {
                return bad(
                    format!("oci.{name}"),
                    "is not an executor name; use letters, digits, '.', '_' and '-'".into(),
                );
            }
            let Some(kind) = e.kind(name) else {
                return bad(
                    format!("oci.{name}.runtime"),
                    format!(
                        "{:?} is not a runtime joblet drives; expected runc, crun or runsc",
                        if e.runtime.is_empty() {
                            name
                        } else {
                            &e.runtime
                        }
                    ),
                );
            };
            if let Some(b) = &e.binary {
                if !b.is_absolute() {
                    return bad(
                        format!("oci.{name}.binary"),
                        format!("{} must be an absolute path", b.display()),
                    );
                }
            }
            if kind != ExecutorKind::Runsc && (e.platform.is_some() || e.debug_log_dir.is_some()) {
                return bad(
                    format!("oci.{name}"),
                    format!("platform and debug_log_dir are runsc settings; {kind} takes runtime, binary and users"),
                );
            }
            if let Some(p) = &e.platform {
                if !["systrap", "ptrace", "kvm"].contains(&p.as_str()) {
                    return bad(
                        format!("oci.{name}.platform"),
                        format!("{p:?} is not a runsc platform; expected systrap, ptrace or kvm"),
                    );
                }
            }
            if let Some(d) = &e.debug_log_dir {
                if !d.is_absolute() {
                    return bad(
                        format!("oci.{name}.debug_log_dir"),
                        format!("{} must be an absolute path", d.display()),
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> ExecutorsConfig {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn the_default_offers_native_and_detects_the_rest() {
        let c = ExecutorsConfig::default();
        assert_eq!((c.default.as_str(), c.detect), ("native", true));
        assert!(c.check().is_ok());
    }

    #[test]
    fn entries_take_their_runtime_from_their_name_or_runtime() {
        let c = parse("oci:\n  runc: {}\n  gvisor: {runtime: runsc, platform: ptrace}\n");
        assert!(c.check().is_ok());
        assert_eq!(c.oci["runc"].kind("runc"), Some(ExecutorKind::Runc));
        assert_eq!(c.oci["gvisor"].kind("gvisor"), Some(ExecutorKind::Runsc));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (yaml, key, words) in [
            (
                "oci:\n  kata: {}\n",
                "executors.oci.kata.runtime",
                "runc, crun or runsc",
            ),
            (
                "oci:\n  native: {runtime: runc}\n",
                "executors.oci.native",
                "own sandbox",
            ),
            (
                "oci:\n  runc: {platform: ptrace}\n",
                "executors.oci.runc",
                "runsc settings",
            ),
            (
                "oci:\n  g: {runtime: runsc, platform: fast}\n",
                "executors.oci.g.platform",
                "systrap, ptrace or kvm",
            ),
            (
                "oci:\n  runc: {binary: runc}\n",
                "executors.oci.runc.binary",
                "absolute",
            ),
            (
                "default: 'a b'\n",
                "executors.default",
                "not an executor name",
            ),
            ("state_dir: run/oci\n", "executors.state_dir", "absolute"),
        ] {
            let (k, msg) = parse(yaml).check().unwrap_err();
            assert_eq!(k, key, "{yaml}");
            assert!(msg.contains(words), "{yaml}: {msg}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(serde_norway::from_str::<ExecutorsConfig>("oci:\n  runc: {root: /x}\n").is_err());
    }
}
