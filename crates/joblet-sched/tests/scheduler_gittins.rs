//! The Gittins policy: FIFO order while no size model exists and
//! whenever every job has the same size (no preemption then), LAS-like
//! preemption of long jobs on a heavy-tailed workload.

mod scheduler_support;

use joblet_sched::model::{Event, Policy, SchedConfig};
use joblet_sched::scheduler::Scheduler;
use proptest::prelude::*;
use scheduler_support::*;

fn gittins(min_samples: u32) -> SchedConfig {
    SchedConfig {
        gittins_min_samples: min_samples,
        ..costly(Policy::Gittins, 600_000, 60_000)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Equal sizes (one bucket): the index grows with service, nothing is
    /// preempted, and jobs end exactly when they end under FIFO.
    #[test]
    fn equal_sizes_run_in_fifo_order(
        gaps in proptest::collection::vec(0i64..600_000, 20..90),
        minutes in 1i64..240,
        gpus in 1u32..3,
        min_samples in 1u32..40,
    ) {
        let mut t = 0;
        let jobs: Vec<SimJob> = gaps
            .iter()
            .enumerate()
            .map(|(i, g)| {
                t += g;
                SimJob { id: format!("j{i:03}"), arrival: t, duration: minutes * 60_000, gpus: 1 }
            })
            .collect();
        let nodes = vec![node(0, gpus * 2)];
        let fifo = simulate(config(Policy::Fifo), nodes.clone(), &jobs, 60_000);
        let git = simulate(gittins(min_samples), nodes, &jobs, 60_000);
        prop_assert_eq!(fifo, git);
    }
}

#[test]
fn fifo_order_before_the_model_exists() {
    let mut s = Scheduler::new(gittins(1_000), vec![node(0, 1)]);
    let mut a = req("a", 1);
    a.preemptible = true;
    submit(&mut s, a, 0);
    submit(&mut s, req("b", 1), 1_000);
    submit(&mut s, req("c", 1), 2_000);
    assert!(preempted(&s.handle(Event::Tick, 100 * 60_000)).is_empty());
    assert_eq!(started(&exit(&mut s, "a", 101 * 60_000)), ["b"]);
    assert_eq!(started(&exit(&mut s, "b", 102 * 60_000)), ["c"]);
}

#[test]
fn long_jobs_are_preempted_for_new_ones_when_most_jobs_are_short() {
    // 40 one-minute jobs teach the model; then a long job runs and a new
    // job arrives: the long one has run well past what most jobs need.
    let mut s = Scheduler::new(gittins(8), vec![node(0, 1)]);
    let mut t = 0;
    for i in 0..40 {
        let job = format!("short{i}");
        assert_eq!(
            started(&submit(&mut s, req(&job, 1), t)),
            std::slice::from_ref(&job)
        );
        t += 60_000;
        exit(&mut s, &job, t);
    }
    let mut long = req("long", 1);
    long.preemptible = true;
    assert_eq!(started(&submit(&mut s, long, t)), ["long"]);
    let a = submit(&mut s, req("new", 1), t + 5 * 60_000);
    assert!(preempted(&a).is_empty(), "before its first checkpoint");
    let a = s.handle(Event::Tick, t + 10 * 60_000);
    assert_eq!(preempted(&a), ["long"]);
    assert_eq!(started(&exit(&mut s, "long", t + 10 * 60_000)), ["new"]);
}

#[test]
fn gittins_beats_fifo_on_a_heavy_tailed_workload() {
    // 85 % of jobs take 1–10 minutes, 15 % take 2–8 hours.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut t = 0;
    let jobs: Vec<SimJob> = (0..300)
        .map(|i| {
            t += 1_000 * (1 + next(40) as i64);
            let duration = if next(100) < 85 {
                60_000 * (1 + next(10) as i64)
            } else {
                3_600_000 * (2 + next(7) as i64)
            };
            SimJob {
                id: format!("j{i:03}"),
                arrival: t,
                duration,
                gpus: 1,
            }
        })
        .collect();
    let nodes = vec![node(0, 8)];
    let fifo = simulate(config(Policy::Fifo), nodes.clone(), &jobs, 60_000);
    let git = simulate(gittins(16), nodes, &jobs, 60_000);
    let (f, g) = (avg_jct(&jobs, &fifo), avg_jct(&jobs, &git));
    assert!(g < 0.8 * f, "gittins {g:.0} ms vs fifo {f:.0} ms");
}
