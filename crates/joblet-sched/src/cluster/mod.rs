//! The cluster's live allocation state: who holds which unit (whole GPU or
//! MIG slice) on which node, what every node's jobs use of its CPU, memory
//! and job slots, GPU health, and the free-capacity index that makes
//! placement fast. Every change goes through `allocate` (or `adopt`),
//! `release`, `set_health`, `add_node`, `remove_node` and the host claims,
//! which keep the index exact; `verify` recounts everything from the
//! ledger.
//!
//! Rules enforced by `allocate` (and followed by [`crate::place`]):
//! - every placement (CPU-only ones too, which hold no unit) takes one job
//!   slot, its `cpu_millis` and its `host_memory_mb` on every node it
//!   touches ([`Placement::nodes`]); on no node may the jobs, CPU or memory
//!   in use (plus what is claimed, below) exceed a tracked capacity
//!   ([`crate::model::NodeCapacity`]); `adopt` (restore) charges a ledger
//!   as it is, even over a capacity lowered since;
//! - host capacity can be *claimed* for a job whose preemption victims are
//!   still stopping: nobody may be placed on it until it is unclaimed;
//! - an exclusive job holds the whole unit: it never lands on a unit with
//!   any holder, and nothing joins it;
//! - shared jobs reserve `memory_mb` each on every unit they hold and the
//!   sum never exceeds the unit's memory; a shared placement with
//!   `memory_mb == 0` reserves the whole unit (so it needs an empty unit),
//!   unless it asks for a fraction of its GPU (`gpu_milli` 1..=999), which
//!   reserves no memory;
//! - every holder accounts a compute share on its unit
//!   ([`Placement::compute_milli`]: whole = 1000, a fraction its
//!   `gpu_milli`, memory-only sharing 0) and the sum never exceeds 1000;
//! - training and inference never share a unit; interactive work may share
//!   with either;
//! - new jobs only go to GPUs whose state `accepts_new_jobs()` and that are
//!   not paused; jobs already there stay until released.

mod capacity;
mod error;
mod host;
pub(crate) mod index;
pub(crate) mod node;
mod verify;

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;

pub use error::AllocError;
pub use host::HostLoad;
pub(crate) use host::Room;
use index::DomainIndex;
use node::{Holder, Node};

use crate::model::{
    GpuHealth, GpuRef, JobKey, NodeId, NodeSpec, Placement, Sharing, GPU_MILLI_WHOLE,
};

/// The weakest whole (non-MIG) GPU of the cluster: requests it satisfies
/// may use the fast path, where every free whole GPU is eligible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WholeFloor {
    pub min_memory_mb: u64,
    pub min_cc: (u32, u32),
}

/// Live allocation state of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterState {
    nodes: BTreeMap<NodeId, Node>,
    /// Placements by job (hashed: looked up on every start and exit).
    ledger: HashMap<JobKey, Placement>,
    index: DomainIndex,
    total_units: u32,
    free_units: u32,
    /// Free whole GPUs over all nodes.
    free_whole: u32,
    floor: Option<WholeFloor>,
    /// Nodes that track their CPU, and their memory: while none does, a
    /// request's CPU (memory) cannot keep it off any node.
    cpu_tracked: u32,
    memory_tracked: u32,
    /// Nodes with a limit of running jobs.
    jobs_tracked: u32,
    /// Static-capacity answers, cleared when nodes change.
    capacity_memo: capacity::CapacityMemo,
}

impl ClusterState {
    /// Every GPU AVAILABLE, not paused; a repeated node id replaces the
    /// earlier node.
    pub fn new(nodes: Vec<NodeSpec>) -> ClusterState {
        let mut state = ClusterState {
            nodes: BTreeMap::new(),
            ledger: HashMap::default(),
            index: DomainIndex::default(),
            total_units: 0,
            free_units: 0,
            free_whole: 0,
            floor: None,
            cpu_tracked: 0,
            memory_tracked: 0,
            jobs_tracked: 0,
            capacity_memo: Default::default(),
        };
        for n in nodes {
            state.add_node(n);
        }
        state
    }

    /// Adds a node, all GPUs AVAILABLE. A node with the same id is removed
    /// first, dropping its jobs' allocations (send `remove_node` first to
    /// learn which).
    pub fn add_node(&mut self, node: NodeSpec) {
        self.capacity_memo.get_mut().clear();
        if self.nodes.contains_key(&node.id) {
            self.remove_node(node.id);
        }
        let node = Node::new(node);
        self.cpu_tracked += u32::from(node.capacity.cpu_millis.is_some());
        self.memory_tracked += u32::from(node.capacity.memory_mb.is_some());
        self.jobs_tracked += u32::from(node.capacity.max_jobs.is_some());
        self.index.insert(&node);
        self.total_units += node.total_units;
        self.free_units += node.free_units;
        self.free_whole += node.free_whole;
        self.floor = merge_floor(self.floor, &node);
        self.nodes.insert(node.id, node);
    }

    /// Removes a node; returns (sorted) the jobs placed there (holding
    /// units there, or CPU-only jobs on it). Their allocations are dropped
    /// whole, on every node; so is what was claimed on the node.
    pub fn remove_node(&mut self, id: NodeId) -> Vec<JobKey> {
        if !self.nodes.contains_key(&id) {
            return Vec::new();
        }
        self.capacity_memo.get_mut().clear();
        let jobs: BTreeSet<JobKey> = self
            .ledger
            .values()
            .filter(|p| p.nodes().any(|n| n == id))
            .map(|p| p.job.clone())
            .collect();
        for j in &jobs {
            self.release(j);
        }
        if let Some(node) = self.nodes.remove(&id) {
            self.index.remove(&node);
            self.total_units -= node.total_units;
            self.free_units -= node.free_units;
            self.free_whole -= node.free_whole;
            self.cpu_tracked -= u32::from(node.capacity.cpu_millis.is_some());
            self.memory_tracked -= u32::from(node.capacity.memory_mb.is_some());
            self.jobs_tracked -= u32::from(node.capacity.max_jobs.is_some());
        }
        self.floor = self.nodes.values().fold(None, merge_floor);
        jobs.into_iter().collect()
    }

    /// Sets one GPU's health (unknown node or GPU: ignored). A GPU that no
    /// longer accepts new jobs keeps its holders until they are released.
    pub fn set_health(&mut self, node: NodeId, index: u32, health: GpuHealth) {
        self.with_node(node, |n| {
            if let Some(pos) = n.gpu_pos(index) {
                n.gpus[pos].health = health;
                n.gpus[pos].refresh();
            }
        });
    }

    /// Drains (or undrains) a node: no new job is placed on it while
    /// drained; its jobs keep what they hold (unknown node: ignored).
    pub fn set_drained(&mut self, node: NodeId, drained: bool) {
        // Re-indexed: a drained node has no free slot in the index.
        self.with_node(node, |n| n.drained = drained);
    }

    /// One GPU's health as last set (unknown node or GPU: `None`).
    pub fn health(&self, node: NodeId, index: u32) -> Option<GpuHealth> {
        let n = self.nodes.get(&node)?;
        n.gpu_pos(index).map(|pos| n.gpus[pos].health)
    }

    /// Records a placement, all of it or (on error) none of it.
    pub fn allocate(&mut self, p: Placement) -> Result<(), AllocError> {
        self.record(p, true)
    }

    /// Records the placement of a job that already runs (restore from the
    /// ledger): checked as by [`ClusterState::allocate`], except that its
    /// CPU, memory and job slot are charged even beyond a node's capacity
    /// (it may have been lowered since the job started). A node over its
    /// capacity takes no new job that asks for what it lacks until its
    /// jobs give enough back ([`ClusterState::verify`] reports it).
    pub fn adopt(&mut self, p: Placement) -> Result<(), AllocError> {
        self.record(p, false)
    }

    fn record(&mut self, p: Placement, check_host: bool) -> Result<(), AllocError> {
        if self.ledger.contains_key(&p.job) {
            return Err(AllocError::DuplicateJob { job: p.job });
        }
        for (i, unit) in p.units.iter().enumerate() {
            if p.units[..i].contains(unit) {
                return Err(AllocError::DuplicateUnit {
                    job: p.job.clone(),
                    unit: unit.clone(),
                });
            }
            self.check_unit(&p, unit)?;
        }
        let load = HostLoad::of(&p);
        // The units' nodes exist (checked above); where no node limits
        // what the placement takes, there is nothing more to check.
        if p.units.is_empty() || (check_host && !self.host_unlimited(load)) {
            for id in p.nodes() {
                let Some(n) = self.nodes.get(&id) else {
                    return Err(AllocError::NoSuchNode {
                        job: p.job,
                        node: id,
                    });
                };
                if let Some((what, asked, left)) = n.room().refusal(load).filter(|_| check_host) {
                    return Err(AllocError::HostFull {
                        job: p.job,
                        node: id,
                        what,
                        asked,
                        left,
                    });
                }
            }
        }
        for id in p.nodes() {
            self.with_node(id, |n| {
                n.used = n.used.plus(load);
                for u in p.units.iter().filter(|u| u.node == id) {
                    let Some(g) = n.gpu_pos(u.index).map(|i| &mut n.gpus[i]) else {
                        continue;
                    };
                    let Some(unit) = g.unit_pos(u.mig).map(|i| &mut g.units[i]) else {
                        continue;
                    };
                    let reserve_mb = reserve(&p, unit.memory_mb);
                    let milli = p.compute_milli();
                    unit.reserved_mb += reserve_mb;
                    unit.milli_used += milli;
                    unit.holders.push(Holder {
                        job: p.job.clone(),
                        reserve_mb,
                        milli,
                        exclusive: p.sharing == Sharing::Exclusive,
                        class: p.class,
                    });
                    g.refresh();
                }
            });
        }
        self.ledger.insert(p.job.clone(), p);
        Ok(())
    }

    fn check_unit(&self, p: &Placement, u: &GpuRef) -> Result<(), AllocError> {
        let job = || p.job.clone();
        let missing = || AllocError::NoSuchUnit {
            job: job(),
            unit: u.clone(),
        };
        let gpu = self
            .nodes
            .get(&u.node)
            .and_then(|n| n.gpu_pos(u.index).map(|i| &n.gpus[i]))
            .ok_or_else(missing)?;
        let unit = gpu
            .unit_pos(u.mig)
            .map(|i| &gpu.units[i])
            .ok_or_else(missing)?;
        if !gpu.placeable() {
            return Err(AllocError::NotPlaceable {
                job: job(),
                unit: u.clone(),
                state: gpu.health.state,
                paused: gpu.health.paused,
            });
        }
        let busy = |h: &Holder| AllocError::Busy {
            job: job(),
            unit: u.clone(),
            holder: h.job.clone(),
        };
        if p.sharing == Sharing::Exclusive {
            if let Some(h) = unit.holders.first() {
                return Err(busy(h));
            }
            return Ok(());
        }
        if let Some(h) = unit.holders.iter().find(|h| h.exclusive) {
            return Err(busy(h));
        }
        if let Some(h) = unit.class_conflict(p.class) {
            return Err(AllocError::ClassConflict {
                job: job(),
                unit: u.clone(),
                class: p.class,
                holder: h.job.clone(),
            });
        }
        let milli = p.compute_milli();
        if milli > unit.free_milli() {
            return Err(AllocError::OutOfCompute {
                job: job(),
                unit: u.clone(),
                asked_milli: milli,
                free_milli: unit.free_milli(),
            });
        }
        let asked_mb = reserve(p, unit.memory_mb);
        let whole_memory = p.memory_mb == 0 && !is_fraction(p);
        if asked_mb > unit.free_mb() || (whole_memory && !unit.holders.is_empty()) {
            return Err(AllocError::OutOfMemory {
                job: job(),
                unit: u.clone(),
                asked_mb,
                free_mb: unit.free_mb(),
            });
        }
        Ok(())
    }

    /// Frees the job's units, CPU, memory and job slots; returns its
    /// placement (None: unknown job).
    pub fn release(&mut self, job: &str) -> Option<Placement> {
        let p = self.ledger.remove(job)?;
        let load = HostLoad::of(&p);
        for id in p.nodes() {
            self.with_node(id, |n| {
                n.used = n.used.minus(load);
                for u in p.units.iter().filter(|u| u.node == id) {
                    let Some(g) = n.gpu_pos(u.index).map(|i| &mut n.gpus[i]) else {
                        continue;
                    };
                    let Some(unit) = g.unit_pos(u.mig).map(|i| &mut g.units[i]) else {
                        continue;
                    };
                    if let Some(i) = unit.holders.iter().position(|h| h.job == job) {
                        let h = unit.holders.swap_remove(i);
                        unit.reserved_mb -= h.reserve_mb;
                        unit.milli_used -= h.milli;
                    }
                    g.refresh();
                }
            });
        }
        Some(p)
    }

    /// Applies `f` to a node, keeping the index and totals exact.
    fn with_node(&mut self, id: NodeId, f: impl FnOnce(&mut Node)) {
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        self.index.remove(n);
        let before = (n.free_units, n.free_whole);
        f(n);
        n.recount();
        self.index.insert(n);
        self.free_units = self.free_units - before.0 + n.free_units;
        self.free_whole = self.free_whole - before.1 + n.free_whole;
    }

    /// Holds `load` on the node for a job whose preemption victims are
    /// still stopping: nobody is placed on it until it is unclaimed
    /// (unknown node: ignored).
    pub(crate) fn claim_host(&mut self, node: NodeId, load: HostLoad) {
        self.with_node(node, |n| n.claimed = n.claimed.plus(load));
    }

    /// Gives back what [`ClusterState::claim_host`] held.
    pub(crate) fn unclaim_host(&mut self, node: NodeId, load: HostLoad) {
        self.with_node(node, |n| n.claimed = n.claimed.minus(load));
    }

    /// What the jobs placed on the node use of its CPU, memory and job
    /// slots (unknown node: `None`).
    pub fn host_used(&self, node: NodeId) -> Option<HostLoad> {
        self.nodes.get(&node).map(|n| n.used)
    }

    /// Whether no node tracks what `load` asks for beyond a job slot: then
    /// its CPU and memory keep it off no node.
    pub(crate) fn host_light(&self, load: HostLoad) -> bool {
        (load.cpu_millis == 0 || self.cpu_tracked == 0)
            && (load.memory_mb == 0 || self.memory_tracked == 0)
    }

    /// Whether host capacity can keep `load` off no node, ever: it is
    /// light and no node limits its jobs.
    pub(crate) fn host_unlimited(&self, load: HostLoad) -> bool {
        self.jobs_tracked == 0 && self.host_light(load)
    }

    pub fn placement(&self, job: &str) -> Option<&Placement> {
        self.ledger.get(job)
    }

    /// The allocations ledger, by job key.
    pub fn placements(&self) -> impl Iterator<Item = &Placement> {
        let mut all: Vec<&Placement> = self.ledger.values().collect();
        all.sort_unstable_by(|a, b| a.job.cmp(&b.job));
        all.into_iter()
    }

    /// Whole GPUs plus MIG slices, healthy or not.
    pub fn total_units(&self) -> u32 {
        self.total_units
    }

    /// Units that a 1-unit exclusive job could get now (placeable, no holder).
    pub fn free_units(&self) -> u32 {
        self.free_units
    }

    /// Jobs holding any unit of that GPU, sorted.
    pub fn jobs_on(&self, node: NodeId, index: u32) -> Vec<JobKey> {
        let Some(g) = self
            .nodes
            .get(&node)
            .and_then(|n| n.gpu_pos(index).map(|i| &n.gpus[i]))
        else {
            return Vec::new();
        };
        let jobs: BTreeSet<&JobKey> = g
            .units
            .iter()
            .flat_map(|u| &u.holders)
            .map(|h| &h.job)
            .collect();
        jobs.into_iter().cloned().collect()
    }

    pub(crate) fn nodes(&self) -> &BTreeMap<NodeId, Node> {
        &self.nodes
    }

    pub(crate) fn index(&self) -> &DomainIndex {
        &self.index
    }

    pub(crate) fn free_whole(&self) -> u32 {
        self.free_whole
    }

    pub(crate) fn floor(&self) -> Option<WholeFloor> {
        self.floor
    }
}

/// Whether a shared placement takes a fraction (1..=999 milli) of its unit.
fn is_fraction(p: &Placement) -> bool {
    p.sharing == Sharing::Shared && p.gpu_milli > 0 && p.gpu_milli < GPU_MILLI_WHOLE
}

/// MiB a placement accounts on a unit of `unit_mb`: exclusive and shared
/// with 0 take the whole unit, except a fraction, which takes what it
/// asked (0 included).
pub(crate) fn reserve(p: &Placement, unit_mb: u64) -> u64 {
    if p.sharing == Sharing::Exclusive || (p.memory_mb == 0 && !is_fraction(p)) {
        unit_mb
    } else {
        p.memory_mb
    }
}

fn merge_floor(floor: Option<WholeFloor>, node: &Node) -> Option<WholeFloor> {
    node.gpus
        .iter()
        .filter(|g| g.is_whole())
        .fold(floor, |f, g| {
            let (mem, cc) = (g.spec.memory_mb, g.spec.compute_capability);
            Some(match f {
                None => WholeFloor {
                    min_memory_mb: mem,
                    min_cc: cc,
                },
                Some(f) => WholeFloor {
                    min_memory_mb: f.min_memory_mb.min(mem),
                    min_cc: f.min_cc.min(cc),
                },
            })
        })
}
