//! What a job asks of the scheduler, and its wall-clock limit, from its
//! spec and the node's rules.

use std::time::Duration;

use joblet_core::{JobId, JobSpec};
use joblet_sched::model::{GpuRef, JobRequest, Placement, Sharing, WorkloadClass};
use serde::{Deserialize, Serialize};

/// The node's rules that shape a job's request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRules {
    /// `gpu.sharing` is `shared` or `mps`: a job with `--gpu-memory`
    /// shares its GPUs (its memory is reserved, never oversubscribed).
    pub gpu_sharing: bool,
    /// `gpu.default_gpu_time`: a GPU job's GPU time budget without
    /// `--gpu-time`.
    pub default_gpu_time: Option<Duration>,
    /// The memory of the node's smallest GPU, MiB: a share of a GPU
    /// (`--gpu=0.5`) without `--gpu-memory` reserves that share of it.
    pub gpu_memory_mb: Option<u64>,
}

/// A recorded job, as the engine needs it: its scheduler request and its
/// wall-clock limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub job: JobId,
    pub request: JobRequest,
    /// The job's wall-clock limit: its timeout or its GPU time budget
    /// (GPUs × wall time), whichever ends first.
    pub wall_limit_ms: Option<u64>,
    /// The reason recorded when the job reaches `wall_limit_ms` and that
    /// limit is its GPU time budget.
    pub gpu_time_reason: Option<String>,
    /// Cluster mode: the placement the cluster's leader chose on this node
    /// (from the spec's [`joblet_core::ClusterRun`]). The job starts on
    /// exactly it, as soon as it is free, and never waits in this node's
    /// queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Placement>,
}

impl Submission {
    /// The submission of job `job` of `owner` with `spec` on a node with
    /// `rules`.
    pub fn of(job: JobId, owner: &str, spec: &JobSpec, rules: &JobRules) -> Submission {
        let (wall, reason) = wall_limit(spec, rules);
        let wall_limit_ms = wall.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let request = request(&job, owner, spec, rules, wall_limit_ms);
        let pinned = spec.cluster.as_ref().map(|c| pinned(&request, c));
        Submission {
            request,
            job,
            wall_limit_ms,
            gpu_time_reason: reason,
            pinned,
        }
    }
}

/// The scheduler's request for a job: its GPUs (whole, MIG slices or a
/// share), and the CPU and memory its limits reserve on the node (a job
/// without `--max-cpu`/`--cpu-cores` or `--max-memory` reserves none).
fn request(
    job: &JobId,
    owner: &str,
    spec: &JobSpec,
    rules: &JobRules,
    wall_limit_ms: Option<u64>,
) -> JobRequest {
    let r = &spec.resources;
    // MIG slices are hardware-partitioned: never shared. A share of a GPU
    // is shared by definition (admission refused it on an exclusive node).
    let shared = rules.gpu_sharing
        && (r.gpu_memory_mb.is_some() || r.gpu_milli.is_some())
        && r.mig_profile.is_none();
    let gpu_milli = r.gpu_milli.filter(|_| shared);
    // A share without --gpu-memory reserves the same share of the GPU's
    // memory (of the node's smallest GPU: never more than the share on
    // any of them), so its memory is held to that quota like any shared
    // job's.
    let gpu_memory_mb = r.gpu_memory_mb.unwrap_or_else(|| {
        gpu_milli
            .zip(rules.gpu_memory_mb)
            .map_or(0, |(m, total)| total * u64::from(m) / 1000)
    });
    JobRequest {
        gpu_milli: gpu_milli.unwrap_or(0),
        job: job.to_string(),
        owner: owner.to_string(),
        queue: "default".into(),
        gpu_count: r.gpu_count,
        gpu_memory_mb,
        sharing: if shared {
            Sharing::Shared
        } else {
            Sharing::Exclusive
        },
        mig_profile: r.mig_profile.clone(),
        min_compute_capability: None,
        class: WorkloadClass::Training,
        priority: 0,
        allow_cross_numa: true,
        allow_cross_node: false,
        preemptible: false,
        time_limit_ms: wall_limit_ms,
        checkpoint_interval_ms: None,
        cpu_millis: cpu_millis(spec),
        host_memory_mb: r.max_memory_mb.unwrap_or(0),
    }
}

/// The placement a cluster's leader chose, in this node's terms.
fn pinned(req: &JobRequest, run: &joblet_core::ClusterRun) -> Placement {
    Placement {
        gpu_milli: run.gpu_milli.unwrap_or(0),
        job: req.job.clone(),
        node: 0,
        units: run
            .units
            .iter()
            .map(|(index, mig)| GpuRef {
                node: 0,
                index: *index,
                mig: *mig,
            })
            .collect(),
        memory_mb: run.memory_mb,
        cpu_millis: req.cpu_millis,
        host_memory_mb: req.host_memory_mb,
        sharing: if run.shared {
            Sharing::Shared
        } else {
            Sharing::Exclusive
        },
        class: req.class,
    }
}

/// The CPU a job's limits let it use, in millicores: `--max-cpu` (percent
/// of one CPU), at most its pinned cores' worth (`--cpu-cores`).
fn cpu_millis(spec: &JobSpec) -> u64 {
    let r = &spec.resources;
    let quota = r.max_cpu_percent.map(|p| u64::from(p) * 10);
    let pinned = r.cpu_cores.as_ref().map(|c| c.len() as u64 * 1000);
    match (quota, pinned) {
        (Some(q), Some(p)) => q.min(p),
        (q, p) => q.or(p).unwrap_or(0),
    }
}

/// A job's wall-clock limit and, when that limit is its GPU time budget
/// (`--gpu-time` or the node default; GPU time = GPUs × wall time), the
/// reason to record when it is reached.
fn wall_limit(spec: &JobSpec, rules: &JobRules) -> (Option<Duration>, Option<String>) {
    let n = spec.resources.gpu_count;
    let budget = (n > 0)
        .then(|| spec.resources.gpu_time.or(rules.default_gpu_time))
        .flatten();
    let Some(budget) = budget else {
        return (spec.timeout, None);
    };
    let wall = budget / n;
    if spec.timeout.is_some_and(|t| t <= wall) {
        return (spec.timeout, None);
    }
    let reason = format!(
        "GPU time limit reached: {} of GPU time ({n} GPUs × {})",
        humantime::format_duration(budget),
        humantime::format_duration(wall)
    );
    (Some(wall), Some(reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::Resources;

    fn spec(resources: Resources, timeout: Option<Duration>) -> JobSpec {
        let mut s = joblet_core::JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0;
        s.resources = resources;
        s.timeout = timeout;
        s
    }

    fn id() -> JobId {
        JobId::parse("3f2a1b4c-0000-4000-8000-000000000001").unwrap()
    }

    #[test]
    fn a_cpu_jobs_limits_become_its_reservation() {
        let s = spec(
            Resources {
                max_cpu_percent: Some(250),
                max_memory_mb: Some(512),
                ..Default::default()
            },
            None,
        );
        let sub = Submission::of(id(), "alice", &s, &JobRules::default());
        assert_eq!(sub.request.cpu_millis, 2500);
        assert_eq!(sub.request.host_memory_mb, 512);
        assert_eq!(sub.request.gpu_count, 0);
        // Pinned to two cores with a larger quota: two cores' worth.
        let s = spec(
            Resources {
                max_cpu_percent: Some(400),
                cpu_cores: Some(vec![0, 1]),
                ..Default::default()
            },
            None,
        );
        assert_eq!(cpu_millis(&s), 2000);
        assert_eq!(cpu_millis(&spec(Resources::default(), None)), 0);
    }

    #[test]
    fn gpu_memory_shares_only_where_the_node_shares_and_never_a_mig_slice() {
        let r = Resources {
            gpu_count: 1,
            gpu_memory_mb: Some(8000),
            ..Default::default()
        };
        let shared = JobRules {
            gpu_sharing: true,
            ..Default::default()
        };
        let s = spec(r.clone(), None);
        assert_eq!(
            Submission::of(id(), "a", &s, &shared).request.sharing,
            Sharing::Shared
        );
        assert_eq!(
            Submission::of(id(), "a", &s, &JobRules::default())
                .request
                .sharing,
            Sharing::Exclusive
        );
        let mig = spec(
            Resources {
                mig_profile: Some("1g.10gb".into()),
                ..r
            },
            None,
        );
        assert_eq!(
            Submission::of(id(), "a", &mig, &shared).request.sharing,
            Sharing::Exclusive
        );
    }

    #[test]
    fn a_gpu_share_is_shared_and_reserves_its_share_of_the_smallest_gpus_memory() {
        let quarter = Resources {
            gpu_count: 1,
            gpu_milli: Some(250),
            ..Default::default()
        };
        let rules = JobRules {
            gpu_sharing: true,
            gpu_memory_mb: Some(40_960),
            ..Default::default()
        };
        let req = Submission::of(id(), "a", &spec(quarter.clone(), None), &rules).request;
        assert_eq!(
            (req.sharing, req.gpu_milli, req.gpu_memory_mb),
            (Sharing::Shared, 250, 10_240)
        );
        assert!(req.gpu_milli_error().is_none());
        // Its own --gpu-memory wins.
        let own = Resources {
            gpu_memory_mb: Some(4096),
            ..quarter
        };
        let req = Submission::of(id(), "a", &spec(own, None), &rules).request;
        assert_eq!((req.gpu_milli, req.gpu_memory_mb), (250, 4096));
    }

    #[test]
    fn the_gpu_time_budget_is_the_wall_limit_when_it_ends_first() {
        let r = Resources {
            gpu_count: 2,
            gpu_time: Some(Duration::from_secs(7200)),
            ..Default::default()
        };
        let sub = Submission::of(id(), "a", &spec(r.clone(), None), &JobRules::default());
        assert_eq!(sub.wall_limit_ms, Some(3_600_000));
        assert_eq!(sub.request.time_limit_ms, Some(3_600_000));
        assert_eq!(
            sub.gpu_time_reason.as_deref(),
            Some("GPU time limit reached: 2h of GPU time (2 GPUs × 1h)")
        );
        // A shorter timeout wins, with the shim's own reason.
        let sub = Submission::of(
            id(),
            "a",
            &spec(r, Some(Duration::from_secs(60))),
            &JobRules::default(),
        );
        assert_eq!(sub.wall_limit_ms, Some(60_000));
        assert_eq!(sub.gpu_time_reason, None);
        // The node default applies to GPU jobs only.
        let rules = JobRules {
            default_gpu_time: Some(Duration::from_secs(90)),
            ..Default::default()
        };
        let cpu = Submission::of(id(), "a", &spec(Resources::default(), None), &rules);
        assert_eq!(cpu.wall_limit_ms, None);
        let gpu = Submission::of(
            id(),
            "a",
            &spec(
                Resources {
                    gpu_count: 1,
                    ..Default::default()
                },
                None,
            ),
            &rules,
        );
        assert_eq!(gpu.wall_limit_ms, Some(90_000));
        assert_eq!(
            gpu.gpu_time_reason.as_deref(),
            Some("GPU time limit reached: 1m 30s of GPU time (1 GPUs × 1m 30s)")
        );
    }
}
