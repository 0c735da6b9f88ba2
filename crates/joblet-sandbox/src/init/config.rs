//! What the init process is told to build: [`InitConfig`], sent as JSON
//! over the init's standard input, and its validation.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The job's network.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    /// A new, empty network namespace with only `lo` (brought up).
    None,
    /// The host's network namespace.
    Host,
}

/// Everything the sandbox init needs to build the job's world and run it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct InitConfig {
    /// Program to run: a path, or a name looked up in `env["PATH"]`.
    pub command: String,
    /// Arguments after `argv[0]` (which is `command`).
    pub args: Vec<String>,
    /// The job's whole environment.
    pub env: BTreeMap<String, String>,
    /// Hostname inside the job's UTS namespace.
    pub hostname: String,
    /// The job's uid and gid (no supplementary groups).
    pub uid: u32,
    pub gid: u32,
    /// Permits uid or gid 0; such a job keeps a small capability set.
    pub allow_root: bool,
    /// Absolute host paths bound read-only at the same path in the job.
    pub ro_mounts: Vec<PathBuf>,
    /// Absolute host device paths under `/dev` bound into the job's `/dev`.
    pub extra_devices: Vec<PathBuf>,
    /// Host directory bound read-write at `/work`.
    pub work_dir: PathBuf,
    /// Size of the job's `/tmp` and `/dev/shm` tmpfs, in MiB.
    pub tmp_size_mb: u64,
    pub net: NetMode,
    /// Load the seccomp filter (see [`super::denied_syscalls`]).
    pub seccomp: bool,
}

/// A config the init refuses before doing anything.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("command is empty: give a program path or name")]
    EmptyCommand,
    #[error("{field} contains a NUL byte: {value:?}")]
    Nul { field: &'static str, value: String },
    #[error("environment variable name {0:?} is empty or contains '='")]
    BadEnvName(String),
    #[error("hostname {0:?} must be 1-64 bytes without NUL")]
    BadHostname(String),
    #[error("uid {uid} / gid {gid} is root: set allow_root to run a job as root")]
    RootNotAllowed { uid: u32, gid: u32 },
    #[error("{field} path {path} must be absolute and must not contain '..' or '.'")]
    BadPath { field: &'static str, path: PathBuf },
    #[error("ro_mounts path {0} is, or lies under, a path the sandbox provides or keeps out itself (/, /dev, /proc, /tmp, /work, /sys)")]
    ReservedMount(PathBuf),
    #[error("extra device {0} must be a path under /dev/")]
    DeviceOutsideDev(PathBuf),
    #[error("tmp_size_mb must be between 1 and 1048576, got {0}")]
    BadTmpSize(u64),
}

/// Paths the sandbox mounts itself; a read-only host bind may not replace
/// them (nested paths such as `/tmp/x` are refused too).
const RESERVED: [&str; 5] = ["/dev", "/proc", "/tmp", "/work", "/sys"];

/// Whether `p` may be bound read-only into jobs: absolute, clean, and not
/// `/` nor at or under a path the sandbox provides itself. The daemon checks
/// its `filesystem.allowed_mounts` with this same rule at start-up.
pub fn check_ro_mount(p: &Path) -> Result<(), ConfigError> {
    clean_absolute("ro_mounts", p)?;
    if p == Path::new("/") || RESERVED.iter().any(|r| p.starts_with(r)) {
        return Err(ConfigError::ReservedMount(p.to_owned()));
    }
    Ok(())
}

impl InitConfig {
    /// Checks everything that can be checked without touching the system.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.command.is_empty() {
            return Err(ConfigError::EmptyCommand);
        }
        no_nul("command", &self.command)?;
        for a in &self.args {
            no_nul("args", a)?;
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') {
                return Err(ConfigError::BadEnvName(k.clone()));
            }
            no_nul("env", k)?;
            no_nul("env", v)?;
        }
        if self.hostname.is_empty() || self.hostname.len() > 64 || self.hostname.contains('\0') {
            return Err(ConfigError::BadHostname(self.hostname.clone()));
        }
        if (self.uid == 0 || self.gid == 0) && !self.allow_root {
            return Err(ConfigError::RootNotAllowed {
                uid: self.uid,
                gid: self.gid,
            });
        }
        for p in &self.ro_mounts {
            check_ro_mount(p)?;
        }
        for p in &self.extra_devices {
            clean_absolute("extra_devices", p)?;
            if !p.starts_with("/dev") || p == Path::new("/dev") {
                return Err(ConfigError::DeviceOutsideDev(p.clone()));
            }
        }
        clean_absolute("work_dir", &self.work_dir)?;
        if self.tmp_size_mb == 0 || self.tmp_size_mb > 1 << 20 {
            return Err(ConfigError::BadTmpSize(self.tmp_size_mb));
        }
        Ok(())
    }
}

fn no_nul(field: &'static str, value: &str) -> Result<(), ConfigError> {
    if value.contains('\0') {
        return Err(ConfigError::Nul {
            field,
            value: value.to_owned(),
        });
    }
    Ok(())
}

fn clean_absolute(field: &'static str, p: &Path) -> Result<(), ConfigError> {
    let bad = || ConfigError::BadPath {
        field,
        path: p.to_path_buf(),
    };
    if !p.is_absolute() {
        return Err(bad());
    }
    if p.to_str().is_none_or(|s| s.contains('\0')) {
        return Err(bad());
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(bad());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> InitConfig {
        InitConfig {
            command: "sh".into(),
            args: vec!["-c".into(), "true".into()],
            env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
            hostname: "job".into(),
            uid: 65534,
            gid: 65534,
            allow_root: false,
            ro_mounts: vec!["/usr".into(), "/bin".into()],
            extra_devices: vec!["/dev/nvidia0".into()],
            work_dir: "/var/lib/joblet/jobs/x/work".into(),
            tmp_size_mb: 64,
            net: NetMode::None,
            seccomp: true,
        }
    }

    #[test]
    fn sample_is_valid_and_round_trips_through_json() {
        let c = sample();
        c.validate().unwrap();
        let json = serde_json::to_string(&c).unwrap();
        let back: InitConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert!(json.contains(r#""net":"None""#), "{json}");
    }

    #[test]
    fn root_needs_allow_root() {
        let mut c = sample();
        c.uid = 0;
        assert_eq!(
            c.validate(),
            Err(ConfigError::RootNotAllowed { uid: 0, gid: 65534 })
        );
        c.uid = 1000;
        c.gid = 0;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::RootNotAllowed { .. })
        ));
        c.uid = 0;
        c.allow_root = true;
        c.validate().unwrap();
    }

    #[test]
    fn paths_must_be_clean_absolute_and_not_reserved() {
        for bad in ["usr", "/usr/../etc", "../usr"] {
            let mut c = sample();
            c.ro_mounts = vec![bad.into()];
            assert!(
                matches!(c.validate(), Err(ConfigError::BadPath { .. })),
                "{bad}"
            );
        }
        for reserved in ["/", "/tmp", "/proc/sys", "/dev", "/work"] {
            let mut c = sample();
            c.ro_mounts = vec![reserved.into()];
            assert_eq!(
                c.validate(),
                Err(ConfigError::ReservedMount(reserved.into())),
                "{reserved}"
            );
        }
        let mut c = sample();
        c.work_dir = "relative/work".into();
        assert!(matches!(
            c.validate(),
            Err(ConfigError::BadPath {
                field: "work_dir",
                ..
            })
        ));
    }

    #[test]
    fn devices_must_live_under_dev() {
        let mut c = sample();
        c.extra_devices = vec!["/tmp/nvidia0".into()];
        assert_eq!(
            c.validate(),
            Err(ConfigError::DeviceOutsideDev("/tmp/nvidia0".into()))
        );
        c.extra_devices = vec!["/devices/x".into()];
        assert!(c.validate().is_err());
    }

    #[test]
    fn rejects_empty_command_nul_bytes_bad_env_hostname_and_sizes() {
        let mut c = sample();
        c.command.clear();
        assert_eq!(c.validate(), Err(ConfigError::EmptyCommand));
        let mut c = sample();
        c.args.push("a\0b".into());
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Nul { field: "args", .. })
        ));
        let mut c = sample();
        c.env.insert("A=B".into(), "x".into());
        assert_eq!(c.validate(), Err(ConfigError::BadEnvName("A=B".into())));
        let mut c = sample();
        c.hostname = "h".repeat(65);
        assert!(matches!(c.validate(), Err(ConfigError::BadHostname(_))));
        let mut c = sample();
        c.tmp_size_mb = 0;
        assert_eq!(c.validate(), Err(ConfigError::BadTmpSize(0)));
    }
}
