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
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use joblet_gpu::exec::SharingMode;
use joblet_sched::model::{Policy, RateLimit, DEFAULT_POLICY};
use serde::Deserialize;

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
    pub runtimes: RuntimesConfig,
    pub volumes: VolumesConfig,
    pub workflows: WorkflowsConfig,
    pub cluster: ClusterConfig,
    pub metrics: MetricsConfig,
    pub rest: RestConfig,
    pub executors: ExecutorsConfig,
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
    /// The CPUs the scheduler shares out to jobs' `--max-cpu` and
    /// `--cpu-cores`; 0 = the CPUs the daemon may run on. More than the
    /// node has oversubscribes them: `--max-cpu` stays each job's ceiling
    /// (`cpu.max`), and jobs share the CPUs there are (a simulated 8-GPU
    /// server on a small machine, or CPU-light jobs that ask for much).
    pub cpu_capacity: u32,
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
    /// Which waiting GPU job goes next: `fifo`, `backfill` (default,
    /// [`DEFAULT_POLICY`]), `las` or `gittins` (docs/scheduler.md).
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

/// Runtimes (`--runtime`): root filesystems built on this node from
/// manifests, stored content-addressed.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimesConfig {
    /// Where runtimes are stored; default `<server.state_dir>/runtimes`.
    pub dir: Option<PathBuf>,
}

/// Workflows (`rnx workflow run`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkflowsConfig {
    /// The size in MiB of the volume each run gets to hand files from job
    /// to job (`$JOBLET_WORKFLOW_SHARED`, an ext4 image like
    /// `rnx volume create`); 0 = runs get none.
    pub shared_volume_mb: u64,
}

impl Default for WorkflowsConfig {
    fn default() -> Self {
        WorkflowsConfig {
            shared_volume_mb: 1024,
        }
    }
}

/// Volumes (`--volume`): named storage that outlives jobs.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VolumesConfig {
    /// Where volume images and mount points live; default
    /// `<server.state_dir>/volumes`.
    pub dir: Option<PathBuf>,
}

impl Config {
    /// `runtimes.dir`, or its default under the state dir.
    pub fn runtimes_dir(&self) -> PathBuf {
        self.runtimes
            .dir
            .clone()
            .unwrap_or_else(|| self.server.state_dir.join("runtimes"))
    }

    /// `volumes.dir`, or its default under the state dir.
    pub fn volumes_dir(&self) -> PathBuf {
        self.volumes
            .dir
            .clone()
            .unwrap_or_else(|| self.server.state_dir.join("volumes"))
    }
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
            runtimes: RuntimesConfig::default(),
            volumes: VolumesConfig::default(),
            workflows: WorkflowsConfig::default(),
            cluster: ClusterConfig::default(),
            metrics: MetricsConfig::default(),
            rest: RestConfig::default(),
            executors: ExecutorsConfig::default(),
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
            cpu_capacity: 0,
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
            policy: DEFAULT_POLICY,
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
mod checks;
mod cluster;
pub use cluster::{ClusterConfig, EtcdTls};
mod de;
mod executors;
pub use executors::{ExecutorsConfig, NativeExecutorConfig, OciExecutorConfig};
mod metrics;
pub use metrics::MetricsConfig;
mod rest;
pub use rest::RestConfig;

use checks::check_values;
pub use checks::{
    check_log_filter, jobs_user, resolve_user, LogFilterError, UserError, LOG_FILTER_FORM,
    MAX_WARM_POOL, USER_FORM,
};
use de::{de_addr, de_duration, de_max_running, de_pids_max};

#[cfg(test)]
mod tests;
