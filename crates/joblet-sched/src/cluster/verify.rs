//! `verify`: recounts every invariant of the cluster state from the ledger
//! alone and compares it with the incremental bookkeeping (tests, simulator).

use std::collections::{BTreeMap, BTreeSet};

use super::host::{over, HostLoad};
use super::index::DomainIndex;
use super::node::{classes_conflict, Node};
use super::{reserve, ClusterState};
use crate::model::{GpuRef, JobKey, NodeId, Placement, Sharing, WorkloadClass, GPU_MILLI_WHOLE};

/// What the ledger says one unit carries.
#[derive(Default)]
struct Load<'a> {
    jobs: Vec<&'a Placement>,
}

impl ClusterState {
    /// Full invariant check: every placement's units (or, CPU-only, its
    /// node) exist and are distinct; no unit is over its memory or its
    /// 1000 milli of compute share, or shared with an exclusive job; no unit mixes training and inference; every
    /// node's CPU, memory and job count in use match the placements that
    /// touch it, and with what is claimed stay within its tracked capacity;
    /// the per-unit holders, free counts, totals and the free-capacity
    /// index all match a recount. Health at allocation time is not checked
    /// (a GPU may have failed since).
    pub fn verify(&self) -> Result<(), String> {
        let mut loads: BTreeMap<&GpuRef, Load> = BTreeMap::new();
        let mut host: BTreeMap<NodeId, HostLoad> = BTreeMap::new();
        let mut ledger: Vec<(&JobKey, &Placement)> = self.ledger.iter().collect();
        ledger.sort_unstable_by_key(|(k, _)| *k);
        for (key, p) in ledger {
            if *key != p.job {
                return Err(format!(
                    "ledger entry {key} holds the placement of {}",
                    p.job
                ));
            }
            let mut seen = BTreeSet::new();
            for u in &p.units {
                if !seen.insert(u) {
                    return Err(format!("job {}: {u} twice", p.job));
                }
                let exists = self
                    .nodes
                    .get(&u.node)
                    .and_then(|n| n.gpu_pos(u.index).map(|i| &n.gpus[i]))
                    .and_then(|g| g.unit_pos(u.mig));
                if exists.is_none() {
                    return Err(format!("job {}: {u} does not exist", p.job));
                }
                loads.entry(u).or_default().jobs.push(p);
            }
            for n in p.nodes() {
                if !self.nodes.contains_key(&n) {
                    return Err(format!("job {}: node {n} does not exist", p.job));
                }
                let h = host.entry(n).or_default();
                *h = h.plus(HostLoad::of(p));
            }
        }
        for node in self.nodes.values() {
            let want = host.get(&node.id).copied().unwrap_or_default();
            if node.used != want {
                return Err(format!(
                    "node {}: {:?} in use but the ledger says {want:?}",
                    node.id, node.used
                ));
            }
            if let Some((what, used, cap)) = over(&node.capacity, want.plus(node.claimed)) {
                return Err(format!(
                    "node {}: {used} {what} in use or claimed of {cap}",
                    node.id
                ));
            }
        }
        for (u, load) in &loads {
            check_load(u, load, self.unit_memory(u))?;
        }
        self.check_bookkeeping(&loads)
    }

    fn unit_memory(&self, u: &GpuRef) -> u64 {
        self.nodes
            .get(&u.node)
            .and_then(|n| n.gpu_pos(u.index).map(|i| &n.gpus[i]))
            .and_then(|g| g.unit_pos(u.mig).map(|i| g.units[i].memory_mb))
            .unwrap_or(0)
    }

    fn check_bookkeeping(&self, loads: &BTreeMap<&GpuRef, Load>) -> Result<(), String> {
        let (mut total, mut free, mut whole) = (0, 0, 0);
        let mut index = DomainIndex::default();
        for node in self.nodes.values() {
            for g in &node.gpus {
                for u in &g.units {
                    let r = GpuRef {
                        node: node.id,
                        index: g.spec.index,
                        mig: u.mig,
                    };
                    let mut want: Vec<&str> = loads
                        .get(&r)
                        .map(|l| l.jobs.iter().map(|p| p.job.as_str()).collect())
                        .unwrap_or_default();
                    let mut have: Vec<&str> = u.holders.iter().map(|h| h.job.as_str()).collect();
                    want.sort_unstable();
                    have.sort_unstable();
                    if want != have {
                        return Err(format!(
                            "{r}: holders {have:?} but the ledger says {want:?}"
                        ));
                    }
                    let reserved: u64 = u.holders.iter().map(|h| h.reserve_mb).sum();
                    if reserved != u.reserved_mb {
                        return Err(format!(
                            "{r}: reserved {} but holders sum {reserved}",
                            u.reserved_mb
                        ));
                    }
                    let milli: u32 = u.holders.iter().map(|h| h.milli).sum();
                    if milli != u.milli_used {
                        return Err(format!(
                            "{r}: {} milli accounted but holders sum {milli}",
                            u.milli_used
                        ));
                    }
                }
            }
            let mut fresh = node.clone();
            fresh.recount_all();
            check_counts(node, &fresh)?;
            index.insert(&fresh);
            total += fresh.total_units;
            free += fresh.free_units;
            whole += fresh.free_whole;
        }
        if (total, free, whole) != (self.total_units, self.free_units, self.free_whole) {
            return Err(format!(
                "totals {}/{}/{} total/free/free whole but a recount gives {total}/{free}/{whole}",
                self.total_units, self.free_units, self.free_whole
            ));
        }
        if index != self.index {
            return Err("the free-capacity index differs from a rebuild".to_string());
        }
        Ok(())
    }
}

fn check_load(u: &GpuRef, load: &Load, memory_mb: u64) -> Result<(), String> {
    let exclusive = load
        .jobs
        .iter()
        .filter(|p| p.sharing == Sharing::Exclusive)
        .count();
    if exclusive > 0 && load.jobs.len() > 1 {
        let jobs: Vec<&str> = load.jobs.iter().map(|p| p.job.as_str()).collect();
        return Err(format!("{u}: exclusive but held by {jobs:?}"));
    }
    let reserved: u64 = load.jobs.iter().map(|p| reserve(p, memory_mb)).sum();
    if reserved > memory_mb {
        return Err(format!("{u}: {reserved} MiB reserved of {memory_mb} MiB"));
    }
    let milli: u32 = load.jobs.iter().map(|p| p.compute_milli()).sum();
    if milli > GPU_MILLI_WHOLE {
        return Err(format!(
            "{u}: {milli} milli of compute accounted of {GPU_MILLI_WHOLE}"
        ));
    }
    let has = |c: WorkloadClass| load.jobs.iter().find(|p| p.class == c);
    if let (Some(t), Some(i)) = (has(WorkloadClass::Training), has(WorkloadClass::Inference)) {
        debug_assert!(classes_conflict(t.class, i.class));
        return Err(format!(
            "{u}: training job {} shares with inference job {}",
            t.job, i.job
        ));
    }
    Ok(())
}

fn check_counts(node: &Node, fresh: &Node) -> Result<(), String> {
    let counts = |n: &Node| {
        let doms: Vec<(u32, u32)> = n.domains.iter().map(|d| (d.free, d.temp)).collect();
        (
            n.free_whole,
            n.free_units,
            n.open_units,
            n.total_units,
            doms,
        )
    };
    if counts(node) != counts(fresh) {
        return Err(format!(
            "node {}: counts {:?} but a recount gives {:?}",
            node.id,
            counts(node),
            counts(fresh)
        ));
    }
    Ok(())
}
