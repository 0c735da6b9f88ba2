//! What a job asks for, and the one place that decides whether a request is
//! acceptable.
//!
//! A [`JobRequest`] holds the fields as a client sent them (numbers signed,
//! strings unparsed). [`JobRequest::validate`] turns it into a [`JobSpec`] or
//! a [`FieldError`] naming the RPC field and the accepted form. Whether this
//! node can *enforce* what a valid spec asks for is a separate question,
//! answered by [`JobSpec::check_supported`] (`support.rs`): a request the node cannot honour
//! is refused, never silently run without its limits.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::parse::{self, ParseError};
use crate::text::clip;
use crate::upload::UploadEntry;

mod support;
pub use support::{NodeCapabilities, Unsupported};

/// A request field that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// The RPC field, dotted (`resources.gpu_memory_mb`, `env["1X"]`).
    pub field: String,
    pub problem: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            problem: problem.into(),
        }
    }

    fn from_parse(field: impl Into<String>, e: ParseError) -> Self {
        FieldError::new(field, e.to_string())
    }
}

/// Upper bounds that keep numbers meaningful (and far from overflow).
pub mod limits {
    /// 1024 cores' worth of CPU percent.
    pub const MAX_CPU_PERCENT: i64 = 102_400;
    /// 16 TiB of memory, in MiB.
    pub const MAX_MEMORY_MB: i64 = 16 * 1024 * 1024;
    /// 1 TiB of GPU memory per GPU, in MiB.
    pub const MAX_GPU_MEMORY_MB: i64 = 1024 * 1024;
    pub const MAX_GPU_COUNT: i64 = 256;
    /// One year.
    pub const MAX_TIMEOUT_SECS: i64 = 366 * 24 * 3600;
    /// One year, in milliseconds.
    pub const MAX_TIMEOUT_MS: i64 = MAX_TIMEOUT_SECS * 1000;
    pub const MAX_COMMAND_BYTES: usize = 4096;
    pub const MAX_ARGS: usize = 4096;
    pub const MAX_ENV: usize = 1024;
}

/// A job request as received, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct JobRequest {
    pub command: String,
    pub args: Vec<String>,
    pub max_cpu: i64,
    pub cpu_cores: String,
    pub max_memory_mb: i64,
    pub max_iobps: i64,
    pub gpu_count: i64,
    pub gpu_memory_mb: i64,
    /// A share of one GPU's compute in thousandths (`--gpu=0.5` is
    /// `gpu_count` 1 with `gpu_milli` 500); 0 = whole GPUs.
    pub gpu_milli: i64,
    pub env: Vec<(String, String)>,
    pub secret_env: Vec<(String, String)>,
    /// Manifest of files to place in the job's `/work` (contents travel separately).
    pub uploads: Vec<UploadEntry>,
    pub volumes: Vec<String>,
    pub runtime: String,
    /// `""` or `none`: loopback only; `host`: the host's network (if the node allows it).
    pub network: String,
    /// The job's time limit in milliseconds; wins over `timeout_seconds`
    /// when set. `None` or `Some(0)` = none asked: the node's
    /// `jobs.default_timeout` applies, which a request can only shorten.
    pub timeout_ms: Option<i64>,
    /// The same in whole seconds, as clients before `timeout_ms` send it
    /// (and as new ones send it beside `timeout_ms`, rounded up, for older
    /// nodes).
    pub timeout_seconds: Option<i64>,
    /// GPU time limit in seconds (`--gpu-time`); `None` = the node's default.
    pub gpu_time_seconds: Option<i64>,
    /// CUDA toolkit version (`--cuda=12.2`); empty = the runtime's or none.
    pub cuda_version: String,
    /// MIG profile (`--mig=1g.10gb`): the job's GPUs are MIG slices of
    /// this profile; empty = whole GPUs.
    pub mig_profile: String,
    /// `--gpu-profiling`: the job also gets `/dev/nvidia-uvm-tools`.
    pub gpu_profiling: bool,
    /// Cluster mode (`--restart`): `""`/`never` or `on-node-failure`.
    pub restart: String,
    /// `--executor`: what runs the job (`native`, `runc`, `crun`, `runsc`
    /// or an admin's name); empty = the node's default.
    pub executor: String,
    /// `--device`: CDI devices, `vendor.com/class=name` each.
    pub devices: Vec<String>,
    /// `-i`: standard input from an attached client.
    pub interactive: bool,
    /// `-t`: a terminal of `tty_rows` × `tty_cols` (both 0: 24 × 80).
    pub tty: bool,
    pub tty_rows: i64,
    pub tty_cols: i64,
}

/// Resource limits of a validated job. `None`/0 = not asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub max_cpu_percent: Option<u32>,
    pub cpu_cores: Option<Vec<u32>>,
    pub max_memory_mb: Option<u64>,
    pub max_iobps: Option<u64>,
    pub gpu_count: u32,
    pub gpu_memory_mb: Option<u64>,
    /// A fractional GPU: this many thousandths (1 to 999) of one GPU's
    /// compute, on a GPU shared with other jobs (`gpu_count` is then 1);
    /// `None` = whole GPUs.
    #[serde(default)]
    pub gpu_milli: Option<u32>,
    /// How long the job may hold its GPUs; `None` = the node's default.
    #[serde(default)]
    pub gpu_time: Option<Duration>,
    /// Its `gpu_count` units are MIG slices of this profile (`1g.10gb`);
    /// `None` = whole GPUs.
    #[serde(default)]
    pub mig_profile: Option<String>,
}

/// A job's network: its own namespace with only loopback (the default), or
/// the host's network stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Network {
    #[default]
    None,
    Host,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

/// A validated job. Secret values are not part of it: they travel beside
/// the spec (see [`JobRequest::validate`]) and are never persisted in clear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    pub command: String,
    pub args: Vec<String>,
    pub resources: Resources,
    pub env: BTreeMap<String, String>,
    /// Names of the secret variables (values elsewhere).
    pub secret_env_keys: Vec<String>,
    /// Entries and bytes uploaded into `/work` before the job started.
    #[serde(default)]
    pub upload_entries: u64,
    #[serde(default)]
    pub upload_bytes: u64,
    /// Volumes mounted at `/volumes/NAME`, in the order asked.
    #[serde(default)]
    pub volumes: Vec<VolumeMount>,
    /// The runtime the job's root comes from: `name` or `name@version` as
    /// asked; once admitted, always `name@version` (the one installed then).
    pub runtime: Option<String>,
    /// The digest of the runtime's tree the job was admitted with
    /// (`sha256:…`), so the record says exactly what it ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_digest: Option<String>,
    #[serde(default)]
    pub network: Network,
    /// The job's time limit, to the millisecond; `None` = none. As
    /// [`JobRequest::validate`] returns it, the limit the request asked
    /// for; once admitted, the limit that applies (the node's default
    /// included).
    pub timeout: Option<Duration>,
    /// The CUDA toolkit version asked for (`12.2`, `12.2.1`); `None` = the
    /// runtime's, or none.
    #[serde(default)]
    pub cuda: Option<String>,
    /// The job may profile its GPUs: it also gets `/dev/nvidia-uvm-tools`
    /// (CUPTI, Nsight). Off: the node is absent and denied.
    #[serde(default)]
    pub gpu_profiling: bool,
    /// The workflow run the job is an attempt of; `None` for a job of its
    /// own. Recorded with the job, in the same commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowJobRef>,
    /// Cluster mode: this node's run of a job the cluster's leader placed
    /// here (`None` on a single node). Recorded with the job, so that a
    /// restarted daemon starts it on exactly the GPUs the leader chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterRun>,
    /// The executor asked for (`--executor`); `None`: the node's default.
    /// Once admitted, always the executor the job runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// CDI devices (`--device vendor.com/class=name`), in the order asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Standard input and terminal (`-i`, `-t`); batch by default.
    #[serde(default, skip_serializing_if = "crate::Stdio::is_batch")]
    pub stdio: crate::Stdio,
}

/// A job's run on one node of a cluster: which attempt, under which
/// leader's fencing token, on exactly which GPUs, and its place in a gang
/// that spans nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRun {
    /// The job's id cluster-wide (this run's own id differs from the
    /// second attempt on: see `joblet_cluster::records::run_id`).
    pub job: String,
    /// This node's name in the cluster.
    pub node: String,
    /// 1 for the first; one more each time the job is placed again after
    /// its node was lost.
    pub attempt: u32,
    /// The leader's fencing token (its etcd key's create revision).
    pub fence: i64,
    /// The GPU units on this node the leader chose: (index, MIG instance).
    pub units: Vec<(u32, Option<u32>)>,
    /// MiB reserved per unit.
    pub memory_mb: u64,
    /// The units are shared with other jobs (memory reserved), not the
    /// job's alone.
    #[serde(default)]
    pub shared: bool,
    /// A share of one GPU (thousandths), when the job asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_milli: Option<u32>,
    /// Set when the job spans nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangRank>,
}

/// One node's part of a gang that spans nodes: the rendezvous PyTorch
/// expects (`MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`, `NODE_RANK`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangRank {
    /// This node's rank (0 = the master's node).
    pub node_rank: u32,
    /// Nodes in the gang.
    pub nodes: u32,
    /// Processes in the whole gang (one per GPU).
    pub world_size: u32,
    /// The first global rank of this node's processes.
    pub rank_base: u32,
    /// Processes on this node (its GPUs).
    pub local_size: u32,
    /// Where rank 0 listens.
    pub master_addr: String,
    pub master_port: u16,
}

/// Which workflow run, job and attempt a job is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowJobRef {
    /// The run's id.
    pub id: String,
    /// The job's name in the workflow file.
    pub job: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Where the run's shared volume is in the job (`$JOBLET_WORKFLOW_SHARED`);
    /// `None`: the run has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<String>,
}

fn non_negative(field: &str, v: i64, max: i64, unit: &str) -> Result<u64, FieldError> {
    if v < 0 {
        return Err(FieldError::new(
            field,
            format!("must not be negative (got {v}); expected 0 (no limit) to {max} {unit}"),
        ));
    }
    if v > max {
        return Err(FieldError::new(
            field,
            format!("{v} is too large; expected 0 (no limit) to {max} {unit}"),
        ));
    }
    Ok(v as u64)
}

/// A volume a job mounts (`--volume=NAME[:ro]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    pub name: String,
    /// `:ro`: the job cannot write to it.
    #[serde(default)]
    pub read_only: bool,
}

impl VolumeMount {
    /// `NAME`, `NAME:ro` or `NAME:rw` (the default, said out loud).
    pub fn parse(s: &str) -> Option<VolumeMount> {
        let (name, read_only) = match s.rsplit_once(':') {
            Some((name, "ro")) => (name, true),
            Some((name, "rw")) => (name, false),
            Some(_) => return None,
            None => (s, false),
        };
        is_name(name).then(|| VolumeMount {
            name: name.to_owned(),
            read_only,
        })
    }
}

impl std::fmt::Display for VolumeMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if self.read_only {
            f.write_str(":ro")?;
        }
        Ok(())
    }
}

/// `NAME` or `NAME@VERSION` of a runtime, split; `None` when either part is
/// not a name ([`is_name`], and a version may also hold `+`).
pub fn split_runtime_ref(s: &str) -> Option<(&str, Option<&str>)> {
    let (name, version) = match s.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (s, None),
    };
    let version_ok = version.is_none_or(|v| {
        !v.is_empty()
            && v.len() <= 64
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
    });
    (is_name(name) && version_ok).then_some((name, version))
}

/// Runtime and volume names: `python-3.11-ml`, `data-lake`.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

fn check_text(field: &str, s: &str) -> Result<(), FieldError> {
    if s.contains('\0') {
        return Err(FieldError::new(field, "must not contain NUL bytes"));
    }
    Ok(())
}

/// `env["KEY"]`: the field of one variable, its key cut as messages echo
/// user text ([`crate::text::clip`]).
pub fn env_field(field: &str, key: &str) -> String {
    format!("{field}[{:?}]", crate::text::clip(key))
}

fn check_env(
    field: &str,
    pairs: &[(String, String)],
    out: &mut BTreeMap<String, String>,
) -> Result<(), FieldError> {
    for (k, v) in pairs {
        parse::check_env_key(k).map_err(|e| FieldError::from_parse(env_field(field, k), e))?;
        check_text(&env_field(field, k), v)?;
        if out.insert(k.clone(), v.clone()).is_some() {
            return Err(FieldError::new(
                env_field(field, k),
                "is given twice (in env and secret_env, or repeated); give each variable once",
            ));
        }
    }
    Ok(())
}

impl JobRequest {
    /// Checks every field; returns the spec and the secret values (kept apart
    /// so the spec can be stored as is).
    pub fn validate(&self) -> Result<(JobSpec, BTreeMap<String, String>), FieldError> {
        if self.command.trim().is_empty() {
            return Err(FieldError::new(
                "command",
                "is empty; give the program to run, e.g. `rnx job run -- python3 train.py`",
            ));
        }
        check_text("command", &self.command)?;
        if self.command.len() > limits::MAX_COMMAND_BYTES {
            return Err(FieldError::new(
                "command",
                format!("is longer than {} bytes", limits::MAX_COMMAND_BYTES),
            ));
        }
        if self.args.len() > limits::MAX_ARGS {
            return Err(FieldError::new(
                "args",
                format!(
                    "has {} arguments; at most {} are accepted",
                    self.args.len(),
                    limits::MAX_ARGS
                ),
            ));
        }
        for (i, a) in self.args.iter().enumerate() {
            check_text(&format!("args[{i}]"), a)?;
        }

        let max_cpu = non_negative(
            "resources.max_cpu",
            self.max_cpu,
            limits::MAX_CPU_PERCENT,
            "percent of one CPU (100 = one core)",
        )?;
        let max_memory = non_negative(
            "resources.max_memory_mb",
            self.max_memory_mb,
            limits::MAX_MEMORY_MB,
            "MiB",
        )?;
        let max_iobps = non_negative(
            "resources.max_iobps",
            self.max_iobps,
            i64::MAX,
            "bytes per second",
        )?;
        let gpu_count = non_negative(
            "resources.gpu_count",
            self.gpu_count,
            limits::MAX_GPU_COUNT,
            "GPUs",
        )?;
        let gpu_memory = non_negative(
            "resources.gpu_memory_mb",
            self.gpu_memory_mb,
            limits::MAX_GPU_MEMORY_MB,
            "MiB per GPU",
        )?;
        needs_gpus(
            gpu_memory > 0,
            gpu_count,
            "resources.gpu_memory_mb",
            "--gpu-memory",
        )?;
        let gpu_milli = gpu_share(self.gpu_milli, gpu_count)?;
        let gpu_time = match self.gpu_time_seconds {
            None => None,
            Some(s) if s <= 0 => {
                return Err(FieldError::new(
                    "resources.gpu_time_seconds",
                    format!(
                        "must be positive (got {s}); expected 1 to {} seconds, like --gpu-time=2h, or leave it unset for the node's default",
                        limits::MAX_TIMEOUT_SECS
                    ),
                ))
            }
            Some(s) => Some(Duration::from_secs(non_negative(
                "resources.gpu_time_seconds",
                s,
                limits::MAX_TIMEOUT_SECS,
                "seconds",
            )?)),
        };
        needs_gpus(
            gpu_time.is_some(),
            gpu_count,
            "resources.gpu_time_seconds",
            "--gpu-time",
        )?;
        let cuda = match self.cuda_version.trim() {
            "" => None,
            v => Some(
                parse::parse_cuda_version(v)
                    .map_err(|e| FieldError::from_parse("cuda_version", e))?,
            ),
        };
        needs_gpus(cuda.is_some(), gpu_count, "cuda_version", "--cuda")?;
        let mig_profile = match self.mig_profile.trim() {
            "" => None,
            p => Some(
                parse::parse_mig_profile(p)
                    .map_err(|e| FieldError::from_parse("mig_profile", e))?,
            ),
        };
        needs_gpus(mig_profile.is_some(), gpu_count, "mig_profile", "--mig")?;
        if gpu_milli.is_some() && mig_profile.is_some() {
            return Err(FieldError::new(
                "resources.gpu_milli",
                "a fractional GPU (--gpu=0.5) cannot be a MIG slice (--mig): ask for --gpu=1 --mig=PROFILE, or for a share of a whole GPU without --mig",
            ));
        }
        needs_gpus(
            self.gpu_profiling,
            gpu_count,
            "gpu_profiling",
            "--gpu-profiling",
        )?;
        let cpu_cores = if self.cpu_cores.trim().is_empty() {
            None
        } else {
            Some(
                parse::parse_cpu_list(&self.cpu_cores)
                    .map_err(|e| FieldError::from_parse("resources.cpu_cores", e))?,
            )
        };

        if self.env.len() + self.secret_env.len() > limits::MAX_ENV {
            return Err(FieldError::new(
                "env",
                format!(
                    "at most {} variables (env and secret_env together)",
                    limits::MAX_ENV
                ),
            ));
        }
        let mut env = BTreeMap::new();
        check_env("env", &self.env, &mut env)?;
        let mut all = env.clone();
        check_env("secret_env", &self.secret_env, &mut all)?;
        let secrets: BTreeMap<String, String> = self.secret_env.iter().cloned().collect();

        // The node's size limit is checked by the daemon; the shape here.
        let upload_bytes = crate::upload::check_manifest(&self.uploads, u64::MAX)?;

        let mut volumes: Vec<VolumeMount> = Vec::with_capacity(self.volumes.len());
        for (i, v) in self.volumes.iter().enumerate() {
            let Some(mount) = VolumeMount::parse(v) else {
                return Err(FieldError::new(format!("volumes[{i}]"), format!("invalid volume {:?}: expected NAME or NAME:ro, the name of letters, digits, '.', '-' and '_', like data-lake or data-lake:ro", clip(v))));
            };
            if volumes.iter().any(|m| m.name == mount.name) {
                return Err(FieldError::new(
                    format!("volumes[{i}]"),
                    format!(
                        "volume {} is given twice: mount each volume once",
                        mount.name
                    ),
                ));
            }
            volumes.push(mount);
        }

        let runtime = match self.runtime.trim() {
            "" => None,
            r if split_runtime_ref(r).is_some() => Some(r.to_owned()),
            r => return Err(FieldError::new("runtime", format!("invalid runtime {:?}: expected NAME or NAME@VERSION, of letters, digits, '.', '-' and '_', like python-3.11-ml or python-3.11-ml@1.0", clip(r)))),
        };

        let executor = match self.executor.trim() {
            "" => None,
            e => {
                crate::executor::check_executor_name(e)?;
                Some(e.to_owned())
            }
        };
        let mut devices: Vec<String> = Vec::with_capacity(self.devices.len());
        for (i, d) in self.devices.iter().enumerate() {
            let d = d.trim();
            if crate::executor::split_cdi_name(d).is_none() {
                return Err(FieldError::new(
                    format!("devices[{i}]"),
                    format!("{:?} is not a CDI device name: expected vendor.com/class=name, like nvidia.com/gpu=0 or vendor.example/fpga=all", clip(d)),
                ));
            }
            if !devices.iter().any(|x| x == d) {
                devices.push(d.to_owned());
            }
        }

        let network = match self.network.trim() {
            "" | "none" => Network::None,
            "host" => Network::Host,
            other => {
                return Err(FieldError::new(
                    "network",
                    format!("invalid value {:?}: expected none (own namespace, loopback only; the default) or host", clip(other)),
                ))
            }
        };

        let timeout_secs = self
            .timeout_seconds
            .map(|s| timeout_field("timeout_seconds", s, limits::MAX_TIMEOUT_SECS, "seconds"))
            .transpose()?;
        let timeout_ms = self
            .timeout_ms
            .map(|ms| timeout_field("timeout_ms", ms, limits::MAX_TIMEOUT_MS, "milliseconds"))
            .transpose()?;
        let timeout = match (timeout_ms, timeout_secs) {
            (Some(ms), _) => Duration::from_millis(ms),
            (None, Some(s)) => Duration::from_secs(s),
            (None, None) => Duration::ZERO,
        };
        let timeout = (!timeout.is_zero()).then_some(timeout);

        let stdio =
            crate::Stdio::from_request(self.interactive, self.tty, self.tty_rows, self.tty_cols)?;

        let spec = JobSpec {
            command: self.command.clone(),
            args: self.args.clone(),
            resources: Resources {
                max_cpu_percent: (max_cpu > 0).then_some(max_cpu as u32),
                cpu_cores,
                max_memory_mb: (max_memory > 0).then_some(max_memory),
                max_iobps: (max_iobps > 0).then_some(max_iobps),
                gpu_count: gpu_count as u32,
                gpu_memory_mb: (gpu_memory > 0).then_some(gpu_memory),
                gpu_milli,
                gpu_time,
                mig_profile,
            },
            env,
            secret_env_keys: secrets.keys().cloned().collect(),
            upload_entries: self.uploads.len() as u64,
            upload_bytes,
            volumes,
            runtime,
            runtime_digest: None,
            network,
            timeout,
            cuda,
            gpu_profiling: self.gpu_profiling,
            workflow: None,
            cluster: None,
            executor,
            devices,
            stdio,
        };
        Ok((spec, secrets))
    }
}

/// A timeout field: 0 (none asked: the node's default) to `max`.
fn timeout_field(field: &str, v: i64, max: i64, unit: &str) -> Result<u64, FieldError> {
    let form = format!("expected 0 (the node's jobs.default_timeout) to {max} {unit}");
    if v < 0 {
        return Err(FieldError::new(
            field,
            format!("must not be negative (got {v}); {form}"),
        ));
    }
    if v > max {
        return Err(FieldError::new(field, format!("{v} is too large; {form}")));
    }
    Ok(v as u64)
}

/// `resources.gpu_milli`: 0 or 1000 = whole GPUs; 1 to 999 = that share
/// of one GPU (`gpu_count` must be 1).
fn gpu_share(milli: i64, gpu_count: u64) -> Result<Option<u32>, FieldError> {
    let share = gpu_milli(milli)?;
    if share.is_some() && gpu_count != 1 {
        return Err(FieldError::new(
            "resources.gpu_milli",
            format!("a share of a GPU ({milli} thousandths) needs resources.gpu_count 1 (got {gpu_count}): --gpu=0.5 asks for half of one GPU, --gpu=N for N whole GPUs"),
        ));
    }
    Ok(share)
}

/// `resources.gpu_milli` as a value: 0 or 1000 = whole GPUs (`None`), 1 to
/// 999 = that share of one GPU; anything else is refused naming the field.
pub fn gpu_milli(milli: i64) -> Result<Option<u32>, FieldError> {
    match milli {
        0 | 1000 => Ok(None),
        1..=999 => Ok(u32::try_from(milli).ok()),
        _ => Err(FieldError::new(
            "resources.gpu_milli",
            format!("must be 0 (whole GPUs) or 1 to 999 thousandths of one GPU (got {milli}); --gpu=0.25 sends 250"),
        )),
    }
}

/// A GPU option given (`given`) on a job without GPUs: refused, naming
/// `field` and the `flag` that needs `--gpu=N` beside it. With `--mig`, N
/// counts MIG slices.
fn needs_gpus(given: bool, gpu_count: u64, field: &str, flag: &str) -> Result<(), FieldError> {
    if !given || gpu_count > 0 {
        return Ok(());
    }
    let slices = if flag == "--mig" {
        ", the number of MIG slices"
    } else {
        ""
    };
    Err(FieldError::new(
        field,
        format!("needs resources.gpu_count of at least 1{slices} (--gpu=N together with {flag})"),
    ))
}

#[cfg(test)]
mod tests;
