//! Shared requests (fractions of a GPU, memory-shared GPUs) are placed by
//! `shared_strategy` where it is set, exclusive ones by `strategy`, as the
//! daemon configures it (`fgd` for shared GPUs, `topology` otherwise).

mod scheduler_support;

use joblet_sched::model::{Action, JobRequest, Policy, SchedConfig, Sharing, Strategy};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

fn quarter(job: &str) -> JobRequest {
    JobRequest {
        sharing: Sharing::Shared,
        gpu_milli: 250,
        ..req(job, 1)
    }
}

/// The GPU index each started job was placed on.
fn gpus(actions: &[Action]) -> Vec<u32> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { placement } => Some(placement.units[0].index),
            _ => None,
        })
        .collect()
}

fn place_two_quarters(cfg: SchedConfig) -> Vec<u32> {
    let mut s = Scheduler::new(cfg, vec![node(0, 4)]);
    let mut at = Vec::new();
    at.extend(gpus(&submit(&mut s, quarter("a"), 0)));
    at.extend(gpus(&submit(&mut s, quarter("b"), 1)));
    at
}

#[test]
fn shared_requests_follow_the_shared_strategy_and_exclusive_ones_the_strategy() {
    let packed = SchedConfig {
        strategy: Strategy::Pack,
        ..config(Policy::Fifo)
    };
    let at = place_two_quarters(packed.clone());
    assert_eq!(at[0], at[1], "pack puts both quarters on one GPU: {at:?}");

    let spread_shared = SchedConfig {
        shared_strategy: Some(Strategy::Spread),
        ..packed
    };
    let at = place_two_quarters(spread_shared.clone());
    assert_ne!(at[0], at[1], "spread for shared requests: {at:?}");
    assert_eq!(
        spread_shared.strategy_for(&req("x", 1)),
        Strategy::Pack,
        "exclusive requests keep the strategy"
    );
    assert_eq!(spread_shared.strategy_for(&quarter("y")), Strategy::Spread);
}
