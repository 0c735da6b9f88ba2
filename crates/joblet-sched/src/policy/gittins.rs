//! The Gittins-index policy (Tiresias' discretised 2D-Gittins, with the
//! size distribution learned online): the default.
//!
//! A job's attained service is units × run time over all its runs, as
//! under LAS. Its *index* is the Gittins index of that service under the
//! size distribution of its queue's completed jobs ([`crate::sizes`]: a
//! log-bucketed histogram per queue, the overall one while a queue has
//! fewer than `gittins_min_samples` completions), over quanta of at least
//! one checkpoint interval per GPU (a started job is not stopped sooner,
//! see [`super::cost`]); its *level* is the index discretised
//! ([`crate::sizes::level_of_index`]: one level per factor of 4, 8
//! levels), and its class is `priority − level`, as under LAS. Before any
//! model exists every level is 0: strict priority, then FIFO. A waiting
//! job's level is fixed until it is requeued or a model becomes usable
//! for it (then every waiting job is re-classed); a running job's follows
//! its service.
//!
//! What that gives: where sizes have a decreasing hazard (heavy tails,
//! most jobs short), the index falls as service grows, so new jobs go
//! first and long ones sink, like LAS; where they have an increasing
//! hazard (similar sizes), the index grows with service, so a running job
//! is never below a newcomer, nothing is preempted, and jobs run in FIFO
//! order. Jobs of one level start in FIFO (re)queue order.
//!
//! The pass is LAS's (see [`super::las`]): work-conserving (every job that
//! fits starts, in class order, within the lookahead), one preemption
//! search per pass. A waiting job may preempt a running job of a lower
//! class that has passed its first checkpoint of the run (see
//! [`super::cost`]); with `gittins_exchange_test` (off by default) only
//! when the exchange pays too: the waiting job's index, with what the
//! preemption costs the victim (its lost work and next restore, × its
//! GPUs) added to the service of the waiting job's best quantum, still
//! exceeds the victim's index now
//! ([`crate::sizes::SizeDist::index_with_cost`]). Off, because on the
//! Philly traces it cost more than it saved: with it, no aging period
//! met the tail and average goals on every VC together
//! (bench/history/scheduler.md, 2026-12-07). Victims that lose the least work go first.
//!
//! Starvation: the queue is ordered by `first submission + class × A`
//! (A = `aging_ms`, or `gittins_aging_ms`, default 2 weeks, when that is
//! 0), so a job keeps
//! its seniority across preemptions and one submitted more than
//! `levels × A` before another always comes first; a running job is
//! preempted only for a waiting job that comes before it in that order
//! (its class judged by its service now).
//!
//! Time limits: the pass starts any job that fits, so a job with a time
//! limit is never held back behind a head job that does not fit; no
//! reservation protects that head (aging and preemption do).

use joblet_core::UnixMillis;

use crate::model::Policy;
use crate::scheduler::{Candidate, Scheduler};

impl Scheduler {
    /// The aging period the queue is ordered with.
    pub(crate) fn aging_ms(&self) -> u64 {
        if self.config.policy == Policy::Gittins && self.config.aging_ms == 0 {
            self.config.gittins_aging_ms
        } else {
            self.config.aging_ms
        }
    }

    /// A size model became usable (the overall one, or a queue's own):
    /// the classes of the waiting jobs are recomputed, so jobs queued
    /// before it existed (all of class 0) or under the overall model do
    /// not keep a class the model would not give them (without this, they
    /// would outrank and preempt jobs the model has classed). Runs at most
    /// once per queue and once for the overall model, O(waiting jobs ×
    /// log) each.
    pub(crate) fn relevel_waiting(&mut self) {
        let aging = self.aging_ms();
        for key in self.queue.keys() {
            let Some(queue) = self.queue.get(key).map(|w| w.req.queue.clone()) else {
                continue;
            };
            let slot = self.sizes.slot(&queue);
            let Some(w) = self.queue.get(key) else {
                continue;
            };
            let level = self.level_of(slot, w.req.gpu_count, w.attained_gpu_ms);
            if level == w.level {
                continue;
            }
            if let Some(mut w) = self.queue.take(key) {
                w.level = level;
                self.queue.push(w, aging);
            }
        }
    }

    /// Under Gittins with aging: whether a running job (candidate of
    /// priority `priority`, level `level` now) comes after the waiting job
    /// whose order key is (`w_priority`, `w_level`, `w_base`) in the
    /// queue's order, i.e. the waiting job may preempt it. `None` when
    /// the order is by class alone (no aging, or another policy).
    pub(crate) fn comes_after(
        &self,
        c: &Candidate,
        priority: i32,
        level: u32,
        waiter: (i32, u32, UnixMillis),
    ) -> Option<bool> {
        let a = self.aging_ms();
        if self.config.policy != Policy::Gittins || a == 0 {
            return None;
        }
        let key = |prio: i32, lvl: u32, base: UnixMillis| {
            i128::from(base) + (i128::from(lvl) - i128::from(prio)) * i128::from(a)
        };
        Some(key(priority, level, c.submitted) > key(waiter.0, waiter.1, waiter.2))
    }

    /// Gittins: whether preempting the candidate at `now` pays for a
    /// waiting job of size-model `slot` that has attained `attained`: its
    /// index, with the victim's lost work and next restore (× its GPUs)
    /// added to its quantum's service, still exceeds the victim's index
    /// now. Always true under other policies, without a model, and
    /// unless `gittins_exchange_test` is set.
    pub(crate) fn exchange_pays(
        &self,
        c: &Candidate,
        waiter: Option<(u32, u32, u64)>,
        now: UnixMillis,
    ) -> bool {
        if self.config.policy != Policy::Gittins || !self.config.gittins_exchange_test {
            return true;
        }
        let Some((slot, gpus, attained)) = waiter else {
            return true;
        };
        let (Some(w), Some(v)) = (self.sizes.model(slot), self.sizes.model(c.slot)) else {
            return true;
        };
        let t = u64::try_from(now.saturating_sub(c.started)).unwrap_or(0);
        let cost = c.cost.cost_ms(t) as f64 * f64::from(c.gpus.max(1));
        w.index_with_cost(gpus, attained, cost) > v.index(c.gpus, c.attained_at(now))
    }
}
