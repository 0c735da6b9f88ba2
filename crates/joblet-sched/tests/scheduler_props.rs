//! Property test over random event sequences on small random clusters
//! (1,000 cases × 1,000 events = 10^6 operations) mixing CPU-only and GPU
//! jobs, with and without CPU and memory requests, on nodes some of which
//! limit CPU, memory or running jobs: after every event the cluster
//! verifies (no count or memory oversubscription), no node's CPU, memory
//! or job count (tracked here from the starts) exceeds its capacity, every
//! start is a whole gang on open GPUs that fit the request (a CPU-only job:
//! on one present node), training and inference never share a unit, quotas
//! and rate limits hold for jobs with GPUs (tracked here, apart from the
//! scheduler), the scheduler's counts match this model, and at random
//! points a scheduler restored from the ledger has exactly the same
//! allocations. At the end of each case every node comes back healthy and
//! running jobs keep exiting: every job submitted is then started or was
//! rejected (nothing waits forever once resources free up).

use joblet_sched::model::{
    GpuSpec, JobRequest, MigSlice, NodeCapacity, NodeSpec, Policy, Quota, RateLimit, SchedConfig,
    Sharing, Strategy as Placing, WorkloadClass,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
pub struct Sub {
    gpus: u8,
    mem: u8,
    shared: bool,
    mig: u8,
    class: u8,
    owner: u8,
    queue: u8,
    priority: i8,
    preemptible: bool,
    limit: Option<u8>,
    cross: u8,
    cc: bool,
    cpu: u8,
    host_mem: u8,
}

#[derive(Debug, Clone)]
pub enum Op {
    Submit(Sub),
    Cancel(u16),
    Exit(u16),
    Health(u8, u8, u8, bool),
    RemoveNode(u8),
    AddNode(u8),
    Tick,
    Restore,
}

/// The event stream of one case: a xorshift generator seeded by proptest
/// (generating 10^6 operations through proptest's value trees alone takes
/// longer than the whole test in a debug build; a failing case still
/// shrinks over its seed, cluster and configuration).
struct Gen(u64);

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn small(&mut self, n: u64) -> u8 {
        self.below(n) as u8
    }

    fn sub(&mut self) -> Sub {
        Sub {
            gpus: self.small(8),
            mem: self.small(16),
            shared: self.below(2) == 0,
            mig: self.small(16),
            class: self.small(3),
            owner: self.small(3),
            queue: self.small(2),
            priority: self.small(4) as i8 - 1,
            preemptible: self.below(2) == 0,
            limit: (self.below(2) == 0).then(|| 1 + self.small(59)),
            cross: self.small(4),
            cc: self.below(6) == 0,
            cpu: self.small(6),
            host_mem: self.small(5),
        }
    }

    /// An operation (weights: submit 35, exit 25, tick 15, health 8,
    /// cancel 6, add node 3, remove node 1, restore 1) and the ms before it.
    fn op(&mut self) -> (Op, u16) {
        let op = match self.below(94) {
            0..35 => Op::Submit(self.sub()),
            35..60 => Op::Exit(self.below(1 << 16) as u16),
            60..75 => Op::Tick,
            75..83 => Op::Health(
                self.small(256),
                self.small(256),
                self.small(14),
                self.below(4) == 0,
            ),
            83..89 => Op::Cancel(self.below(1 << 16) as u16),
            89..92 => Op::AddNode(self.small(256)),
            92 => Op::RemoveNode(self.small(256)),
            _ => Op::Restore,
        };
        (op, self.below(4_000) as u16)
    }
}

fn gpu_spec() -> impl Strategy<Value = (u8, bool, u8, bool)> {
    (0u8..4, any::<bool>(), 0u8..2, any::<bool>())
}

fn capacity() -> impl Strategy<Value = NodeCapacity> {
    (
        proptest::option::weighted(0.5, 1u64..=4),
        proptest::option::weighted(0.5, 1u64..=3),
        proptest::option::weighted(0.5, 1u32..=4),
    )
        .prop_map(|(cpus, gib, max_jobs)| NodeCapacity {
            cpu_millis: cpus.map(|c| c * 2_000),
            memory_mb: gib.map(|g| g * 8_192),
            max_jobs,
        })
}

fn cluster() -> impl Strategy<Value = Vec<NodeSpec>> {
    proptest::collection::vec(
        (
            proptest::sample::select(vec![0usize, 2, 3, 4])
                .prop_flat_map(|n| proptest::collection::vec(gpu_spec(), n)),
            capacity(),
        ),
        1..=3,
    )
    .prop_map(|nodes| {
        nodes
            .into_iter()
            .enumerate()
            .map(|(id, (gpus, capacity))| NodeSpec {
                id: id as u32,
                capacity,
                gpus: gpus
                    .into_iter()
                    .enumerate()
                    .map(|(i, (mem, mig, numa, cc))| GpuSpec {
                        index: i as u32,
                        uuid: format!("GPU-{id}-{i}"),
                        memory_mb: [16_384, 40_960, 81_920, 81_920][mem as usize],
                        numa: u32::from(numa),
                        socket: u32::from(numa),
                        nvlink_group: (i < 2).then_some(0),
                        compute_capability: if cc { (8, 0) } else { (7, 0) },
                        mig: if mig && mem >= 2 {
                            (0..3)
                                .map(|s| MigSlice {
                                    id: s,
                                    profile: "1g.10gb".into(),
                                    memory_mb: 10_240,
                                })
                                .chain([MigSlice {
                                    id: 3,
                                    profile: "2g.20gb".into(),
                                    memory_mb: 20_480,
                                }])
                                .collect()
                        } else {
                            Vec::new()
                        },
                    })
                    .collect(),
            })
            .collect()
    })
}

fn sched_config() -> impl Strategy<Value = SchedConfig> {
    (
        (0u8..4, 0u64..3),
        0u8..10,
        proptest::option::of(1u32..6),
        proptest::option::of(1u32..5),
        proptest::option::of((1u8..20, 1u32..4)),
        any::<bool>(),
        0usize..6,
    )
        .prop_map(
            |((policy, ckpt), strategy, oq, qq, rate, aging, lookahead)| SchedConfig {
                policy: [Policy::Fifo, Policy::Backfill, Policy::Las, Policy::Gittins]
                    [policy as usize],
                strategy: [
                    Placing::Pack,
                    Placing::Spread,
                    Placing::BestFit,
                    Placing::Topology,
                    Placing::Fgd,
                ][strategy as usize % 5],
                // Shared requests placed apart from the others, as the
                // daemon does, half of the time.
                shared_strategy: (strategy >= 5).then_some(Placing::Fgd),
                owner_quotas: oq
                    .map(|q| ("o0".to_string(), Quota { max_gpus: q }))
                    .into_iter()
                    .collect(),
                queue_quotas: qq
                    .map(|q| ("q1".to_string(), Quota { max_gpus: q }))
                    .into_iter()
                    .collect(),
                owner_rate: rate.map(|(r, burst)| RateLimit {
                    per_second: f64::from(r) / 10.0,
                    burst,
                }),
                aging_ms: if aging { 5_000 } else { 0 },
                lookahead,
                las_thresholds_gpu_ms: vec![5_000, 50_000],
                // 0 (free), or checkpoints every 30 s or 90 s with a 5 s
                // restore: no job is preempted before 60 s either way.
                checkpoint_interval_ms: ckpt * 30_000 + (ckpt / 2) * 30_000,
                restore_cost_ms: if ckpt > 0 { 5_000 } else { 0 },
                gittins_min_samples: 3,
                gittins_aging_ms: if aging { 0 } else { 60_000 },
                // Both ways of judging a Gittins preemption.
                gittins_exchange_test: aging,
            },
        )
}

fn request(job: String, s: &Sub) -> JobRequest {
    JobRequest {
        gpu_milli: 0,
        job,
        owner: format!("o{}", s.owner),
        queue: format!("q{}", s.queue),
        gpu_count: [0, 1, 1, 1, 2, 2, 3, 4][s.gpus as usize],
        gpu_memory_mb: [
            0, 0, 0, 0, 0, 0, 0, 0, 4_096, 4_096, 4_096, 8_192, 8_192, 12_000, 30_000, 90_000,
        ][s.mem as usize],
        sharing: if s.shared {
            Sharing::Shared
        } else {
            Sharing::Exclusive
        },
        mig_profile: match s.mig {
            0 | 1 => Some("1g.10gb".into()),
            2 => Some("2g.20gb".into()),
            3 => Some("7g.80gb".into()),
            _ => None,
        },
        min_compute_capability: s.cc.then_some((8, 0)),
        class: [
            WorkloadClass::Training,
            WorkloadClass::Inference,
            WorkloadClass::Interactive,
        ][s.class as usize],
        priority: i32::from(s.priority),
        allow_cross_numa: s.cross >= 1,
        allow_cross_node: s.cross >= 3,
        preemptible: s.preemptible,
        time_limit_ms: s.limit.map(|l| u64::from(l) * 1_000),
        checkpoint_interval_ms: None,
        cpu_millis: [0, 0, 500, 1_000, 2_000, 9_000][s.cpu as usize],
        host_memory_mb: [0, 0, 1_024, 8_192, 30_000][s.host_mem as usize],
    }
}

#[path = "scheduler_support/props_model.rs"]
mod model;

/// Events per case; with 1,000 cases, 10^6 operations.
const EVENTS: usize = 1_000;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_event_sequences_keep_every_invariant(
        nodes in cluster(),
        config in sched_config(),
        seed in 1u64..,
    ) {
        let mut m = model::Model::new(config, nodes);
        let mut gen = Gen(seed);
        for i in 0..EVENTS {
            let (op, dt) = gen.op();
            m.now += i64::from(dt);
            m.apply(op, i);
        }
        m.drain(EVENTS);
    }
}
