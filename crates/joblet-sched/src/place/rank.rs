//! Which single-node domain a gang goes to: from the free-capacity index
//! (fast path) or by scanning the nodes; both rank by the same order.

use std::collections::BTreeSet;

use super::select::count_into;
use super::Demand;
use crate::cluster::index::Key;
use crate::cluster::node::{Domain, TIERS};
use crate::cluster::ClusterState;
use crate::model::{NodeId, Strategy};

/// Rank of a candidate domain: smaller is better.
type Rank = (i64, i64, i64, u32, NodeId, usize);

/// The best (node, domain index) for the whole gang on one node.
pub(crate) fn best_domain(state: &ClusterState, d: &Demand) -> Option<(NodeId, usize)> {
    if d.fast_path(state) {
        fast(state, d)
    } else {
        scan(state, d)
    }
}

/// Whether a domain may hold the gang, and which it is to rank.
fn candidate(d: &Demand, dom: &Domain) -> bool {
    if !(dom.single_numa || d.cross_numa) {
        return false;
    }
    match d.strategy {
        Strategy::Pack | Strategy::Spread => {
            if d.cross_numa {
                dom.node_level
            } else {
                dom.numa_level
            }
        }
        Strategy::Topology | Strategy::BestFit | Strategy::Fgd => true,
    }
}

fn rank(d: &Demand, tier: u8, f: u32, f_node: u32, temp: u32, node: NodeId, dom: usize) -> Rank {
    let (t, f, f_node, n) = (
        i64::from(tier),
        i64::from(f),
        i64::from(f_node),
        i64::from(d.n),
    );
    let (a, b, c) = match d.strategy {
        // `Fgd` ranks here only what it does not score: MIG requests.
        Strategy::Topology | Strategy::Fgd => (t, f, f_node),
        Strategy::BestFit => (f - n, t, f_node),
        Strategy::Pack => (f, f_node, 0),
        Strategy::Spread => (-f, -f_node, 0),
    };
    (a, b, c, temp, node, dom)
}

/// Tiers whose domains stay on one NUMA node.
fn tier_allowed(d: &Demand, tier: usize) -> bool {
    d.cross_numa || tier == 0 || tier == 2
}

fn fast(state: &ClusterState, d: &Demand) -> Option<(NodeId, usize)> {
    let idx = state.index();
    let from = Key::at_least(d.n);
    let pick = |k: &Key| (k.node, k.dom as usize);
    match d.strategy {
        Strategy::Topology | Strategy::Fgd => (0..TIERS)
            .filter(|t| tier_allowed(d, *t))
            .find_map(|t| idx.tiers[t].range(from..).next())
            .map(pick),
        Strategy::BestFit => (0..TIERS)
            .filter(|t| tier_allowed(d, *t))
            .filter_map(|t| {
                let k = idx.tiers[t].range(from..).next()?;
                let r = rank(
                    d,
                    t as u8,
                    k.free,
                    k.node_free,
                    k.temp,
                    k.node,
                    k.dom as usize,
                );
                Some((r, pick(k)))
            })
            .min()
            .map(|(_, p)| p),
        Strategy::Pack => level(state, d).range(from..).next().map(pick),
        Strategy::Spread => {
            let set = level(state, d);
            let last = set.iter().next_back().filter(|k| k.free >= d.n)?;
            let group = Key {
                free: last.free,
                node_free: last.node_free,
                temp: 0,
                node: 0,
                dom: 0,
            };
            set.range(group..).next().map(pick)
        }
    }
}

fn level<'s>(state: &'s ClusterState, d: &Demand) -> &'s BTreeSet<Key> {
    if d.cross_numa {
        &state.index().node_level
    } else {
        &state.index().numa_level
    }
}

fn scan(state: &ClusterState, d: &Demand) -> Option<(NodeId, usize)> {
    let whole_exclusive = d.exclusive && d.profile.is_none();
    let mut best: Option<Rank> = None;
    let mut cnt = Vec::new();
    for node in state.nodes().values() {
        let room = if whole_exclusive {
            node.free_whole
        } else {
            node.open_units
        };
        if room < d.n || !d.host_fits(node) {
            continue;
        }
        let total = count_into(node, d, &mut cnt);
        if total < d.n {
            continue;
        }
        for (i, dom) in node.domains.iter().enumerate() {
            if !candidate(d, dom) {
                continue;
            }
            let f: u32 = dom.gpus.iter().map(|p| cnt[*p]).sum();
            if f < d.n {
                continue;
            }
            let r = rank(d, dom.tier, f, total, dom.temp, node.id, i);
            if best.is_none_or(|b| r < b) {
                best = Some(r);
            }
        }
    }
    best.map(|r| (r.4, r.5))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::Strategy;
    use crate::model::{GpuSpec, JobRequest, MigSlice, NodeSpec, Sharing, WorkloadClass};
    use joblet_core::gpu::GpuState;

    fn node(id: u32, gpus: &[(u32, Option<u32>, bool, u32)], max_jobs: Option<u32>) -> NodeSpec {
        NodeSpec {
            id,
            capacity: crate::model::NodeCapacity {
                max_jobs,
                ..Default::default()
            },
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, (numa, nvl, is_mig, _))| GpuSpec {
                    index: i as u32,
                    uuid: String::new(),
                    memory_mb: 1000,
                    numa: *numa,
                    socket: numa / 2,
                    nvlink_group: *nvl,
                    compute_capability: (8, 0),
                    mig: if *is_mig {
                        vec![MigSlice {
                            id: 0,
                            profile: "p".into(),
                            memory_mb: 500,
                        }]
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }
    }

    fn demand(n: u32, cross_numa: bool, strategy: Strategy) -> Demand<'static> {
        Demand {
            n,
            exclusive: true,
            profile: None,
            min_cc: None,
            mem_mb: 0,
            milli: crate::model::GPU_MILLI_WHOLE,
            fraction: false,
            class: WorkloadClass::Training,
            cross_numa,
            strategy,
            host: crate::cluster::HostLoad {
                jobs: 1,
                ..Default::default()
            },
            shape: crate::place::workload::Shape {
                gpu_count: n,
                gpu_milli: crate::model::GPU_MILLI_WHOLE,
                cpu_millis: 0,
                memory_mb: 0,
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// The index answers exactly what a full scan answers (nodes
        /// whose job slots are all taken included: neither offers them).
        #[test]
        fn fast_path_equals_scan(
            nodes in prop::collection::vec(
                prop::collection::vec((0u32..4, prop::option::of(0u32..2), prop::bool::weighted(0.1), 0u32..8), 1..=8),
                1..=8),
            slots in prop::collection::vec(prop::option::of(0u32..4), 8),
            fill in prop::collection::vec((1u32..=8, any::<bool>(), 0usize..4), 0..24),
        ) {
            let specs: Vec<NodeSpec> = nodes.iter().enumerate().map(|(i, g)| node(i as u32, g, slots[i])).collect();
            let mut s = ClusterState::new(specs);
            for (id, gpus) in nodes.iter().enumerate() {
                for (i, (.., t)) in gpus.iter().enumerate() {
                    let state = if *t == 7 { GpuState::Degraded } else { GpuState::Available };
                    let health = crate::model::GpuHealth { state, paused: *t == 6, temperature_c: Some(t * 10) };
                    s.set_health(id as u32, i as u32, health);
                }
            }
            let all = [Strategy::Topology, Strategy::Pack, Strategy::Spread, Strategy::BestFit];
            for (j, (n, cross, st)) in fill.iter().enumerate() {
                let req = JobRequest { gpu_milli: 0,
                    job: format!("f{j}"), owner: String::new(), queue: String::new(),
                    gpu_count: *n, gpu_memory_mb: 0, sharing: Sharing::Exclusive,
                    mig_profile: None, min_compute_capability: None,
                    class: WorkloadClass::Training, priority: 0,
                    allow_cross_numa: *cross, allow_cross_node: false,
                    preemptible: false, time_limit_ms: None, checkpoint_interval_ms: None,
                    cpu_millis: 0, host_memory_mb: 0,
                };
                if let Some(p) = crate::place::place(&s, &req, all[*st]) {
                    s.allocate(p).unwrap();
                }
            }
            for n in 1..=8 {
                for cross in [false, true] {
                    for st in all {
                        let d = demand(n, cross, st);
                        // Only a cluster of MIG GPUs has no whole-GPU floor.
                        prop_assert_eq!(d.fast_path(&s), s.floor().is_some());
                        prop_assert_eq!(fast(&s, &d), scan(&s, &d), "n {} cross {} {:?}", n, cross, st);
                        let ids = |v: Vec<&crate::cluster::node::Node>| v.iter().map(|x| x.id).collect::<Vec<_>>();
                        let walked = super::super::cross::from_index(&s, n).map(ids);
                        let sorted = super::super::cross::by_scan(&s, &d).map(ids);
                        if let Some(w) = &walked {
                            let sorted = sorted.unwrap_or_default();
                            prop_assert_eq!(&w[..], &sorted[..w.len().min(sorted.len())]);
                        } else {
                            let open: u32 = s.nodes().values().filter(|x| x.has_slot()).map(|x| x.free_whole).sum();
                            prop_assert!(open < n);
                        }
                    }
                }
            }
        }
    }
}
