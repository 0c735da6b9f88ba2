//! Shared helpers of the scheduler tests: cluster and request builders,
//! action filters, and a tiny event-driven simulator for JCT comparisons.
#![allow(dead_code)]

use std::collections::BTreeMap;

use joblet_core::UnixMillis;
use joblet_sched::model::{
    Action, Event, GpuSpec, JobRequest, NodeSpec, Policy, SchedConfig, Sharing, Strategy,
    WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;

pub fn gpu(index: u32, numa: u32) -> GpuSpec {
    GpuSpec {
        index,
        uuid: format!("GPU-{index}"),
        memory_mb: 81_920,
        numa,
        socket: numa,
        nvlink_group: None,
        compute_capability: (8, 0),
        mig: Vec::new(),
    }
}

/// A node with `n` 80 GiB GPUs, the first half on NUMA 0, the rest on 1.
pub fn node(id: u32, n: u32) -> NodeSpec {
    NodeSpec {
        id,
        capacity: Default::default(),
        gpus: (0..n)
            .map(|i| gpu(i, u32::from(i >= n.div_ceil(2))))
            .collect(),
    }
}

/// An exclusive training job of one owner/queue, no limit, not preemptible.
pub fn req(job: &str, gpus: u32) -> JobRequest {
    JobRequest {
        gpu_milli: 0,
        job: job.to_string(),
        owner: "alice".into(),
        queue: "default".into(),
        gpu_count: gpus,
        gpu_memory_mb: 0,
        sharing: Sharing::Exclusive,
        mig_profile: None,
        min_compute_capability: None,
        class: WorkloadClass::Training,
        priority: 0,
        allow_cross_numa: true,
        allow_cross_node: false,
        preemptible: false,
        time_limit_ms: None,
        checkpoint_interval_ms: None,
        cpu_millis: 0,
        host_memory_mb: 0,
    }
}

/// The policy with free preemption (no checkpoint loss, no restore), as
/// these tests were written for; [`costly`] turns the costs on.
pub fn config(policy: Policy) -> SchedConfig {
    SchedConfig {
        policy,
        strategy: Strategy::Topology,
        checkpoint_interval_ms: 0,
        restore_cost_ms: 0,
        ..SchedConfig::default()
    }
}

/// The policy with preemption costs: checkpoints every `checkpoint_ms`,
/// `restore_ms` to restore.
pub fn costly(policy: Policy, checkpoint_ms: u64, restore_ms: u64) -> SchedConfig {
    SchedConfig {
        checkpoint_interval_ms: checkpoint_ms,
        restore_cost_ms: restore_ms,
        ..config(policy)
    }
}

pub fn submit(s: &mut Scheduler, r: JobRequest, now: UnixMillis) -> Vec<Action> {
    s.handle(Event::Submit(Box::new(r)), now)
}

pub fn exit(s: &mut Scheduler, job: &str, now: UnixMillis) -> Vec<Action> {
    s.handle(Event::Exited(job.to_string()), now)
}

pub fn started(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { placement } => Some(placement.job.clone()),
            _ => None,
        })
        .collect()
}

pub fn preempted(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { job, .. } => Some(job.clone()),
            _ => None,
        })
        .collect()
}

pub fn rejected(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reject { job, reason } => Some((job.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

/// A job of the tiny simulator: arrives, needs `duration` ms of run time
/// on `gpus` GPUs (preemption loses no work: checkpoints are free).
#[derive(Debug, Clone)]
pub struct SimJob {
    pub id: String,
    pub arrival: UnixMillis,
    pub duration: i64,
    pub gpus: u32,
}

/// Completion time of every job, simulated with `Tick`s every `tick_ms`;
/// preempted jobs exit at once.
pub fn simulate(
    config: SchedConfig,
    nodes: Vec<NodeSpec>,
    jobs: &[SimJob],
    tick_ms: i64,
) -> BTreeMap<String, UnixMillis> {
    let mut s = Scheduler::new(config, nodes);
    let mut remaining: BTreeMap<String, i64> =
        jobs.iter().map(|j| (j.id.clone(), j.duration)).collect();
    let mut running: BTreeMap<String, UnixMillis> = BTreeMap::new();
    let mut done = BTreeMap::new();
    let mut arrivals: Vec<&SimJob> = jobs.iter().collect();
    arrivals.sort_by_key(|j| (j.arrival, j.id.clone()));
    let mut next_arrival = 0;
    let mut now = 0;
    let mut next_tick = tick_ms;
    for _ in 0..10_000_000 {
        if done.len() == jobs.len() {
            return done;
        }
        let next_end = running
            .iter()
            .map(|(id, st)| (st + remaining[id], id.clone()))
            .min();
        let arrival = arrivals.get(next_arrival).map(|j| j.arrival);
        let t = [next_end.as_ref().map(|e| e.0), arrival, Some(next_tick)]
            .into_iter()
            .flatten()
            .min()
            .expect("a next time");
        now = now.max(t);
        let mut events = Vec::new();
        if let Some((_, id)) = next_end.filter(|e| e.0 == now) {
            running.remove(&id);
            remaining.insert(id.clone(), 0);
            done.insert(id.clone(), now);
            events.push(Event::Exited(id));
        } else if arrival == Some(now) {
            let j = arrivals[next_arrival];
            next_arrival += 1;
            let mut r = req(&j.id, j.gpus);
            r.preemptible = true;
            events.push(Event::Submit(Box::new(r)));
        } else {
            next_tick = now + tick_ms;
            events.push(Event::Tick);
        }
        while let Some(ev) = events.pop() {
            for a in s.handle(ev, now) {
                match a {
                    Action::Start { placement } => {
                        running.insert(placement.job.clone(), now);
                    }
                    Action::Preempt { job, .. } => {
                        if let Some(st) = running.remove(&job) {
                            *remaining.get_mut(&job).expect("known") -= now - st;
                        }
                        events.push(Event::Exited(job));
                    }
                    Action::Reject { job, reason } => panic!("{job} rejected: {reason}"),
                }
            }
        }
    }
    panic!(
        "simulation did not finish: {} of {} done",
        done.len(),
        jobs.len()
    );
}

/// Average JCT (completion − arrival) in ms.
pub fn avg_jct(jobs: &[SimJob], done: &BTreeMap<String, UnixMillis>) -> f64 {
    let sum: i64 = jobs.iter().map(|j| done[&j.id] - j.arrival).sum();
    sum as f64 / jobs.len() as f64
}
