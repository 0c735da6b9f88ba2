//! Preemption costs in the simulator, over random traces: a preemption
//! never loses more than one checkpoint interval of work, restores are
//! paid once per restart, busy GPU·time is the trace's work plus exactly
//! those costs, free preemption costs nothing, and no GPU is ever
//! oversubscribed (the simulator's own ledger), under every policy.

use joblet_sim::metrics::metrics;
use joblet_sim::run::{run_policy, ClusterShape, PreemptionCosts};
use joblet_sim::trace::{parse_trace, TraceFilter};
use joblet_sim::ALL_POLICIES;
use proptest::prelude::*;

/// A trace of (gap s, duration s, GPUs) rows in Tiresias' columns.
fn csv(rows: &[(u32, u32, u32)]) -> String {
    let mut out = String::from("job_id,num_gpu,submit_time,duration\n");
    let mut t = 0;
    for (i, &(gap, duration, gpus)) in rows.iter().enumerate() {
        t += gap;
        out.push_str(&format!("{i},{gpus},{t},{duration}\n"));
    }
    out
}

fn row() -> impl Strategy<Value = (u32, u32, u32)> {
    (
        0u32..900,
        // Mostly minutes, some hours: preemptions happen.
        prop_oneof![3 => 30u32..1_200, 1 => 3_600u32..30_000],
        prop_oneof![4 => Just(1u32), 1 => Just(2u32), 1 => Just(4u32), 1 => Just(8u32)],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_preemption_loses_at_most_one_checkpoint_interval(
        rows in proptest::collection::vec(row(), 10..70),
        checkpoint_min in prop_oneof![Just(0u64), 1u64..45],
        restore_s in prop_oneof![Just(0u64), 1u64..300],
    ) {
        let trace = parse_trace("random.csv", csv(&rows).as_bytes(), &TraceFilter::default()).unwrap();
        let costs = PreemptionCosts {
            checkpoint_interval_ms: checkpoint_min * 60_000,
            restore_cost_ms: restore_s * 1_000,
        };
        let shape = ClusterShape { nodes: 2, gpus_per_node: 8, gpu_memory_gb: 32 };
        for policy in ALL_POLICIES {
            let run = run_policy(&trace, shape, policy, costs).unwrap();
            let m = metrics(&run);
            prop_assert_eq!(m.max_oversubscription, 0, "{:?}", policy);
            prop_assert_eq!(m.completed, trace.jobs.len(), "{:?}", policy);
            let mut work = 0u128;
            for (job, out) in trace.jobs.iter().zip(&run.jobs) {
                let p = u64::from(out.preemptions);
                if costs.checkpoint_interval_ms == 0 {
                    prop_assert_eq!(out.lost_ms, 0);
                } else {
                    prop_assert!(out.max_lost_ms < costs.checkpoint_interval_ms, "{:?}: {:?}", policy, out);
                }
                prop_assert!(out.lost_ms <= p * out.max_lost_ms);
                // Every restart restores, at most once per preemption.
                prop_assert!(out.restore_ms <= p * costs.restore_cost_ms);
                let (Some(start), Some(end)) = (out.first_start_ms, out.end_ms) else {
                    panic!("{policy:?}: {out:?} did not run");
                };
                prop_assert!(end - start >= job.duration_ms + out.lost_ms + out.restore_ms);
                work += u128::from(job.gpus) * u128::from(job.duration_ms + out.lost_ms + out.restore_ms);
            }
            prop_assert_eq!(run.busy_unit_ms, work, "{:?}", policy);
        }
    }
}

#[test]
fn free_preemption_costs_nothing() {
    let rows: Vec<(u32, u32, u32)> = (0..60)
        .map(|i| (20, if i % 5 == 0 { 20_000 } else { 120 }, 1 + i % 2))
        .collect();
    let trace = parse_trace("free.csv", csv(&rows).as_bytes(), &TraceFilter::default()).unwrap();
    let shape = ClusterShape {
        nodes: 1,
        gpus_per_node: 4,
        gpu_memory_gb: 32,
    };
    let run = run_policy(
        &trace,
        shape,
        joblet_sched::model::Policy::Las,
        PreemptionCosts::FREE,
    )
    .unwrap();
    let m = metrics(&run);
    assert!(m.preemptions > 0, "the workload preempts");
    assert_eq!((m.lost_gpu_hours, m.restore_gpu_hours), (0.0, 0.0));
}

#[test]
fn split_keeps_work_up_to_the_last_checkpoint() {
    let c = PreemptionCosts {
        checkpoint_interval_ms: 1_000,
        restore_cost_ms: 300,
    };
    // Preempted 2,500 ms into a first run: 2,000 kept, 500 lost.
    assert_eq!(c.split(2_500, 0), (2_000, 500));
    // In a restored run, the restore comes first.
    assert_eq!(c.split(2_500, 300), (2_000, 200));
    assert_eq!(c.split(200, 300), (0, 0));
    assert_eq!(PreemptionCosts::FREE.split(2_500, 0), (2_500, 0));
}
