//! Quotas, the per-owner token bucket, and aging.

mod scheduler_support;

use joblet_sched::model::{Event, Policy, Quota, RateLimit, SchedConfig};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

fn owned(job: &str, gpus: u32, owner: &str) -> joblet_sched::model::JobRequest {
    let mut r = req(job, gpus);
    r.owner = owner.into();
    r
}

#[test]
fn owner_quota_rejects_larger_jobs_and_holds_back_the_rest() {
    for policy in [Policy::Fifo, Policy::Backfill, Policy::Las] {
        let cfg = SchedConfig {
            owner_quotas: vec![("alice".into(), Quota { max_gpus: 4 })],
            ..config(policy)
        };
        let mut s = Scheduler::new(cfg, vec![node(0, 8)]);
        let r = rejected(&submit(&mut s, owned("huge", 5, "alice"), 0));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1, "asks for 5 GPUs but the owner's quota is 4");
        assert_eq!(started(&submit(&mut s, owned("a1", 3, "alice"), 0)), ["a1"]);
        assert!(started(&submit(&mut s, owned("a2", 2, "alice"), 0)).is_empty());
        // Another owner is not blocked by alice's waiting job, even in FIFO.
        assert_eq!(started(&submit(&mut s, owned("b1", 2, "bob"), 0)), ["b1"]);
        assert_eq!(started(&exit(&mut s, "a1", 10)), ["a2"]);
    }
}

#[test]
fn queue_quota_limits_units_held_by_a_queue() {
    let cfg = SchedConfig {
        queue_quotas: vec![("batch".into(), Quota { max_gpus: 2 })],
        ..config(Policy::Fifo)
    };
    let mut s = Scheduler::new(cfg, vec![node(0, 8)]);
    let mut big = req("big", 3);
    big.queue = "batch".into();
    assert_eq!(
        rejected(&submit(&mut s, big, 0))[0].1,
        "asks for 3 GPUs but queue batch's quota is 2"
    );
    let mut b1 = req("b1", 2);
    b1.queue = "batch".into();
    let mut b2 = req("b2", 1);
    b2.queue = "batch".into();
    assert_eq!(started(&submit(&mut s, b1, 0)), ["b1"]);
    assert!(started(&submit(&mut s, b2, 0)).is_empty());
    assert_eq!(started(&submit(&mut s, req("other", 4), 0)), ["other"]);
    assert_eq!(started(&exit(&mut s, "b1", 5)), ["b2"]);
}

#[test]
fn rate_limit_holds_an_owner_without_tokens_and_not_others() {
    let cfg = SchedConfig {
        owner_rate: Some(RateLimit {
            per_second: 1.0,
            burst: 2,
        }),
        ..config(Policy::Fifo)
    };
    let mut s = Scheduler::new(cfg, vec![node(0, 8)]);
    let mut starts = Vec::new();
    for i in 0..4 {
        starts.extend(started(&submit(
            &mut s,
            owned(&format!("a{i}"), 1, "alice"),
            0,
        )));
    }
    assert_eq!(starts, ["a0", "a1"], "burst of 2");
    assert_eq!(started(&submit(&mut s, owned("b0", 1, "bob"), 0)), ["b0"]);
    assert_eq!(
        started(&submit(&mut s, owned("cpu", 0, "alice"), 0)),
        ["cpu"]
    );
    assert!(started(&s.handle(Event::Tick, 999)).is_empty());
    assert_eq!(started(&s.handle(Event::Tick, 1_000)), ["a2"]);
    assert_eq!(started(&s.handle(Event::Tick, 2_000)), ["a3"]);
}

#[test]
fn aging_lets_a_low_priority_job_through_eventually() {
    // One GPU; a stream of priority-3 jobs, one every 10 s, each running
    // 10 s. Without aging the priority-0 job never runs; with one level
    // per 10 s it passes every job submitted 30 s or more after it.
    for (aging_ms, expect_start) in [(0, false), (10_000, true)] {
        let cfg = SchedConfig {
            aging_ms,
            ..config(Policy::Fifo)
        };
        let mut s = Scheduler::new(cfg, vec![node(0, 1)]);
        submit(&mut s, req("first", 1), 0);
        submit(&mut s, req("low", 1), 1);
        let mut low_started = false;
        let mut running = "first".to_string();
        for i in 0..100 {
            let now = 10_000 * i + 5_000;
            let mut hi = req(&format!("hi{i}"), 1);
            hi.priority = 3;
            submit(&mut s, hi, now);
            let a = exit(&mut s, &running, now + 5_000);
            let st = started(&a);
            assert_eq!(st.len(), 1);
            running = st[0].clone();
            if running == "low" {
                low_started = true;
                assert!(i <= 5, "low waited {i} rounds");
                break;
            }
        }
        assert_eq!(low_started, expect_start, "aging {aging_ms}");
    }
}
