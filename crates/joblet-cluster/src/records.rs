//! The values kept in etcd (JSON). Small on purpose: a job's log, history
//! and runtime data stay on the node that ran it.

use std::collections::BTreeMap;

pub use joblet_core::GangRank;
use joblet_core::{JobSpec, JobState, UnixMillis};
use joblet_engine::Submission;
use joblet_sched::model::{GpuHealth, NodeSpec, Placement, Sharing, WorkloadClass};
use serde::{Deserialize, Serialize};

/// A node as it registers itself (`nodes/NAME`, on its lease).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub name: String,
    /// Where clients and other nodes reach its API (`host:port`).
    pub address: String,
    /// Its GPUs, CPU, memory and job slots (`id` is meaningless here: the
    /// leader numbers nodes itself).
    pub spec: NodeSpec,
    /// Every GPU's health now (by index).
    #[serde(default)]
    pub health: Vec<(u32, GpuHealth)>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// May lead the scheduler (`cluster.scheduler`).
    #[serde(default)]
    pub scheduler: bool,
    /// GPU model names, by index order (for `rnx node list`).
    #[serde(default)]
    pub gpu_models: Vec<String>,
    /// When this daemon started.
    pub started_at: UnixMillis,
}

/// What happens to a job whose node is lost (its lease expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// It ends FAILED, the reason naming the node.
    #[default]
    Never,
    /// It is placed again elsewhere as its next attempt.
    OnNodeFailure,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Never => "never",
            RestartPolicy::OnNodeFailure => "on-node-failure",
        }
    }
}

/// A job, cluster-wide (`jobs/ID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEntry {
    pub owner: String,
    pub spec: JobSpec,
    /// Its scheduler request and wall-clock limit, as the node that took
    /// it computed them.
    pub submission: Submission,
    pub submitted_at: UnixMillis,
    /// The node that took the submission.
    pub via: String,
    #[serde(default)]
    pub restart: RestartPolicy,
    pub phase: JobPhase,
}

impl JobEntry {
    pub fn id(&self) -> &str {
        self.submission.job.as_str()
    }

    /// The state a user sees, before a node's report is merged in.
    pub fn state(&self) -> JobState {
        match &self.phase {
            JobPhase::Queued { .. } => JobState::Queued,
            JobPhase::Assigned { .. } => JobState::Running,
            JobPhase::Ended { state, .. } => *state,
        }
    }

    /// The attempt running or next to run (1 for the first).
    pub fn attempt(&self) -> u32 {
        match &self.phase {
            JobPhase::Queued { attempt, .. }
            | JobPhase::Assigned { attempt, .. }
            | JobPhase::Ended { attempt, .. } => *attempt,
        }
    }

    /// The nodes it runs or ran on (empty while queued).
    pub fn nodes(&self) -> &[String] {
        match &self.phase {
            JobPhase::Queued { .. } => &[],
            JobPhase::Assigned { nodes, .. } => nodes,
            JobPhase::Ended { nodes, .. } => nodes,
        }
    }
}

/// Where a job stands cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum JobPhase {
    /// Waiting to be placed; `attempt` is the one it will run as.
    Queued {
        attempt: u32,
        /// Why it waits again (the node of its last attempt was lost).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Placed: its nodes have its assignment.
    Assigned {
        attempt: u32,
        nodes: Vec<String>,
        /// The leader's fencing token that placed it.
        fence: i64,
        at: UnixMillis,
    },
    /// Over, for good.
    Ended {
        attempt: u32,
        nodes: Vec<String>,
        state: JobState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        reason: String,
        at: UnixMillis,
    },
}

/// What one job holds on one node (an entry of [`NodeAlloc`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocEntry {
    pub attempt: u32,
    /// GPU units on this node: (index, MIG instance).
    pub units: Vec<(u32, Option<u32>)>,
    /// MiB reserved per unit.
    pub memory_mb: u64,
    pub sharing: Sharing,
    pub class: WorkloadClass,
    pub cpu_millis: u64,
    pub host_memory_mb: u64,
    /// A share of one GPU (thousandths); 0 = whole units.
    #[serde(default)]
    pub gpu_milli: u32,
}

/// Everything placed on one node (`alloc/NAME`), written only by the
/// leader, in the transaction that places or frees.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeAlloc {
    pub jobs: BTreeMap<String, AllocEntry>,
}

/// What a node is told to run (`assign/NAME/ID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub job: String,
    pub attempt: u32,
    /// The leader's fencing token (its key's create revision).
    pub fence: i64,
    /// The job's part on this node, in the node's own terms (node 0).
    pub placement: Placement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangRank>,
    pub at: UnixMillis,
}

/// A node's word on a job it was assigned (`reports/ID/NAME`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    pub attempt: u32,
    pub state: ReportState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum ReportState {
    Running {
        at: UnixMillis,
    },
    Ended {
        state: JobState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        reason: String,
        at: UnixMillis,
    },
}

/// Encodes a record for etcd.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

/// Decodes a record read from etcd; `what` names it in the error.
pub fn decode<T: for<'de> Deserialize<'de>>(
    what: &str,
    key: &str,
    bytes: &[u8],
) -> Result<T, RecordError> {
    serde_json::from_slice(bytes).map_err(|e| RecordError {
        what: what.to_string(),
        key: key.to_string(),
        problem: e.to_string(),
    })
}

/// A value in etcd that is not what its key says it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("etcd key {key} does not hold a {what}: {problem}")]
pub struct RecordError {
    pub what: String,
    pub key: String,
    pub problem: String,
}

/// The id of attempt `attempt` of job `job` on the node that runs it: the
/// job's own id for the first attempt; for later ones an id derived from
/// both (a node may run several attempts of one job, each a job of its
/// own in its store).
pub fn run_id(job: &str, attempt: u32) -> String {
    if attempt <= 1 {
        return job.to_string();
    }
    // FNV-1a over the id and attempt, twice with different seeds, laid out
    // as a version-4 UUID: stable, and distinct per attempt.
    let hash = |seed: u64| {
        let mut h = seed;
        for b in job.bytes().chain(attempt.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    };
    let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attempt_runs_under_the_jobs_id_later_ones_under_their_own() {
        let job = "3f2a1b4c-0000-4000-8000-000000000001";
        assert_eq!(run_id(job, 1), job);
        let (two, three) = (run_id(job, 2), run_id(job, 3));
        assert_ne!(two, job);
        assert_ne!(two, three);
        assert_eq!(two, run_id(job, 2));
        assert!(joblet_core::JobId::parse(&two).is_ok(), "{two}");
    }
}
