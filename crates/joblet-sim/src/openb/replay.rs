//! Replay of the openb pods over time: each pod is submitted at its
//! `creation_time` and, if it started, exits at its `deletion_time`
//! (exits first at equal times), through a `joblet_sched` [`Scheduler`].
//! As in the trace's own simulator, a pod that cannot start when it is
//! created is cancelled and counted as failed. An independent [`Ledger`]
//! checks every placement; the allocated GPU share is integrated over
//! time.

use std::collections::HashMap;
use std::time::Instant;

use joblet_sched::model::{Action, Event, Placement, Strategy};
use serde::Serialize;

use super::inflate::scheduler_for;
use super::ledger::Ledger;
use super::strategy_name;
use super::trace::{OpenbNode, Pod};
use crate::error::SimError;

/// One strategy's replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayRun {
    pub strategy: &'static str,
    pub pods: u64,
    pub failed_pods: u64,
    /// Time-weighted mean of allocated GPU amount ÷ cluster GPUs, over
    /// [first creation, last event].
    pub mean_allocated_gpu_share: f64,
    pub peak_allocated_gpu_share: f64,
    pub handle_calls: u64,
    pub wall_secs: f64,
    /// (seconds, allocated GPU share) after every event (the plot).
    #[serde(skip)]
    pub samples: Vec<(u64, f64)>,
}

/// Replays the pods under one strategy.
pub fn replay(
    pods: &[Pod],
    nodes: &[OpenbNode],
    strategy: Strategy,
) -> Result<ReplayRun, SimError> {
    let wall = Instant::now();
    let name = strategy_name(strategy);
    let cluster_milli: u64 = nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    if cluster_milli == 0 {
        return Err(SimError::NothingToInflate);
    }
    let (mut sched, mut ledger) = scheduler_for(pods, nodes, strategy);
    // (time s, 0 = exit / 1 = submit, pod index)
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * pods.len());
    for (i, p) in pods.iter().enumerate() {
        events.push((p.creation_s, 1, i));
    }
    events.sort_unstable();
    let mut exits: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        Default::default();
    let mut running: HashMap<String, Placement> = HashMap::new();
    let (mut failed, mut calls) = (0u64, 0u64);
    let mut samples = Vec::new();
    let (mut area, mut last_t, mut peak) = (0f64, None::<u64>, 0f64);
    let broke = |at: u64, detail: String| SimError::SchedulerBroke {
        policy: name,
        at_ms: at.saturating_mul(1000),
        detail,
    };
    let sample = |t: u64, ledger: &Ledger, samples: &mut Vec<(u64, f64)>| {
        let share = ledger.allocated_milli() as f64 / cluster_milli as f64;
        samples.push((t, share));
        share
    };
    let mut share = 0.0;
    let mut next = 0;
    loop {
        let exit_t = exits.peek().map(|r| r.0 .0);
        let sub_t = events.get(next).map(|e| e.0);
        let (t, is_exit) = match (exit_t, sub_t) {
            (None, None) => break,
            (Some(x), Some(s)) if x <= s => (x, true),
            (Some(x), None) => (x, true),
            (_, Some(s)) => (s, false),
        };
        if let Some(l) = last_t {
            area += share * (t - l) as f64;
        }
        last_t = Some(t);
        let now = i64::try_from(t.saturating_mul(1000)).unwrap_or(i64::MAX);
        if is_exit {
            let Some(std::cmp::Reverse((_, i))) = exits.pop() else {
                break;
            };
            let job = format!("p{i}");
            if let Some(p) = running.remove(&job) {
                ledger.give(&p);
            }
            sched.handle(Event::Exited(job), now);
            calls += 1;
        } else {
            let i = events[next].2;
            next += 1;
            let pod = &pods[i];
            let job = format!("p{i}");
            let actions = sched.handle(Event::Submit(Box::new(pod.request(job.clone()))), now);
            calls += 1;
            let mut started = false;
            for a in actions {
                if let Action::Start { placement } = a {
                    ledger.take(&placement).map_err(|d| broke(t, d))?;
                    started |= placement.job == job;
                    running.insert(placement.job.clone(), placement);
                }
            }
            if started {
                exits.push(std::cmp::Reverse((pod.deletion_s.max(t), i)));
            } else {
                failed += 1;
                sched.handle(Event::Cancel(job), now);
                calls += 1;
            }
        }
        share = sample(t, &ledger, &mut samples);
        peak = peak.max(share);
    }
    sched
        .cluster()
        .verify()
        .map_err(|d| broke(last_t.unwrap_or(0), d))?;
    let first_t = samples.first().map_or(0, |s| s.0);
    let span = last_t.unwrap_or(0).saturating_sub(first_t);
    Ok(ReplayRun {
        strategy: name,
        pods: pods.len() as u64,
        failed_pods: failed,
        mean_allocated_gpu_share: if span == 0 { share } else { area / span as f64 },
        peak_allocated_gpu_share: peak,
        handle_calls: calls,
        wall_secs: wall.elapsed().as_secs_f64(),
        samples,
    })
}
