//! Per-policy numbers from one run: completion and queueing-delay
//! statistics, makespan, utilisation, fragmentation, oversubscription and
//! decision throughput.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::policy_name;
use crate::run::RunResult;

/// How many jobs were rejected for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    pub reason: String,
    pub jobs: usize,
}

/// Average, median and 99th percentile of a set of durations, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub avg_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
}

/// One policy's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyMetrics {
    pub policy: &'static str,
    pub jobs_total: usize,
    pub completed: usize,
    pub rejected: usize,
    /// Neither completed nor rejected (the scheduler never started them):
    /// must be 0.
    pub unfinished: usize,
    /// Most frequent first.
    pub rejected_reasons: Vec<ReasonCount>,
    /// Job completion time, end − submit, of completed jobs.
    pub jct: Stats,
    /// First start − submit, of jobs that started.
    pub queueing_delay: Stats,
    /// Last completion − first submission.
    pub makespan_s: f64,
    /// Busy GPU·time ÷ (GPUs × makespan).
    pub utilisation: f64,
    /// Time-weighted average of free GPUs the smallest waiting gang cannot
    /// use (sampled at least a minute apart).
    pub avg_fragmentation_gpus: f64,
    /// Most units in use beyond capacity on any node or GPU: must be 0.
    pub max_oversubscription: u64,
    pub preemptions: u64,
    /// Preemptions per job (of every job in the trace): mean and most.
    pub preemptions_per_job_mean: f64,
    pub preemptions_per_job_max: u32,
    /// GPU·hours of progress lost to preemptions (since the jobs' last
    /// checkpoints).
    pub lost_gpu_hours: f64,
    /// GPU·hours spent restoring after preemptions.
    pub restore_gpu_hours: f64,
    /// `Scheduler::handle` calls.
    pub decisions: u64,
    /// Time spent inside `handle`.
    pub decision_secs: f64,
    pub decisions_per_s: f64,
    /// `cluster().verify()` calls, all passed.
    pub verifies: u64,
    /// Whole run of this policy.
    pub wall_secs: f64,
}

/// Nearest-rank percentile of sorted values (0 for none).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn stats(mut ms: Vec<u64>) -> Stats {
    ms.sort_unstable();
    let avg = if ms.is_empty() {
        0.0
    } else {
        ms.iter().map(|&v| v as f64).sum::<f64>() / ms.len() as f64
    };
    Stats {
        avg_s: avg / 1000.0,
        p50_s: percentile(&ms, 50.0) as f64 / 1000.0,
        p99_s: percentile(&ms, 99.0) as f64 / 1000.0,
    }
}

/// Computes the metrics of one run.
pub fn metrics(run: &RunResult) -> PolicyMetrics {
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    let mut jct = Vec::new();
    let mut delay = Vec::new();
    let (mut completed, mut rejected, mut unfinished, mut preemptions) = (0, 0, 0, 0u64);
    let mut last_end = 0;
    let (mut max_preempt, mut lost_ms, mut restore_ms) = (0u32, 0u128, 0u128);
    for job in &run.jobs {
        preemptions += u64::from(job.preemptions);
        max_preempt = max_preempt.max(job.preemptions);
        lost_ms += u128::from(job.lost_ms) * u128::from(job.gpus);
        restore_ms += u128::from(job.restore_ms) * u128::from(job.gpus);
        if let Some(start) = job.first_start_ms {
            delay.push(start - job.submit_ms);
        }
        match (&job.rejected, job.end_ms) {
            (Some(reason), _) => {
                rejected += 1;
                *reasons.entry(reason).or_default() += 1;
            }
            (None, Some(end)) => {
                completed += 1;
                jct.push(end - job.submit_ms);
                last_end = last_end.max(end);
            }
            (None, None) => unfinished += 1,
        }
    }
    let mut rejected_reasons: Vec<ReasonCount> = reasons
        .into_iter()
        .map(|(reason, jobs)| ReasonCount {
            reason: reason.to_string(),
            jobs,
        })
        .collect();
    rejected_reasons.sort_by(|a, b| b.jobs.cmp(&a.jobs).then_with(|| a.reason.cmp(&b.reason)));
    let makespan_ms = if completed > 0 { last_end } else { run.end_ms };
    let capacity = run.total_units as f64 * makespan_ms as f64;
    PolicyMetrics {
        policy: policy_name(run.policy),
        jobs_total: run.jobs.len(),
        completed,
        rejected,
        unfinished,
        rejected_reasons,
        jct: stats(jct),
        queueing_delay: stats(delay),
        makespan_s: makespan_ms as f64 / 1000.0,
        utilisation: if capacity > 0.0 {
            run.busy_unit_ms as f64 / capacity
        } else {
            0.0
        },
        avg_fragmentation_gpus: if makespan_ms > 0 {
            run.frag_unit_ms as f64 / makespan_ms as f64
        } else {
            0.0
        },
        max_oversubscription: run.max_oversubscription,
        preemptions,
        preemptions_per_job_mean: if run.jobs.is_empty() {
            0.0
        } else {
            preemptions as f64 / run.jobs.len() as f64
        },
        preemptions_per_job_max: max_preempt,
        lost_gpu_hours: lost_ms as f64 / 3_600_000.0,
        restore_gpu_hours: restore_ms as f64 / 3_600_000.0,
        decisions: run.handle_calls,
        decision_secs: run.handle_secs,
        decisions_per_s: if run.handle_secs > 0.0 {
            run.handle_calls as f64 / run.handle_secs
        } else {
            0.0
        },
        verifies: run.verifies,
        wall_secs: run.wall_secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(percentile(&[1, 2, 3], 0.0), 1);
    }

    #[test]
    fn stats_in_seconds() {
        let s = stats(vec![3000, 1000, 2000]);
        assert_eq!(s.avg_s, 2.0);
        assert_eq!(s.p50_s, 2.0);
        assert_eq!(s.p99_s, 3.0);
    }
}
