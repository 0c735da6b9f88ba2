//! `joblet-config.yml`: the daemon's configuration.
//!
//! Every key has a default, so an empty file (or none) gives a working local
//! node. Unknown keys and bad values are start-up errors naming the dotted
//! key (`jobs.default_timeout`) and the accepted form.
//!
//! [`Config::parse`] checks the file's values on their own;
//! [`Config::check`] adds what they name on this host (`jobs.user`). Both
//! `joblet server` and `joblet check-config` run [`Config::check`], so a
//! file one accepts the other never refuses for its content. Durations
//! (`jobs.default_timeout`, `stop_grace_period`, `gpu.*`) are kept to the
//! millisecond (`500ms`, `1.5s`; a bare number is seconds).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use joblet_core::text::clip;
use joblet_gpu::exec::SharingMode;
use joblet_sched::model::{Policy, RateLimit};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub version: String,
    pub server: ServerConfig,
    pub jobs: JobsConfig,
    pub filesystem: FilesystemConfig,
    pub sandbox: SandboxConfig,
    pub gpu: GpuConfig,
    pub logging: LoggingConfig,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `host:port` to listen on; port 0 picks a free port (written to `server.json`).
    #[serde(deserialize_with = "de_addr")]
    pub address: SocketAddr,
    /// Where the database, certificates and job directories live.
    pub state_dir: PathBuf,
    /// Extra names/IPs for the server certificate (beyond localhost, loopback and the hostname).
    pub tls_hosts: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// The node's time limit: jobs that give no `--timeout` (or 0) get it,
    /// and a job's own `--timeout` can only be shorter; 0 = none.
    #[serde(deserialize_with = "de_duration")]
    pub default_timeout: Duration,
    /// SIGTERM-to-SIGKILL grace for `rnx job stop` and timeouts.
    #[serde(deserialize_with = "de_duration")]
    pub stop_grace_period: Duration,
    /// Jobs running at once; the rest wait in the queue (FIFO).
    #[serde(deserialize_with = "de_max_running")]
    pub max_running: usize,
    /// Who jobs run as: a user name from the host's passwd, `UID` or `UID:GID`.
    pub user: String,
    /// Lets `jobs.user` be root (uid 0). Off: a root job is a config error.
    pub allow_root: bool,
    /// Processes (and threads) a job may have at once (`pids.max`).
    #[serde(deserialize_with = "de_pids_max")]
    pub pids_max: u64,
    /// Largest total of `--upload` files per job, in MiB.
    pub max_upload_mb: u64,
    /// New jobs are refused while the state disk has less free, in MiB
    /// (room for running jobs' output and records).
    pub min_free_disk_mb: u64,
    /// Space kept in reserve on the state disk, in MiB, given up when it
    /// fills so that jobs' outcomes are still recorded; 0 = none.
    pub state_reserve_mb: u64,
    /// How long a finished job's host work directory (its uploads, and
    /// what it wrote to `/work` when `filesystem.work_size_mb` is 0) is
    /// kept; its log and record stay until `rnx job delete`. 0 = until
    /// then.
    #[serde(deserialize_with = "de_duration")]
    pub work_retention: Duration,
}

/// The job's filesystem view.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FilesystemConfig {
    /// Host directories bound read-only into every job (merged-/usr symlinks
    /// such as `/bin -> usr/bin` are recreated as symlinks). Paths that do
    /// not exist on this host are skipped.
    pub allowed_mounts: Vec<PathBuf>,
    /// Size of the job's private `/tmp` (tmpfs, charged to its memory).
    pub tmp_size_mb: u64,
    /// Size of the job's `/work` (tmpfs, charged to its memory; uploads are
    /// copied in, and what the job writes there goes with it). 0: `/work`
    /// is the job's directory on the host, unlimited, kept until
    /// `rnx job delete`.
    pub work_size_mb: u64,
}

/// Isolation switches.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Run jobs in the sandbox (namespaces, cgroups, device filter,
    /// seccomp, unprivileged user). Needs root. Off: jobs run as plain
    /// processes of their shim and limits are refused as unsupported.
    pub enabled: bool,
    /// The daemon's subtree in each cgroup hierarchy.
    pub cgroup_base: String,
    /// Seccomp filter for jobs (at least as strict as Docker's default
    /// profile; docs/security.md).
    pub seccomp: bool,
    /// Syscall groups the filter lets through on this node (`io_uring`,
    /// `perf`, `ptrace`, `numa`); unknown names are refused by serde,
    /// naming the key and the accepted groups.
    pub seccomp_allow: Vec<joblet_sandbox::init::SyscallGroup>,
    /// Lets jobs ask for `--network=host` (the host's network stack).
    /// Off: every job gets its own network namespace with loopback only.
    pub allow_host_network: bool,
    /// Sandboxes kept built ahead of their jobs (shim, namespaces,
    /// read-only tree, cgroup and device filter ready), so a job starts
    /// without waiting for them. 0 = build each job's sandbox when it
    /// starts.
    pub warm_pool: usize,
}

/// Seed 001's `gpu:` section: GPU discovery and health monitoring. GPU jobs
/// themselves are refused as "not supported yet" until GPU execution lands.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    /// Discover and monitor the node's GPUs. Off: no GPU code runs at all.
    pub enabled: bool,
    /// With `enabled`: refuse to start when no usable GPU is found. Off: warn
    /// and run CPU-only (seed 003's graceful fallback).
    pub required: bool,
    /// Where CUDA toolkits live (`cuda-X.Y` siblings are found too).
    pub cuda_paths: Vec<PathBuf>,
    /// The NVML library to load; default `libnvidia-ml.so.1` from the
    /// loader's path.
    pub nvml_library: Option<PathBuf>,
    /// Use hwloc for the NUMA topology (sysfs otherwise or when it fails).
    pub hwloc: bool,
    /// How often the health monitor samples every GPU; 0 = never (NVML
    /// events are still watched).
    #[serde(deserialize_with = "de_duration")]
    pub health_interval: Duration,
    /// Simulate GPUs from a mock-NVML profile or an `nvidia-smi -q -x`
    /// capture, served by the project's fake NVML library (for machines
    /// without GPUs: demos, tests). Shown as SIMULATED everywhere.
    pub simulate: Option<PathBuf>,
    /// Fault/load injection file for the simulated GPUs (fake-nvml's
    /// `MOCK_NVML_STATE`).
    pub simulate_state: Option<PathBuf>,
    /// How jobs use GPUs: `exclusive` (one job per GPU), `shared` (jobs
    /// share a GPU, each held to its `--gpu-memory` quota, enforced by the
    /// monitor), `mps` (shared, plus an MPS control daemon per GPU).
    pub sharing: SharingMode,
    /// Which waiting GPU job goes next: `fifo`, `backfill` or `las`.
    pub policy: Policy,
    /// Most GPUs one owner may hold at once (owner → GPUs); unlisted
    /// owners are unlimited.
    pub owner_max_gpus: BTreeMap<String, u32>,
    /// Per-owner GPU allocation rate (`{per_second: 2, burst: 10}`).
    pub owner_rate: Option<RateLimit>,
    /// What happens to a GPU after its job: `verify` (wait until NVML shows
    /// none of the job's processes and memory back to its idle baseline,
    /// else quarantine it), `reset` (as verify, but reset an exclusive GPU
    /// that is not clean before quarantining it), `off`.
    pub scrub_policy: ScrubPolicy,
    /// How long release waits for a GPU to come back clean.
    #[serde(deserialize_with = "de_duration")]
    pub scrub_timeout: Duration,
    /// GPU time limit for jobs that do not give `--gpu-time` (GPUs × wall
    /// time); 0 = none.
    #[serde(deserialize_with = "de_duration")]
    pub default_gpu_time: Duration,
    /// `NVIDIA_DRIVER_CAPABILITIES` for jobs that do not set it.
    pub driver_capabilities: String,
    /// Where the host's NVIDIA device nodes are (tests and simulations use
    /// a directory of `mknod`-made nodes).
    pub dev_dir: PathBuf,
    /// The loader cache the driver libraries are found through.
    pub ld_cache: PathBuf,
    /// Where the driver's binaries (`nvidia-smi`, MPS) are looked up.
    pub driver_bin_dirs: Vec<PathBuf>,
    /// The host's procfs: device majors (`devices`) and MIG capability
    /// minors (`driver/nvidia-caps/mig-minors`) are read under it (tests
    /// and simulations use a directory of their own).
    pub proc_dir: PathBuf,
    /// The MPS control program (`gpu.sharing: mps`); default
    /// `nvidia-cuda-mps-control` from `driver_bin_dirs`, then `PATH`.
    pub mps_control: Option<PathBuf>,
    /// Where each GPU's MPS control daemon gets its pipe and log
    /// directories and its shared-memory tmpfs
    /// (`<mps_dir>/<GPU UUID>/{pipe,log,shm}`).
    pub mps_dir: PathBuf,
    /// Size in MiB of each GPU's MPS shared-memory tmpfs: the control
    /// daemon's and its jobs' `/dev/shm` (NVIDIA's device plugin uses 64).
    pub mps_shm_size_mb: u64,
    /// MPS jobs' share of a GPU's SMs (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`,
    /// 1 to 100), also set as the control daemon's default so a job can
    /// only lower it; `null` = MPS's default (100).
    pub mps_active_thread_percentage: Option<u32>,
    /// GPU-ready warm sandboxes to keep besides `sandbox.warm_pool`: the
    /// driver's files (default capabilities and CUDA toolkit) and the
    /// control nodes bound and allowed ahead, so a GPU job only adds its
    /// GPUs' nodes (docs/gpu.md); 0 = GPU jobs start in CPU ones.
    pub warm_pool: usize,
}

/// What release does with a GPU a job has left.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ScrubPolicy {
    #[default]
    Verify,
    Reset,
    Off,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// A tracing filter: `info`, `debug`, `joblet=debug,warn`. `RUST_LOG` overrides it.
    pub level: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            version: "1".into(),
            server: ServerConfig::default(),
            jobs: JobsConfig::default(),
            filesystem: FilesystemConfig::default(),
            sandbox: SandboxConfig::default(),
            gpu: GpuConfig::default(),
            logging: LoggingConfig::default(),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            address: SocketAddr::from(([127, 0, 0, 1], 50051)),
            state_dir: PathBuf::from("/var/lib/joblet"),
            tls_hosts: Vec::new(),
        }
    }
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            default_timeout: Duration::ZERO,
            stop_grace_period: Duration::from_secs(10),
            max_running: 64,
            user: "nobody".into(),
            allow_root: false,
            pids_max: 1024,
            max_upload_mb: 1024,
            min_free_disk_mb: 64,
            state_reserve_mb: 16,
            work_retention: Duration::from_secs(24 * 3600),
        }
    }
}

impl Default for FilesystemConfig {
    fn default() -> Self {
        FilesystemConfig {
            allowed_mounts: [
                "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            tmp_size_mb: 256,
            work_size_mb: 1024,
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            enabled: true,
            cgroup_base: "joblet".into(),
            seccomp: true,
            seccomp_allow: Vec::new(),
            allow_host_network: false,
            warm_pool: 2,
        }
    }
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            enabled: false,
            cuda_paths: ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda"]
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            nvml_library: None,
            required: true,
            hwloc: true,
            health_interval: Duration::from_secs(1),
            simulate: None,
            simulate_state: None,
            sharing: SharingMode::Exclusive,
            policy: Policy::Backfill,
            owner_max_gpus: BTreeMap::new(),
            owner_rate: None,
            scrub_policy: ScrubPolicy::Verify,
            scrub_timeout: Duration::from_secs(10),
            default_gpu_time: Duration::ZERO,
            driver_capabilities: "utility,compute".into(),
            dev_dir: PathBuf::from("/dev"),
            ld_cache: PathBuf::from("/etc/ld.so.cache"),
            // Last: where NVIDIA's container-host installs (GKE, some
            // cloud images) put the driver's binaries, with nothing in
            // /usr/bin.
            driver_bin_dirs: [
                "/usr/bin",
                "/usr/local/bin",
                "/usr/sbin",
                "/bin",
                "/usr/local/nvidia/bin",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            proc_dir: PathBuf::from("/proc"),
            mps_control: None,
            mps_dir: PathBuf::from("/run/joblet/mps"),
            mps_shm_size_mb: 64,
            mps_active_thread_percentage: None,
            warm_pool: 2,
        }
    }
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses YAML text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            path: path.to_owned(),
            key,
            message,
        };
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let de = serde_norway::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let key = if key == "." {
                "(top level)".to_owned()
            } else {
                key
            };
            invalid(key, e.into_inner().to_string())
        })?;
        check_values(&cfg).map_err(|(key, message)| invalid(key, message))?;
        Ok(cfg)
    }

    /// Every check `joblet server` makes of its configuration that needs
    /// neither root nor a change on the host: the values (as
    /// [`Config::parse`]) and what they name here (`jobs.user` exists and
    /// is not root without `jobs.allow_root`). `joblet server` runs it
    /// before anything else, `joblet check-config` runs exactly it; both
    /// report the same error. `source` names the file in messages.
    pub fn check(&self, source: &Path) -> Result<(), ConfigError> {
        let invalid = |(key, message): (String, String)| ConfigError::Invalid {
            path: source.to_owned(),
            key,
            message,
        };
        check_values(self).map_err(invalid)?;
        jobs_user(&self.jobs).map_err(|e| invalid(("jobs.user".into(), e.to_string())))?;
        Ok(())
    }
}

/// The values of a parsed file that serde cannot check by type.
fn check_values(cfg: &Config) -> Result<(), (String, String)> {
    if cfg.version != "1" {
        return Err((
            "version".into(),
            format!(
                "unsupported version {:?}; expected \"1\"",
                clip(&cfg.version)
            ),
        ));
    }
    if cfg.server.state_dir.as_os_str().is_empty() || cfg.server.state_dir.is_relative() {
        return Err((
            "server.state_dir".into(),
            format!(
                "{:?} is not an absolute path; expected e.g. /var/lib/joblet",
                cfg.server.state_dir
            ),
        ));
    }
    check_sandbox_settings(cfg)?;
    check_log_filter(&cfg.logging.level).map_err(|e| ("logging.level".to_owned(), e.to_string()))
}

pub const LOG_FILTER_FORM: &str = "a level (trace, debug, info, warn, error or off) or comma-separated directives like joblet=debug,warn (tracing's EnvFilter syntax, TARGET=LEVEL)";

/// `logging.level`: tracing's `EnvFilter` syntax, where every directive
/// names a level. A bare word that is not a level (`shouting`) would be a
/// target enabled at every level, which is what a mistyped level looks
/// like: the daemon would log nothing of its own, so it is refused.
pub fn check_log_filter(filter: &str) -> Result<(), LogFilterError> {
    let t = filter.trim();
    if t.is_empty() {
        return Err(LogFilterError::Empty);
    }
    if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(t) {
        return Err(LogFilterError::Invalid {
            filter: filter.to_owned(),
            problem: e.to_string(),
        });
    }
    for directive in t.split(',').map(str::trim) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, l)| l);
        if level
            .trim()
            .parse::<tracing_subscriber::filter::LevelFilter>()
            .is_err()
        {
            return Err(LogFilterError::NotALevel {
                directive: directive.to_owned(),
            });
        }
    }
    Ok(())
}

/// Why `logging.level` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFilterError {
    #[error("is empty; expected {LOG_FILTER_FORM}")]
    Empty,
    #[error(
        "invalid filter {:?} ({problem}); expected {LOG_FILTER_FORM}",
        clip(filter)
    )]
    Invalid { filter: String, problem: String },
    #[error("{:?} is not a log level; expected {LOG_FILTER_FORM}", clip(directive))]
    NotALevel { directive: String },
}

pub const USER_FORM: &str = "a user name, UID or UID:GID (e.g. nobody or 65534:65534)";

/// Why `jobs.user` cannot be the jobs' user (the caller names the
/// setting). Values are clipped in messages.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// Neither a user name nor `UID` / `UID:GID` in decimal.
    #[error("invalid value {:?}: expected {USER_FORM}", clip(spec))]
    Invalid { spec: String },
    #[error("no user named {:?} on this host: expected {USER_FORM}", clip(spec))]
    Unknown { spec: String },
    #[error("cannot look up user {:?}: {source}", clip(spec))]
    Lookup { spec: String, source: nix::Error },
    /// Uid or gid 0 without `jobs.allow_root`.
    #[error("{:?} {}; expected an unprivileged user such as nobody, or set jobs.allow_root: true to run jobs as root (not recommended)", clip(spec), if *uid_zero { "is root (uid 0)" } else { "has root's group (gid 0)" })]
    Root { spec: String, uid_zero: bool },
}

/// `jobs.user`: a passwd name, `UID` or `UID:GID`.
pub fn resolve_user(spec: &str) -> Result<(u32, u32), UserError> {
    let num = |s: &str| {
        s.parse::<u32>().map_err(|_| UserError::Invalid {
            spec: spec.to_string(),
        })
    };
    if let Some((u, g)) = spec.split_once(':') {
        return Ok((num(u)?, num(g)?));
    }
    if spec.chars().all(|c| c.is_ascii_digit()) && !spec.is_empty() {
        let uid = num(spec)?;
        return Ok((uid, uid));
    }
    match nix::unistd::User::from_name(spec) {
        Ok(Some(u)) => Ok((u.uid.as_raw(), u.gid.as_raw())),
        Ok(None) => Err(UserError::Unknown {
            spec: spec.to_string(),
        }),
        Err(source) => Err(UserError::Lookup {
            spec: spec.to_string(),
            source,
        }),
    }
}

/// Who jobs run as (`jobs.user`, resolved on this host): never root (uid or
/// gid 0) unless `jobs.allow_root`.
pub fn jobs_user(jobs: &JobsConfig) -> Result<(u32, u32), UserError> {
    let (uid, gid) = resolve_user(&jobs.user)?;
    if (uid == 0 || gid == 0) && !jobs.allow_root {
        return Err(UserError::Root {
            spec: jobs.user.clone(),
            uid_zero: uid == 0,
        });
    }
    Ok((uid, gid))
}

/// Most warm sandboxes a node keeps (`sandbox.warm_pool`): each holds a
/// shim, two init processes, namespaces and a cgroup.
pub const MAX_WARM_POOL: usize = 64;

/// `filesystem.*` and `sandbox.*` values serde cannot check by type.
fn check_sandbox_settings(cfg: &Config) -> Result<(), (String, String)> {
    for (i, m) in cfg.filesystem.allowed_mounts.iter().enumerate() {
        // The sandbox's own rule, so the daemon never starts with a mount
        // every job would refuse.
        joblet_sandbox::init::check_ro_mount(m).map_err(|e| {
            (
                format!("filesystem.allowed_mounts[{i}]"),
                format!("{e}; expected an absolute host directory such as /usr or /opt/tools"),
            )
        })?;
    }
    if !(1..=1_048_576).contains(&cfg.filesystem.tmp_size_mb) {
        return Err((
            "filesystem.tmp_size_mb".into(),
            format!(
                "invalid value {}: expected 1 to 1048576 (MiB)",
                cfg.filesystem.tmp_size_mb
            ),
        ));
    }
    if cfg.filesystem.work_size_mb > 1_048_576 {
        return Err((
            "filesystem.work_size_mb".into(),
            format!(
                "invalid value {}: expected 0 (the host directory, unlimited) or 1 to 1048576 (MiB)",
                cfg.filesystem.work_size_mb
            ),
        ));
    }
    crate::gpu::config_check::check(&cfg.gpu)?;
    for (key, n) in [
        ("sandbox.warm_pool", cfg.sandbox.warm_pool),
        ("gpu.warm_pool", cfg.gpu.warm_pool),
    ] {
        if n > MAX_WARM_POOL {
            return Err((
                key.into(),
                format!("invalid value {n}: expected 0 (no warm sandboxes) to {MAX_WARM_POOL}"),
            ));
        }
    }
    let base = &cfg.sandbox.cgroup_base;
    if base.is_empty()
        || base.starts_with('.')
        || !base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err((
            "sandbox.cgroup_base".into(),
            format!("invalid value {base:?}: expected a single directory name such as joblet"),
        ));
    }
    Ok(())
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(joblet_core::parse::DURATION_FORM)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v).map(Duration::from_secs).map_err(|_| {
                E::custom(format!(
                    "invalid value {v}: expected {}",
                    joblet_core::parse::DURATION_FORM
                ))
            })
        }
        /// `0.5`: seconds with a fraction, kept to the millisecond.
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Duration, E> {
            let ms = v * 1000.0;
            let whole = ms.round();
            if v.is_finite() && v >= 0.0 && (ms - whole).abs() < 1e-6 && whole <= 1e15 {
                Ok(Duration::from_millis(whole as u64))
            } else {
                Err(E::custom(format!(
                    "invalid value {v}: expected {}",
                    joblet_core::parse::DURATION_FORM
                )))
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
            joblet_core::parse::parse_duration(v).map_err(E::custom)
        }
    }
    d.deserialize_any(V)
}

fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| serde::de::Error::custom(format!("invalid value {s:?}: expected IP:PORT like 127.0.0.1:50051 or 0.0.0.0:50051 ([::]:50051 for IPv6)")))
}

fn de_pids_max<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = i64::deserialize(d)?;
    if (8..=4_194_304).contains(&n) {
        Ok(n as u64)
    } else {
        Err(serde::de::Error::custom(format!(
            "invalid value {n}: expected a number of processes from 8 to 4194304"
        )))
    }
}

fn de_max_running<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let n = i64::deserialize(d)?;
    if (1..=100_000).contains(&n) {
        Ok(n as usize)
    } else {
        Err(serde::de::Error::custom(format!(
            "invalid value {n}: expected a number of jobs from 1 to 100000"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("joblet-config.yml"))
    }

    #[test]
    fn empty_file_is_all_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
        assert!(!Config::default().gpu.enabled);
    }

    #[test]
    fn seed_001_gpu_section_is_accepted() {
        let cfg = parse("gpu:\n  enabled: true\n  cuda_paths:\n    - \"/usr/local/cuda\"\n    - \"/opt/cuda\"\n    - \"/usr/lib/cuda\"\n").unwrap();
        assert!(cfg.gpu.enabled);
        assert_eq!(cfg.gpu.cuda_paths.len(), 3);
        assert!(
            cfg.gpu.required,
            "a GPU node without GPUs is an error by default"
        );
        assert_eq!(cfg.gpu.health_interval, Duration::from_secs(1));
    }

    #[test]
    fn values_parse() {
        let cfg = parse("server:\n  address: \"0.0.0.0:7000\"\n  state_dir: /tmp/x\njobs:\n  default_timeout: 1h30m\n  stop_grace_period: 3\n  max_running: 20\n").unwrap();
        assert_eq!(cfg.server.address.port(), 7000);
        assert_eq!(cfg.jobs.default_timeout, Duration::from_secs(5400));
        assert_eq!(cfg.jobs.stop_grace_period, Duration::from_secs(3));
        assert_eq!(cfg.jobs.max_running, 20);
    }

    /// Every duration key keeps milliseconds: sub-second values are never
    /// 0 (none) or cut to whole seconds.
    #[test]
    fn durations_keep_milliseconds() {
        let cfg = parse("jobs:\n  default_timeout: 500ms\n  stop_grace_period: 1.5s\ngpu:\n  health_interval: 250ms\n  scrub_timeout: 1.9s\n  default_gpu_time: 90s\n").unwrap();
        assert_eq!(cfg.jobs.default_timeout, Duration::from_millis(500));
        assert_eq!(cfg.jobs.stop_grace_period, Duration::from_millis(1500));
        assert_eq!(cfg.gpu.health_interval, Duration::from_millis(250));
        assert_eq!(cfg.gpu.scrub_timeout, Duration::from_millis(1900));
        assert_eq!(cfg.gpu.default_gpu_time, Duration::from_secs(90));
        for (yaml, ms) in [
            ("0.5", 500),
            ("1.9", 1900),
            ("\"0.5s\"", 500),
            ("1ms", 1),
            ("2", 2000),
        ] {
            let cfg = parse(&format!("jobs:\n  default_timeout: {yaml}\n")).unwrap();
            assert_eq!(
                cfg.jobs.default_timeout,
                Duration::from_millis(ms),
                "{yaml}"
            );
        }
        for bad in ["1us", "0.0001", "-0.5", ".nan"] {
            let e = parse(&format!("jobs:\n  default_timeout: {bad}\n")).unwrap_err();
            assert!(e.to_string().contains("jobs.default_timeout"), "{bad}: {e}");
            assert!(e.to_string().contains("duration like 30s"), "{bad}: {e}");
        }
    }

    #[test]
    fn log_levels_need_a_level_in_every_directive() {
        for good in [
            "info",
            "DEBUG",
            "off",
            "joblet=debug,warn",
            "joblet::engine=trace,tower=off",
            "joblet[job]=debug",
        ] {
            check_log_filter(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for (bad, needle) in [
            ("shouting", "\"shouting\" is not a log level"),
            ("joblet", "\"joblet\" is not a log level"),
            ("info,joblet", "\"joblet\" is not a log level"),
            ("joblet=loud", "\"joblet=loud\""),
            ("", "is empty"),
            ("[[", "invalid filter"),
        ] {
            let e = check_log_filter(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
            assert!(
                e.contains("trace, debug, info, warn, error or off"),
                "{bad}: {e}"
            );
        }
        let e = parse("logging:\n  level: shouting\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::Invalid { key, .. } if key == "logging.level"),
            "{e}"
        );
    }

    /// What `check-config` and `server` both refuse about `jobs.user`.
    #[test]
    fn jobs_user_resolves_and_is_not_root_without_allow_root() {
        let check = |user: &str, allow_root: bool| {
            let mut cfg = Config::default();
            cfg.jobs.user = user.into();
            cfg.jobs.allow_root = allow_root;
            cfg.check(Path::new("j.yml")).map_err(|e| e.to_string())
        };
        for (user, needle) in [
            ("root", "\"root\" is root (uid 0)"),
            ("0", "\"0\" is root (uid 0)"),
            ("65534:0", "\"65534:0\" has root's group (gid 0)"),
            ("0:65534", "is root (uid 0)"),
        ] {
            let e = check(user, false).unwrap_err();
            assert!(
                e.starts_with("config file j.yml: jobs.user: "),
                "{user}: {e}"
            );
            assert!(
                e.contains(needle) && e.contains("jobs.allow_root: true"),
                "{user}: {e}"
            );
            check(user, true).unwrap_or_else(|e| panic!("{user} with allow_root: {e}"));
        }
        let e = check("nosuchuser", true).unwrap_err();
        assert_eq!(e, "config file j.yml: jobs.user: no user named \"nosuchuser\" on this host: expected a user name, UID or UID:GID (e.g. nobody or 65534:65534)");
        let e = check("1:x", false).unwrap_err();
        assert!(e.contains("UID:GID"), "{e}");
        check("nobody", false).unwrap();
        check("65534:65534", false).unwrap();
        assert_eq!(resolve_user("1000:50").unwrap(), (1000, 50));
        assert_eq!(resolve_user("root").unwrap(), (0, 0));
        // The values are checked again, as in parse.
        let mut cfg = Config::default();
        cfg.logging.level = "shouting".into();
        assert!(cfg
            .check(Path::new("j.yml"))
            .unwrap_err()
            .to_string()
            .contains("logging.level"));
    }

    /// Each bad key is named with its dotted path and the accepted form.
    #[test]
    fn bad_keys_and_values_are_named() {
        let table = [
            (
                "server:\n  adress: x\n",
                "server.adress",
                "expected one of `address`",
            ),
            (
                "server:\n  address: localhost\n",
                "server.address",
                "IP:PORT",
            ),
            (
                "server:\n  state_dir: relative/dir\n",
                "server.state_dir",
                "absolute",
            ),
            (
                "jobs:\n  default_timeout: soon\n",
                "jobs.default_timeout",
                "duration like 30s",
            ),
            (
                "jobs:\n  default_timeout: -5\n",
                "jobs.default_timeout",
                "duration like 30s",
            ),
            ("jobs:\n  max_running: 0\n", "jobs.max_running", "from 1 to"),
            ("gpu:\n  enabled: maybe\n", "gpu.enabled", "bool"),
            ("gpu:\n  strategy: pack\n", "gpu.strategy", "unknown field"),
            (
                "gpu:\n  health_interval: 10ms\n",
                "gpu.health_interval",
                "at least 100ms",
            ),
            (
                "gpu:\n  simulate: /nonexistent/profile.yaml\n",
                "gpu.simulate",
                "mock-NVML profile",
            ),
            ("bogus: 1\n", "bogus", "unknown field"),
            ("version: \"2\"\n", "version", "expected \"1\""),
            ("logging:\n  level: \"[[\"\n", "logging.level", "filter"),
            ("jobs:\n  pids_max: 2\n", "jobs.pids_max", "from 8 to"),
            (
                "filesystem:\n  allowed_mounts: [/proc]\n",
                "filesystem.allowed_mounts[0]",
                "absolute host directory",
            ),
            (
                "filesystem:\n  allowed_mounts: [usr]\n",
                "filesystem.allowed_mounts[0]",
                "absolute host directory",
            ),
            (
                "filesystem:\n  allowed_mounts: [/usr, /tmp/tools]\n",
                "filesystem.allowed_mounts[1]",
                "lies under",
            ),
            (
                "filesystem:\n  tmp_size_mb: 0\n",
                "filesystem.tmp_size_mb",
                "1 to 1048576",
            ),
            (
                "sandbox:\n  cgroup_base: a/b\n",
                "sandbox.cgroup_base",
                "single directory name",
            ),
            ("sandbox:\n  enabled: sure\n", "sandbox.enabled", "bool"),
            (
                "sandbox:\n  warm_pool: 65\n",
                "sandbox.warm_pool",
                "0 (no warm sandboxes) to 64",
            ),
            ("sandbox:\n  warm_pool: -1\n", "sandbox.warm_pool", "usize"),
            (
                "gpu:\n  warm_pool: 100\n",
                "gpu.warm_pool",
                "0 (no warm sandboxes) to 64",
            ),
            ("gpu:\n  proc_dir: proc\n", "gpu.proc_dir", "e.g. /proc"),
            (
                "gpu:\n  mps_dir: run/mps\n",
                "gpu.mps_dir",
                "e.g. /run/joblet/mps",
            ),
            (
                "gpu:\n  mps_control: /nonexistent/mps-control\n",
                "gpu.mps_control",
                "nvidia-cuda-mps-control",
            ),
            (
                "gpu:\n  mps_shm_size_mb: 0\n",
                "gpu.mps_shm_size_mb",
                "1 to 1048576",
            ),
            (
                "gpu:\n  mps_active_thread_percentage: 0\n",
                "gpu.mps_active_thread_percentage",
                "1 to 100",
            ),
            (
                "gpu:\n  mps_active_thread_percentage: 101\n",
                "gpu.mps_active_thread_percentage",
                "1 to 100",
            ),
        ];
        for (text, key, needle) in table {
            let e = parse(text).unwrap_err();
            let ConfigError::Invalid {
                key: got, message, ..
            } = &e
            else {
                panic!("{e}")
            };
            assert_eq!(got, key, "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {message}");
        }
    }
}
