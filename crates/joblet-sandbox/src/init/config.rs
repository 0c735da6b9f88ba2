//! What the init process is told to build: [`InitConfig`], sent as JSON
//! over the init's standard input, and its validation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// Absolute paths bound read-only at the same path in the job: the
    /// host's own, or with `root` set, the same paths of that tree.
    pub ro_mounts: Vec<PathBuf>,
    /// A runtime's tree on the host (`--runtime`): `ro_mounts` are taken
    /// from it (`<root>/usr` at `/usr`, and so on) instead of from the
    /// host's root, so the job's programs and libraries are the runtime's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// Absolute host device paths under `/dev` bound into the job's `/dev`.
    pub extra_devices: Vec<PathBuf>,
    /// Host directory bound read-write at `/work` (`work_size_mb` 0), or
    /// copied into a `/work` tmpfs of `work_size_mb` MiB.
    pub work_dir: PathBuf,
    /// Size of the job's `/work` tmpfs in MiB; 0 = the host directory
    /// itself, unlimited.
    #[serde(default)]
    pub work_size_mb: u64,
    /// Size of the job's `/tmp` and `/dev/shm` tmpfs, in MiB.
    pub tmp_size_mb: u64,
    pub net: NetMode,
    /// Load the seccomp filter (see [`super::denied_syscalls`]).
    pub seccomp: bool,
    /// Groups of syscalls the filter lets through on this node
    /// (`sandbox.seccomp_allow`); empty: the default policy.
    #[serde(default)]
    pub seccomp_allow: Vec<super::SyscallGroup>,
    /// Host files or directories bound read-only (nosuid, nodev) at `target`
    /// in the job, after `/dev` and `/proc` are built (so a target under
    /// `/proc`, e.g. `/proc/driver/nvidia/params`, overlays the job's procfs).
    #[serde(default)]
    pub binds: Vec<Bind>,
    /// Paths hidden in the job if present there: a file gets an empty
    /// read-only regular file bound over it, a directory an empty read-only
    /// tmpfs. Missing paths (and symlinks) are skipped. Applied after `binds`.
    #[serde(default)]
    pub masks: Vec<PathBuf>,
    /// Host device nodes bound into the job's `/dev` under another name
    /// (`source` anywhere on the host, e.g. a directory of `mknod`-made
    /// nodes; `target` under `/dev`). Like `extra_devices`, each must be a
    /// device node on the host or the job does not start.
    #[serde(default)]
    pub device_binds: Vec<Bind>,
    /// A host directory bound read-write (nosuid, nodev, noexec) at the
    /// job's `/dev/shm` instead of a private tmpfs, so the job shares POSIX
    /// shared memory with whoever else uses that directory (an MPS job with
    /// its GPU's control daemon). Absolute, UTF-8; it must exist.
    #[serde(default)]
    pub dev_shm: Option<PathBuf>,
    /// A warm start: build only what every job of the node shares
    /// ([`InitConfig::warm_mismatch`] lists it), fork pid 1 once released
    /// into the cgroup, and take the job's own config later from the
    /// release socket ([`super::PendingInit::enter`], then
    /// [`super::PendingInit::start`]). Its command, env, hostname, user,
    /// devices, binds and masks are placeholders until then.
    #[serde(default)]
    pub warm: bool,
    /// An interactive job: its standard input is descriptor
    /// [`super::JOB_STDIN_FD`] of the init (a pipe, or a terminal), not
    /// `/dev/null`. `None`: a batch job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<JobStdin>,
}

/// An interactive job's standard input (see [`InitConfig::stdin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStdin {
    /// A terminal (also the job's stdout and stderr): the job leads a
    /// session of its own with it as the controlling terminal.
    pub tty: bool,
}

/// One host file or directory bound into the job at another path:
/// read-only (driver files, toolkits), or read-write (a volume); always
/// nosuid, nodev.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// Absolute host path (symlinks are resolved on the host); it must exist.
    pub source: PathBuf,
    /// Absolute path in the job. Missing directories up to it are created in
    /// the job's root tmpfs; an existing file or directory is bound over.
    pub target: PathBuf,
    /// The job may write through it (a volume mounted without `:ro`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writable: bool,
}

impl Bind {
    fn target(&self) -> &Path {
        &self.target
    }
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
    #[error("binds[{index}].{end} {path} must be an absolute path without '..' or '.' components")]
    BadBindPath {
        index: usize,
        /// `"source"` or `"target"`.
        end: &'static str,
        path: PathBuf,
    },
    #[error("binds[{index}].target {path} is refused: {reason}; give a new path such as /run/<name>, an existing file or directory of a read-only mount, or one file under /proc")]
    ReservedBindTarget {
        index: usize,
        path: PathBuf,
        reason: &'static str,
    },
    #[error("binds[{index}].target {path} is also the target of binds[{first}]: give each bind its own target")]
    DuplicateBindTarget {
        index: usize,
        first: usize,
        path: PathBuf,
    },
    #[error("dev_shm {0} must be an absolute UTF-8 path without '..' or '.' components, and not /: give the host directory to bind at the job's /dev/shm, or leave dev_shm unset for a private tmpfs")]
    BadDevShm(PathBuf),
    #[error(
        "masks[{index}] {path} must be an absolute path without '..' or '.' components, and not /"
    )]
    BadMask { index: usize, path: PathBuf },
}

/// Paths the sandbox mounts itself; a read-only host bind may not replace
/// them (nested paths such as `/tmp/x` are refused too).
const RESERVED: [&str; 5] = ["/dev", "/proc", "/tmp", "/work", "/sys"];

/// Why `target` may not be a bind target, if it may not.
fn reserved_bind_target(target: &Path) -> Option<&'static str> {
    if target == Path::new("/") {
        Some("it would cover the job's whole root")
    } else if target == Path::new("/proc") {
        Some("it would cover the job's whole /proc with its masked paths")
    } else if target.starts_with("/dev") {
        Some("the job's /dev is built by the sandbox; give device nodes in extra_devices")
    } else if target.starts_with("/work") {
        Some("/work is the host's work directory; a mount point created there would be left behind on the host")
    } else if target.starts_with(super::rootfs::OLD_ROOT) {
        Some("the host's root is parked there while the sandbox is built")
    } else {
        None
    }
}

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
    /// Why a sandbox built warm from `self` cannot run `job`: the first
    /// setting the two differ in among those built before the job is known
    /// (namespaces, the read-only tree, `/tmp`, seccomp, the user the
    /// job's process, forked ahead, runs as, and the binds and device binds
    /// made ahead, which must be the first of the job's: see
    /// [`InitConfig::job_part`]). `None`: it can.
    pub fn warm_mismatch(&self, job: &InitConfig) -> Option<&'static str> {
        if !made_ahead_fits(&self.binds, &job.binds, Bind::target) {
            Some("binds")
        } else if !made_ahead_fits(&self.extra_devices, &job.extra_devices, PathBuf::as_path) {
            Some("extra_devices")
        } else if !made_ahead_fits(&self.device_binds, &job.device_binds, Bind::target) {
            Some("device_binds")
        } else if self.net != job.net {
            Some("net")
        } else if self.ro_mounts != job.ro_mounts {
            Some("ro_mounts")
        } else if self.root != job.root {
            Some("root")
        } else if self.tmp_size_mb != job.tmp_size_mb {
            Some("tmp_size_mb")
        } else if self.seccomp != job.seccomp {
            Some("seccomp")
        } else if self.stdin != job.stdin {
            // A warm sandbox was built for a batch job's streams.
            Some("stdin")
        } else if self.seccomp_allow != job.seccomp_allow {
            Some("seccomp_allow")
        } else if (self.uid, self.gid, self.allow_root) != (job.uid, job.gid, job.allow_root) {
            // The job's process drops its privileges before the job comes.
            Some("user")
        } else {
            None
        }
    }

    /// What a sandbox built warm from `self` still has to build of `job`
    /// (which fits it: [`InitConfig::warm_mismatch`]): `job` without the
    /// binds, extra devices and device binds the warm sandbox made before
    /// the job came (a GPU-ready one's driver files and control nodes).
    /// Both the shim, which opens the host sources of what is left, and
    /// pid 1, which builds it, work from this.
    pub fn job_part(&self, job: &InitConfig) -> InitConfig {
        fn skip<T>(v: &mut Vec<T>, n: usize) {
            v.drain(..n.min(v.len()));
        }
        let mut part = job.clone();
        skip(&mut part.binds, self.binds.len());
        skip(&mut part.extra_devices, self.extra_devices.len());
        skip(&mut part.device_binds, self.device_binds.len());
        part
    }

    /// Checks everything that can be checked without touching the system.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.command.is_empty() && !self.warm {
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
        if let Some(root) = &self.root {
            clean_absolute("root", root)?;
        }
        for b in &self.device_binds {
            clean_absolute("device_binds.source", &b.source)?;
            clean_absolute("device_binds.target", &b.target)?;
            if !b.target.starts_with("/dev") || b.target == Path::new("/dev") {
                return Err(ConfigError::DeviceOutsideDev(b.target.clone()));
            }
        }
        for p in &self.extra_devices {
            clean_absolute("extra_devices", p)?;
            if !p.starts_with("/dev") || p == Path::new("/dev") {
                return Err(ConfigError::DeviceOutsideDev(p.clone()));
            }
        }
        clean_absolute("work_dir", &self.work_dir)?;
        if let Some(p) = &self.dev_shm {
            if !is_clean_absolute(p) || p == Path::new("/") {
                return Err(ConfigError::BadDevShm(p.clone()));
            }
        }
        self.validate_binds()?;
        for (index, p) in self.masks.iter().enumerate() {
            if !is_clean_absolute(p) || p == Path::new("/") {
                return Err(ConfigError::BadMask {
                    index,
                    path: p.clone(),
                });
            }
        }
        if self.tmp_size_mb == 0 || self.tmp_size_mb > 1 << 20 {
            return Err(ConfigError::BadTmpSize(self.tmp_size_mb));
        }
        Ok(())
    }

    fn validate_binds(&self) -> Result<(), ConfigError> {
        for (index, b) in self.binds.iter().enumerate() {
            for (end, path) in [("source", &b.source), ("target", &b.target)] {
                if !is_clean_absolute(path) {
                    return Err(ConfigError::BadBindPath {
                        index,
                        end,
                        path: path.clone(),
                    });
                }
            }
            if let Some(reason) = reserved_bind_target(&b.target) {
                return Err(ConfigError::ReservedBindTarget {
                    index,
                    path: b.target.clone(),
                    reason,
                });
            }
            if let Some(first) = self.binds[..index]
                .iter()
                .position(|o| o.target == b.target)
            {
                return Err(ConfigError::DuplicateBindTarget {
                    index,
                    first,
                    path: b.target.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Whether mounts made ahead (`ahead`) can stand for the first of `job`'s:
/// they are, and none of the job's others is mounted at or above the
/// `target` of one of them (which, made first as usual, would have covered
/// it).
fn made_ahead_fits<T: PartialEq>(ahead: &[T], job: &[T], target: fn(&T) -> &Path) -> bool {
    job.starts_with(ahead)
        && job[ahead.len()..]
            .iter()
            .all(|b| !ahead.iter().any(|a| target(a).starts_with(target(b))))
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
    if !is_clean_absolute(p) {
        return Err(ConfigError::BadPath {
            field,
            path: p.to_path_buf(),
        });
    }
    Ok(())
}

/// Absolute, UTF-8 without NUL, no `..` or `.` components.
fn is_clean_absolute(p: &Path) -> bool {
    // On the raw text: `components()` drops an interior `.` (`/run/./shm`).
    p.is_absolute()
        && p.to_str()
            .is_some_and(|s| !s.contains('\0') && !s.split('/').any(|c| c == "." || c == ".."))
}

#[cfg(test)]
pub(crate) mod tests;
