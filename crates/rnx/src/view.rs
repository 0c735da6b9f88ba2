//! What rnx shows about a job: a stable, serde-serialisable view built from
//! the wire type. `--json` prints it as is; the human printer formats it.
//! Field names here are part of rnx's JSON output contract.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use joblet_core::UnixMillis;
use joblet_proto::{job_gpus_from_pb, pb, state_from_pb};
use serde::Serialize;

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobView {
    pub id: String,
    pub command: String,
    pub args: Vec<String>,
    /// `PENDING`, `QUEUED`, `RUNNING`, `COMPLETED`, `FAILED`, `STOPPED`,
    /// `PREEMPTED`, or `UNKNOWN` for a state this build does not know.
    pub state: String,
    pub owner: String,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub created: Option<String>,
    pub created_unix_ms: Option<UnixMillis>,
    pub started: Option<String>,
    pub started_unix_ms: Option<UnixMillis>,
    pub ended: Option<String>,
    pub ended_unix_ms: Option<UnixMillis>,
    /// The time limit that applies, in seconds rounded up; `null` = no
    /// time limit.
    pub timeout_seconds: Option<i64>,
    /// The time limit that applies, in milliseconds; `null` = no time
    /// limit.
    pub timeout_ms: Option<i64>,
    /// `name@version` of the runtime the job runs in.
    pub runtime: Option<String>,
    /// `sha256:…` of the runtime's tree it was admitted with.
    pub runtime_digest: Option<String>,
    /// Volumes it mounts at `/volumes/NAME`: `NAME` or `NAME:ro`.
    pub volumes: Vec<String>,
    /// `none` (loopback only) or `host`.
    pub network: String,
    /// The executor it runs on (`native`, `runc`, ...; see `rnx whoami`);
    /// `null` from a node that predates executors.
    pub executor: Option<String>,
    /// CDI devices it asked for (`--device`), `vendor.com/class=name`.
    pub devices: Vec<String>,
    pub resources: ResourcesView,
    /// The GPUs the job holds (or held, once it ended). `null` for a CPU
    /// job and for a GPU job not placed yet: `resources.gpu_count` says
    /// how many it waits for.
    pub gpus: Option<GpusView>,
    /// The CUDA toolkit version asked for (`--cuda`).
    pub cuda_version: Option<String>,
    /// The MIG profile asked for (`--mig`, e.g. `1g.10gb`); `null` = whole
    /// GPUs.
    pub mig_profile: Option<String>,
    /// `--gpu-profiling`: the job may profile its GPUs.
    pub gpu_profiling: bool,
    pub env: BTreeMap<String, String>,
    /// Keys of the secret environment; every value is `***`.
    pub secret_env: BTreeMap<String, String>,
    pub transitions: Vec<TransitionView>,
    pub log_bytes: u64,
    /// The workflow run the job is part of (`rnx workflow status ID`);
    /// `null` for a job run on its own.
    pub workflow_id: Option<String>,
    /// Its job name in that workflow's file.
    pub workflow_job: Option<String>,
    /// Which attempt of that workflow job it is (1 for the first).
    pub workflow_attempt: Option<u32>,
    /// Cluster mode: the node(s) it runs or ran on (`[]` while it waits
    /// to be placed); `null` on a node on its own.
    pub nodes: Option<Vec<String>>,
    /// Cluster mode: 1 for its first placement, one more each time it was
    /// placed again after its node was lost; `null` on a node on its own.
    pub attempt: Option<u32>,
    /// Cluster mode: `never` or `on-node-failure`, what happens to it when
    /// its node is lost; `null` on a node on its own.
    pub restart: Option<String>,
}

/// Resource limits; `null` = not set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourcesView {
    pub max_cpu_percent: Option<i64>,
    pub cpu_cores: Option<String>,
    pub max_memory_mb: Option<i64>,
    pub max_iobps: Option<i64>,
    pub gpu_count: i64,
    pub gpu_memory_mb: Option<i64>,
    /// A fractional GPU (`--gpu=0.5`): thousandths of one GPU; `null` =
    /// whole GPUs.
    pub gpu_milli: Option<i64>,
    /// `--gpu-time` in seconds; `null` = the node's default.
    pub gpu_time_seconds: Option<i64>,
}

/// The GPUs allocated to a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpusView {
    /// Host GPU indices, as `rnx gpu status` shows them.
    pub indices: Vec<u32>,
    pub uuids: Vec<String>,
    /// Memory reserved per GPU in MB; `null` = the whole GPU.
    pub memory_mb_per_gpu: Option<u64>,
    /// `exclusive`, `shared`, `mps` or `mig`.
    pub sharing: String,
    /// Most GPU memory the job was seen using, in MB; `null` = not known.
    pub peak_memory_mb: Option<u64>,
}

impl From<&pb::JobGpus> for GpusView {
    fn from(g: &pb::JobGpus) -> Self {
        let g = job_gpus_from_pb(g.clone());
        GpusView {
            indices: g.indices,
            uuids: g.uuids,
            memory_mb_per_gpu: g.memory_mb_per_gpu,
            sharing: g.sharing,
            peak_memory_mb: g.peak_memory_mb,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransitionView {
    /// `null` for the job's first state.
    pub from: Option<String>,
    pub to: String,
    pub at: Option<String>,
    pub at_unix_ms: UnixMillis,
    pub reason: Option<String>,
}

/// What `rnx whoami` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WhoAmIView {
    pub name: String,
    pub role: String,
    pub node: String,
    pub address: String,
    pub node_version: String,
    pub supported: Vec<String>,
    /// The node's state disk: path, free and total bytes.
    pub state_disk: Option<StateDiskView>,
    /// What can run jobs on the node (`--executor`); empty from a node
    /// that predates executors.
    pub executors: Vec<ExecutorView>,
    /// The executor of a job that names none; `null` from a node that
    /// predates executors.
    pub default_executor: Option<String>,
}

/// One executor of the node, as `rnx whoami` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutorView {
    /// What `--executor` names.
    pub name: String,
    /// `native`, `runc`, `crun` or `runsc`.
    pub kind: String,
    /// The runtime's binary; `null` for native.
    pub binary: Option<String>,
    /// The runtime's version; `null` when not known.
    pub version: Option<String>,
    /// `gpu`, `cdi`, `oom-events`, `checkpoint-restore`, `join-netns`,
    /// `device-cgroup`: what it can do for a job.
    pub capabilities: Vec<String>,
    /// Why it cannot run GPU jobs; `null` when it can.
    pub gpu_unavailable: Option<String>,
    /// Whether you may run jobs on it.
    pub allowed: bool,
    /// It runs the jobs that name no executor.
    pub default: bool,
}

impl ExecutorView {
    /// One executor of a WhoAmI answer whose default is `default`.
    pub fn from_pb(e: &pb::ExecutorInfo, default: &str) -> ExecutorView {
        ExecutorView {
            name: e.name.clone(),
            kind: e.kind.clone(),
            binary: non_empty(&e.binary),
            version: non_empty(&e.version),
            capabilities: e.capabilities.clone(),
            gpu_unavailable: non_empty(&e.gpu_unavailable),
            allowed: e.allowed,
            default: e.name == default,
        }
    }
}

/// Where the node keeps its store and jobs' files, and how full it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateDiskView {
    pub path: String,
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// The state's name, `UNKNOWN` for one this build does not know.
pub fn state_name(v: i32) -> String {
    state_from_pb(v)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|| "UNKNOWN".to_owned())
}

fn positive(v: i64) -> Option<i64> {
    (v > 0).then_some(v)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// RFC 3339 in UTC with whole seconds (`2025-01-02T03:04:05Z`).
pub fn rfc3339(ms: UnixMillis) -> String {
    humantime::format_rfc3339_seconds(system_time(ms)).to_string()
}

/// RFC 3339 in UTC with milliseconds, for JSON.
pub fn rfc3339_millis(ms: UnixMillis) -> String {
    humantime::format_rfc3339_millis(system_time(ms)).to_string()
}

fn system_time(ms: UnixMillis) -> SystemTime {
    let d = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

impl From<&pb::Job> for JobView {
    fn from(j: &pb::Job) -> Self {
        let r = j.resources.clone().unwrap_or_default();
        let stamp = |ms: i64| positive(ms).map(rfc3339_millis);
        JobView {
            id: j.id.clone(),
            command: j.command.clone(),
            args: j.args.clone(),
            state: state_name(j.state),
            owner: j.owner.clone(),
            exit_code: j.exit_code,
            reason: non_empty(&j.reason),
            created: stamp(j.created_unix_ms),
            created_unix_ms: positive(j.created_unix_ms),
            started: stamp(j.started_unix_ms),
            started_unix_ms: positive(j.started_unix_ms),
            ended: stamp(j.ended_unix_ms),
            ended_unix_ms: positive(j.ended_unix_ms),
            timeout_seconds: positive(j.timeout_ms)
                .map(|ms| ms / 1000 + i64::from(ms % 1000 != 0))
                .or(positive(j.timeout_seconds)),
            // A node that predates timeout_ms sends whole seconds.
            timeout_ms: positive(j.timeout_ms)
                .or_else(|| positive(j.timeout_seconds).map(|s| s.saturating_mul(1000))),
            runtime: non_empty(&j.runtime),
            runtime_digest: non_empty(&j.runtime_digest),
            volumes: j.volumes.clone(),
            network: if j.network.is_empty() {
                "none".to_owned()
            } else {
                j.network.clone()
            },
            executor: non_empty(&j.executor),
            devices: j.devices.clone(),
            resources: ResourcesView {
                max_cpu_percent: positive(r.max_cpu),
                cpu_cores: non_empty(&r.cpu_cores),
                max_memory_mb: positive(r.max_memory_mb),
                max_iobps: positive(r.max_iobps),
                gpu_count: r.gpu_count.max(0),
                gpu_memory_mb: positive(r.gpu_memory_mb),
                gpu_milli: positive(r.gpu_milli),
                gpu_time_seconds: r.gpu_time_seconds.and_then(positive),
            },
            gpus: j.gpus.as_ref().map(GpusView::from),
            cuda_version: non_empty(&j.cuda_version),
            mig_profile: non_empty(&j.mig_profile),
            gpu_profiling: j.gpu_profiling,
            env: j.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            secret_env: j
                .secret_env
                .keys()
                .map(|k| (k.clone(), "***".to_owned()))
                .collect(),
            transitions: j
                .transitions
                .iter()
                .map(|t| TransitionView {
                    from: state_from_pb(t.from).map(|s| s.as_str().to_owned()),
                    to: state_name(t.to),
                    at: stamp(t.at_unix_ms),
                    at_unix_ms: t.at_unix_ms,
                    reason: non_empty(&t.reason),
                })
                .collect(),
            log_bytes: j.log_bytes,
            workflow_id: non_empty(&j.workflow_id),
            workflow_job: non_empty(&j.workflow_id).and(non_empty(&j.workflow_job)),
            workflow_attempt: (!j.workflow_id.is_empty() && j.workflow_attempt > 0)
                .then_some(j.workflow_attempt),
            // The node sends attempt 0 unless it is in a cluster.
            nodes: (j.attempt > 0).then(|| j.nodes.clone()),
            attempt: (j.attempt > 0).then_some(j.attempt),
            restart: (j.attempt > 0).then(|| non_empty(&j.restart)).flatten(),
        }
    }
}

impl JobView {
    /// The NODE cell of `job list`: its nodes joined by `,`, `-` when it
    /// has none (not placed yet, or not in a cluster).
    pub fn nodes_cell(&self) -> String {
        match self.nodes.as_deref() {
            Some(nodes) if !nodes.is_empty() => nodes.join(","),
            _ => "-".to_owned(),
        }
    }

    /// `1a2b3c4d/model-training#2`: the workflow (short id), the job's name
    /// in it and the attempt; `None` for a job run on its own.
    pub fn workflow_ref(&self) -> Option<String> {
        let id = self.workflow_id.as_deref()?;
        let mut s = id.get(..8).unwrap_or(id).to_owned();
        if let Some(job) = &self.workflow_job {
            s.push('/');
            s.push_str(job);
        }
        if let Some(a) = self.workflow_attempt {
            s.push_str(&format!("#{a}"));
        }
        Some(s)
    }
}

/// The job's command line, quoted so it could be pasted into a shell.
pub fn command_line(command: &str, args: &[String]) -> String {
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | '=' | ':' | ',' | '+' | '@' | '%')
        });
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_never_reach_the_view() {
        let job = pb::Job {
            id: "x".into(),
            secret_env: [("TOKEN".to_owned(), "leaked?".to_owned())].into(),
            ..Default::default()
        };
        let v = JobView::from(&job);
        assert_eq!(v.secret_env["TOKEN"], "***");
        assert!(!serde_json::to_string(&v).unwrap().contains("leaked"));
    }

    #[test]
    fn times_and_unset_values() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_millis(1_500), "1970-01-01T00:00:01.500Z");
        let v = JobView::from(&pb::Job {
            state: 99,
            created_unix_ms: 1_000,
            ..Default::default()
        });
        assert_eq!(v.state, "UNKNOWN");
        assert_eq!(v.started, None);
        assert_eq!(v.timeout_seconds, None);
        assert_eq!(v.timeout_ms, None);
        assert_eq!(v.created.as_deref(), Some("1970-01-01T00:00:01.000Z"));
    }

    #[test]
    fn timeouts_keep_milliseconds_and_read_older_nodes_seconds() {
        let v = JobView::from(&pb::Job {
            timeout_ms: 1900,
            timeout_seconds: 2,
            ..Default::default()
        });
        assert_eq!((v.timeout_ms, v.timeout_seconds), (Some(1900), Some(2)));
        let old = JobView::from(&pb::Job {
            timeout_seconds: 30,
            ..Default::default()
        });
        assert_eq!(
            (old.timeout_ms, old.timeout_seconds),
            (Some(30_000), Some(30))
        );
    }

    #[test]
    fn command_lines_are_quoted_only_when_needed() {
        let args = vec![
            "-c".to_owned(),
            "print('hi there')".to_owned(),
            "--batch-size=64".to_owned(),
            String::new(),
        ];
        assert_eq!(
            command_line("python", &args),
            r#"python -c 'print('\''hi there'\'')' --batch-size=64 ''"#
        );
    }
}
