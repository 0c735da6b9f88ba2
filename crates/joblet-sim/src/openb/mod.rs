//! Alibaba's openb GPU-sharing trace through the scheduler core: the
//! FGD paper's workload-inflation experiment ([`inflate`]) and a replay of
//! the pods over their creation and deletion times ([`replay`]), for
//! several placement strategies, with the allocated GPU share and the
//! GPUs left unallocated as the results.
//!
//! - [`trace`]: the pod and node lists → pods, nodes, requests.
//! - [`ledger`]: the independent oversubscription check.
//! - [`report`]: tables (text, markdown), JSON and the SVG plot.

pub mod inflate;
pub mod ledger;
pub mod replay;
pub mod report;
pub mod trace;

use std::path::PathBuf;

use joblet_sched::model::Strategy;

use crate::error::SimError;
pub use inflate::{InflateOptions, Level, StrategyRun, DEFAULT_SEED};
pub use report::OpenbReport;

/// Strategies in the order a comparison lists them by default.
pub const ALL_STRATEGIES: [Strategy; 5] = [
    Strategy::Fgd,
    Strategy::BestFit,
    Strategy::Pack,
    Strategy::Spread,
    Strategy::Topology,
];

/// The name `parse_strategies` accepts for a strategy.
pub fn strategy_name(s: Strategy) -> &'static str {
    match s {
        Strategy::Fgd => "fgd",
        Strategy::BestFit => "best-fit",
        Strategy::Pack => "pack",
        Strategy::Spread => "spread",
        Strategy::Topology => "topology",
    }
}

/// Parses a comma-separated list of strategy names (case-insensitive),
/// keeping their order.
pub fn parse_strategies(s: &str) -> Result<Vec<Strategy>, SimError> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let st = ALL_STRATEGIES
            .into_iter()
            .find(|st| strategy_name(*st).eq_ignore_ascii_case(name))
            .ok_or_else(|| SimError::BadStrategy {
                name: name.to_string(),
            })?;
        if out.contains(&st) {
            return Err(SimError::DuplicateStrategy {
                name: name.to_string(),
            });
        }
        out.push(st);
    }
    if out.is_empty() {
        return Err(SimError::NoStrategies);
    }
    Ok(out)
}

/// Which experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpenbMode {
    Inflate(InflateOptions),
    Replay,
}

/// What to simulate on the openb trace.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenbOptions {
    pub pods: PathBuf,
    pub nodes: PathBuf,
    pub strategies: Vec<Strategy>,
    pub mode: OpenbMode,
    /// Write allocated GPU share vs arrived workload (inflation) or vs
    /// time (replay) as an SVG here.
    pub plot: Option<PathBuf>,
}

/// Reads both lists, runs every strategy, writes the plot if asked.
pub fn simulate_openb(opts: &OpenbOptions) -> Result<OpenbReport, SimError> {
    if opts.strategies.is_empty() {
        return Err(SimError::NoStrategies);
    }
    let pods = trace::read_pods(&opts.pods)?;
    trace::check_no_gpu_spec(&pods, &opts.pods)?;
    let nodes = trace::read_nodes(&opts.nodes)?;
    let mut report = OpenbReport::new(opts, &pods, &nodes);
    for &s in &opts.strategies {
        match opts.mode {
            OpenbMode::Inflate(o) => report
                .inflation
                .push(inflate::inflate(&pods, &nodes, s, o)?),
            OpenbMode::Replay => report.replay.push(replay::replay(&pods, &nodes, s)?),
        }
    }
    if let Some(path) = &opts.plot {
        report::write_plot(&report, path)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strategy_lists() {
        assert_eq!(
            parse_strategies("FGD, best-fit").unwrap(),
            [Strategy::Fgd, Strategy::BestFit]
        );
        let e = parse_strategies("fgd,dotprod").unwrap_err().to_string();
        assert!(
            e.contains("`dotprod`") && e.contains("fgd, best-fit, pack, spread, topology"),
            "{e}"
        );
        assert!(parse_strategies("pack,pack")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(matches!(parse_strategies(","), Err(SimError::NoStrategies)));
        for s in ALL_STRATEGIES {
            assert_eq!(parse_strategies(strategy_name(s)).unwrap(), [s]);
        }
    }
}
