//! Whether this node takes a job, and the checks of the other requests'
//! plain values: pure functions of the request and the node's settings,
//! so they are tested without a daemon.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::executor::ExecutorCatalog;
use joblet_core::parse::format_cpu_list;
use joblet_core::spec::env_field;
use joblet_core::{FieldError, JobRequest, JobSpec, Network, NodeCapabilities, UnixMillis};

use joblet_gpu::exec::SharingMode;

use super::ApiError;
use crate::config::Config;
use crate::node_facts::NodeFacts;

/// Bytes of `ARG_MAX` kept for what the node adds to a job's exec: its own
/// variables (`PATH`, `HOME`, `LANG`, `JOBLET_JOB_ID`, a GPU job's
/// `CUDA_*`/`NVIDIA_*`) and the program's path.
pub const NODE_EXEC_RESERVE: u64 = 16 * 1024;

/// What one argv or envp string costs exec besides its bytes and NUL: its
/// pointer.
const POINTER_BYTES: u64 = std::mem::size_of::<usize>() as u64;

/// What this node admits, from its configuration and what it enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `sandbox.allow_host_network`.
    pub allow_host_network: bool,
    /// `jobs.max_upload_mb` in bytes.
    pub max_upload_bytes: u64,
    /// `filesystem.work_size_mb` in bytes when jobs get a sized `/work`
    /// (sandbox on, not 0): uploads must fit in it.
    pub work_size_bytes: Option<u64>,
    /// What the node can enforce; a job asking for more is refused.
    pub caps: NodeCapabilities,
    /// `jobs.default_timeout`: the node's time limit, which a job's own
    /// timeout can only shorten; `None` = the node sets none.
    pub default_timeout: Option<Duration>,
    /// The node's CPUs and its kernel's exec limits, read at start-up.
    pub node: NodeFacts,
    /// The state dir and `jobs.min_free_disk_mb` in bytes: uploads are
    /// counted against the state disk's free space above that floor
    /// (`None`: not checked).
    pub state_disk: Option<(std::path::PathBuf, u64)>,
    /// What can run jobs on this node, and its default: each job is
    /// pinned to the executor it runs on once its caller may use it and it
    /// has every capability the job needs.
    pub executors: Arc<ExecutorCatalog>,
    /// Where the node's CDI specs are (`--device` names are looked up
    /// there): `/etc/cdi` and `/var/run/cdi`.
    pub cdi_dirs: Vec<std::path::PathBuf>,
    /// `gpu.sharing`: a share of a GPU (`--gpu=0.5`) needs `shared` or
    /// `mps`.
    pub gpu_sharing: SharingMode,
}

impl Admission {
    /// The node's rules from its configuration; `executors` is the node's
    /// executor catalog (built from the `executors:` section).
    pub fn new(
        cfg: &Config,
        caps: NodeCapabilities,
        node: NodeFacts,
        executors: Arc<ExecutorCatalog>,
    ) -> Admission {
        Admission {
            allow_host_network: cfg.sandbox.allow_host_network,
            max_upload_bytes: cfg.jobs.max_upload_mb.saturating_mul(1024 * 1024),
            work_size_bytes: (cfg.sandbox.enabled && cfg.filesystem.work_size_mb > 0)
                .then(|| cfg.filesystem.work_size_mb.saturating_mul(1024 * 1024)),
            caps,
            default_timeout: (!cfg.jobs.default_timeout.is_zero())
                .then_some(cfg.jobs.default_timeout),
            node,
            state_disk: Some((
                cfg.server.state_dir.clone(),
                cfg.jobs.min_free_disk_mb.saturating_mul(1024 * 1024),
            )),
            executors,
            cdi_dirs: joblet_oci::cdi::DEFAULT_SPEC_DIRS
                .iter()
                .map(std::path::PathBuf::from)
                .collect(),
            gpu_sharing: cfg.gpu.sharing,
        }
    }

    /// A job request of `user` checked the same way for every way of
    /// submitting it: its fields, its upload manifest against the node's
    /// limits, whether the node can enforce what it asks and allows its
    /// network, and its executor ([`ExecutorCatalog::resolve`]: one the
    /// node has, `user` may use and that can run it), which the spec then
    /// names (the node's default filled in). Its time limit is
    /// [`effective_timeout`].
    /// Returns the spec and the secret values.
    pub fn accept(
        &self,
        user: &str,
        raw: &JobRequest,
    ) -> Result<(JobSpec, BTreeMap<String, String>), ApiError> {
        let (mut spec, secrets) = raw.validate()?;
        check_exec_size(&spec, &secrets, &self.node)?;
        let total = joblet_core::upload::check_manifest(&raw.uploads, self.max_upload_bytes)?;
        if let Some(work) = self.work_size_bytes.filter(|&w| total > w) {
            return Err(FieldError::new(
                "uploads",
                format!(
                    "{total} bytes in total do not fit in the job's /work ({work} bytes, filesystem.work_size_mb); upload less, or ask an admin for a larger filesystem.work_size_mb"
                ),
            )
            .into());
        }
        if let Some((dir, floor)) = &self.state_disk {
            check_upload_room(total, dir, *floor)?;
        }
        spec.check_supported(&self.caps)?;
        check_gpu_share(&spec, self.gpu_sharing)?;
        check_cpus(&spec, &self.node)?;
        if spec.network == Network::Host && !self.allow_host_network {
            return Err(ApiError::NotAllowed {
                what: "network host: jobs on the host network",
                setting: "sandbox.allow_host_network",
            });
        }
        let executor = self.executors.resolve(user, &spec)?;
        if spec.stdio.is_interactive()
            && executor.kind != joblet_core::executor::ExecutorKind::Native
        {
            return Err(FieldError::new(
                "executor",
                format!(
                    "interactive jobs ({}) run on the native executor; {:?} cannot give a job a terminal or input from joblet yet: drop --executor or use --executor=native",
                    spec.stdio.flags(),
                    executor.name
                ),
            )
            .into());
        }
        spec.executor = Some(executor.name.clone());
        // The executor takes CDI devices (resolved above): each must be in
        // the node's CDI specs now.
        crate::executor::check_devices(&self.cdi_dirs, &spec.devices)?;
        spec.timeout = effective_timeout(spec.timeout, self.default_timeout);
        Ok((spec, secrets))
    }
}

/// A share of a GPU needs GPUs that several jobs share.
pub fn check_gpu_share(spec: &JobSpec, sharing: SharingMode) -> Result<(), FieldError> {
    if spec.resources.gpu_milli.is_some() && sharing == SharingMode::Exclusive {
        return Err(FieldError::new(
            "resources.gpu_milli",
            "a share of a GPU (--gpu=0.5) needs GPUs shared between jobs, and this node gives each job whole GPUs (gpu.sharing: exclusive); ask for --gpu=1, or run it on a node whose admin set gpu.sharing to shared (the share is reserved on a time-sliced GPU) or mps (the share also caps the job's SMs)",
        ));
    }
    Ok(())
}

/// A job's command line and environment as `execve` takes them: each
/// string within `MAX_ARG_STRLEN`, all of them within `ARG_MAX` less
/// [`NODE_EXEC_RESERVE`]. Refused here, naming the field, rather than
/// failing at exec with `E2BIG`.
pub fn check_exec_size(
    spec: &JobSpec,
    secrets: &BTreeMap<String, String>,
    node: &NodeFacts,
) -> Result<(), FieldError> {
    let hint = "pass large data as a file (--upload) instead";
    if let Some(max) = node.max_arg_strlen {
        for (i, a) in spec.args.iter().enumerate() {
            if a.len() as u64 + 1 > max {
                return Err(FieldError::new(
                    format!("args[{i}]"),
                    format!(
                        "is {} bytes, the kernel takes at most {max} per string (with its NUL byte); {hint}",
                        a.len()
                    ),
                ));
            }
        }
        for (field, vars) in [("env", &spec.env), ("secret_env", secrets)] {
            for (k, v) in vars {
                if (k.len() + v.len()) as u64 + 2 > max {
                    return Err(FieldError::new(
                        env_field(field, k),
                        format!(
                            "value is {} bytes, the kernel takes at most {max} per string (KEY=VALUE with its NUL byte); {hint}",
                            v.len()
                        ),
                    ));
                }
            }
        }
    }
    if let Some(arg_max) = node.arg_max {
        let cost = |len: usize| len as u64 + 1 + POINTER_BYTES;
        let argv: u64 =
            cost(spec.command.len()) + spec.args.iter().map(|a| cost(a.len())).sum::<u64>();
        let envp: u64 = spec
            .env
            .iter()
            .chain(secrets)
            .map(|(k, v)| cost(k.len() + 1 + v.len()))
            .sum();
        let limit = arg_max.saturating_sub(NODE_EXEC_RESERVE);
        if argv + envp > limit {
            let field = if envp >= argv { "env" } else { "args" };
            return Err(FieldError::new(
                field,
                format!(
                    "the command line ({argv} bytes) and the environment ({envp} bytes), with a pointer each, come to {} bytes; the kernel takes at most {limit} (ARG_MAX {arg_max}, less {NODE_EXEC_RESERVE} kept for what the node adds); {hint}",
                    argv + envp
                ),
            ));
        }
    }
    Ok(())
}

/// `--cpu-cores` within the CPUs a job may be pinned to on this node
/// (online, and in the daemon's affinity), rather than failing at start
/// when the kernel refuses the cpuset.
pub fn check_cpus(spec: &JobSpec, node: &NodeFacts) -> Result<(), FieldError> {
    let (Some(asked), Some(usable)) = (&spec.resources.cpu_cores, node.job_cpus()) else {
        return Ok(());
    };
    let missing: Vec<u32> = asked
        .iter()
        .copied()
        .filter(|c| !usable.contains(c))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = format_cpu_list(&missing);
    let what = if missing.len() == 1 {
        format!("CPU {list} is")
    } else {
        format!("CPUs {list} are")
    };
    let online = node.online_cpus.as_deref();
    let offline = online.is_some_and(|on| missing.iter().all(|c| !on.contains(c)));
    let where_ = match (online, &node.allowed_cpus) {
        (Some(on), _) if offline => format!("not on this node (online: {})", format_cpu_list(on)),
        (Some(on), Some(allowed)) => format!(
            "not available to jobs on this node (online: {}; the daemon's CPU affinity: {})",
            format_cpu_list(on),
            format_cpu_list(allowed)
        ),
        (_, Some(allowed)) => format!(
            "not available to jobs on this node (the daemon's CPU affinity: {})",
            format_cpu_list(allowed)
        ),
        (Some(on), None) => format!("not on this node (online: {})", format_cpu_list(on)),
        (None, None) => "not on this node".to_owned(),
    };
    Err(FieldError::new(
        "resources.cpu_cores",
        format!(
            "{what} {where_}; expected a CPU list within {}",
            format_cpu_list(&usable)
        ),
    ))
}

/// The time limit a job gets: the smaller of its own (`asked`; `None` when
/// it asked for none, or for 0) and the node's `jobs.default_timeout`, so
/// a request can never raise or remove an admin's limit.
pub fn effective_timeout(asked: Option<Duration>, node: Option<Duration>) -> Option<Duration> {
    match (asked, node) {
        (Some(a), Some(n)) => Some(a.min(n)),
        (a, n) => a.or(n),
    }
}

/// A request that carries no file data (RunJob) may not announce uploads.
pub fn no_uploads(raw: &JobRequest) -> Result<(), FieldError> {
    if raw.uploads.is_empty() {
        return Ok(());
    }
    Err(FieldError::new(
        "uploads",
        "RunJob carries no file data: send jobs with uploads through SubmitJob (rnx --upload does)",
    ))
}

/// `grace_seconds` of a stop: `None` = the node's stop grace period.
pub fn grace(secs: Option<i64>) -> Result<Option<Duration>, FieldError> {
    match secs {
        None => Ok(None),
        Some(s) if (0..=24 * 3600).contains(&s) => Ok(Some(Duration::from_secs(s as u64))),
        Some(s) => Err(FieldError::new(
            "grace_seconds",
            format!("invalid value {s}: expected 0 to 86400 seconds"),
        )),
    }
}

/// A list's `limit`: 0 = all.
pub fn list_limit(limit: i64) -> Result<Option<usize>, FieldError> {
    if limit < 0 {
        return Err(FieldError::new(
            "limit",
            format!("invalid value {limit}: expected 0 (all) or a positive number"),
        ));
    }
    Ok((limit > 0).then_some(usize::try_from(limit).unwrap_or(usize::MAX)))
}

/// The audit log's `since_ms`: 0 = all records.
pub fn audit_since(since_ms: i64) -> Result<Option<UnixMillis>, FieldError> {
    if since_ms < 0 {
        return Err(FieldError::new(
            "since_ms",
            format!(
                "invalid value {since_ms}: expected 0 (all records) or a time in Unix milliseconds"
            ),
        ));
    }
    Ok((since_ms > 0).then_some(since_ms))
}

#[cfg(test)]
mod tests;

/// Refuses uploads that would take the state disk below the free space it
/// keeps (`jobs.min_free_disk_mb`), before a byte is received.
fn check_upload_room(total: u64, dir: &std::path::Path, floor: u64) -> Result<(), FieldError> {
    if total == 0 {
        return Ok(());
    }
    let Ok(space) = crate::disk::space(dir) else {
        return Ok(());
    };
    if total.saturating_add(floor) > space.free {
        return Err(FieldError::new(
            "uploads",
            format!(
                "{total} bytes do not fit on the node's state disk ({} bytes free, {floor} of them kept free by jobs.min_free_disk_mb); upload less, or delete finished jobs with `rnx job delete`",
                space.free
            ),
        ));
    }
    Ok(())
}
