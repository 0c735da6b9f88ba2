//! Workload inflation (the FGD paper's experiment): pods drawn from the
//! trace's pod list at random, with replacement, are submitted one by one
//! to a `joblet_sched` [`Scheduler`] (through `handle`, as the daemon
//! does) until the arrived workload (the sum of the GPU demand of every
//! pod drawn, placed or not, over the cluster's GPUs) reaches the target.
//! Nothing departs. A pod that does not start at once is cancelled and
//! counted as failed. After each pod an independent [`Ledger`] checks the
//! placement, and at each arrived-workload level the allocated GPU share
//! and the unallocated GPUs (cluster GPUs minus the allocated GPU amount,
//! fractions counted) are recorded.
//!
//! The draw is a SplitMix64 stream from the seed: the same seed, trace and
//! strategy give the same run.

use std::time::Instant;

use joblet_sched::model::{Action, Event, Policy, SchedConfig, Strategy};
use joblet_sched::place::workload::{Shape, Workload};
use joblet_sched::scheduler::Scheduler;
use serde::Serialize;

use super::ledger::Ledger;
use super::strategy_name;
use super::trace::{node_specs, OpenbNode, Pod};
use crate::error::SimError;

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 42;

/// How far to inflate and how often to record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InflateOptions {
    pub seed: u64,
    /// Stop once the arrived workload reaches this % of the cluster's GPUs.
    pub target_pct: u32,
    /// Record every this many % of arrived workload.
    pub step_pct: u32,
}

impl Default for InflateOptions {
    fn default() -> InflateOptions {
        InflateOptions {
            seed: DEFAULT_SEED,
            target_pct: 130,
            step_pct: 5,
        }
    }
}

/// The cluster at one arrived-workload level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    /// Arrived GPU demand, % of the cluster's GPUs.
    pub arrived_pct: f64,
    /// Allocated GPU amount ÷ cluster GPUs.
    pub allocated_gpu_share: f64,
    /// Cluster GPUs − allocated GPU amount (fractions counted).
    pub unallocated_gpus: f64,
    /// `unallocated_gpus` as % of the cluster's GPUs.
    pub unallocated_pct: f64,
    /// Pods drawn so far, and those that did not start.
    pub pods: u64,
    pub failed_pods: u64,
}

/// One strategy's inflation run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyRun {
    pub strategy: &'static str,
    /// At every `step_pct` up to the target.
    pub levels: Vec<Level>,
    /// At 100% arrived workload.
    pub at_100: Level,
    pub handle_calls: u64,
    pub wall_secs: f64,
}

/// Splitmix64 (Steele, Lea, Flood 2014): a tiny, seedable, portable stream.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0), by rejection (no modulo bias).
    fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// The workload mix of a pod list: every pod's shape once.
pub fn trace_workload(pods: &[Pod]) -> Workload {
    Workload::seeded(pods.iter().map(|p| Shape::of(&p.request(String::new()))))
}

/// The scheduler of one strategy over `nodes` (FIFO: pods are placed in
/// the order they arrive), its workload mix seeded with the pod list, and
/// the independent ledger that checks its starts.
pub(super) fn scheduler_for(
    pods: &[Pod],
    nodes: &[OpenbNode],
    strategy: Strategy,
) -> (Scheduler, Ledger) {
    let specs = node_specs(nodes);
    let config = SchedConfig {
        policy: Policy::Fifo,
        strategy,
        ..SchedConfig::default()
    };
    let mut sched = Scheduler::new(config, specs.clone());
    sched.seed_workload(trace_workload(pods));
    (sched, Ledger::new(&specs))
}

/// Inflates the cluster with pods under one strategy.
pub fn inflate(
    pods: &[Pod],
    nodes: &[OpenbNode],
    strategy: Strategy,
    opts: InflateOptions,
) -> Result<StrategyRun, SimError> {
    let wall = Instant::now();
    let name = strategy_name(strategy);
    let cluster_milli: u64 = nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    if cluster_milli == 0 || pods.is_empty() || opts.step_pct == 0 {
        return Err(SimError::NothingToInflate);
    }
    let (mut sched, mut ledger) = scheduler_for(pods, nodes, strategy);
    let mut rng = SplitMix64(opts.seed);
    let target = cluster_milli * u64::from(opts.target_pct) / 100;
    let step = cluster_milli * u64::from(opts.step_pct) / 100;
    let mut next_level = step.max(1);
    let (mut arrived, mut allocated, mut drawn, mut failed, mut calls) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut levels = Vec::new();
    let mut at_100 = None;
    let level = |arrived: u64, allocated: u64, drawn: u64, failed: u64| Level {
        arrived_pct: arrived as f64 * 100.0 / cluster_milli as f64,
        allocated_gpu_share: allocated as f64 / cluster_milli as f64,
        unallocated_gpus: (cluster_milli - allocated) as f64 / 1000.0,
        unallocated_pct: (cluster_milli - allocated) as f64 * 100.0 / cluster_milli as f64,
        pods: drawn,
        failed_pods: failed,
    };
    while arrived < target {
        let pod = &pods[rng.below(pods.len() as u64) as usize];
        let job = format!("p{drawn}");
        drawn += 1;
        let now = drawn as i64;
        let actions = sched.handle(Event::Submit(Box::new(pod.request(job.clone()))), now);
        calls += 1;
        let mut started = false;
        for a in actions {
            match a {
                Action::Start { placement } => {
                    ledger
                        .take(&placement)
                        .map_err(|detail| SimError::SchedulerBroke {
                            policy: name,
                            at_ms: drawn,
                            detail,
                        })?;
                    started |= placement.job == job;
                }
                Action::Reject { .. } | Action::Preempt { .. } => {}
            }
        }
        if started {
            allocated += pod.gpu_demand_milli();
        } else {
            failed += 1;
            sched.handle(Event::Cancel(job), now);
            calls += 1;
        }
        arrived += pod.gpu_demand_milli();
        if at_100.is_none() && arrived >= cluster_milli {
            at_100 = Some(level(arrived, allocated, drawn, failed));
        }
        while arrived >= next_level && next_level <= target {
            levels.push(level(next_level, allocated, drawn, failed));
            next_level += step.max(1);
        }
    }
    sched
        .cluster()
        .verify()
        .map_err(|detail| SimError::SchedulerBroke {
            policy: name,
            at_ms: drawn,
            detail,
        })?;
    if ledger.allocated_milli() != allocated {
        return Err(SimError::SchedulerBroke {
            policy: name,
            at_ms: drawn,
            detail: format!(
                "the ledger holds {} GPU milli but the started pods asked {allocated}",
                ledger.allocated_milli()
            ),
        });
    }
    let at_100 = at_100.unwrap_or_else(|| level(arrived, allocated, drawn, failed));
    Ok(StrategyRun {
        strategy: name,
        levels,
        at_100,
        handle_calls: calls,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_fixed_and_uniform_enough() {
        let mut r = SplitMix64(42);
        let first: Vec<u64> = (0..3).map(|_| r.below(10)).collect();
        let mut again = SplitMix64(42);
        assert_eq!(first, (0..3).map(|_| again.below(10)).collect::<Vec<_>>());
        let mut counts = [0u32; 4];
        let mut r = SplitMix64(7);
        for _ in 0..40_000 {
            counts[r.below(4) as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| (9_000..11_000).contains(c)),
            "{counts:?}"
        );
    }
}
