//! One scheduler places every job: CPU-only jobs wait and start like GPU
//! jobs, on nodes' CPU, memory and job slots; what can never fit is
//! rejected; quotas and rate limits stay about GPUs; FIFO, backfill and
//! preemption count CPU, memory and slots; node removal and restore.

mod scheduler_support;

use joblet_sched::model::{
    Event, JobRequest, NodeCapacity, NodeSpec, Policy, Quota, RateLimit, SchedConfig,
};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

fn with(mut n: NodeSpec, cpu: Option<u64>, mem: Option<u64>, jobs: Option<u32>) -> NodeSpec {
    n.capacity = NodeCapacity {
        cpu_millis: cpu,
        memory_mb: mem,
        max_jobs: jobs,
    };
    n
}

fn cpu(job: &str, millis: u64) -> JobRequest {
    JobRequest {
        cpu_millis: millis,
        ..req(job, 0)
    }
}

fn limited(mut r: JobRequest, ms: u64) -> JobRequest {
    r.time_limit_ms = Some(ms);
    r
}

#[test]
fn cpu_only_jobs_wait_for_a_job_slot_and_start_when_one_frees() {
    let mut s = Scheduler::new(
        config(Policy::Fifo),
        vec![with(node(0, 0), None, None, Some(2))],
    );
    assert_eq!(started(&submit(&mut s, cpu("a", 0), 0)), ["a"]);
    let p = s.cluster().placement("a").unwrap();
    assert_eq!((p.node, p.units.len()), (0, 0), "in the ledger");
    assert_eq!(started(&submit(&mut s, cpu("b", 0), 1)), ["b"]);
    assert!(started(&submit(&mut s, cpu("c", 0), 2)).is_empty());
    assert_eq!((s.running(), s.waiting()), (2, 1));
    assert_eq!(started(&exit(&mut s, "a", 3)), ["c"]);
    assert_eq!(s.cluster().placement("a"), None, "released");
    s.cluster().verify().unwrap();
}

#[test]
fn cpu_and_memory_are_never_oversubscribed() {
    let n = with(node(0, 0), Some(4_000), Some(16_384), None);
    let mut s = Scheduler::new(config(Policy::Las), vec![n]);
    assert_eq!(started(&submit(&mut s, cpu("a", 3_000), 0)), ["a"]);
    assert!(started(&submit(&mut s, cpu("b", 2_000), 1)).is_empty());
    let mut m = cpu("m", 0);
    m.host_memory_mb = 16_384;
    assert_eq!(
        started(&submit(&mut s, m, 2)),
        ["m"],
        "LAS is work-conserving: m passes b"
    );
    let mut m2 = cpu("m2", 0);
    m2.host_memory_mb = 1;
    assert!(started(&submit(&mut s, m2, 3)).is_empty());
    let used = s.cluster().host_used(0).unwrap();
    assert_eq!(
        (used.cpu_millis, used.memory_mb, used.jobs),
        (3_000, 16_384, 2)
    );
    assert_eq!(started(&exit(&mut s, "a", 4)), ["b"]);
    assert_eq!(started(&exit(&mut s, "m", 5)), ["m2"]);
}

#[test]
fn gpu_jobs_need_a_free_job_slot_and_their_cpu_too() {
    let n = with(node(0, 4), Some(8_000), None, Some(2));
    let mut s = Scheduler::new(config(Policy::Las), vec![n]);
    submit(&mut s, cpu("c1", 1_000), 0);
    submit(&mut s, cpu("c2", 1_000), 0);
    assert!(
        started(&submit(&mut s, req("g", 1), 1)).is_empty(),
        "GPUs free but no job slot"
    );
    assert_eq!(started(&exit(&mut s, "c1", 2)), ["g"]);
    let mut hungry = req("h", 1);
    hungry.cpu_millis = 7_500;
    exit(&mut s, "c2", 3);
    assert_eq!(started(&submit(&mut s, hungry, 4)), ["h"]);
    let mut more = req("more", 1);
    more.cpu_millis = 1_000;
    assert!(
        started(&submit(&mut s, more, 5)).is_empty(),
        "7,500 of 8,000 millicores taken"
    );
    assert_eq!(s.cluster().free_units(), 2);
}

#[test]
fn requests_that_never_fit_are_rejected_at_submit() {
    let n = with(node(0, 2), Some(16_000), Some(24_576), Some(8));
    let mut s = Scheduler::new(config(Policy::Fifo), vec![n]);
    let mut big = cpu("big", 0);
    big.host_memory_mb = 32_768;
    assert_eq!(
        rejected(&submit(&mut s, big, 0)),
        [(
            "big".to_string(),
            "asks for 32768 MiB of memory but the largest node offers 24576 MiB".to_string()
        )]
    );
    let mut gpu_big = req("gbig", 1);
    gpu_big.host_memory_mb = 32_768;
    assert_eq!(rejected(&submit(&mut s, gpu_big, 0)).len(), 1);
    let r = rejected(&submit(&mut s, cpu("cpus", 32_000), 0));
    assert!(r[0].1.contains("largest node offers 16000"), "{}", r[0].1);
    assert_eq!(s.waiting(), 0, "nothing queued forever");
    let mut closed = Scheduler::new(
        config(Policy::Fifo),
        vec![with(node(0, 2), None, None, Some(0))],
    );
    for r in [cpu("c", 0), req("g", 1)] {
        let got = rejected(&submit(&mut closed, r, 0));
        assert!(got[0].1.contains("limit of running jobs is 0"), "{got:?}");
    }
}

#[test]
fn quotas_and_rate_limits_count_only_gpu_jobs() {
    let config = SchedConfig {
        owner_quotas: vec![("alice".into(), Quota { max_gpus: 1 })],
        owner_rate: Some(RateLimit {
            per_second: 0.001,
            burst: 1,
        }),
        ..config(Policy::Fifo)
    };
    let mut s = Scheduler::new(config, vec![node(0, 4)]);
    assert_eq!(started(&submit(&mut s, req("g1", 1), 0)), ["g1"]);
    assert!(
        started(&submit(&mut s, req("g2", 1), 1)).is_empty(),
        "quota and token spent"
    );
    // g2 is over quota: it blocks nobody, and CPU-only jobs take neither
    // quota nor token.
    for (i, job) in ["c1", "c2", "c3"].into_iter().enumerate() {
        assert_eq!(started(&submit(&mut s, cpu(job, 0), 2 + i as i64)), [job]);
    }
}

#[test]
fn under_backfill_a_cpu_job_passes_a_gpu_head_only_when_harmless() {
    // 8 GPUs, 8 CPUs. `a` (4 GPUs, 4,000 millicores) ends by 100 s; the
    // head `h` wants 2 GPUs and 6,000 millicores: GPUs are free but not the
    // CPU, so it is reserved at 100 s, leaving 2,000 millicores spare then.
    let n = with(node(0, 8), Some(8_000), None, None);
    let mut s = Scheduler::new(config(Policy::Backfill), vec![n]);
    let mut a = limited(req("a", 4), 100_000);
    a.cpu_millis = 4_000;
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    let mut h = req("h", 2);
    h.cpu_millis = 6_000;
    assert!(started(&submit(&mut s, h, 0)).is_empty());
    assert!(
        started(&submit(&mut s, cpu("nolimit", 1_000), 1)).is_empty(),
        "no time limit: never backfills"
    );
    assert!(
        started(&submit(&mut s, limited(cpu("wide", 4_000), 500_000), 2)).is_empty(),
        "would take the head's CPU at 100 s"
    );
    assert_eq!(
        started(&submit(&mut s, limited(cpu("spare", 2_000), 500_000), 3)),
        ["spare"],
        "fits in what the head leaves"
    );
    assert!(
        started(&submit(&mut s, limited(cpu("more", 500), 500_000), 4)).is_empty(),
        "the spare CPU is gone"
    );
    assert_eq!(
        started(&submit(&mut s, limited(cpu("short", 2_000), 50_000), 5)),
        ["short"],
        "ends before the reservation"
    );
    assert!(started(&exit(&mut s, "short", 55_000)).is_empty());
    assert_eq!(started(&exit(&mut s, "a", 100_000)), ["h"], "h on time");
}

#[test]
fn backfill_never_takes_a_job_slot_the_head_needs_at_its_reservation() {
    // The head spans both nodes; node 1 has one slot free now, which the
    // head needs once `a` ends on node 0.
    let n0 = with(node(0, 4), None, None, Some(1));
    let n1 = with(node(1, 4), None, None, Some(2));
    let mut s = Scheduler::new(config(Policy::Backfill), vec![n0, n1]);
    let mut a = limited(req("a", 4), 100_000);
    a.allow_cross_node = true;
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    let on0 = s.cluster().placement("a").unwrap().node;
    assert_eq!(on0, 0, "a fills node 0's GPUs and its only slot");
    assert_eq!(started(&submit(&mut s, cpu("x", 0), 0)), ["x"]);
    assert_eq!(s.cluster().placement("x").unwrap().node, 1);
    let mut h = req("h", 8);
    h.allow_cross_node = true;
    assert!(started(&submit(&mut s, h, 1)).is_empty());
    assert!(
        started(&submit(&mut s, limited(cpu("late", 0), 500_000), 2)).is_empty(),
        "would hold node 1's last slot at 100 s"
    );
    assert_eq!(
        started(&submit(&mut s, limited(cpu("quick", 0), 50_000), 3)),
        ["quick"]
    );
    exit(&mut s, "quick", 50_000);
    assert_eq!(started(&exit(&mut s, "a", 100_000)), ["h"]);
    s.cluster().verify().unwrap();
}

#[test]
fn preempted_jobs_free_their_cpu_and_slot_only_when_they_exit() {
    let n = with(node(0, 0), Some(4_000), None, Some(1));
    let mut s = Scheduler::new(config(Policy::Las), vec![n]);
    let mut low = cpu("low", 1_000);
    low.preemptible = true;
    submit(&mut s, low, 0);
    let mut high = cpu("high", 1_000);
    high.priority = 5;
    let a = submit(&mut s, high, 61_000);
    assert_eq!(preempted(&a), ["low"]);
    assert!(started(&a).is_empty(), "low still holds the slot");
    assert!(started(&s.handle(Event::Tick, 62_000)).is_empty());
    assert_eq!(started(&exit(&mut s, "low", 63_000)), ["high"]);
    assert_eq!(s.waiting(), 1, "low is requeued");
}

#[test]
fn a_gpu_job_preempts_for_cpu_but_not_cpu_jobs_that_would_not_help() {
    let n = with(node(0, 2), Some(4_000), None, None);
    let mut s = Scheduler::new(config(Policy::Fifo), vec![n]);
    let mut idle_cpu = cpu("cpu", 0);
    idle_cpu.preemptible = true;
    idle_cpu.priority = -1;
    submit(&mut s, idle_cpu, 0);
    let mut g = req("g", 1);
    g.preemptible = true;
    g.cpu_millis = 4_000;
    submit(&mut s, g, 0);
    let mut high = req("high", 1);
    high.priority = 5;
    high.cpu_millis = 1_000;
    // A GPU is free; the CPU is all g's. The lower-priority CPU-only job
    // asks no CPU: stopping it would not help.
    let a = submit(&mut s, high, 61_000);
    assert_eq!(preempted(&a), ["g"]);
    assert_eq!(started(&exit(&mut s, "g", 62_000)), ["high"]);
}

#[test]
fn cpu_freed_by_one_victim_is_held_until_the_last_one_exits() {
    let n = with(node(0, 0), Some(8_000), None, None);
    let mut s = Scheduler::new(config(Policy::Las), vec![n]);
    for v in ["v1", "v2"] {
        let mut r = cpu(v, 4_000);
        r.preemptible = true;
        submit(&mut s, r, 0);
    }
    let mut high = cpu("high", 8_000);
    high.priority = 5;
    let a = submit(&mut s, high, 61_000);
    assert_eq!(preempted(&a), ["v1", "v2"]);
    submit(&mut s, cpu("other", 4_000), 61_001);
    assert!(
        started(&exit(&mut s, "v1", 62_000)).is_empty(),
        "v1's CPU is held for high"
    );
    assert_eq!(started(&exit(&mut s, "v2", 63_000)), ["high"]);
    s.cluster().verify().unwrap();
}

#[test]
fn cpu_only_jobs_on_a_removed_node_are_preempted_or_rejected() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 0), node(1, 1)]);
    let mut p = cpu("p", 0);
    p.preemptible = true;
    submit(&mut s, p, 0);
    submit(&mut s, cpu("fixed", 0), 0);
    let (np, nf) = (
        s.cluster().placement("p").unwrap().node,
        s.cluster().placement("fixed").unwrap().node,
    );
    let a = s.handle(Event::NodeRemoved(np), 1);
    assert_eq!(preempted(&a), ["p"]);
    if nf == np {
        assert_eq!(rejected(&a)[0].0, "fixed");
    }
    assert_eq!(s.cluster().placement("p"), None);
    assert_eq!(
        started(&exit(&mut s, "p", 2)),
        ["p"],
        "requeued on the other node"
    );
    s.cluster().verify().unwrap();
}

#[test]
fn restore_brings_back_cpu_only_placements() {
    let n = || with(node(0, 2), Some(4_000), None, Some(2));
    let mut s = Scheduler::new(config(Policy::Fifo), vec![n()]);
    let jobs = [cpu("c", 3_000), req("g", 1)];
    for r in jobs.clone() {
        submit(&mut s, r, 0);
    }
    let running: Vec<_> = jobs
        .iter()
        .map(|r| (r.clone(), s.cluster().placement(&r.job).unwrap().clone(), 0))
        .collect();
    let mut restored =
        Scheduler::restore(config(Policy::Fifo), vec![n()], running.clone(), Vec::new()).unwrap();
    restored.cluster().verify().unwrap();
    assert_eq!(restored.cluster().host_used(0), s.cluster().host_used(0));
    assert!(
        started(&submit(&mut restored, cpu("x", 0), 1)).is_empty(),
        "both slots are taken"
    );
    // Across a restart that lowered the node's limits the ledger still
    // comes back; nothing new starts until enough has ended.
    let lower = with(node(0, 2), Some(2_000), None, Some(1));
    let mut r = Scheduler::restore(config(Policy::Fifo), vec![lower], running, Vec::new()).unwrap();
    assert_eq!(r.running(), 2);
    assert!(started(&submit(&mut r, cpu("y", 0), 1)).is_empty());
    assert!(
        started(&exit(&mut r, "c", 2)).is_empty(),
        "still 1 job of 1"
    );
    assert_eq!(started(&exit(&mut r, "g", 3)), ["y"]);
}

#[test]
fn backfill_never_delays_the_head_under_a_stream_of_cpu_and_gpu_candidates() {
    // `a` ends by 100 s; the head needs its GPUs and more CPU, memory and
    // slots than are free now. Candidates of every kind arrive each second
    // and run to their limits; whatever backfills, the head starts at 100 s.
    let n = with(node(0, 8), Some(16_000), Some(32_768), Some(6));
    let mut s = Scheduler::new(config(Policy::Backfill), vec![n]);
    let mut a = limited(req("a", 4), 100_000);
    (a.cpu_millis, a.host_memory_mb) = (6_000, 8_192);
    let mut b = limited(req("b", 2), 1_000_000);
    (b.cpu_millis, b.host_memory_mb) = (2_000, 4_096);
    assert_eq!(started(&submit(&mut s, a, 0)), ["a"]);
    assert_eq!(started(&submit(&mut s, b, 0)), ["b"]);
    let mut h = req("h", 4);
    (h.cpu_millis, h.host_memory_mb) = (8_000, 16_384);
    assert!(started(&submit(&mut s, h, 0)).is_empty());
    let mut limits = std::collections::BTreeMap::new();
    let mut ends: Vec<(i64, String)> = Vec::new();
    let (mut backfilled, mut past) = (0, 0);
    let mut record = |actions: Vec<joblet_sched::model::Action>,
                      now: i64,
                      limits: &std::collections::BTreeMap<String, u64>,
                      ends: &mut Vec<(i64, String)>| {
        for job in started(&actions) {
            assert_ne!(job, "h", "h starts only when a ends");
            let end = now + limits[&job] as i64;
            backfilled += 1;
            past += usize::from(end > 100_000);
            ends.push((end, job));
        }
    };
    for i in 0..99i64 {
        let now = 1_000 * i;
        ends.sort();
        while ends.first().is_some_and(|e| e.0 <= now) {
            let (end, job) = ends.remove(0);
            let a = exit(&mut s, &job, end);
            record(a, end, &limits, &mut ends);
            ends.sort();
        }
        let k = (i * 7_919) as u64;
        let mut c = req(&format!("c{i}"), u32::from(k.is_multiple_of(3)));
        c.cpu_millis = (k % 5) * 1_000;
        c.host_memory_mb = (k % 4) * 2_048;
        c.time_limit_ms = Some((k % 150) * 1_000 + 1_000);
        limits.insert(c.job.clone(), c.time_limit_ms.unwrap());
        let a = submit(&mut s, c, now);
        record(a, now, &limits, &mut ends);
    }
    ends.sort();
    while ends.first().is_some_and(|e| e.0 <= 100_000) {
        let (end, job) = ends.remove(0);
        let a = exit(&mut s, &job, end);
        record(a, end, &limits, &mut ends);
        ends.sort();
    }
    let a = exit(&mut s, "a", 100_000);
    assert_eq!(started(&a).first().map(String::as_str), Some("h"));
    assert!(backfilled >= 5, "only {backfilled} backfilled");
    assert!(past >= 1, "none ran past the reservation in the slack");
    s.cluster().verify().unwrap();
}
