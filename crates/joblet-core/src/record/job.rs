//! A job as recorded, and everything the node reports about it.

use super::AuditRecord;
use crate::{JobId, JobSpec, JobState, UnixMillis};

/// One job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: JobId,
    /// Submission order, assigned by the store; never reused.
    pub seq: i64,
    pub owner: String,
    pub spec: JobSpec,
    pub state: JobState,
    /// Why the job is in its state (`""` if there is nothing to say).
    pub reason: String,
    pub exit_code: Option<i32>,
    pub created_ms: UnixMillis,
    /// When the job last went to RUNNING.
    pub started_ms: Option<UnixMillis>,
    /// When the job reached a terminal state.
    pub ended_ms: Option<UnixMillis>,
    pub shim_pid: Option<i32>,
}

/// One row of a job's state history. `from` is `None` for the creation row.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRecord {
    pub from: Option<JobState>,
    pub to: JobState,
    pub at_ms: UnixMillis,
    pub reason: String,
}

/// Where a job stands, without its spec: the fields its transitions set.
/// What the store's `transition_of` and `progress` read, so that the
/// engine's own moves and a log follower's look at a job do not parse the
/// spec it already has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobProgress {
    pub state: JobState,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub started_ms: Option<UnixMillis>,
    pub ended_ms: Option<UnixMillis>,
    pub shim_pid: Option<i32>,
}

impl JobRecord {
    /// Its [`JobProgress`].
    pub fn progress(&self) -> JobProgress {
        JobProgress {
            state: self.state,
            reason: self.reason.clone(),
            exit_code: self.exit_code,
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            shim_pid: self.shim_pid,
        }
    }

    /// Takes over `p`'s fields (the spec and identity stay).
    pub fn set_progress(&mut self, p: JobProgress) {
        self.state = p.state;
        self.reason = p.reason;
        self.exit_code = p.exit_code;
        self.started_ms = p.started_ms;
        self.ended_ms = p.ended_ms;
        self.shim_pid = p.shim_pid;
    }
}

/// The GPUs a job holds, or held once it has ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobGpus {
    /// Host GPU indices, in allocation order.
    pub indices: Vec<u32>,
    pub uuids: Vec<String>,
    /// Memory reserved per GPU in MiB; `None` = the whole GPU.
    pub memory_mb_per_gpu: Option<u64>,
    /// `exclusive`, `shared`, `mps` or `mig`.
    pub sharing: String,
    /// Highest GPU memory the job was seen using, in MiB; `None` = not
    /// known yet.
    pub peak_memory_mb: Option<u64>,
}

impl JobGpus {
    /// The GPUs `job` holds, or held once it has ended, from the last audit
    /// record of its allocations (`last`). `None` for a CPU job and for a
    /// GPU job waiting for GPUs (also one queued again after a preemption,
    /// whose last record is closed).
    pub fn of(job: &JobRecord, last: Option<AuditRecord>) -> Option<JobGpus> {
        if job.spec.resources.gpu_count == 0 {
            return None;
        }
        let r = last?;
        let waiting = matches!(job.state, JobState::Pending | JobState::Queued);
        if r.end_ms.is_some() && waiting {
            return None;
        }
        Some(JobGpus {
            indices: r.gpu_indices,
            uuids: r.gpu_uuids,
            memory_mb_per_gpu: r.memory_mb_per_gpu,
            sharing: r.sharing,
            peak_memory_mb: r.peak_memory_mb,
        })
    }
}

/// A job as the node reports it: its record, and what status and list
/// calls show beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDetails {
    pub record: JobRecord,
    /// Its state history, oldest first; empty where it was not asked for.
    pub transitions: Vec<TransitionRecord>,
    /// Bytes of output recorded so far.
    pub log_bytes: u64,
    /// `None` for a CPU job and for a GPU job not placed yet.
    pub gpus: Option<JobGpus>,
    /// Cluster mode: where it runs or ran, and as which attempt; `None` on
    /// a single node.
    pub cluster: Option<ClusterPlace>,
}

/// Cluster mode: a job's nodes, attempt and restart policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterPlace {
    /// The node(s) it runs or ran on; empty while queued.
    pub nodes: Vec<String>,
    /// 1 for the first; one more each time it is placed again after its
    /// node was lost.
    pub attempt: u32,
    /// `never` or `on-node-failure`.
    pub restart: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobRequest;

    fn job(gpus: i64, state: JobState) -> JobRecord {
        JobRecord {
            id: JobId::parse("00000001-0000-4000-8000-000000000000").unwrap(),
            seq: 1,
            owner: "alice".into(),
            spec: JobRequest {
                command: "python".into(),
                gpu_count: gpus,
                ..Default::default()
            }
            .validate()
            .unwrap()
            .0,
            state,
            reason: String::new(),
            exit_code: None,
            created_ms: 1,
            started_ms: None,
            ended_ms: None,
            shim_pid: None,
        }
    }

    fn audit(end_ms: Option<UnixMillis>) -> AuditRecord {
        AuditRecord {
            job_id: "00000001-0000-4000-8000-000000000000".into(),
            owner: "alice".into(),
            gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
            gpu_indices: vec![0, 1],
            memory_mb_per_gpu: Some(8192),
            sharing: "exclusive".into(),
            start_ms: 10,
            end_ms,
            peak_memory_mb: Some(4000),
            ended: end_ms.map(|_| "PREEMPTED".into()),
            reason: None,
        }
    }

    #[test]
    fn gpus_of_cpu_waiting_running_and_ended_jobs() {
        assert_eq!(
            JobGpus::of(&job(0, JobState::Running), Some(audit(None))),
            None,
            "a CPU job has none"
        );
        assert_eq!(
            JobGpus::of(&job(2, JobState::Queued), None),
            None,
            "not placed yet"
        );
        let want = JobGpus {
            indices: vec![0, 1],
            uuids: vec!["GPU-a".into(), "GPU-b".into()],
            memory_mb_per_gpu: Some(8192),
            sharing: "exclusive".into(),
            peak_memory_mb: Some(4000),
        };
        assert_eq!(
            JobGpus::of(&job(2, JobState::Running), Some(audit(None))),
            Some(want.clone())
        );
        // Preempted: the GPUs it held; queued again: waiting, none shown.
        let closed = Some(audit(Some(20)));
        assert_eq!(
            JobGpus::of(&job(2, JobState::Preempted), closed.clone()),
            Some(want.clone())
        );
        assert_eq!(JobGpus::of(&job(2, JobState::Queued), closed.clone()), None);
        assert_eq!(
            JobGpus::of(&job(2, JobState::Pending), closed.clone()),
            None
        );
        assert_eq!(JobGpus::of(&job(2, JobState::Stopped), closed), Some(want));
    }
}
