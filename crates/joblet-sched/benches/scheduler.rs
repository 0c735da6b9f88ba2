//! Scheduler decisions under load (issue 5): `Scheduler::handle` on
//! 1,000 nodes × 8 GPUs with ~10,000 waiting jobs, and on 1 node × 8 GPUs,
//! for every policy. Criterion measures events per second; a fixed run of
//! 100,000 events per case prints the p50 / p99 latency of one `handle`
//! (criterion reports means, not tails). Every exit is a completion, so the
//! Gittins policy learns its size model from them.
//!
//! `cargo bench -p joblet-sched --bench scheduler [-- FILTER]` (a filter,
//! e.g. `Gittins/1000x8`, also limits the tail runs to matching cases).

use std::time::{Duration, Instant};

use criterion::Criterion;
use joblet_sched::model::{
    Action, Event, GpuSpec, JobRequest, NodeSpec, Policy, SchedConfig, Sharing, WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;

fn node(id: u32) -> NodeSpec {
    NodeSpec {
        id,
        capacity: Default::default(),
        gpus: (0..8)
            .map(|index| GpuSpec {
                index,
                uuid: format!("GPU-{id}-{index}"),
                memory_mb: 81_920,
                numa: index / 4,
                socket: index / 4,
                nvlink_group: Some(id),
                compute_capability: (9, 0),
                mig: Vec::new(),
            })
            .collect(),
    }
}

/// A deterministic stream of submits and exits.
struct Load {
    rng: u64,
    seq: u64,
    running: Vec<String>,
    now: i64,
}

impl Load {
    fn next(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }

    fn request(&mut self) -> JobRequest {
        self.seq += 1;
        let gpus = [1, 1, 2, 4, 8][self.next(5) as usize];
        JobRequest {
            gpu_milli: 0,
            job: format!("j{}", self.seq),
            owner: format!("user{}", self.next(20)),
            queue: "default".into(),
            gpu_count: gpus,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: self.next(3) as i32,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: self.next(2) == 0,
            time_limit_ms: Some(1_000 * (1 + self.next(3_600))),
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        }
    }

    /// One event: alternately a random running job exits and a job arrives.
    fn event(&mut self, i: u64) -> Event {
        self.now += 10;
        if i.is_multiple_of(2) && !self.running.is_empty() {
            let k = self.next(self.running.len() as u64) as usize;
            Event::Exited(self.running.swap_remove(k))
        } else {
            Event::Submit(Box::new(self.request()))
        }
    }

    fn apply(&mut self, s: &mut Scheduler, ev: Event) {
        for a in s.handle(ev, self.now) {
            if let Action::Start { placement } = a {
                self.running.push(placement.job);
            }
        }
    }
}

/// A scheduler filled until `waiting` jobs wait.
fn loaded(policy: Policy, nodes: u32, waiting: usize) -> (Scheduler, Load) {
    // Checkpoints every minute and no restore: victims become eligible
    // after the same 60 s as before preemption costs (the bench spans
    // ~20 simulated minutes, too short for the 30-minute default).
    let config = SchedConfig {
        policy,
        checkpoint_interval_ms: 60_000,
        restore_cost_ms: 0,
        ..SchedConfig::default()
    };
    let mut s = Scheduler::new(config, (0..nodes).map(node).collect());
    let mut load = Load {
        rng: 0x9E37_79B9_7F4A_7C15,
        seq: 0,
        running: Vec::new(),
        now: 0,
    };
    while s.waiting() < waiting {
        load.now += 10;
        let r = load.request();
        load.apply(&mut s, Event::Submit(Box::new(r)));
    }
    (s, load)
}

fn tails(policy: Policy, nodes: u32, waiting: usize) {
    let (mut s, mut load) = loaded(policy, nodes, waiting);
    let n = 100_000u64;
    let mut lat = Vec::with_capacity(n as usize);
    let t0 = Instant::now();
    for i in 0..n {
        let ev = load.event(i);
        let t = Instant::now();
        load.apply(&mut s, ev);
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    println!(
        "tails {policy:?} {nodes}x8, {waiting} waiting: {:.0} events/s, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs (waiting {}, running {})",
        n as f64 / total.as_secs_f64(),
        lat[lat.len() / 2].as_secs_f64() * 1e6,
        lat[lat.len() * 99 / 100].as_secs_f64() * 1e6,
        lat[lat.len() - 1].as_secs_f64() * 1e6,
        s.waiting(),
        s.running()
    );
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    // The first argument that is not a flag (or a flag's value) filters.
    let mut filter = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--bench" {
            continue;
        }
        if a.starts_with("--") {
            if !a.contains('=') && a.ends_with("-time") {
                args.next();
            }
            continue;
        }
        filter = Some(a);
        break;
    }
    for (nodes, waiting) in [(1_000u32, 10_000usize), (1, 100)] {
        for policy in [Policy::Fifo, Policy::Backfill, Policy::Las, Policy::Gittins] {
            let name = format!("handle/{policy:?}/{nodes}x8/{waiting}-waiting");
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let (mut s, mut load) = loaded(policy, nodes, waiting);
            let mut i = 0;
            c.bench_function(&name, |b| {
                b.iter(|| {
                    i += 1;
                    let ev = load.event(i);
                    load.apply(&mut s, ev);
                })
            });
            tails(policy, nodes, waiting);
        }
    }
    c.final_summary();
}
