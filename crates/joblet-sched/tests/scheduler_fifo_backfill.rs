//! FIFO and EASY backfill: the head blocks under FIFO, backfill never
//! delays the head's reservation, and plain priority preemption.

mod scheduler_support;

use joblet_sched::model::{Event, Policy};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

#[test]
fn fifo_head_blocks_everything_behind_it_cpu_jobs_too() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 8)]);
    assert_eq!(started(&submit(&mut s, req("a", 6), 0)), ["a"]);
    assert!(started(&submit(&mut s, req("b", 4), 1)).is_empty());
    assert!(
        started(&submit(&mut s, req("c", 1), 2)).is_empty(),
        "c is behind b"
    );
    assert!(
        started(&submit(&mut s, req("cpu", 0), 3)).is_empty(),
        "a CPU-only job is behind b too"
    );
    assert_eq!(s.cluster().free_units(), 2);
    assert_eq!(started(&exit(&mut s, "a", 10)), ["b", "c", "cpu"]);
    assert_eq!((s.waiting(), s.running()), (0, 3));
}

#[test]
fn fifo_starts_by_priority_then_arrival() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 2)]);
    submit(&mut s, req("run", 2), 0);
    submit(&mut s, req("low1", 1), 1);
    let mut hi = req("hi", 1);
    hi.priority = 5;
    submit(&mut s, hi, 2);
    submit(&mut s, req("low2", 1), 3);
    assert_eq!(started(&exit(&mut s, "run", 10)), ["hi", "low1"]);
}

/// Node of 8: `a` (4 GPUs, ends by 100 s) and `b` (2 GPUs, ends by
/// 1000 s) run; the head `h` needs 6, so its reservation is at 100 s.
fn backfill_setup() -> Scheduler {
    let mut s = Scheduler::new(config(Policy::Backfill), vec![node(0, 8)]);
    let mut a = req("a", 4);
    a.time_limit_ms = Some(100_000);
    let mut b = req("b", 2);
    b.time_limit_ms = Some(1_000_000);
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    assert_eq!(started(&submit(&mut s, b, 0)), ["b"]);
    assert!(started(&submit(&mut s, req("h", 6), 0)).is_empty());
    s
}

#[test]
fn backfill_starts_only_jobs_that_end_before_the_reservation() {
    let mut s = backfill_setup();
    let mut long = req("long", 2);
    long.time_limit_ms = Some(200_000);
    assert!(
        started(&submit(&mut s, long, 1_000)).is_empty(),
        "would delay h"
    );
    assert!(
        started(&submit(&mut s, req("nolimit", 1), 1_000)).is_empty(),
        "jobs without a time limit never backfill"
    );
    let mut short = req("short", 2);
    short.time_limit_ms = Some(50_000);
    assert_eq!(started(&submit(&mut s, short, 1_000)), ["short"]);
    // Everyone ends at their limit: the head starts exactly at 100 s.
    assert!(started(&exit(&mut s, "short", 51_000)).is_empty());
    assert_eq!(started(&exit(&mut s, "a", 100_000)), ["h"]);
}

#[test]
fn backfill_never_delays_the_head_under_a_stream_of_candidates() {
    let mut s = backfill_setup();
    // Candidates arrive every second and run to their limits; whatever
    // starts must end by 100 s, when `a` ends and the head must start.
    let mut limits = std::collections::BTreeMap::new();
    let mut ends: Vec<(i64, String)> = Vec::new();
    let record = |actions: Vec<joblet_sched::model::Action>,
                  now: i64,
                  limits: &std::collections::BTreeMap<String, u64>,
                  ends: &mut Vec<(i64, String)>| {
        let jobs = started(&actions);
        for job in jobs.iter().cloned() {
            let end = now + limits[&job] as i64;
            assert!(end <= 100_000, "{job} ends at {end}, after the reservation");
            ends.push((end, job));
        }
        jobs.len()
    };
    let mut backfilled = 0;
    for i in 0..99 {
        let now = 1_000 * i;
        ends.sort();
        while ends.first().is_some_and(|e| e.0 <= now) {
            let (end, job) = ends.remove(0);
            let a = exit(&mut s, &job, end);
            backfilled += record(a, end, &limits, &mut ends);
            ends.sort();
        }
        let mut c = req(&format!("c{i}"), 1 + (i % 2) as u32);
        c.time_limit_ms = Some(((i * 7_919) % 150) as u64 * 1_000 + 1_000);
        limits.insert(c.job.clone(), c.time_limit_ms.unwrap());
        let a = submit(&mut s, c, now);
        backfilled += record(a, now, &limits, &mut ends);
    }
    assert!(backfilled >= 5, "only {backfilled} backfilled");
    ends.sort();
    while let Some((end, job)) = (!ends.is_empty()).then(|| ends.remove(0)) {
        let a = exit(&mut s, &job, end);
        record(a, end, &limits, &mut ends);
        ends.sort();
    }
    assert_eq!(started(&exit(&mut s, "a", 100_000)), ["h"]);
}

#[test]
fn backfill_uses_units_the_reservation_does_not_need() {
    // Node 0 (8 GPUs) is full until 100 s; node 1 has 2 GPUs, too small
    // for the head (4 on one node): a long job may use node 1.
    let mut s = Scheduler::new(config(Policy::Backfill), vec![node(0, 8), node(1, 2)]);
    let mut a = req("a", 8);
    a.time_limit_ms = Some(100_000);
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    assert!(started(&submit(&mut s, req("h", 4), 0)).is_empty());
    let mut long = req("long", 2);
    long.time_limit_ms = Some(10_000_000);
    assert_eq!(started(&submit(&mut s, long, 0)), ["long"]);
    assert_eq!(started(&exit(&mut s, "a", 100_000)), ["h"]);
}

#[test]
fn backfill_is_off_while_the_head_waits_for_a_job_without_limit() {
    let mut s = Scheduler::new(config(Policy::Backfill), vec![node(0, 4)]);
    submit(&mut s, req("a", 3), 0); // no limit: the head's start is unknown
    assert!(started(&submit(&mut s, req("h", 4), 0)).is_empty());
    let mut short = req("short", 1);
    short.time_limit_ms = Some(1_000);
    assert!(started(&submit(&mut s, short, 0)).is_empty());
    assert_eq!(started(&exit(&mut s, "a", 5_000)), ["h"]);
}

#[test]
fn higher_priority_preempts_lower_priority_preemptible_after_min_run() {
    for policy in [Policy::Fifo, Policy::Backfill] {
        let mut s = Scheduler::new(config(policy), vec![node(0, 4)]);
        let mut low = req("low", 4);
        low.preemptible = true;
        submit(&mut s, low, 0);
        let mut hi = req("hi", 2);
        hi.priority = 5;
        let a = submit(&mut s, hi, 1_000);
        assert!(
            preempted(&a).is_empty(),
            "low ran less than the minimum run time"
        );
        let a = s.handle(Event::Tick, 61_000);
        assert_eq!(preempted(&a), ["low"]);
        assert!(preempted(&s.handle(Event::Tick, 62_000)).is_empty());
        // low keeps its GPUs until it exits, then waits again.
        assert_eq!(s.cluster().free_units(), 0);
        assert_eq!(started(&exit(&mut s, "low", 63_000)), ["hi"]);
        assert_eq!(s.waiting(), 1);
        assert_eq!(s.attained_gpu_ms("low", 63_000), Some(4 * 63_000));
    }
}

#[test]
fn equal_priority_and_non_preemptible_jobs_are_not_preempted() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 2)]);
    let mut same = req("same", 1);
    same.preemptible = true;
    submit(&mut s, same, 0);
    submit(&mut s, req("fixed", 1), 0);
    let mut mid = req("mid", 2);
    mid.priority = 0;
    submit(&mut s, mid, 0);
    let mut hi = req("hi", 2);
    hi.priority = 1;
    submit(&mut s, hi, 0);
    // hi needs 2 GPUs; only `same` could go, which frees just one.
    assert!(preempted(&s.handle(Event::Tick, 1_000_000)).is_empty());
}
