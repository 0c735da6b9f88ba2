//! EASY backfill: strict order until the first allowed job that does not
//! fit (the head); then the head gets a reservation and later jobs may
//! start only if they cannot delay it.
//!
//! The reservation (see [`super::reserve`]) is computed from running jobs'
//! time limits: the head's earliest start (the *shadow time*), the units it
//! would take then, and the nodes it would run on with what would be left
//! there beyond its own CPU, memory and job slot (the *slack*). A later job
//! with a time limit starts if placement finds it a place now and it
//! either ends (start + time limit) by the shadow time, or uses no
//! reserved unit and, on each reserved node it touches, fits in the slack
//! in every tracked dimension (CPU, memory, job slots); the slack shrinks
//! by what it takes. So a backfilled job never delays the head in any
//! dimension. Jobs without a time limit never backfill, and if the head's
//! start depends on a job without a limit, nothing backfills. The
//! reservation is cached until running jobs' ends may have changed
//! (release, start ahead of the head, preemption, health, nodes); backfill
//! starts keep it valid. Trade-off: it is count-based per unit, so it is
//! conservative for shared heads (it waits for units to be wholly free)
//! and ignores NVLink preferences; the guarantee relies on jobs ending by
//! their limits (the daemon enforces them).

use rustc_hash::FxHashSet as HashSet;

use joblet_core::UnixMillis;

use crate::cluster::{HostLoad, Room};
use crate::model::{after, GpuRef, NodeId, NodeIds, Placement};
use crate::queue::QKey;
use crate::scheduler::Scheduler;

/// The head job's reservation: its earliest start and what it takes then.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub head: QKey,
    /// `res_version` it was computed at.
    pub version: u64,
    /// The head's earliest start; `UnixMillis::MAX` = unknown.
    pub shadow: UnixMillis,
    pub units: HashSet<GpuRef>,
    /// The nodes the head would run on at the shadow time, each with what
    /// would be left there besides the head (in the dimensions the node
    /// tracks; none listed when no node tracks what the head asks for).
    pub(crate) slack: Vec<(NodeId, Room)>,
}

impl Reservation {
    /// Whether a job placed on `p` that is still running at the shadow
    /// time leaves the head its units and its CPU, memory and job slots.
    fn spares(&self, p: &Placement) -> bool {
        let load = HostLoad::of(p);
        p.units.iter().all(|u| !self.units.contains(u))
            && p.nodes().all(|n| {
                self.slack
                    .iter()
                    .find(|(m, _)| *m == n)
                    .is_none_or(|(_, room)| room.fits(load))
            })
    }

    /// Such a job started on `nodes`: it takes `load` of the slack there.
    fn take(&mut self, load: HostLoad, nodes: NodeIds) {
        for n in nodes {
            if let Some((_, room)) = self.slack.iter_mut().find(|(m, _)| *m == n) {
                room.take(load);
            }
        }
    }
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
        let ends_first = after(now, limit) <= shadow;
        let harmless = ends_first || self.reservation.as_ref().is_some_and(|r| r.spares(&p));
        if !harmless {
            if let Some(w) = self.queue.get_mut(key) {
                w.refused_at = Some(stamp);
            }
            return;
        }
        let taken = (!ends_first).then(|| (HostLoad::of(&p), p.nodes()));
        if self.start(key, p, now) {
            let version = self.res_version;
            if let Some(r) = self.reservation.as_mut() {
                r.version = version;
                if let Some((load, nodes)) = taken.filter(|_| !r.slack.is_empty()) {
                    r.take(load, nodes);
                }
            }
        }
    }
}
