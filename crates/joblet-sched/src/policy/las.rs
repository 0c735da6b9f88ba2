//! Tiresias-style discretised two-dimensional least attained service.
//!
//! A job's attained service is units × run time, summed over all its runs
//! (a preempted job keeps it); a CPU-only job attains none and stays in
//! queue 0. `las_thresholds_gpu_ms` cut it into queues:
//! queue 0 holds jobs below the first threshold, and a job whose service is
//! above threshold i belongs to queue i+1. Waiting jobs are ordered by
//! queue (combined with priority as `queue − priority`, see
//! [`crate::queue`]), then FIFO by (re)queue time; a waiting job's queue
//! only changes when it is requeued. The pass is work-conserving: it starts
//! every job, in that order, that fits (within the lookahead). The first
//! job that does not fit and has lower-class preemptible jobs running may
//! preempt them (see [`super::preempt`]): running jobs are judged by their
//! service *now*, so a long job sinks while it runs and becomes a victim
//! for newcomers in higher queues.
//!
//! Anti-thrashing: a job that (re)started less than [`MIN_RUN_MS`] (60 s)
//! ago, or has not reached its first checkpoint of the run, is never
//! preempted (under every policy, see [`super::cost`]); and a preempted
//! job re-enters its queue at the back. Starvation: with `aging_ms` set, waiting moves a job up one queue
//! per period, so long jobs come back to the front eventually (Tiresias'
//! promotion knob). LAS needs time to pass to act on a sinking job: feed
//! `Tick` events (the daemon does; a simulator should, e.g. every few
//! seconds of trace time).

use joblet_core::UnixMillis;

use super::preempt::Search;
use super::{Offer, SWEEP_CHUNK};
use crate::model::Policy;
use crate::queue::QKey;
use crate::scheduler::Scheduler;

/// A job that (re)started less than this long ago is not preempted.
pub const MIN_RUN_MS: i64 = 60_000;

impl Scheduler {
    /// The class level of a job of the size-model `slot` with this much
    /// attained service: its LAS queue under LAS, its discretised Gittins
    /// index under Gittins, else 0.
    pub(crate) fn level_of(&self, slot: u32, gpus: u32, attained_gpu_ms: u64) -> u32 {
        match self.config.policy {
            Policy::Las => {
                let n = self
                    .config
                    .las_thresholds_gpu_ms
                    .iter()
                    .filter(|&&t| attained_gpu_ms > t)
                    .count();
                u32::try_from(n).unwrap_or(u32::MAX)
            }
            Policy::Gittins => self.sizes.level(slot, gpus, attained_gpu_ms),
            Policy::Fifo | Policy::Backfill => 0,
        }
    }

    /// The most a level can exceed 0 under the policy.
    pub(crate) fn max_level(&self) -> i64 {
        match self.config.policy {
            Policy::Las => {
                i64::try_from(self.config.las_thresholds_gpu_ms.len()).unwrap_or(i64::MAX)
            }
            Policy::Gittins => i64::from(crate::sizes::LEVELS - 1),
            Policy::Fifo | Policy::Backfill => 0,
        }
    }

    /// A waiting job's class.
    pub(crate) fn waiting_class(&self, key: QKey) -> Option<i64> {
        self.queue
            .get(key)
            .map(|w| i64::from(w.req.priority) - i64::from(w.level))
    }

    pub(crate) fn pass_las(&mut self, now: UnixMillis) {
        // The window: the first `pass_budget` waiting jobs (starts only
        // remove jobs already passed, so its last key stays its end).
        let end = self.queue.nth_key(self.pass_budget() - 1);
        let mut cursor = None;
        // One preemption search per pass, for the first job that does not
        // fit and may search: until it ran, every job of the window counts.
        if self.may_search(now) && !self.seek_search(&mut cursor, end, now) {
            return;
        }
        // After it, only jobs that might start.
        self.each_candidate(cursor, end, |s, key| {
            s.try_start(key, now);
        });
    }

    /// Offers the window's jobs in order, starting those that fit, until
    /// the first allowed one that does not fit and may search has run a
    /// preemption search (true; `cursor` is left on it), or the window
    /// ends (false).
    fn seek_search(
        &mut self,
        cursor: &mut Option<QKey>,
        end: Option<QKey>,
        now: UnixMillis,
    ) -> bool {
        let mut peeks = std::mem::take(&mut self.scratch);
        let mut searched = false;
        'window: loop {
            self.peek(*cursor, SWEEP_CHUNK, end, &mut peeks);
            if peeks.is_empty() {
                break;
            }
            for p in &peeks {
                *cursor = Some(p.key);
                let searchable = p.awaiting_victims == 0 && p.preempt_retry_at <= now;
                let offer = if self.surely_no_fit(p) {
                    if !searchable || !self.allowed(p.key, now) {
                        continue;
                    }
                    Offer::NoFit
                } else {
                    self.try_start(p.key, now)
                };
                if offer == Offer::NoFit && searchable {
                    searched = self.preempt_for(p.key, now) != Search::Skipped;
                    if searched {
                        break 'window;
                    }
                }
            }
        }
        self.scratch = peeks;
        searched
    }
}
