//! Joblet's trace simulator (issue 5): replays a GPU job trace through the
//! `joblet-sched` core, the same code the daemon runs, under several
//! policies, and compares them.
//!
//! - [`trace`]: CSV traces (Philly, Tiresias and alike) → jobs at t ≥ 0.
//! - [`cluster`]: `NODESxGPUS` → DGX-like nodes.
//! - [`run`]: the discrete-event simulation of one policy, with an
//!   independent GPU ledger for oversubscription.
//! - [`openb`]: Alibaba's GPU-sharing trace (fractional GPU pods) under
//!   several placement strategies: workload inflation and replay.
//! - [`metrics`], [`report`], [`plot`]: the numbers, the comparison table
//!   (markdown, text, JSON) and an SVG of utilisation and queue length.
//!
//! Entry point: [`simulate`].

pub mod civil;
pub mod cluster;
pub mod duration;
pub mod error;
pub mod ledger;
pub mod metrics;
pub mod openb;
pub mod plot;
pub mod report;
pub mod run;
pub mod trace;

use std::path::PathBuf;

use joblet_sched::model::{Policy, DEFAULT_POLICY};
use serde::Serialize;

pub use cluster::parse_cluster;
pub use duration::parse_duration_ms;
pub use error::SimError;
pub use metrics::PolicyMetrics;
pub use run::{PreemptionCosts, Sample};

/// The policies in the order a comparison lists them by default.
pub const ALL_POLICIES: [Policy; 4] =
    [Policy::Fifo, Policy::Backfill, Policy::Las, Policy::Gittins];

/// How backfill learns durations (reported with the results).
pub const TIME_LIMITS_NOTE: &str = "backfill is given each job's true duration as its time limit; fifo, las and gittins know no durations";

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    pub trace: PathBuf,
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// GiB per GPU (the CLI's default is 32).
    pub gpu_memory_gb: u64,
    /// In report order; at least one.
    pub policies: Vec<Policy>,
    /// Only jobs of this owner/queue (e.g. a Philly virtual cluster).
    pub filter: Option<String>,
    /// Only the first N jobs by submit time (after the filter).
    pub limit: Option<usize>,
    /// Write the utilisation / queue-length SVG here.
    pub plot: Option<PathBuf>,
    /// What preemption costs (on by default: [`PreemptionCosts::DEFAULT`]).
    pub costs: PreemptionCosts,
}

/// One policy's queue and utilisation over time (for the plot).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySeries {
    pub policy: &'static str,
    pub samples: Vec<Sample>,
}

/// The results of one simulation: one [`PolicyMetrics`] per policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    pub trace: String,
    pub filter: Option<String>,
    pub jobs: usize,
    /// `NODESxGPUS`.
    pub cluster: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub gpu_memory_gb: u64,
    pub time_limits: &'static str,
    /// The policy `default` names (the daemon's default).
    pub default_policy: &'static str,
    /// Checkpoint interval, ms (0: preemption loses no work).
    pub checkpoint_interval_ms: u64,
    /// Restore cost after a preemption, ms.
    pub restore_cost_ms: u64,
    pub policies: Vec<PolicyMetrics>,
    /// Time series behind the plot (not in the JSON).
    #[serde(skip)]
    pub series: Vec<PolicySeries>,
}

/// The name `parse_policies` accepts for a policy.
pub fn policy_name(policy: Policy) -> &'static str {
    match policy {
        Policy::Fifo => "fifo",
        Policy::Backfill => "backfill",
        Policy::Las => "las",
        Policy::Gittins => "gittins",
    }
}

/// Parses a comma-separated list of policy names (`fifo`, `backfill`,
/// `las`, `gittins`, or `default` for the daemon's default policy,
/// [`DEFAULT_POLICY`]; case-insensitive), keeping their order.
pub fn parse_policies(s: &str) -> Result<Vec<Policy>, SimError> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let policy = if name.eq_ignore_ascii_case("default") {
            DEFAULT_POLICY
        } else {
            ALL_POLICIES
                .into_iter()
                .find(|p| policy_name(*p).eq_ignore_ascii_case(name))
                .ok_or_else(|| SimError::BadPolicy {
                    name: name.to_string(),
                })?
        };
        if out.contains(&policy) {
            return Err(SimError::DuplicatePolicy {
                name: name.to_string(),
            });
        }
        out.push(policy);
    }
    if out.is_empty() {
        return Err(SimError::NoPolicies);
    }
    Ok(out)
}

/// Reads the trace, runs it through each policy on the same cluster, and
/// writes the plot if asked.
pub fn simulate(opts: &SimOptions) -> Result<SimReport, SimError> {
    if opts.policies.is_empty() {
        return Err(SimError::NoPolicies);
    }
    if opts.gpu_memory_gb == 0 {
        return Err(SimError::BadGpuMemory);
    }
    let cluster = format!("{}x{}", opts.nodes, opts.gpus_per_node);
    // The same checks as the CLI's spec.
    parse_cluster(&cluster)?;
    let trace = trace::read_trace(
        &opts.trace,
        &trace::TraceFilter {
            owner_or_queue: opts.filter.clone(),
            limit: opts.limit,
        },
    )?;
    let shape = run::ClusterShape {
        nodes: opts.nodes,
        gpus_per_node: opts.gpus_per_node,
        gpu_memory_gb: opts.gpu_memory_gb,
    };
    let mut policies = Vec::new();
    let mut series = Vec::new();
    for &policy in &opts.policies {
        let result = run::run_policy(&trace, shape, policy, opts.costs)?;
        policies.push(metrics::metrics(&result));
        series.push(PolicySeries {
            policy: policy_name(policy),
            samples: result.samples,
        });
    }
    let report = SimReport {
        trace: trace.file,
        filter: opts.filter.clone(),
        jobs: trace.jobs.len(),
        cluster,
        nodes: opts.nodes,
        gpus_per_node: opts.gpus_per_node,
        gpu_memory_gb: opts.gpu_memory_gb,
        time_limits: TIME_LIMITS_NOTE,
        default_policy: policy_name(DEFAULT_POLICY),
        checkpoint_interval_ms: opts.costs.checkpoint_interval_ms,
        restore_cost_ms: opts.costs.restore_cost_ms,
        policies,
        series,
    };
    if let Some(path) = &opts.plot {
        let svg = plot::svg(&report).map_err(|message| SimError::Draw {
            path: path.clone(),
            message,
        })?;
        std::fs::write(path, svg).map_err(|source| SimError::Plot {
            path: path.clone(),
            source,
        })?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_policy_lists() {
        assert_eq!(parse_policies("las").unwrap(), [Policy::Las]);
        assert_eq!(
            parse_policies(" FIFO, backfill ,las").unwrap(),
            [Policy::Fifo, Policy::Backfill, Policy::Las]
        );
        let e = parse_policies("fifo,srtf").unwrap_err().to_string();
        assert!(
            e.contains("`srtf`") && e.contains("fifo, backfill, las, gittins, default"),
            "{e}"
        );
        assert_eq!(
            parse_policies("fifo,Default").unwrap(),
            [Policy::Fifo, DEFAULT_POLICY]
        );
        // `default` is a name for a policy: listing it twice is an error.
        let twice = format!("default,{}", policy_name(DEFAULT_POLICY));
        assert!(parse_policies(&twice).is_err());
        assert!(parse_policies("las,las")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(matches!(parse_policies(" , "), Err(SimError::NoPolicies)));
        for p in ALL_POLICIES {
            assert_eq!(parse_policies(policy_name(p)).unwrap(), [p]);
        }
    }
}
