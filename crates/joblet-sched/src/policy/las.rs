//! Tiresias-style discretised two-dimensional least attained service.
//!
//! A job's attained service is units × run time, summed over all its runs
//! (a preempted job keeps it). `las_thresholds_gpu_ms` cut it into queues:
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
//! ago is never preempted (under every policy), so each run makes progress
//! worth its restart cost; and a preempted job re-enters its queue at the
//! back. Starvation: with `aging_ms` set, waiting moves a job up one queue
//! per period, so long jobs come back to the front eventually (Tiresias'
//! promotion knob). LAS needs time to pass to act on a sinking job: feed
//! `Tick` events (the daemon does; a simulator should, e.g. every few
//! seconds of trace time).

use joblet_core::UnixMillis;

use super::preempt::Search;
use super::Offer;
use crate::model::Policy;
use crate::queue::QKey;
use crate::scheduler::{Running, Scheduler};

/// A job that (re)started less than this long ago is not preempted.
pub const MIN_RUN_MS: i64 = 60_000;

impl Scheduler {
    /// The LAS queue of a job with this much attained service (0 unless the
    /// policy is LAS).
    pub(crate) fn level_of(&self, attained_gpu_ms: u64) -> u32 {
        if self.config.policy != Policy::Las {
            return 0;
        }
        let n = self
            .config
            .las_thresholds_gpu_ms
            .iter()
            .filter(|&&t| attained_gpu_ms > t)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// A running job's class now (higher = more important): its priority
    /// minus its LAS queue.
    pub(crate) fn running_class(&self, r: &Running, now: UnixMillis) -> i64 {
        i64::from(r.req.priority) - i64::from(self.level_of(r.attained_at(now)))
    }

    /// A waiting job's class.
    pub(crate) fn waiting_class(&self, key: QKey) -> Option<i64> {
        self.queue
            .get(key)
            .map(|w| i64::from(w.req.priority) - i64::from(w.level))
    }

    pub(crate) fn pass_las(&mut self, now: UnixMillis) {
        let keys = self.sweep(None, self.pass_budget(), now);
        // One preemption search per pass, for the first job that does not
        // fit and may search.
        let mut searched = !self.may_search(now);
        for &(key, no_fit, searchable) in &keys {
            let offer = if no_fit {
                if searched || !searchable || !self.allowed(key, now) {
                    continue;
                }
                Offer::NoFit
            } else {
                self.try_start(key, now)
            };
            if offer == Offer::NoFit && searchable && !searched {
                searched = self.preempt_for(key, now) != Search::Skipped;
            }
        }
        self.scratch = keys;
    }
}
