//! One node's live state: its GPUs, their allocatable units (a whole GPU or
//! its MIG slices) with the jobs holding them, its topology domains, and
//! the CPU, memory and job slots its jobs use.

use joblet_core::gpu::GpuState;

use super::host::{HostLoad, Room};
use crate::model::{GpuHealth, GpuSpec, JobKey, NodeCapacity, NodeId, NodeSpec, WorkloadClass};

/// Number of topology tiers, best first (see [`Domain::tier`]).
pub(crate) const TIERS: usize = 5;

/// One job's hold on a unit.
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    pub job: JobKey,
    /// MiB accounted on the unit (exclusive: the whole unit).
    pub reserve_mb: u64,
    /// Compute share (milli) accounted on the unit
    /// ([`crate::model::Placement::compute_milli`]).
    pub milli: u32,
    pub exclusive: bool,
    pub class: WorkloadClass,
}

/// An allocatable unit: a whole GPU (no MIG) or one MIG slice.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    pub mig: Option<u32>,
    pub profile: Option<String>,
    pub memory_mb: u64,
    pub holders: Vec<Holder>,
    pub reserved_mb: u64,
    /// Compute share (milli) its holders account; at most 1000.
    pub milli_used: u32,
}

impl Unit {
    /// Compute share (milli) not yet accounted.
    pub fn free_milli(&self) -> u32 {
        crate::model::GPU_MILLI_WHOLE.saturating_sub(self.milli_used)
    }

    pub fn exclusive_held(&self) -> bool {
        self.holders.iter().any(|h| h.exclusive)
    }

    /// MiB not yet reserved.
    pub fn free_mb(&self) -> u64 {
        self.memory_mb.saturating_sub(self.reserved_mb)
    }

    /// Whether a job of `class` may join the unit's holders: training and
    /// inference never share a unit; interactive work mixes with either.
    pub fn class_conflict(&self, class: WorkloadClass) -> Option<&Holder> {
        self.holders
            .iter()
            .find(|h| classes_conflict(h.class, class))
    }
}

/// Training and inference never share a unit; interactive shares with both.
pub(crate) fn classes_conflict(a: WorkloadClass, b: WorkloadClass) -> bool {
    matches!(
        (a, b),
        (WorkloadClass::Training, WorkloadClass::Inference)
            | (WorkloadClass::Inference, WorkloadClass::Training)
    )
}

/// One GPU: its spec, health and units.
#[derive(Debug, Clone)]
pub(crate) struct Gpu {
    pub spec: GpuSpec,
    pub health: GpuHealth,
    pub units: Vec<Unit>,
    /// Derived from `units` and `health` by [`Gpu::refresh`] (call it after
    /// changing either), so that a node recounts without reading every
    /// unit: free units and units not held exclusively (0 when not
    /// placeable), and whether it is a free whole GPU.
    counts: GpuCounts,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct GpuCounts {
    free_units: u32,
    open_units: u32,
    free_whole: bool,
}

impl Gpu {
    fn new(spec: GpuSpec) -> Gpu {
        let mut units: Vec<Unit> = Vec::new();
        if spec.mig.is_empty() {
            units.push(Unit {
                mig: None,
                profile: None,
                memory_mb: spec.memory_mb,
                holders: Vec::new(),
                reserved_mb: 0,
                milli_used: 0,
            });
        } else {
            for s in &spec.mig {
                // A repeated slice id would be ambiguous: the first one counts.
                if units.iter().any(|u| u.mig == Some(s.id)) {
                    continue;
                }
                units.push(Unit {
                    mig: Some(s.id),
                    profile: Some(s.profile.clone()),
                    memory_mb: s.memory_mb,
                    holders: Vec::new(),
                    reserved_mb: 0,
                    milli_used: 0,
                });
            }
        }
        Gpu {
            spec,
            health: GpuHealth {
                state: GpuState::Available,
                paused: false,
                temperature_c: None,
            },
            units,
            counts: GpuCounts::default(),
        }
    }

    /// Brings the derived counts up to date with the units and health.
    pub fn refresh(&mut self) {
        self.counts = if self.placeable() {
            GpuCounts {
                free_units: self.units.iter().filter(|u| u.holders.is_empty()).count() as u32,
                open_units: self.units.iter().filter(|u| !u.exclusive_held()).count() as u32,
                free_whole: self.is_whole() && self.units.iter().all(|u| u.holders.is_empty()),
            }
        } else {
            GpuCounts::default()
        };
    }

    /// New jobs may land here: the state accepts them and placement is not
    /// paused.
    pub fn placeable(&self) -> bool {
        self.health.state.accepts_new_jobs() && !self.health.paused
    }

    /// Unknown temperature counts as 0 (coolest).
    pub fn temp(&self) -> u32 {
        self.health.temperature_c.unwrap_or(0)
    }

    pub fn is_whole(&self) -> bool {
        self.spec.mig.is_empty()
    }

    /// A whole GPU that is placeable and held by nobody (as of the last
    /// [`Gpu::refresh`]).
    pub fn free_whole(&self) -> bool {
        self.counts.free_whole
    }

    pub fn unit_pos(&self, mig: Option<u32>) -> Option<usize> {
        self.units.iter().position(|u| u.mig == mig)
    }
}

/// A set of GPUs of one node that a gang may be confined to: an NVLink
/// group, a NUMA node, a socket, the whole node (identical sets merged).
#[derive(Debug, Clone)]
pub(crate) struct Domain {
    /// 0: one NVLink group on one NUMA node; 1: one NVLink group across
    /// NUMA nodes; 2: one NUMA node; 3: one socket; 4: the node.
    pub tier: u8,
    /// GPU positions on the node, ascending.
    pub gpus: Vec<usize>,
    /// Exactly the GPUs of one NUMA node.
    pub numa_level: bool,
    /// All GPUs of the node.
    pub node_level: bool,
    /// All its GPUs hang off one NUMA node.
    pub single_numa: bool,
    /// Whole (non-MIG) GPUs in it.
    pub whole: u32,
    /// Free whole GPUs (placeable, no holder); kept by `Node::recount`.
    pub free: u32,
    /// Hottest GPU's temperature; kept by `Node::recount`.
    pub temp: u32,
}

/// A node's live state.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub id: NodeId,
    /// Sorted by GPU index (a repeated index keeps its first GPU).
    pub gpus: Vec<Gpu>,
    pub domains: Vec<Domain>,
    /// Free whole GPUs (the fast path's capacity).
    pub free_whole: u32,
    /// Free units of any kind (placeable, no holder).
    pub free_units: u32,
    /// Placeable units not held exclusively (what a shared job could join).
    pub open_units: u32,
    pub total_units: u32,
    pub capacity: NodeCapacity,
    /// What the placements in the ledger charge this node.
    pub used: HostLoad,
    /// What is held for a job whose preemption victims are still stopping
    /// (nobody else may take it).
    pub claimed: HostLoad,
    /// Drained (cluster mode, `rnx node drain`): no new job lands here;
    /// what runs here keeps running.
    pub drained: bool,
}

impl Node {
    pub fn new(spec: NodeSpec) -> Node {
        let mut specs = spec.gpus;
        specs.sort_by_key(|g| g.index);
        specs.dedup_by_key(|g| g.index);
        let gpus: Vec<Gpu> = specs.into_iter().map(Gpu::new).collect();
        let domains = build_domains(&gpus);
        let total_units = gpus.iter().map(|g| g.units.len() as u32).sum();
        let mut node = Node {
            id: spec.id,
            gpus,
            domains,
            free_whole: 0,
            free_units: 0,
            open_units: 0,
            total_units,
            capacity: spec.capacity,
            used: HostLoad::default(),
            claimed: HostLoad::default(),
            drained: false,
        };
        node.recount_all();
        node
    }

    /// What is left of the node's host capacity for new jobs.
    pub fn room(&self) -> Room {
        Room::left(&self.capacity, self.used.plus(self.claimed))
    }

    /// Whether one more job of `load` fits the node's host capacity.
    pub fn host_fits(&self, load: HostLoad) -> bool {
        !self.drained && self.room().fits(load)
    }

    /// Whether any job could start here now (a job slot is free): nodes
    /// without one are left out of the free-capacity index.
    pub fn has_slot(&self) -> bool {
        !self.drained
            && self
                .capacity
                .max_jobs
                .is_none_or(|m| self.used.jobs.saturating_add(self.claimed.jobs) < m)
    }

    pub fn gpu_pos(&self, index: u32) -> Option<usize> {
        // GPUs are usually indexed 0..n: then the index is the position.
        let at = usize::try_from(index).ok()?;
        if self.gpus.get(at).is_some_and(|g| g.spec.index == index) {
            return Some(at);
        }
        self.gpus
            .binary_search_by_key(&index, |g| g.spec.index)
            .ok()
    }

    /// Recomputes every derived count from the units, GPU by GPU.
    pub fn recount_all(&mut self) {
        for g in &mut self.gpus {
            g.refresh();
        }
        self.recount();
    }

    /// Recomputes the node's and domains' counts from its GPUs' (each
    /// brought up to date by [`Gpu::refresh`] when it changed).
    pub fn recount(&mut self) {
        let (mut free_units, mut open_units, mut free_whole) = (0, 0, 0);
        for g in &self.gpus {
            free_units += g.counts.free_units;
            open_units += g.counts.open_units;
            free_whole += u32::from(g.counts.free_whole);
        }
        self.free_units = free_units;
        self.open_units = open_units;
        self.free_whole = free_whole;
        let gpus = &self.gpus;
        for d in &mut self.domains {
            d.free = d.gpus.iter().filter(|p| gpus[**p].free_whole()).count() as u32;
            d.temp = d.gpus.iter().map(|p| gpus[*p].temp()).max().unwrap_or(0);
        }
    }
}

fn build_domains(gpus: &[Gpu]) -> Vec<Domain> {
    use std::collections::BTreeMap;
    // (set, numa_level, node_level) in a fixed order; identical sets merge.
    let mut sets: Vec<(Vec<usize>, bool, bool)> = Vec::new();
    let mut push = |set: Vec<usize>, numa_level: bool, node_level: bool| {
        if set.is_empty() {
            return;
        }
        if let Some(s) = sets.iter_mut().find(|s| s.0 == set) {
            s.1 |= numa_level;
            s.2 |= node_level;
        } else {
            sets.push((set, numa_level, node_level));
        }
    };
    let group = |key: &dyn Fn(&GpuSpec) -> Option<(u32, u32)>| {
        let mut m: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (pos, g) in gpus.iter().enumerate() {
            if let Some(k) = key(&g.spec) {
                m.entry(k).or_default().push(pos);
            }
        }
        m.into_values().collect::<Vec<_>>()
    };
    for s in group(&|g| g.nvlink_group.map(|n| (n, g.numa))) {
        push(s, false, false);
    }
    for s in group(&|g| g.nvlink_group.map(|n| (n, 0))) {
        push(s, false, false);
    }
    for s in group(&|g| Some((g.numa, 0))) {
        push(s, true, false);
    }
    for s in group(&|g| Some((g.socket, 0))) {
        push(s, false, false);
    }
    push((0..gpus.len()).collect(), false, true);

    sets.into_iter()
        .map(|(set, numa_level, node_level)| {
            let first = &gpus[set[0]].spec;
            let same = |f: &dyn Fn(&GpuSpec) -> Option<u32>| {
                set.iter().all(|p| f(&gpus[*p].spec) == f(first))
            };
            let one_nvlink = first.nvlink_group.is_some() && same(&|g| g.nvlink_group);
            let single_numa = same(&|g| Some(g.numa));
            let one_socket = same(&|g| Some(g.socket));
            let tier = match (one_nvlink, single_numa, one_socket) {
                (true, true, _) => 0,
                (true, false, _) => 1,
                (false, true, _) => 2,
                (false, false, true) => 3,
                (false, false, false) => 4,
            };
            let whole = set.iter().filter(|p| gpus[**p].is_whole()).count() as u32;
            Domain {
                tier,
                gpus: set,
                numa_level,
                node_level,
                single_numa,
                whole,
                free: 0,
                temp: 0,
            }
        })
        .collect()
}
