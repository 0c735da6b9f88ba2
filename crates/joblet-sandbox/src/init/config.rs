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
            root: None,
            extra_devices: vec!["/dev/nvidia0".into()],
            work_dir: "/var/lib/joblet/jobs/x/work".into(),
            work_size_mb: 0,
            tmp_size_mb: 64,
            net: NetMode::None,
            seccomp: true,
            seccomp_allow: vec![],
            binds: vec![Bind {
                source: "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15".into(),
                target: "/run/joblet/driver/lib/libcuda.so.1".into(),
                writable: false,
            }],
            masks: vec!["/proc/driver/nvidia".into()],
            device_binds: vec![],
            dev_shm: Some("/run/joblet/mps/GPU-1/shm".into()),
            warm: false,
        }
    }

    #[test]
    fn a_warm_sandbox_fits_jobs_that_differ_only_in_their_own_settings() {
        let base = InitConfig {
            warm: true,
            binds: vec![],
            ..sample()
        };
        let mut job = sample();
        job.command = "python3".into();
        job.hostname = "job-2".into();
        job.extra_devices.push("/dev/nvidia1".into());
        job.binds.clear();
        job.dev_shm = None;
        job.work_size_mb = 512;
        assert_eq!(base.warm_mismatch(&job), None);
        job.net = NetMode::Host;
        assert_eq!(base.warm_mismatch(&job), Some("net"));
        job.net = NetMode::None;
        job.ro_mounts.push("/opt".into());
        assert_eq!(base.warm_mismatch(&job), Some("ro_mounts"));
        job.ro_mounts = base.ro_mounts.clone();
        job.root = Some("/var/lib/joblet/runtimes/trees/abc".into());
        assert_eq!(base.warm_mismatch(&job), Some("root"));
        job.root = None;
        job.tmp_size_mb = 1;
        assert_eq!(base.warm_mismatch(&job), Some("tmp_size_mb"));
        job.tmp_size_mb = base.tmp_size_mb;
        job.seccomp = false;
        assert_eq!(base.warm_mismatch(&job), Some("seccomp"));
        job.seccomp = true;
        job.seccomp_allow = vec![super::super::SyscallGroup::IoUring];
        assert_eq!(base.warm_mismatch(&job), Some("seccomp_allow"));
        job.seccomp_allow.clear();
        job.uid += 1;
        assert_eq!(base.warm_mismatch(&job), Some("user"));
        job.uid = base.uid;
        job.allow_root = !base.allow_root;
        assert_eq!(base.warm_mismatch(&job), Some("user"));
    }

    fn bind(source: &str, target: &str) -> Bind {
        Bind {
            source: source.into(),
            target: target.into(),
            writable: false,
        }
    }

    #[test]
    fn binds_made_ahead_must_be_the_first_of_the_jobs_and_are_left_out_of_its_part() {
        let lib = bind(
            "/usr/lib/libnvidia-ml.so.1",
            "/run/nvidia/driver/lib/libnvidia-ml.so.1",
        );
        let ctl = bind("/dev/nvidiactl", "/dev/nvidiactl");
        let gpu0 = bind("/dev/nvidia0", "/dev/nvidia0");
        let mps = bind("/run/joblet/mps/GPU-1/pipe", "/run/nvidia/mps");
        let warm = InitConfig {
            warm: true,
            binds: vec![lib.clone()],
            device_binds: vec![ctl.clone()],
            ..sample()
        };
        let mut job = InitConfig {
            binds: vec![lib.clone(), mps.clone()],
            device_binds: vec![ctl.clone(), gpu0.clone()],
            ..sample()
        };
        assert_eq!(warm.warm_mismatch(&job), None);
        let part = warm.job_part(&job);
        assert_eq!(part.binds, vec![mps.clone()]);
        assert_eq!(part.device_binds, vec![gpu0.clone()]);
        assert_eq!(
            (part.command.as_str(), &part.env),
            (job.command.as_str(), &job.env)
        );

        // Not first, missing, or another source: not what the job asks for.
        job.binds = vec![mps.clone(), lib.clone()];
        assert_eq!(warm.warm_mismatch(&job), Some("binds"));
        job.binds = vec![mps.clone()];
        assert_eq!(warm.warm_mismatch(&job), Some("binds"));
        job.binds = vec![bind(
            "/opt/other/libnvidia-ml.so.1",
            &lib.target.display().to_string(),
        )];
        assert_eq!(warm.warm_mismatch(&job), Some("binds"));
        // One of the job's own above a bind made ahead would have been
        // mounted first, under it: it cannot be added after.
        job.binds = vec![lib.clone(), bind("/opt/driver", "/run/nvidia")];
        assert_eq!(warm.warm_mismatch(&job), Some("binds"));
        job.binds = vec![lib.clone()];
        job.device_binds = vec![gpu0.clone()];
        assert_eq!(warm.warm_mismatch(&job), Some("device_binds"));
        // A CPU job in a GPU-ready sandbox: never.
        job.binds.clear();
        job.device_binds.clear();
        assert_eq!(warm.warm_mismatch(&job), Some("binds"));
    }

    #[test]
    fn config_json_without_binds_or_masks_still_parses() {
        let mut v = serde_json::to_value(sample()).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.remove("binds");
        obj.remove("masks");
        obj.remove("dev_shm");
        let c: InitConfig = serde_json::from_value(v).unwrap();
        assert!(c.binds.is_empty() && c.masks.is_empty());
        assert_eq!(c.dev_shm, None);
        c.validate().unwrap();
    }

    #[test]
    fn bind_paths_must_be_clean_and_absolute_naming_the_entry() {
        for (source, target, end) in [
            ("lib/libcuda.so", "/run/x", "source"),
            ("/usr/../etc/shadow", "/run/x", "source"),
            ("/usr/lib", "run/x", "target"),
            ("/usr/lib", "/run/../etc", "target"),
            ("/usr/./lib", "/run/x", "source"),
            ("/usr/lib", "/run/x/.", "target"),
            ("/usr/lib", "", "target"),
        ] {
            let mut c = sample();
            c.binds.push(bind(source, target));
            let e = c.validate().unwrap_err();
            let path = if end == "source" { source } else { target };
            assert_eq!(
                e,
                ConfigError::BadBindPath {
                    index: 1,
                    end,
                    path: path.into()
                },
                "{source} -> {target}"
            );
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("binds[1].{end} ")), "{msg}");
            assert!(msg.contains("absolute path without '..'"), "{msg}");
        }
    }

    #[test]
    fn bind_targets_may_not_cover_what_the_sandbox_builds() {
        for target in [
            "/",
            "/proc",
            "/dev",
            "/dev/nvidia0",
            "/work",
            "/work/x",
            "/.oldroot/etc",
        ] {
            let mut c = sample();
            c.binds = vec![bind("/usr/lib", target)];
            match c.validate() {
                Err(e @ ConfigError::ReservedBindTarget { index: 0, .. }) => {
                    let msg = e.to_string();
                    assert!(
                        msg.starts_with(&format!("binds[0].target {target} is refused: ")),
                        "{msg}"
                    );
                    assert!(msg.contains("/run/<name>"), "{msg}");
                }
                other => panic!("{target}: {other:?}"),
            }
        }
        // Near misses are fine: a file under /proc, names that only
        // start like a reserved path, existing paths of read-only mounts.
        let mut c = sample();
        c.binds = vec![
            bind("/tmp/params", "/proc/driver/nvidia/params"),
            bind("/usr/lib", "/device"),
            bind("/usr/lib", "/workspace/lib"),
            bind("/usr/lib", "/tmp/lib"),
            bind("/etc/hosts", "/etc/hosts"),
        ];
        c.validate().unwrap();
    }

    #[test]
    fn dev_shm_must_be_a_clean_absolute_utf8_path() {
        use std::os::unix::ffi::OsStrExt;
        let non_utf8 = PathBuf::from(std::ffi::OsStr::from_bytes(b"/run/\xff/shm"));
        for bad in [
            PathBuf::from("run/shm"),
            PathBuf::from("/run/../dev/shm"),
            PathBuf::from("/run/./shm"),
            PathBuf::from("/"),
            PathBuf::from(""),
            non_utf8,
        ] {
            let mut c = sample();
            c.dev_shm = Some(bad.clone());
            let e = c.validate().unwrap_err();
            assert_eq!(e, ConfigError::BadDevShm(bad.clone()), "{}", bad.display());
            let msg = e.to_string();
            assert!(
                msg.starts_with("dev_shm ") && msg.contains("absolute UTF-8 path"),
                "{msg}"
            );
        }
        let mut c = sample();
        c.dev_shm = None;
        c.validate().unwrap();
    }

    #[test]
    fn two_binds_may_not_share_a_target() {
        let mut c = sample();
        c.binds
            .push(bind("/usr/lib", "/run/joblet/driver/lib/libcuda.so.1"));
        assert_eq!(
            c.validate(),
            Err(ConfigError::DuplicateBindTarget {
                index: 1,
                first: 0,
                path: "/run/joblet/driver/lib/libcuda.so.1".into()
            })
        );
    }

    mod paths {
        use super::*;
        use proptest::prelude::*;

        /// One path component that is neither `.` nor `..`.
        fn segment() -> impl Strategy<Value = String> {
            "[a-z0-9._-]{1,8}".prop_filter("not . or ..", |s| s != "." && s != "..")
        }

        proptest! {
            #[test]
            fn clean_paths_pass_and_a_parent_component_anywhere_fails(
                segs in proptest::collection::vec(segment(), 1..6),
                at in 0usize..6,
            ) {
                let clean = format!("/{}", segs.join("/"));
                let mut with_parent = segs.clone();
                with_parent.insert(at.min(segs.len()), "..".into());
                let dirty = format!("/{}", with_parent.join("/"));

                let mut c = sample();
                c.masks = vec![clean.clone().into()];
                c.binds = vec![bind(&clean, &format!("/run/j{clean}"))];
                prop_assert_eq!(c.validate(), Ok(()));

                c.masks = vec![dirty.clone().into()];
                prop_assert_eq!(
                    c.validate(),
                    Err(ConfigError::BadMask { index: 0, path: dirty.clone().into() })
                );
                c.masks.clear();
                c.binds = vec![bind("/usr/lib", &dirty)];
                prop_assert_eq!(
                    c.validate(),
                    Err(ConfigError::BadBindPath { index: 0, end: "target", path: dirty.into() })
                );
            }

            #[test]
            fn targets_are_refused_exactly_at_and_under_reserved_places(
                first in prop_oneof![
                    prop::sample::select(vec!["dev", "work", "proc", ".oldroot", "run", "devices", "workspace"])
                        .prop_map(String::from),
                    segment(),
                ],
                rest in proptest::collection::vec(segment(), 0..4),
            ) {
                let segs: Vec<String> = std::iter::once(first).chain(rest).collect();
                let target = format!("/{}", segs.join("/"));
                let reserved = segs[0] == "dev"
                    || segs[0] == "work"
                    || segs[0] == ".oldroot"
                    || (segs.len() == 1 && segs[0] == "proc");
                let mut c = sample();
                c.binds = vec![bind("/usr/lib", &target)];
                let refused = matches!(
                    c.validate(),
                    Err(ConfigError::ReservedBindTarget { .. })
                );
                prop_assert_eq!(refused, reserved, "{}", target);
            }
        }
    }

    #[test]
    fn masks_must_be_clean_absolute_and_not_root() {
        for bad in ["/", "relative", "/proc/../etc", ""] {
            let mut c = sample();
            c.masks = vec!["/ok".into(), bad.into()];
            let e = c.validate().unwrap_err();
            assert_eq!(
                e,
                ConfigError::BadMask {
                    index: 1,
                    path: bad.into()
                },
                "{bad}"
            );
            assert!(e.to_string().starts_with("masks[1] "), "{e}");
        }
        let mut c = sample();
        c.masks = vec![
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into(),
            "/dev/nvidia0".into(),
            "/proc/driver/nvidia".into(),
        ];
        c.validate().unwrap();
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
