//! The head job's backfill reservation, from running jobs' time limits.
//!
//! The walk visits running jobs by expected end (a stopping job ends now;
//! a job without a limit never does) and frees, at each end, the job's
//! units and its CPU, memory and job slot on each of its nodes. A unit the
//! head could use (open GPU, enough memory, compute capability, the MIG
//! profile it asks for, or a whole GPU without MIG) counts as free when the
//! last job on it has ended, and only while its node has room for the
//! head's CPU, memory and a job slot (in the dimensions the node tracks).
//! Grouping units per NUMA node, per node, or over the cluster (as the
//! head's `allow_cross_*` permit), the head's earliest start (the *shadow
//! time*) is the earliest moment some group has `gpu_count` units free;
//! those units are reserved. A CPU-only head's shadow time is the earliest
//! moment some node has room for it. Each reserved node also records what
//! would be left there at the shadow time besides the head (its slack).
//!
//! Only nodes a walked job touches are looked at (the head did not fit,
//! so no node or group has room for it now, and an untouched node does not
//! change), except for heads that may span nodes, which count every
//! node's free units.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use joblet_core::UnixMillis;

use super::backfill::Reservation;
use crate::cluster::{HostLoad, Room};
use crate::model::{GpuRef, JobRequest, NodeId, Placement};
use crate::queue::QKey;
use crate::scheduler::{ByJob, Scheduler};

/// Where a head's gang must fit: (node, NUMA node), (node, all), or the
/// whole cluster.
type GroupKey = (u32, u32);

/// What reached the head's needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A group with `gpu_count` units free.
    Group(GroupKey),
    /// A node with room for a CPU-only head.
    Node(NodeId),
}

/// The maps of a reservation walk, kept between walks (their memory is
/// reused: a walk runs on most backfill passes).
#[derive(Debug, Clone, Default)]
pub(crate) struct WalkBuf {
    touched: HashSet<u32>,
    held: HashMap<GpuRef, (u32, GroupKey)>,
    groups: HashMap<GroupKey, Vec<GpuRef>>,
    /// Per touched node, when host capacity matters: what the walk freed
    /// there so far, and whether the head has room there by then.
    hosts: HashMap<NodeId, (HostLoad, bool)>,
    /// Free matching units of nodes without room for the head yet.
    blocked: HashMap<NodeId, Vec<(GpuRef, GroupKey)>>,
}

impl WalkBuf {
    fn clear(&mut self) {
        self.touched.clear();
        self.held.clear();
        self.groups.clear();
        self.hosts.clear();
        self.blocked.clear();
    }
}

impl Scheduler {
    /// The head's reservation (see the module docs).
    pub(crate) fn reserve(
        &self,
        head: QKey,
        req: &JobRequest,
        now: UnixMillis,
        buf: &mut WalkBuf,
    ) -> Reservation {
        buf.clear();
        let load = HostLoad::of_request(req);
        let mut walk = Walk {
            s: self,
            req,
            need: usize::try_from(req.gpu_count).unwrap_or(usize::MAX),
            load,
            host: !self.cluster.host_unlimited(load),
            now,
            buf,
            found: None,
        };
        if req.allow_cross_node {
            for &id in self.nodes.keys() {
                walk.touch(id);
            }
        }
        for ByJob { n: end, job } in &self.by_end {
            if walk.found.is_some() {
                break;
            }
            let at = (*end).max(now);
            if let Some(p) = self.running.get(job).and_then(|r| r.placement.as_ref()) {
                walk.end_of(p, at);
            }
        }
        let Some((shadow, found)) = walk.found else {
            return Reservation {
                head,
                version: self.res_version,
                shadow: UnixMillis::MAX,
                units: HashSet::default(),
                slack: Vec::new(),
            };
        };
        let (units, mut nodes) = match found {
            Found::Group(key) => {
                let units = walk.buf.groups.remove(&key).unwrap_or_default();
                let nodes: Vec<NodeId> = units.iter().map(|u| u.node).collect();
                (units, nodes)
            }
            Found::Node(n) => (Vec::new(), vec![n]),
        };
        nodes.sort_unstable();
        nodes.dedup();
        let slack = if walk.host {
            nodes
                .into_iter()
                .filter_map(|n| {
                    let mut room = walk.room_at(n)?;
                    room.take(load);
                    Some((n, room))
                })
                .collect()
        } else {
            Vec::new()
        };
        Reservation {
            head,
            version: self.res_version,
            shadow,
            units: units.into_iter().collect(),
            slack,
        }
    }
}

/// The state of one reservation walk.
struct Walk<'a> {
    s: &'a Scheduler,
    req: &'a JobRequest,
    need: usize,
    /// What the head charges each node it runs on.
    load: HostLoad,
    /// Host capacity may keep the head off a node (else never looked at).
    host: bool,
    now: UnixMillis,
    buf: &'a mut WalkBuf,
    /// (shadow time, what reached the head's needs).
    found: Option<(UnixMillis, Found)>,
}

impl Walk<'_> {
    fn group(&self, node: u32, numa: u32) -> GroupKey {
        if self.req.allow_cross_node {
            (0, 0)
        } else if self.req.allow_cross_numa {
            (node, u32::MAX)
        } else {
            (node, numa)
        }
    }

    /// The node's room once the walk has freed `freed` there.
    fn room_with(&self, id: NodeId, freed: HostLoad) -> Option<Room> {
        let node = self.s.cluster.nodes().get(&id)?;
        Some(Room::left(
            &node.capacity,
            node.used.plus(node.claimed).minus(freed),
        ))
    }

    /// The node's room at the walk's time.
    fn room_at(&self, id: NodeId) -> Option<Room> {
        let freed = self.buf.hosts.get(&id).map_or(HostLoad::default(), |h| h.0);
        self.room_with(id, freed)
    }

    /// Whether the head has room on the node (always, when host capacity
    /// does not matter).
    fn open(&self, id: NodeId) -> bool {
        !self.host || self.buf.hosts.get(&id).is_some_and(|h| h.1)
    }

    /// A walked job ends at `at`: its CPU, memory and slots, then its
    /// units, are free.
    fn end_of(&mut self, p: &Placement, at: UnixMillis) {
        let load = HostLoad::of(p);
        for n in p.nodes() {
            self.touch(n);
            self.free_host(n, load, at);
        }
        for u in &p.units {
            self.free(u, at);
        }
    }

    /// Counts a node the first time it is seen: whether the head has room
    /// there now; its free matching units join their group (or wait for
    /// the room), held ones wait for their jobs' ends.
    fn touch(&mut self, id: u32) {
        if self.found.is_some() || !self.buf.touched.insert(id) {
            return;
        }
        if self.host {
            let fits = self
                .room_with(id, HostLoad::default())
                .is_some_and(|r| r.fits(self.load));
            self.buf.hosts.insert(id, (HostLoad::default(), fits));
            if fits && self.req.gpu_count == 0 {
                self.found = Some((self.now, Found::Node(id)));
                return;
            }
        }
        if self.req.gpu_count == 0 {
            return;
        }
        let s = self.s;
        let Some(node) = s.nodes.get(&id) else {
            return;
        };
        let req = self.req;
        for gpu in &node.gpus {
            if s.closed.contains(&(id, gpu.index))
                || req
                    .min_compute_capability
                    .is_some_and(|cc| gpu.compute_capability < cc)
            {
                continue;
            }
            let key = self.group(id, gpu.numa);
            match &req.mig_profile {
                Some(profile) => {
                    for m in &gpu.mig {
                        if &m.profile == profile && m.memory_mb >= req.gpu_memory_mb {
                            self.unit(id, gpu.index, Some(m.id), key);
                        }
                    }
                }
                None if gpu.mig.is_empty() && gpu.memory_mb >= req.gpu_memory_mb => {
                    self.unit(id, gpu.index, None, key);
                }
                None => {}
            }
        }
    }

    /// A matching unit of a node seen for the first time: free now, or
    /// held until its jobs end.
    fn unit(&mut self, node: u32, index: u32, mig: Option<u32>, key: GroupKey) {
        let r = GpuRef { node, index, mig };
        match self.s.unit_jobs.get(&r) {
            Some(&n) => {
                self.buf.held.insert(r, (n, key));
            }
            None => self.add(r, key, self.now),
        }
    }

    /// One job on the unit ends at `at`.
    fn free(&mut self, u: &GpuRef, at: UnixMillis) {
        let Some((left, key)) = self.buf.held.get_mut(u) else {
            return;
        };
        *left -= 1;
        if *left == 0 {
            let key = *key;
            self.buf.held.remove(u);
            self.add(u.clone(), key, at);
        }
    }

    /// A job on the node ends at `at`, giving back `load` there: once the
    /// head has room, a CPU-only head is placed, and a gang's free units
    /// there count.
    fn free_host(&mut self, id: NodeId, load: HostLoad, at: UnixMillis) {
        if !self.host || self.found.is_some() {
            return;
        }
        let Some(&(freed, open)) = self.buf.hosts.get(&id) else {
            return;
        };
        let freed = freed.plus(load);
        let fits = open || self.room_with(id, freed).is_some_and(|r| r.fits(self.load));
        self.buf.hosts.insert(id, (freed, fits));
        if open || !fits {
            return;
        }
        if self.req.gpu_count == 0 {
            self.found = Some((at, Found::Node(id)));
            return;
        }
        for (u, key) in self.buf.blocked.remove(&id).unwrap_or_default() {
            self.add(u, key, at);
        }
    }

    fn add(&mut self, u: GpuRef, key: GroupKey, at: UnixMillis) {
        if self.found.is_some() {
            return;
        }
        if !self.open(u.node) {
            self.buf.blocked.entry(u.node).or_default().push((u, key));
            return;
        }
        let group = self.buf.groups.entry(key).or_default();
        group.push(u);
        if group.len() >= self.need {
            self.found = Some((at, Found::Group(key)));
        }
    }
}
