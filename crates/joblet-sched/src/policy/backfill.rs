//! EASY backfill: strict order until the first allowed job that does not
//! fit (the head); then the head gets a reservation and later jobs may
//! start only if they cannot delay it.
//!
//! The reservation is computed from running jobs' time limits: each unit
//! the head could use (open GPU, enough memory, compute capability, the
//! MIG profile it asks for, or a whole GPU without MIG) becomes free when
//! the last job on it ends by its limit (now if idle; a stopping job ends
//! now; a job without a limit never does). Grouping units per NUMA node,
//! per node, or over the cluster (as the head's `allow_cross_*` permit),
//! the head's earliest start (the *shadow time*) is the earliest moment
//! some group has `gpu_count` units free; those units are reserved. A
//! later job with a time limit starts if placement finds it a place and it
//! either ends (start + time limit) by the shadow time or uses no reserved
//! unit. Jobs without a time limit never backfill, and if the head's
//! start depends on a job without a limit, nothing backfills. The
//! reservation is cached until running jobs' ends may have changed
//! (release, start ahead of the head, preemption, health, nodes); backfill
//! starts keep it valid. Trade-off: it is count-based per unit, so it is
//! conservative for shared heads (it waits for units to be wholly free)
//! and ignores NVLink preferences; the guarantee relies on jobs ending by
//! their limits (the daemon enforces them).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use joblet_core::UnixMillis;

use crate::model::{after, GpuRef, JobRequest};
use crate::queue::QKey;
use crate::scheduler::{ByJob, Scheduler};

/// The head job's reserved units and earliest start.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub head: QKey,
    /// `res_version` it was computed at.
    pub version: u64,
    /// The head's earliest start; `UnixMillis::MAX` = unknown.
    pub shadow: UnixMillis,
    pub units: HashSet<GpuRef>,
}

impl Scheduler {
    pub(crate) fn pass_backfill(&mut self, now: UnixMillis) {
        let Some((head, passed)) = self.start_in_order(now) else {
            return;
        };
        self.preempt_for(head, now);
        let fresh = self
            .reservation
            .as_ref()
            .is_some_and(|r| r.head == head && r.version == self.res_version);
        if !fresh {
            let Some(req) = self.queue.get(head).map(|w| w.req.clone()) else {
                return;
            };
            let mut buf = std::mem::take(&mut self.walk_buf);
            self.reservation = Some(self.reserve(head, &req, now, &mut buf));
            self.walk_buf = buf;
        }
        let Some(shadow) = self.reservation.as_ref().map(|r| r.shadow) else {
            return;
        };
        if shadow == UnixMillis::MAX {
            return;
        }
        // The window: `lookahead` jobs after the head, which is preceded
        // only by the jobs `start_in_order` passed over.
        let end = self
            .queue
            .nth_key(passed.saturating_add(self.config.lookahead));
        self.each_candidate(Some(head), end, |s, key| s.backfill(key, shadow, now));
    }

    /// Starts the job if it fits and cannot delay the head's reservation.
    fn backfill(&mut self, key: QKey, shadow: UnixMillis, now: UnixMillis) {
        let Some(w) = self.queue.get(key) else {
            return;
        };
        let Some(limit) = w.req.time_limit_ms else {
            return;
        };
        let stamp = (self.epoch, self.res_version);
        if w.refused_at == Some(stamp) {
            return;
        }
        let (_, Some(p)) = self.offer(key, now) else {
            return;
        };
        let harmless = after(now, limit) <= shadow
            || self
                .reservation
                .as_ref()
                .is_some_and(|r| p.units.iter().all(|u| !r.units.contains(u)));
        if !harmless {
            if let Some(w) = self.queue.get_mut(key) {
                w.refused_at = Some(stamp);
            }
            return;
        }
        if self.start(key, p, now) {
            let version = self.res_version;
            if let Some(r) = self.reservation.as_mut() {
                r.version = version;
            }
        }
    }

    /// The head's reservation from running jobs' time limits: walk the
    /// running jobs by expected end, freeing their units, until one allowed
    /// group (NUMA node, node or cluster) has `gpu_count` matching units
    /// free. Only nodes a walked job touches are looked at (the head did
    /// not fit, so no group has enough free units now), except for heads
    /// that may span nodes, which count every node's free units.
    fn reserve(
        &self,
        head: QKey,
        req: &JobRequest,
        now: UnixMillis,
        buf: &mut WalkBuf,
    ) -> Reservation {
        buf.touched.clear();
        buf.held.clear();
        buf.groups.clear();
        let mut walk = Walk {
            s: self,
            req,
            need: usize::try_from(req.gpu_count).unwrap_or(usize::MAX),
            now,
            touched: &mut buf.touched,
            held: &mut buf.held,
            groups: &mut buf.groups,
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
            for u in self.running.get(job).into_iter().flat_map(|r| &r.units) {
                walk.touch(u.node);
                walk.free(u, at);
            }
        }
        let (shadow, units) = walk
            .found
            .map_or((UnixMillis::MAX, Vec::new()), |(t, key)| {
                (t, walk.groups.remove(&key).unwrap_or_default())
            });
        Reservation {
            head,
            version: self.res_version,
            shadow,
            units: units.into_iter().collect(),
        }
    }
}

/// Where a head's gang must fit: (node, NUMA node), (node, all), or the
/// whole cluster.
type GroupKey = (u32, u32);

/// The maps of a reservation walk, kept between walks (their memory is
/// reused: a walk runs on most backfill passes).
#[derive(Debug, Clone, Default)]
pub(crate) struct WalkBuf {
    touched: HashSet<u32>,
    held: HashMap<GpuRef, (u32, GroupKey)>,
    groups: HashMap<GroupKey, Vec<GpuRef>>,
}

/// The state of one reservation walk.
struct Walk<'a> {
    s: &'a Scheduler,
    req: &'a JobRequest,
    need: usize,
    now: UnixMillis,
    touched: &'a mut HashSet<u32>,
    /// Matching units still held: (jobs left on it, its group).
    held: &'a mut HashMap<GpuRef, (u32, GroupKey)>,
    /// Matching units free by the walk's time, per group.
    groups: &'a mut HashMap<GroupKey, Vec<GpuRef>>,
    /// (shadow time, the group that reached `need` units).
    found: Option<(UnixMillis, GroupKey)>,
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

    /// Counts a node's matching units the first time it is seen: free
    /// ones join their group, held ones wait for their jobs' ends.
    fn touch(&mut self, id: u32) {
        if self.found.is_some() || !self.touched.insert(id) {
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
                self.held.insert(r, (n, key));
            }
            None => self.add(r, key, self.now),
        }
    }

    /// One job on the unit ends at `at`.
    fn free(&mut self, u: &GpuRef, at: UnixMillis) {
        let Some((left, key)) = self.held.get_mut(u) else {
            return;
        };
        *left -= 1;
        if *left == 0 {
            let key = *key;
            self.held.remove(u);
            self.add(u.clone(), key, at);
        }
    }

    fn add(&mut self, u: GpuRef, key: GroupKey, at: UnixMillis) {
        if self.found.is_some() {
            return;
        }
        let group = self.groups.entry(key).or_default();
        group.push(u);
        if group.len() >= self.need {
            self.found = Some((at, key));
        }
    }
}
