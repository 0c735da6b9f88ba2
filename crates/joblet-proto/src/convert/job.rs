//! A job as status and list report it: [`JobDetails`] ↔ `pb::Job`.
//!
//! Secret values never reach the wire: a job carries only the names of its
//! secret variables, each sent with the value `***`. The wire does not
//! carry the record's `seq` and `shim_pid`, the spec's upload
//! counts or a terminal's starting size; they come back as `0`, `None`,
//! `0` and 24 × 80. A limit of 0 and
//! an empty text are the wire's "not set", so `Some(0)` and `Some("")`
//! come back as `None`.

use std::time::Duration;

use joblet_core::parse::{format_cpu_list, parse_cpu_list};
use joblet_core::record::{ClusterPlace, JobDetails, JobGpus, JobRecord};
use joblet_core::{FieldError, JobId, JobSpec, Network, Resources, VolumeMount, WorkflowJobRef};

use super::state::{required_state_from_pb, state_to_pb, transition_from_pb, transition_to_pb};
use super::{non_empty, nonzero, saturating_i64};
use crate::pb;

/// What every secret value is replaced with.
pub const SECRET_MASK: &str = "***";

/// A job on the wire, with its transitions, output size and GPUs.
pub fn job_to_pb(d: &JobDetails) -> pb::Job {
    let rec = &d.record;
    let spec = &rec.spec;
    pb::Job {
        id: rec.id.to_string(),
        command: spec.command.clone(),
        args: spec.args.clone(),
        state: state_to_pb(rec.state) as i32,
        owner: rec.owner.clone(),
        resources: Some(resources_to_pb(&spec.resources)),
        env: spec.env.clone().into_iter().collect(),
        secret_env: spec
            .secret_env_keys
            .iter()
            .map(|k| (k.clone(), SECRET_MASK.to_owned()))
            .collect(),
        exit_code: rec.exit_code,
        reason: rec.reason.clone(),
        created_unix_ms: rec.created_ms,
        started_unix_ms: rec.started_ms.unwrap_or(0),
        ended_unix_ms: rec.ended_ms.unwrap_or(0),
        timeout_seconds: spec
            .timeout
            .map(|t| saturating_i64(t.as_secs().saturating_add(u64::from(t.subsec_nanos() > 0))))
            .unwrap_or(0),
        timeout_ms: spec.timeout.map(|t| saturating_i64(millis(t))).unwrap_or(0),
        runtime: spec.runtime.clone().unwrap_or_default(),
        transitions: d.transitions.iter().map(transition_to_pb).collect(),
        log_bytes: d.log_bytes,
        network: spec.network.as_str().to_owned(),
        gpus: d.gpus.as_ref().map(job_gpus_to_pb),
        cuda_version: spec.cuda.clone().unwrap_or_default(),
        mig_profile: spec.resources.mig_profile.clone().unwrap_or_default(),
        gpu_profiling: spec.gpu_profiling,
        volumes: spec.volumes.iter().map(ToString::to_string).collect(),
        runtime_digest: spec.runtime_digest.clone().unwrap_or_default(),
        workflow_id: spec
            .workflow
            .as_ref()
            .map(|w| w.id.clone())
            .unwrap_or_default(),
        workflow_job: spec
            .workflow
            .as_ref()
            .map(|w| w.job.clone())
            .unwrap_or_default(),
        workflow_attempt: spec.workflow.as_ref().map_or(0, |w| w.attempt),
        nodes: d
            .cluster
            .as_ref()
            .map(|c| c.nodes.clone())
            .unwrap_or_default(),
        attempt: d.cluster.as_ref().map_or(0, |c| c.attempt),
        restart: d
            .cluster
            .as_ref()
            .map(|c| c.restart.clone())
            .unwrap_or_default(),
        executor: spec.executor.clone().unwrap_or_default(),
        devices: spec.devices.clone(),
        interactive: spec.stdio.stdin,
        tty: spec.stdio.tty.is_some(),
    }
}

/// A job from the wire (see the module docs for what it does not carry).
pub fn job_from_pb(j: pb::Job) -> Result<JobDetails, FieldError> {
    let id = JobId::parse(&j.id).map_err(|e| FieldError::new("id", e.to_string()))?;
    let state = required_state_from_pb("state", j.state)?;
    let transitions = j
        .transitions
        .into_iter()
        .enumerate()
        .map(|(i, t)| transition_from_pb(&format!("transitions[{i}]"), t))
        .collect::<Result<_, _>>()?;
    let mut secret_env_keys: Vec<String> = j.secret_env.into_keys().collect();
    secret_env_keys.sort();
    let network = match j.network.as_str() {
        "" | "none" => Network::None,
        "host" => Network::Host,
        other => {
            return Err(FieldError::new(
                "network",
                format!("unknown network {other:?}; expected none or host"),
            ))
        }
    };
    // A node before timeout_ms sends only whole seconds.
    let timeout_secs = nonzero(unsigned("timeout_seconds", j.timeout_seconds)?);
    let timeout = match nonzero(unsigned("timeout_ms", j.timeout_ms)?) {
        Some(ms) => Some(Duration::from_millis(ms)),
        None => timeout_secs.map(Duration::from_secs),
    };
    let mut resources = resources_from_pb(j.resources.unwrap_or_default())?;
    resources.mig_profile = non_empty(j.mig_profile);
    let spec = JobSpec {
        command: j.command,
        args: j.args,
        resources,
        env: j.env.into_iter().collect(),
        secret_env_keys,
        upload_entries: 0,
        upload_bytes: 0,
        volumes: j
            .volumes
            .iter()
            .enumerate()
            .map(|(i, v)| {
                VolumeMount::parse(v).ok_or_else(|| {
                    FieldError::new(
                        format!("volumes[{i}]"),
                        format!("{v:?} is not NAME or NAME:ro"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        runtime: non_empty(j.runtime),
        runtime_digest: non_empty(j.runtime_digest),
        network,
        timeout,
        cuda: non_empty(j.cuda_version),
        gpu_profiling: j.gpu_profiling,
        workflow: (!j.workflow_id.is_empty()).then_some(WorkflowJobRef {
            id: j.workflow_id,
            job: j.workflow_job,
            attempt: j.workflow_attempt,
            shared: None,
        }),
        cluster: None,
        executor: non_empty(j.executor),
        devices: j.devices,
        // The wire does not carry the terminal's starting size.
        stdio: joblet_core::Stdio {
            stdin: j.interactive,
            tty: j.tty.then_some(joblet_core::TermSize {
                rows: joblet_core::stdio::DEFAULT_ROWS,
                cols: joblet_core::stdio::DEFAULT_COLS,
            }),
        },
    };
    Ok(JobDetails {
        record: JobRecord {
            id,
            seq: 0,
            owner: j.owner,
            spec,
            state,
            reason: j.reason,
            exit_code: j.exit_code,
            created_ms: j.created_unix_ms,
            started_ms: nonzero(j.started_unix_ms),
            ended_ms: nonzero(j.ended_unix_ms),
            shim_pid: None,
        },
        transitions,
        log_bytes: j.log_bytes,
        gpus: j.gpus.map(job_gpus_from_pb),
        cluster: (j.attempt > 0).then_some(ClusterPlace {
            nodes: j.nodes,
            attempt: j.attempt,
            restart: j.restart,
        }),
    })
}

/// A job's limits on the wire (0 / `""` = not set). The MIG profile is a
/// field of the job, not of its resources, on the wire.
pub fn resources_to_pb(r: &Resources) -> pb::Resources {
    pb::Resources {
        max_cpu: r.max_cpu_percent.map(i64::from).unwrap_or(0),
        cpu_cores: r
            .cpu_cores
            .as_deref()
            .map(format_cpu_list)
            .unwrap_or_default(),
        max_memory_mb: r.max_memory_mb.map(saturating_i64).unwrap_or(0),
        max_iobps: r.max_iobps.map(saturating_i64).unwrap_or(0),
        gpu_count: i64::from(r.gpu_count),
        gpu_memory_mb: r.gpu_memory_mb.map(saturating_i64).unwrap_or(0),
        gpu_time_seconds: r.gpu_time.map(|t| saturating_i64(t.as_secs())),
        gpu_milli: r.gpu_milli.map(i64::from).unwrap_or(0),
    }
}

/// A job's limits from the wire; `mig_profile` is left `None`.
pub fn resources_from_pb(r: pb::Resources) -> Result<Resources, FieldError> {
    let cpu_cores = match r.cpu_cores.as_str() {
        "" => None,
        list => Some(
            parse_cpu_list(list)
                .map_err(|e| FieldError::new("resources.cpu_cores", e.to_string()))?,
        ),
    };
    let max_cpu = unsigned("resources.max_cpu", r.max_cpu)?;
    let gpu_count = unsigned("resources.gpu_count", r.gpu_count)?;
    let gpu_milli = joblet_core::spec::gpu_milli(r.gpu_milli)?;
    Ok(Resources {
        max_cpu_percent: nonzero(fits_u32("resources.max_cpu", max_cpu)?),
        cpu_cores,
        max_memory_mb: nonzero(unsigned("resources.max_memory_mb", r.max_memory_mb)?),
        max_iobps: nonzero(unsigned("resources.max_iobps", r.max_iobps)?),
        gpu_count: fits_u32("resources.gpu_count", gpu_count)?,
        gpu_memory_mb: nonzero(unsigned("resources.gpu_memory_mb", r.gpu_memory_mb)?),
        gpu_milli,
        gpu_time: r
            .gpu_time_seconds
            .map(|s| unsigned("resources.gpu_time_seconds", s).map(Duration::from_secs))
            .transpose()?,
        mig_profile: None,
    })
}

pub fn job_gpus_to_pb(g: &JobGpus) -> pb::JobGpus {
    pb::JobGpus {
        indices: g.indices.clone(),
        uuids: g.uuids.clone(),
        memory_mb_per_gpu: g.memory_mb_per_gpu.unwrap_or(0),
        sharing: g.sharing.clone(),
        peak_memory_mb: g.peak_memory_mb.unwrap_or(0),
    }
}

pub fn job_gpus_from_pb(g: pb::JobGpus) -> JobGpus {
    JobGpus {
        indices: g.indices,
        uuids: g.uuids,
        memory_mb_per_gpu: nonzero(g.memory_mb_per_gpu),
        sharing: g.sharing,
        peak_memory_mb: nonzero(g.peak_memory_mb),
    }
}

/// A duration in whole milliseconds (saturating).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn unsigned(field: &str, v: i64) -> Result<u64, FieldError> {
    u64::try_from(v).map_err(|_| FieldError::new(field, format!("must not be negative (got {v})")))
}

fn fits_u32(field: &str, v: u64) -> Result<u32, FieldError> {
    u32::try_from(v).map_err(|_| FieldError::new(field, format!("{v} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::{JobRequest, JobState};

    fn record(req: JobRequest) -> JobDetails {
        JobDetails {
            record: JobRecord {
                id: JobId::parse("3f2a1b4c-0000-4000-8000-000000000001").unwrap(),
                seq: 1,
                owner: "alice".into(),
                spec: req.validate().unwrap().0,
                state: JobState::Running,
                reason: String::new(),
                exit_code: None,
                created_ms: 1,
                started_ms: Some(2),
                ended_ms: None,
                shim_pid: None,
            },
            transitions: Vec::new(),
            log_bytes: 0,
            gpus: None,
            cluster: None,
        }
    }

    #[test]
    fn a_jobs_mig_profile_and_gpu_profiling_reach_the_wire() {
        let job = job_to_pb(&record(JobRequest {
            command: "python".into(),
            gpu_count: 2,
            mig_profile: "1g.10gb".into(),
            gpu_profiling: true,
            ..Default::default()
        }));
        assert_eq!(job.mig_profile, "1g.10gb");
        assert!(job.gpu_profiling);
        let plain = job_to_pb(&record(JobRequest {
            command: "python".into(),
            gpu_count: 1,
            ..Default::default()
        }));
        assert_eq!(plain.mig_profile, "");
        assert!(!plain.gpu_profiling);
    }

    #[test]
    fn a_jobs_executor_and_devices_reach_the_wire_and_come_back() {
        let mut d = record(JobRequest {
            command: "id".into(),
            devices: vec!["nvidia.com/gpu=0".into()],
            ..Default::default()
        });
        d.record.spec.executor = Some("runc".into());
        let job = job_to_pb(&d);
        assert_eq!(job.executor, "runc");
        assert_eq!(job.devices, ["nvidia.com/gpu=0"]);
        let back = job_from_pb(job).unwrap().record.spec;
        assert_eq!(back.executor.as_deref(), Some("runc"));
        assert_eq!(back.devices, ["nvidia.com/gpu=0"]);
        // A job from a node that predates executors names none.
        let old = job_to_pb(&record(JobRequest {
            command: "id".into(),
            ..Default::default()
        }));
        assert_eq!((old.executor.as_str(), old.devices.len()), ("", 0));
        assert_eq!(job_from_pb(old).unwrap().record.spec.executor, None);
    }

    #[test]
    fn secret_values_never_reach_the_wire() {
        let job = job_to_pb(&record(JobRequest {
            command: "x".into(),
            secret_env: vec![("TOKEN".into(), "s3cret".into())],
            ..Default::default()
        }));
        assert_eq!(job.secret_env.get("TOKEN").map(String::as_str), Some("***"));
        assert!(!format!("{job:?}").contains("s3cret"));
    }

    #[test]
    fn job_mig_profile_and_gpu_profiling_are_new_fields_old_peers_read_as_unset() {
        use prost::Message;
        let job = pb::Job {
            id: "j".into(),
            mig_profile: "1g.10gb".into(),
            gpu_profiling: true,
            ..Default::default()
        };
        let bytes = job.encode_to_vec();
        // Field 21 (length-delimited) and field 22 (varint): new numbers.
        assert!(
            bytes.windows(2).any(|w| w == [21 << 3 | 2, 0x01]),
            "{bytes:x?}"
        );
        assert!(
            bytes.windows(3).any(|w| w == [22 << 3, 0x01, 0x01]),
            "{bytes:x?}"
        );
        let back = pb::Job::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (back.mig_profile.as_str(), back.gpu_profiling),
            ("1g.10gb", true)
        );
        // A Job from a node without them: whole GPUs, no profiling.
        let old = pb::Job {
            id: "j".into(),
            cuda_version: "12.2".into(),
            ..Default::default()
        };
        let back = pb::Job::decode(old.encode_to_vec().as_slice()).unwrap();
        assert_eq!((back.mig_profile.as_str(), back.gpu_profiling), ("", false));
    }

    #[test]
    fn bad_wire_values_name_their_field() {
        let good = job_to_pb(&record(JobRequest {
            command: "x".into(),
            ..Default::default()
        }));
        let bad = |f: fn(&mut pb::Job)| {
            let mut j = good.clone();
            f(&mut j);
            job_from_pb(j).unwrap_err().field
        };
        assert_eq!(bad(|j| j.id = "nope".into()), "id");
        assert_eq!(bad(|j| j.state = 0), "state");
        assert_eq!(bad(|j| j.network = "bridge".into()), "network");
        assert_eq!(bad(|j| j.timeout_seconds = -1), "timeout_seconds");
        assert_eq!(bad(|j| j.timeout_ms = -1), "timeout_ms");
        assert_eq!(
            bad(|j| j.resources.as_mut().unwrap().max_cpu = i64::from(u32::MAX) + 1),
            "resources.max_cpu"
        );
        assert_eq!(
            bad(|j| j.resources.as_mut().unwrap().cpu_cores = "3-1".into()),
            "resources.cpu_cores"
        );
        assert_eq!(
            bad(|j| j.resources.as_mut().unwrap().max_memory_mb = -5),
            "resources.max_memory_mb"
        );
    }
}
