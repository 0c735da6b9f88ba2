//! Preemption costs (every policy): no job is preempted before its first
//! checkpoint of a run (after its restore when it was preempted before),
//! and victims that would lose the least work go first.

mod scheduler_support;

use joblet_sched::model::{Event, Policy, SchedConfig};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

const MIN: i64 = 60_000;

fn las(checkpoint_ms: u64, restore_ms: u64) -> SchedConfig {
    SchedConfig {
        las_thresholds_gpu_ms: vec![1_000],
        ..costly(Policy::Las, checkpoint_ms, restore_ms)
    }
}

#[test]
fn no_preemption_before_the_first_checkpoint_of_a_run() {
    // Checkpoints every 10 minutes, 2 minutes to restore.
    let mut s = Scheduler::new(las(600_000, 120_000), vec![node(0, 1)]);
    let mut a = req("a", 1);
    a.preemptible = true;
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    let mut b = req("b", 1);
    b.preemptible = true;
    // `a` sank below `b` at once, but has not checkpointed yet.
    assert!(preempted(&submit(&mut s, b, MIN)).is_empty());
    for t in (2..10).map(|m| m * MIN) {
        assert!(preempted(&s.handle(Event::Tick, t)).is_empty(), "at {t}");
    }
    assert_eq!(preempted(&s.handle(Event::Tick, 10 * MIN)), ["a"]);
    assert_eq!(started(&exit(&mut s, "a", 10 * MIN)), ["b"]);
    // `b` ends at 12 min and `a` restarts: its restored run checkpoints
    // first 2 + 10 minutes in, at 24 min, so `c` waits until then.
    assert_eq!(started(&exit(&mut s, "b", 12 * MIN)), ["a"]);
    assert!(preempted(&submit(&mut s, req("c", 1), 13 * MIN)).is_empty());
    for t in (14..24).map(|m| m * MIN) {
        assert!(preempted(&s.handle(Event::Tick, t)).is_empty(), "at {t}");
    }
    assert_eq!(preempted(&s.handle(Event::Tick, 24 * MIN)), ["a"]);
}

#[test]
fn a_requests_own_checkpoint_interval_wins() {
    let mut s = Scheduler::new(las(600_000, 0), vec![node(0, 1)]);
    let mut a = req("a", 1);
    a.preemptible = true;
    a.checkpoint_interval_ms = Some(3 * 60_000);
    submit(&mut s, a, 0);
    let mut b = req("b", 1);
    b.preemptible = true;
    assert!(preempted(&submit(&mut s, b, 2 * MIN)).is_empty());
    assert_eq!(preempted(&s.handle(Event::Tick, 3 * MIN)), ["a"]);
}

#[test]
fn victims_that_lose_the_least_work_go_first() {
    // Checkpoints every 10 minutes. `old` started at 0 and `young` at
    // 5 min; at 24 min `old` would lose 4 min of work and `young` 9 min,
    // so `old` goes though `young` has less attained service.
    let mut s = Scheduler::new(las(600_000, 0), vec![node(0, 2)]);
    for (job, t) in [("old", 0), ("young", 5 * MIN)] {
        let mut r = req(job, 1);
        r.preemptible = true;
        assert_eq!(started(&submit(&mut s, r, t)), [job]);
    }
    assert_eq!(preempted(&submit(&mut s, req("new", 1), 24 * MIN)), ["old"]);
    // At 26 min: `young` would lose 1 min, the other 6 min.
    let mut s = Scheduler::new(las(600_000, 0), vec![node(0, 2)]);
    for (job, t) in [("old", 0), ("young", 5 * MIN)] {
        let mut r = req(job, 1);
        r.preemptible = true;
        submit(&mut s, r, t);
    }
    assert_eq!(
        preempted(&submit(&mut s, req("new", 1), 26 * MIN)),
        ["young"]
    );
}

#[test]
fn free_preemption_keeps_the_minimum_run_time_only() {
    let mut s = Scheduler::new(las(0, 0), vec![node(0, 1)]);
    let mut a = req("a", 1);
    a.preemptible = true;
    submit(&mut s, a, 0);
    let mut b = req("b", 1);
    b.preemptible = true;
    assert!(preempted(&submit(&mut s, b, MIN - 1)).is_empty());
    // The failed search is retried 5 s later; by then `a` ran a minute.
    assert_eq!(preempted(&s.handle(Event::Tick, MIN + 5_000)), ["a"]);
}
