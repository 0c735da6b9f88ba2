//! No oversubscription with fractional GPU requests: 10^6 seeded random
//! events (200,000 per strategy: fgd, best-fit, pack, spread, topology)
//! on a small cluster whose nodes track CPU, memory and job slots, mixing
//! fractions of a GPU (`gpu_milli` 1..=999, shared), whole shared GPUs,
//! exclusive single and multi-GPU gangs, memory-sharing jobs and CPU-only
//! jobs, with submits, exits, cancels, drains and node removals and
//! additions. After every event an independent ledger, kept here from
//! the `Start` actions alone, checks every GPU's compute share (≤ 1000
//! milli) and memory, exclusivity, and every node's CPU, memory and job
//! slots; every 4,096 events the scheduler's own `verify` runs too.
//!
//! Run it with more events: `SHARING_PROPS_EVENTS=10000000 cargo test -p
//! joblet-sched --test sharing_props --release`.

use std::collections::BTreeMap;

use joblet_sched::model::{
    Action, Event, GpuSpec, JobRequest, NodeCapacity, NodeSpec, Placement, Policy, SchedConfig,
    Sharing, Strategy, WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;

const NODES: u32 = 4;
const GPU_MB: u64 = 1000;

/// Xorshift64: the event stream from a fixed seed.
struct Gen(u64);

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn spec(id: u32) -> NodeSpec {
    let gpus = 2 + id % 3;
    NodeSpec {
        id,
        gpus: (0..gpus)
            .map(|index| GpuSpec {
                index,
                uuid: format!("GPU-{id}-{index}"),
                memory_mb: GPU_MB,
                numa: index % 2,
                socket: 0,
                nvlink_group: None,
                compute_capability: (8, 0),
                mig: Vec::new(),
            })
            .collect(),
        capacity: NodeCapacity {
            cpu_millis: Some(8_000),
            memory_mb: Some(16_000),
            max_jobs: Some(6),
        },
    }
}

fn request(g: &mut Gen, job: String) -> JobRequest {
    let kind = g.below(6);
    let (gpu_count, sharing, gpu_milli, gpu_memory_mb) = match kind {
        0 => (0, Sharing::Exclusive, 0, 0),
        // Fractions from a few dozen shares (1, 50, 100, …, 950, 999):
        // workloads have few shapes, and `fgd` scores against each.
        1 | 2 => {
            let milli = [1, 999][g.below(2) as usize].max(50 * g.below(20) as u32);
            (1, Sharing::Shared, milli, g.below(3) * 200)
        }
        3 => (1 + g.below(3) as u32, Sharing::Exclusive, 0, 0),
        4 => (1, Sharing::Shared, 0, g.below(3) * 300),
        _ => (1, Sharing::Shared, 1000, 0),
    };
    JobRequest {
        job,
        owner: String::new(),
        queue: String::new(),
        gpu_count,
        gpu_memory_mb,
        sharing,
        mig_profile: None,
        min_compute_capability: None,
        class: [
            WorkloadClass::Training,
            WorkloadClass::Inference,
            WorkloadClass::Interactive,
        ][g.below(3) as usize],
        priority: 0,
        allow_cross_numa: g.below(2) == 0,
        allow_cross_node: false,
        preemptible: false,
        time_limit_ms: None,
        cpu_millis: g.below(4) * 1_000,
        host_memory_mb: g.below(4) * 2_000,
        gpu_milli,
        checkpoint_interval_ms: None,
    }
}

/// What the test itself knows is held, from the starts.
#[derive(Default)]
struct Ledger {
    running: BTreeMap<String, Placement>,
}

impl Ledger {
    /// Compute share a placement takes per GPU, by the documented rule.
    fn milli(p: &Placement) -> u32 {
        match p.sharing {
            Sharing::Exclusive => 1000,
            Sharing::Shared if p.gpu_milli > 0 => p.gpu_milli,
            Sharing::Shared if p.memory_mb == 0 => 1000,
            Sharing::Shared => 0,
        }
    }

    fn memory(p: &Placement) -> u64 {
        let fraction = p.sharing == Sharing::Shared && p.gpu_milli > 0 && p.gpu_milli < 1000;
        if p.sharing == Sharing::Exclusive || (p.memory_mb == 0 && !fraction) {
            GPU_MB
        } else {
            p.memory_mb
        }
    }

    fn check(&self, specs: &BTreeMap<u32, NodeSpec>) -> Result<(), String> {
        let mut gpu: BTreeMap<(u32, u32), (u32, u64, u32, bool)> = BTreeMap::new();
        let mut host: BTreeMap<u32, (u64, u64, u32)> = BTreeMap::new();
        for p in self.running.values() {
            if p.units.is_empty() {
                let h = host.entry(p.node).or_default();
                *h = (h.0 + p.cpu_millis, h.1 + p.host_memory_mb, h.2 + 1);
            }
            let mut nodes: Vec<u32> = p.units.iter().map(|u| u.node).collect();
            nodes.dedup();
            for n in nodes {
                let h = host.entry(n).or_default();
                *h = (h.0 + p.cpu_millis, h.1 + p.host_memory_mb, h.2 + 1);
            }
            for u in &p.units {
                let e = gpu.entry((u.node, u.index)).or_default();
                e.0 += Self::milli(p);
                e.1 += Self::memory(p);
                e.2 += 1;
                e.3 |= p.sharing == Sharing::Exclusive;
            }
        }
        for ((n, i), (milli, mb, holders, excl)) in gpu {
            if milli > 1000 || mb > GPU_MB || (excl && holders > 1) {
                return Err(format!(
                    "node {n} GPU {i}: {milli} milli, {mb} MiB, {holders} holders, exclusive {excl}"
                ));
            }
        }
        for (n, (cpu, mem, jobs)) in host {
            let Some(c) = specs.get(&n).map(|s| s.capacity) else {
                return Err(format!("a job holds removed node {n}"));
            };
            if Some(cpu) > c.cpu_millis || Some(mem) > c.memory_mb || Some(jobs) > c.max_jobs {
                return Err(format!(
                    "node {n}: {cpu} millicores, {mem} MiB, {jobs} jobs"
                ));
            }
        }
        Ok(())
    }
}

fn run(strategy: Strategy, events: u64, seed: u64) {
    let mut g = Gen(seed);
    let config = SchedConfig {
        policy: Policy::Fifo,
        strategy,
        ..SchedConfig::default()
    };
    let mut specs: BTreeMap<u32, NodeSpec> = (0..NODES).map(|i| (i, spec(i))).collect();
    let mut s = Scheduler::new(config, specs.values().cloned().collect());
    let mut ledger = Ledger::default();
    let mut next = 0u64;
    for step in 0..events {
        let now = step as i64;
        let event = match g.below(100) {
            0..=44 => {
                next += 1;
                Event::Submit(Box::new(request(&mut g, format!("j{next}"))))
            }
            45..=84 => match ledger.running.keys().nth(g.below(8) as usize) {
                Some(j) => Event::Exited(j.clone()),
                None => Event::Tick,
            },
            85..=94 => Event::Cancel(format!("j{}", next.saturating_sub(g.below(4)))),
            95..=96 => Event::NodeDrained {
                node: g.below(u64::from(NODES)) as u32,
                drained: g.below(2) == 0,
            },
            97 => {
                let id = g.below(u64::from(NODES)) as u32;
                specs.remove(&id);
                Event::NodeRemoved(id)
            }
            _ => {
                let id = g.below(u64::from(NODES)) as u32;
                let n = spec(id);
                specs.insert(id, n.clone());
                Event::NodeAdded(n)
            }
        };
        match &event {
            Event::Exited(j) => {
                ledger.running.remove(j);
            }
            Event::NodeRemoved(id) | Event::NodeAdded(NodeSpec { id, .. }) => {
                // The node's jobs lose their allocations (whole).
                ledger
                    .running
                    .retain(|_, p| p.node != *id && p.units.iter().all(|u| u.node != *id));
            }
            _ => {}
        }
        for a in s.handle(event, now) {
            if let Action::Start { placement } = a {
                assert!(
                    ledger
                        .running
                        .insert(placement.job.clone(), placement)
                        .is_none(),
                    "step {step}: started twice"
                );
            }
        }
        if let Err(e) = ledger.check(&specs) {
            panic!("{strategy:?} step {step}: {e}");
        }
        if step % 4096 == 0 {
            if let Err(e) = s.cluster().verify() {
                panic!("{strategy:?} step {step}: verify: {e}");
            }
        }
    }
    s.cluster().verify().unwrap();
}

#[test]
fn no_oversubscription_over_a_million_events() {
    let total: u64 = std::env::var("SHARING_PROPS_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let all = [
        Strategy::Fgd,
        Strategy::BestFit,
        Strategy::Pack,
        Strategy::Spread,
        Strategy::Topology,
    ];
    for (i, st) in all.into_iter().enumerate() {
        run(
            st,
            total / all.len() as u64,
            0x9E37_79B9_7F4A_7C15 ^ i as u64,
        );
    }
}

#[test]
fn bad_gpu_milli_is_rejected_at_submit_naming_the_field() {
    let mut s = Scheduler::new(SchedConfig::default(), vec![spec(0)]);
    let mut g = Gen(1);
    for (count, sharing, milli) in [
        (2, Sharing::Shared, 500),
        (1, Sharing::Exclusive, 500),
        (1, Sharing::Shared, 1001),
    ] {
        let mut req = request(&mut g, format!("bad{milli}{count}"));
        (req.gpu_count, req.sharing, req.gpu_milli) = (count, sharing, milli);
        let acts = s.handle(Event::Submit(Box::new(req)), 0);
        match acts.as_slice() {
            [Action::Reject { reason, .. }] => {
                assert!(
                    reason.contains("gpu_milli") && reason.contains("1..=999"),
                    "{reason}"
                )
            }
            other => panic!("{count} {sharing:?} {milli}: {other:?}"),
        }
    }
}
