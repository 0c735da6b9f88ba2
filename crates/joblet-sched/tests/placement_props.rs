//! Property tests: random clusters (1–6 nodes, 1–8 GPUs, some MIG, random
//! NUMA / socket / NVLink, mixed memory and compute capability, some nodes
//! limiting CPU, memory or running jobs) under random place (CPU-only and
//! GPU requests, with and without CPU and memory) / release / health /
//! node add-remove sequences. After every step `verify()` holds and no
//! node's CPU, memory or job count (summed here from the ledger) exceeds
//! its capacity; every placement is accepted by `allocate`, is a whole
//! gang of eligible units on placeable GPUs within the allowed span, on
//! nodes with room for its CPU, memory and a job slot; `place` answers
//! None exactly when an independent brute-force count finds no gang (or,
//! CPU-only, no node) either (completeness); and a state rebuilt from the
//! ledger decides the same.

mod placement_common;

use std::collections::{BTreeMap, BTreeSet};

use joblet_core::gpu::GpuState;
use joblet_sched::cluster::ClusterState;
use joblet_sched::model::{
    GpuHealth, GpuRef, GpuSpec, JobRequest, MigSlice, NodeCapacity, NodeSpec, Placement, Sharing,
    Strategy as Strat, WorkloadClass,
};
use joblet_sched::place::place;
use placement_common::{health, req};
use proptest::prelude::*;

const PROFILES: [(&str, u64); 2] = [("1g.10gb", 10_000), ("3g.40gb", 40_000)];

fn gpu_strategy(index: u32) -> impl proptest::strategy::Strategy<Value = GpuSpec> {
    (
        0u32..3,
        prop::option::of(0u32..2),
        prop::sample::select(vec![16_000u64, 40_000, 80_000]),
        prop::sample::select(vec![(7u32, 0u32), (8, 0), (9, 0)]),
        prop::option::weighted(0.2, prop::collection::vec(0usize..2, 1..=3)),
    )
        .prop_map(move |(numa, nvlink, memory_mb, cc, mig)| GpuSpec {
            index,
            uuid: format!("GPU-{index}"),
            memory_mb,
            numa,
            socket: numa / 2,
            nvlink_group: nvlink,
            compute_capability: cc,
            mig: mig
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(id, p)| MigSlice {
                    id: id as u32,
                    profile: PROFILES[p].0.to_string(),
                    memory_mb: PROFILES[p].1,
                })
                .collect(),
        })
}

fn capacity_strategy() -> impl proptest::strategy::Strategy<Value = NodeCapacity> {
    (
        prop::option::weighted(0.5, prop::sample::select(vec![2_000u64, 4_000, 8_000])),
        prop::option::weighted(0.5, prop::sample::select(vec![4_096u64, 16_384])),
        prop::option::weighted(0.5, 0u32..=4),
    )
        .prop_map(|(cpu_millis, memory_mb, max_jobs)| NodeCapacity {
            cpu_millis,
            memory_mb,
            max_jobs,
        })
}

fn cluster_strategy() -> impl proptest::strategy::Strategy<Value = Vec<NodeSpec>> {
    prop::collection::vec((1u32..=8, capacity_strategy()), 1..=6).prop_flat_map(|sizes| {
        sizes
            .into_iter()
            .enumerate()
            .map(|(id, (n, capacity))| {
                (0..n)
                    .map(gpu_strategy)
                    .collect::<Vec<_>>()
                    .prop_map(move |gpus| NodeSpec {
                        id: id as u32,
                        gpus,
                        capacity,
                    })
            })
            .collect::<Vec<_>>()
    })
}

#[derive(Debug, Clone)]
enum Op {
    Place(Box<JobRequest>, Strat),
    Release(usize),
    Health(usize, usize, GpuHealth),
    ToggleNode(usize),
}

fn request_strategy() -> impl proptest::strategy::Strategy<Value = JobRequest> {
    (
        0u32..=5,
        prop::sample::select(vec![0u64, 8_000, 20_000, 40_000]),
        any::<bool>(),
        prop::option::weighted(0.2, 0usize..2),
        prop::option::weighted(0.2, prop::sample::select(vec![(8u32, 0u32), (9, 0)])),
        prop::sample::select(vec![
            WorkloadClass::Training,
            WorkloadClass::Inference,
            WorkloadClass::Interactive,
        ]),
        any::<bool>(),
        prop::bool::weighted(0.35),
        (
            prop::sample::select(vec![0u64, 0, 500, 1_000, 3_000]),
            prop::sample::select(vec![0u64, 0, 2_048, 8_192]),
        ),
    )
        .prop_map(
            |(n, mem, sh, prof, cc, class, numa, node, (cpu, host_mb))| JobRequest {
                gpu_memory_mb: mem,
                sharing: if sh {
                    Sharing::Shared
                } else {
                    Sharing::Exclusive
                },
                mig_profile: prof.map(|p| PROFILES[p].0.to_string()),
                min_compute_capability: cc,
                class,
                allow_cross_numa: numa,
                allow_cross_node: node,
                cpu_millis: cpu,
                host_memory_mb: host_mb,
                ..req("", n)
            },
        )
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    let health = (
        prop::sample::select(GpuState::ALL.to_vec()),
        prop::bool::weighted(0.2),
        prop::option::of(30u32..90),
    )
        .prop_map(|(s, p, t)| health(s, p, t));
    prop_oneof![
        6 => (request_strategy(), prop::sample::select(vec![
            Strat::Topology, Strat::Pack, Strat::Spread, Strat::BestFit,
        ])).prop_map(|(r, s)| Op::Place(Box::new(r), s)),
        3 => any::<usize>().prop_map(Op::Release),
        2 => (any::<usize>(), any::<usize>(), health).prop_map(|(n, g, h)| Op::Health(n, g, h)),
        1 => any::<usize>().prop_map(Op::ToggleNode),
    ]
}

/// The test's own model: specs, health, and what the ledger says.
struct Model {
    specs: Vec<NodeSpec>,
    present: BTreeSet<u32>,
    health: BTreeMap<(u32, u32), GpuHealth>,
}

fn available() -> GpuHealth {
    health(GpuState::Available, false, None)
}

impl Model {
    fn placeable(&self, node: u32, index: u32) -> bool {
        let h = self
            .health
            .get(&(node, index))
            .copied()
            .unwrap_or_else(available);
        h.state.accepts_new_jobs() && !h.paused
    }

    /// What the ledger charges the node: (CPU, memory, jobs).
    fn charged(&self, s: &ClusterState, node: u32) -> (u64, u64, u32) {
        let mut sum = (0, 0, 0);
        for p in s.placements().filter(|p| p.nodes().any(|n| n == node)) {
            sum.0 += p.cpu_millis;
            sum.1 += p.host_memory_mb;
            sum.2 += 1;
        }
        sum
    }

    /// Whether the node has a job slot and room for `r`'s CPU and memory.
    fn host_ok(&self, s: &ClusterState, node: u32, r: &JobRequest) -> bool {
        let cap = self.specs[node as usize].capacity;
        let (cpu, mem, jobs) = self.charged(s, node);
        let fits = |cap: Option<u64>, used: u64, asked: u64| {
            asked == 0 || cap.is_none_or(|c| used + asked <= c)
        };
        fits(cap.cpu_millis, cpu, r.cpu_millis)
            && fits(cap.memory_mb, mem, r.host_memory_mb)
            && fits(cap.max_jobs.map(u64::from), u64::from(jobs), 1)
    }

    /// Every unit that could take `r` now, by brute force over the ledger.
    fn eligible(&self, s: &ClusterState, r: &JobRequest) -> Vec<(GpuRef, u32)> {
        let mut holders: BTreeMap<GpuRef, Vec<&Placement>> = BTreeMap::new();
        for p in s.placements() {
            for u in &p.units {
                holders.entry(u.clone()).or_default().push(p);
            }
        }
        let mut out = Vec::new();
        for spec in self
            .specs
            .iter()
            .filter(|n| self.present.contains(&n.id) && self.host_ok(s, n.id, r))
        {
            for g in &spec.gpus {
                if !self.placeable(spec.id, g.index)
                    || r.min_compute_capability
                        .is_some_and(|c| g.compute_capability < c)
                {
                    continue;
                }
                let units: Vec<(Option<u32>, Option<&str>, u64)> = if g.mig.is_empty() {
                    vec![(None, None, g.memory_mb)]
                } else {
                    g.mig
                        .iter()
                        .map(|m| (Some(m.id), Some(m.profile.as_str()), m.memory_mb))
                        .collect()
                };
                for (mig, profile, mb) in units {
                    let unit = GpuRef {
                        node: spec.id,
                        index: g.index,
                        mig,
                    };
                    let hs = holders.get(&unit).cloned().unwrap_or_default();
                    let reserved: u64 = hs
                        .iter()
                        .map(|p| {
                            if p.sharing == Sharing::Exclusive || p.memory_mb == 0 {
                                mb
                            } else {
                                p.memory_mb
                            }
                        })
                        .sum();
                    let ok = profile == r.mig_profile.as_deref()
                        && mb >= r.gpu_memory_mb
                        && match r.sharing {
                            Sharing::Exclusive => hs.is_empty(),
                            Sharing::Shared => {
                                let want = if r.gpu_memory_mb == 0 {
                                    mb
                                } else {
                                    r.gpu_memory_mb
                                };
                                hs.iter().all(|p| {
                                    p.sharing == Sharing::Shared
                                        && !matches!(
                                            (p.class, r.class),
                                            (WorkloadClass::Training, WorkloadClass::Inference)
                                                | (
                                                    WorkloadClass::Inference,
                                                    WorkloadClass::Training
                                                )
                                        )
                                }) && reserved + want <= mb
                                    && (r.gpu_memory_mb > 0 || hs.is_empty())
                            }
                        };
                    if ok {
                        out.push((unit, g.numa));
                    }
                }
            }
        }
        out
    }

    /// Whether some gang exists (units are independent, so counting per
    /// allowed span is an exhaustive search).
    fn feasible(&self, s: &ClusterState, r: &JobRequest) -> bool {
        if r.gpu_count == 0 {
            return self.present.iter().any(|n| self.host_ok(s, *n, r));
        }
        let el = self.eligible(s, r);
        let mut per: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for (u, numa) in &el {
            let key = match (r.allow_cross_node, r.allow_cross_numa) {
                (true, _) => (0, 0),
                (false, true) => (u.node, 0),
                (false, false) => (u.node, *numa),
            };
            *per.entry(key).or_default() += 1;
        }
        per.values().any(|c| *c >= r.gpu_count)
    }

    fn numa_of(&self, u: &GpuRef) -> u32 {
        self.specs[u.node as usize]
            .gpus
            .iter()
            .find(|g| g.index == u.index)
            .map_or(u32::MAX, |g| g.numa)
    }
}

fn run(specs: Vec<NodeSpec>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut s = ClusterState::new(specs.clone());
    let mut m = Model {
        present: specs.iter().map(|n| n.id).collect(),
        specs,
        health: BTreeMap::new(),
    };
    let mut running: Vec<String> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Place(r, st) => {
                let r = JobRequest {
                    job: format!("j{step}"),
                    ..*r
                };
                let got = place(&s, &r, st);
                prop_assert_eq!(got.clone(), place(&s, &r, st), "deterministic");
                prop_assert_eq!(
                    got.is_some(),
                    m.feasible(&s, &r),
                    "complete and sound: {:?}",
                    r
                );
                if let Some(p) = got {
                    let el: BTreeSet<GpuRef> =
                        m.eligible(&s, &r).into_iter().map(|e| e.0).collect();
                    prop_assert_eq!(p.units.len() as u32, r.gpu_count);
                    prop_assert_eq!(
                        (p.cpu_millis, p.host_memory_mb),
                        (r.cpu_millis, r.host_memory_mb)
                    );
                    prop_assert_eq!(p.node, p.units.first().map_or(p.node, |u| u.node));
                    for n in p.nodes() {
                        prop_assert!(m.present.contains(&n));
                        prop_assert!(m.host_ok(&s, n, &r), "no room on node {} for {:?}", n, r);
                    }
                    prop_assert!(
                        p.units.iter().all(|u| el.contains(u)),
                        "ineligible unit in {:?}",
                        p
                    );
                    prop_assert!(p.units.iter().all(|u| m.placeable(u.node, u.index)));
                    let nodes: BTreeSet<u32> = p.units.iter().map(|u| u.node).collect();
                    let numas: BTreeSet<(u32, u32)> =
                        p.units.iter().map(|u| (u.node, m.numa_of(u))).collect();
                    prop_assert!(r.allow_cross_node || nodes.len() <= 1);
                    prop_assert!(r.allow_cross_node || r.allow_cross_numa || numas.len() <= 1);
                    prop_assert_eq!(p.sharing, r.sharing);
                    let before = s.free_units();
                    s.allocate(p.clone())
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert!(s.free_units() <= before);
                    running.push(p.job);
                }
            }
            Op::Release(i) if !running.is_empty() => {
                let job = running.swap_remove(i % running.len());
                let p = s.release(&job);
                prop_assert!(p.is_some_and(|p| p.job == job));
                prop_assert!(s.placement(&job).is_none());
            }
            Op::Release(_) => {}
            Op::Health(n, g, h) => {
                let spec = &m.specs[n % m.specs.len()];
                let index = spec.gpus[g % spec.gpus.len()].index;
                let before = s.jobs_on(spec.id, index);
                s.set_health(spec.id, index, h);
                prop_assert_eq!(s.jobs_on(spec.id, index), before, "holders stay");
                if m.present.contains(&spec.id) {
                    m.health.insert((spec.id, index), h);
                }
            }
            Op::ToggleNode(n) => {
                let spec = m.specs[n % m.specs.len()].clone();
                if m.present.remove(&spec.id) {
                    let want: Vec<String> = s
                        .placements()
                        .filter(|p| p.nodes().any(|n| n == spec.id))
                        .map(|p| p.job.clone())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    prop_assert_eq!(s.remove_node(spec.id), want.clone());
                    running.retain(|j| !want.contains(j));
                    m.health.retain(|(node, _), _| *node != spec.id);
                } else {
                    m.present.insert(spec.id);
                    s.add_node(spec);
                }
            }
        }
        s.verify().map_err(TestCaseError::fail)?;
        prop_assert_eq!(s.placements().count(), running.len());
        for &n in &m.present {
            let cap = m.specs[n as usize].capacity;
            let (cpu, mem, jobs) = m.charged(&s, n);
            prop_assert!(
                cap.cpu_millis.is_none_or(|c| cpu <= c),
                "node {} CPU {}",
                n,
                cpu
            );
            prop_assert!(
                cap.memory_mb.is_none_or(|c| mem <= c),
                "node {} memory {}",
                n,
                mem
            );
            prop_assert!(
                cap.max_jobs.is_none_or(|c| jobs <= c),
                "node {} jobs {}",
                n,
                jobs
            );
        }
    }
    rebuilt_decides_the_same(&s, &m)
}

/// A state rebuilt from specs, ledger and health makes the same decisions.
fn rebuilt_decides_the_same(s: &ClusterState, m: &Model) -> Result<(), TestCaseError> {
    let specs: Vec<NodeSpec> = m
        .specs
        .iter()
        .filter(|n| m.present.contains(&n.id))
        .cloned()
        .collect();
    let mut r = ClusterState::new(specs);
    for p in s.placements() {
        r.allocate(p.clone())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    for ((node, index), h) in &m.health {
        r.set_health(*node, *index, *h);
    }
    r.verify().map_err(TestCaseError::fail)?;
    prop_assert_eq!(r.free_units(), s.free_units());
    for n in 0..=4 {
        for st in [Strat::Topology, Strat::Pack, Strat::Spread, Strat::BestFit] {
            for cpu in [0, 1_000] {
                let q = JobRequest {
                    allow_cross_numa: n > 2,
                    cpu_millis: cpu,
                    ..req("q", n)
                };
                prop_assert_eq!(place(&r, &q, st), place(s, &q, st));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_every_invariant(
        specs in cluster_strategy(),
        ops in prop::collection::vec(op_strategy(), 1..100),
    ) {
        run(specs, ops)?;
    }
}
