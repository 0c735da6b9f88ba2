//! Placement of one request on the cluster state, by strategy.
//!
//! Every placement needs, on each node it touches, a free job slot and
//! room for the request's `cpu_millis` and `host_memory_mb` (in the
//! dimensions the node tracks); nodes without are not considered. A
//! CPU-only request (`gpu_count` 0) takes one such node: `Pack`, `BestFit`
//! and `Topology` the one with the least room left after placing it,
//! `Spread` the one with the most (CPU first, then memory, then job slots,
//! an untracked dimension counting as unlimited; then the most jobs
//! running, `Spread`: the fewest; then the lowest node id).
//!
//! A request with GPUs takes `gpu_count` units, all or none: whole GPUs, or
//! with `mig_profile` only MIG slices of that profile (a GPU with slices
//! offers only its slices). Units must be on GPUs that accept new jobs and
//! are not paused, meet `min_compute_capability` and have at least
//! `gpu_memory_mb`. Exclusive requests take units nobody holds; shared ones
//! join units not held exclusively, not mixing training with inference,
//! reserving `gpu_memory_mb` (0 = the whole unit, so an empty one, except
//! for a fraction) within the unit's unreserved memory, and their compute
//! share ([`crate::model::Placement::compute_milli`]) within the unit's
//! unaccounted share (1000 milli per unit).
//!
//! A gang stays on one NUMA node unless `allow_cross_numa`, on one node
//! unless `allow_cross_node` (which also allows crossing NUMA nodes), and
//! only spans nodes when no single node can hold it. Candidate places are
//! the node's topology domains (NVLink group on one NUMA node, NVLink
//! group, NUMA node, socket, node); `F` below is a domain's count of
//! eligible units and `F(node)` the node's:
//! - `Topology`: the best tier (NVLink group in one NUMA node → NVLink
//!   group → NUMA node → socket → node), then pack order: smallest `F`,
//!   then busiest node (smallest `F(node)`, which keeps empty nodes whole),
//!   then coolest domain (its hottest GPU);
//! - `Pack`: the NUMA node (or, when it may cross NUMA nodes, the node)
//!   with the smallest `F`, then busiest node, coolest;
//! - `Spread`: the NUMA node (or node) with the largest `F`, then the
//!   emptiest node, coolest;
//! - `BestFit`: any allowed domain with the smallest `F - gpu_count`, then
//!   the better tier, busiest node, coolest; a fraction of a GPU
//!   (`gpu_milli` 1..=999) is instead scored node by node
//!   (`scored.rs`): least GPU compute share left on the node, then on the GPU;
//! - `Fgd`: every request without a MIG profile (CPU-only ones too) is
//!   scored node by node (`scored.rs`) by the growth of the node's
//!   fragmentation for the workload ([`fgd`], [`workload`]); MIG requests
//!   are placed in `Topology`'s order.
//!
//! Remaining ties go to the lowest node id, then the domain built first.
//! Inside the chosen place, units come from its best-tier sub-domain that
//! fits, from the NUMA node with most eligible units first, tightest
//! fit first (memory; for a fraction, compute share then memory; `Spread`:
//! roomiest), coolest, lowest index.
//! Cross-node gangs take nodes with the most eligible units first.
//!
//! Speed: exclusive whole-GPU requests that every whole GPU of the cluster
//! satisfies (memory, compute capability), and whose CPU and memory no
//! node tracks (or that ask for none), are answered from the cluster's
//! free-capacity index (which leaves out nodes without a free job slot)
//! with a few range lookups; other requests scan the nodes (skipping those
//! without enough open units or host room).

mod cross;
pub mod fgd;
mod host;
mod rank;
mod scored;
mod select;
pub mod workload;

use crate::cluster::node::{classes_conflict, Gpu, Node, Unit};
use crate::cluster::{ClusterState, HostLoad};
use crate::model::{
    compute_milli, GpuRef, JobRequest, Placement, Sharing, Strategy, WorkloadClass,
};
use workload::{Shape, Workload};

/// A placement that `allocate` would accept, or None when none exists now.
/// A request for 0 GPUs gets a placement without units on one node. `Fgd`
/// measures fragmentation against the request's own shape alone (see
/// [`place_with`]).
pub fn place(state: &ClusterState, req: &JobRequest, strategy: Strategy) -> Option<Placement> {
    place_with(state, req, strategy, &Workload::default())
}

/// [`place`], with `Fgd` measuring fragmentation against `workload` (the
/// scheduler's observed mix of request shapes). A request whose
/// `gpu_milli` does not fit the rest of it
/// ([`JobRequest::gpu_milli_error`]) gets no placement.
pub fn place_with(
    state: &ClusterState,
    req: &JobRequest,
    strategy: Strategy,
    workload: &Workload,
) -> Option<Placement> {
    if req.gpu_milli_error().is_some() {
        return None;
    }
    let d = Demand::new(req, strategy);
    let host_only = |node| Placement {
        job: req.job.clone(),
        node,
        units: Vec::new(),
        memory_mb: 0,
        cpu_millis: req.cpu_millis,
        host_memory_mb: req.host_memory_mb,
        gpu_milli: req.gpu_milli,
        sharing: req.sharing,
        class: req.class,
    };
    let scored = match strategy {
        Strategy::Fgd => d.profile.is_none(),
        Strategy::BestFit => d.fraction,
        _ => false,
    };
    if d.n == 0 && !scored {
        return Some(host_only(host::best_node(state, &d)?));
    }
    let best = if scored {
        scored::best(state, &d, workload)
    } else {
        None
    };
    let picked = if let Some((node, choice)) = best {
        if d.n == 0 {
            return Some(host_only(node.id));
        }
        choice
            .into_iter()
            .map(|(pos, unit)| (node, pos, unit))
            .collect()
    } else if scored && !req.allow_cross_node {
        return None;
    } else if scored {
        cross::units_across(state, &d)?
    } else if let Some((node, dom)) = rank::best_domain(state, &d) {
        let node = state.nodes().get(&node)?;
        let ev = select::eval(node, &d);
        select::units(node, &ev, dom, d.n, &d)
            .into_iter()
            .map(|(pos, unit)| (node, pos, unit))
            .collect()
    } else if req.allow_cross_node {
        cross::units_across(state, &d)?
    } else {
        return None;
    };
    let mut units: Vec<GpuRef> = Vec::with_capacity(picked.len());
    let mut min_mb = u64::MAX;
    for (node, pos, unit) in picked {
        let g = &node.gpus[pos];
        let u = &g.units[unit];
        min_mb = min_mb.min(u.memory_mb);
        units.push(GpuRef {
            node: node.id,
            index: g.spec.index,
            mig: u.mig,
        });
    }
    units.sort_unstable();
    let memory_mb = match req.sharing {
        Sharing::Shared => req.gpu_memory_mb,
        Sharing::Exclusive => min_mb,
    };
    Some(Placement {
        job: req.job.clone(),
        node: units.first()?.node,
        units,
        memory_mb,
        cpu_millis: req.cpu_millis,
        host_memory_mb: req.host_memory_mb,
        gpu_milli: req.gpu_milli,
        sharing: req.sharing,
        class: req.class,
    })
}

/// A request as placement needs it.
#[derive(Debug, Clone)]
pub(crate) struct Demand<'a> {
    pub n: u32,
    pub exclusive: bool,
    pub profile: Option<&'a str>,
    pub min_cc: Option<(u32, u32)>,
    pub mem_mb: u64,
    /// Compute share (milli) it accounts on each unit
    /// ([`Placement::compute_milli`]).
    pub milli: u32,
    /// A fraction (1..=999 milli) of one GPU.
    pub fraction: bool,
    pub class: WorkloadClass,
    /// May use domains spanning NUMA nodes (cross-node implies it).
    pub cross_numa: bool,
    pub strategy: Strategy,
    /// What it charges each node it touches.
    pub host: HostLoad,
    pub shape: Shape,
}

impl<'a> Demand<'a> {
    fn new(req: &'a JobRequest, strategy: Strategy) -> Demand<'a> {
        Demand {
            n: req.gpu_count,
            exclusive: req.sharing == Sharing::Exclusive,
            profile: req.mig_profile.as_deref(),
            min_cc: req.min_compute_capability,
            mem_mb: req.gpu_memory_mb,
            milli: compute_milli(req.sharing, req.gpu_milli, req.gpu_memory_mb),
            fraction: req.is_fractional(),
            class: req.class,
            cross_numa: req.allow_cross_numa || req.allow_cross_node,
            strategy,
            host: HostLoad::of_request(req),
            shape: Shape::of(req),
        }
    }

    /// Whether the node has a job slot and room for its CPU and memory.
    pub fn host_fits(&self, node: &Node) -> bool {
        node.host_fits(self.host)
    }

    /// If the unit may take this request now: its unreserved MiB after
    /// taking it (exclusive: the unit's MiB beyond the minimum asked; a
    /// fraction: its unaccounted compute share after, then MiB, as
    /// `milli << 32 | MiB`, so that the tightest fit is the smallest).
    pub fn room_after(&self, g: &Gpu, u: &Unit) -> Option<u64> {
        if !g.placeable()
            || self.profile != u.profile.as_deref()
            || u.memory_mb < self.mem_mb
            || self.min_cc.is_some_and(|c| g.spec.compute_capability < c)
        {
            return None;
        }
        if self.exclusive {
            return u.holders.is_empty().then(|| u.memory_mb - self.mem_mb);
        }
        if u.holders
            .iter()
            .any(|h| h.exclusive || classes_conflict(h.class, self.class))
        {
            return None;
        }
        let milli_left = u.free_milli().checked_sub(self.milli)?;
        if self.fraction {
            let mb_left = u.free_mb().checked_sub(self.mem_mb)?;
            return Some(u64::from(milli_left) << 32 | mb_left.min(u64::from(u32::MAX)));
        }
        if self.mem_mb == 0 {
            return u.holders.is_empty().then_some(0);
        }
        u.free_mb().checked_sub(self.mem_mb)
    }

    /// Every free whole GPU of the cluster on a node with a free job slot
    /// serves it: the index is exact.
    pub fn fast_path(&self, state: &ClusterState) -> bool {
        let Some(floor) = state.floor() else {
            return false;
        };
        state.host_light(self.host)
            && self.exclusive
            && self.profile.is_none()
            && self.mem_mb <= floor.min_memory_mb
            && self.min_cc.is_none_or(|c| floor.min_cc >= c)
    }
}
