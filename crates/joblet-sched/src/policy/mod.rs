//! Which waiting job goes next: the decision pass run after every event,
//! for the four policies, and what they share (eligibility, placement
//! with a failure memo, starting a job).
//!
//! Every pass looks at no more than the head plus `lookahead` waiting jobs
//! (CPU-only and GPU alike), in the order of [`crate::queue`] (priority,
//! LAS queue, aging, FIFO). Jobs over a quota or whose owner has no
//! rate-limit token are skipped and block nobody (CPU-only jobs are never
//! held back by either). A job is not offered to placement if it failed
//! since capacity was last freed (a release, a health change, a node), if it is
//! an exclusive gang larger than the cluster's free units, or if a gang of
//! the same shape and no more units failed since then. The queue keeps
//! the keys of each (shape, exclusive, gang size) group in order, so a
//! pass jumps from one job that might start to the next, skipping whole
//! groups that cannot (a merge of a few ordered sets; a walk when many
//! groups wait), and it knows the
//! last key of its window without counting. Only while a job to preempt
//! for is still sought does a pass look at every job of its window (in
//! ordered sweeps of a few dozen). So a pass costs O(groups · log
//! waiting) per job offered, O(lookahead) at worst, plus the placements
//! it really needs.
//!
//! The policies and their trade-offs:
//! - [`Policy::Fifo`] (strict): jobs start in
//!   order; the first allowed job that does not fit blocks everything
//!   behind it, CPU-only jobs included (a CPU-only job behind a waiting
//!   GPU job waits even when a node has room for it). Predictable and
//!   starvation-free for big gangs, but GPUs and CPUs idle behind a large
//!   head job; worst average JCT.
//! - [`Policy::Backfill`] (EASY): as FIFO,
//!   but while the head waits, later jobs start if, by their time limit,
//!   they end before the head's reservation or leave it the units, CPU,
//!   memory and job slots it needs then (see [`backfill`]). Never delays
//!   the head (given honest time limits); only jobs with time limits
//!   backfill, so it gains little when users do not declare them.
//! - [`Policy::Las`] (`SchedConfig::default()`'s): Tiresias-style
//!   discretised two-dimensional least attained service (see [`las`]).
//!   Needs no durations: short jobs finish in the top queue, long ones sink
//!   and are preempted for newcomers, which cuts average JCT well below
//!   FIFO on heavy-tailed workloads. Costs: preemptions (checkpoint and
//!   restart work for the jobs, bounded by a minimum run time), large gangs
//!   can wait while smaller jobs of the same queue keep the GPUs (it is
//!   work-conserving: jobs that fit start past those that do not), and
//!   long jobs finish later than under FIFO.
//! - [`Policy::Gittins`]: a Gittins index over attained service with the
//!   size distribution learned from completed jobs (see [`gittins`]): LAS's
//!   pass, with classes from the index, preemption only where it pays for
//!   its cost, and seniority-based aging. FIFO order until enough jobs
//!   have completed, and wherever sizes are alike.
//! - All policies preempt: a waiting job that does not fit may stop
//!   preemptible running jobs of a lower class (lower priority; under LAS,
//!   `priority − LAS queue`; under Gittins, `priority − index level`),
//!   never before their first checkpoint of a run, those losing the least
//!   work first (see [`cost`], [`preempt`]).

pub mod backfill;
pub mod cost;
pub mod fifo;
pub mod gittins;
pub mod las;
pub mod preempt;
pub mod reserve;

use joblet_core::UnixMillis;

use crate::model::{Action, Placement, Policy, Sharing};
use crate::place::place_with;
use crate::queue::{Peek, QKey};
use crate::scheduler::Scheduler;

/// Waiting jobs a pass that seeks a job to preempt for reads from the
/// queue at a time: it usually stops after the first few.
pub(crate) const SWEEP_CHUNK: usize = 32;

/// Gang sizes that failed to place, by request shape (everything placement
/// looks at but the size), since capacity last grew: a gang of the same
/// shape and at least that size cannot fit either.
#[derive(Debug, Clone, Default)]
pub(crate) struct Misfits {
    epoch: u64,
    smallest: Vec<(u64, u32)>,
}

impl Misfits {
    /// Forgets everything when capacity has grown.
    fn renew(&mut self, epoch: u64) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.smallest.clear();
        }
    }

    fn fails(&self, shape: u64, gpus: u32) -> bool {
        self.smallest.iter().any(|&(s, g)| s == shape && gpus >= g)
    }

    fn record(&mut self, shape: u64, gpus: u32) {
        match self.smallest.iter_mut().find(|(s, _)| *s == shape) {
            Some(e) => e.1 = e.1.min(gpus),
            None => self.smallest.push((shape, gpus)),
        }
    }
}

/// What happened when a waiting job was offered the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Over a quota or no token: skipped, blocks nobody.
    NotAllowed,
    /// Allowed but no placement now.
    NoFit,
    /// Allowed, and this placement would be accepted.
    Fits,
}

impl Scheduler {
    /// One decision pass of the configured policy.
    pub(crate) fn pass(&mut self, now: UnixMillis) {
        if self.queue.is_empty() {
            return;
        }
        match self.config.policy {
            Policy::Fifo => self.pass_fifo(now),
            Policy::Backfill => self.pass_backfill(now),
            Policy::Las | Policy::Gittins => self.pass_las(now),
        }
    }

    /// How many waiting jobs one pass may look at.
    pub(crate) fn pass_budget(&self) -> usize {
        self.config.lookahead.saturating_add(1)
    }

    /// The next (up to) `n` waiting jobs after `after` (from the head when
    /// `None`) and up to `end` (inclusive; `None`: no bound), in order,
    /// into `out` (cleared first).
    pub(crate) fn peek(
        &mut self,
        after: Option<QKey>,
        n: usize,
        end: Option<QKey>,
        out: &mut Vec<Peek>,
    ) {
        out.clear();
        self.misfits.renew(self.epoch);
        self.queue.peek(after, n, end, out);
    }

    /// Whether the peeked job surely does not fit now: its placement failed
    /// since capacity last grew, an exclusive gang is larger than the free
    /// units, or a gang of the same shape and no more units failed since
    /// then. Exactly the checks [`Scheduler::offer`] makes before asking
    /// placement, without looking the job up; once true it stays true
    /// through a pass (starts only take capacity).
    pub(crate) fn surely_no_fit(&self, p: &Peek) -> bool {
        p.failed_epoch == Some(self.epoch)
            || (p.exclusive && p.gpu_count > self.cluster.free_units())
            || self.misfits.fails(p.shape, p.gpu_count)
    }

    /// Offers, in order, the waiting jobs after `after` and up to `end`
    /// (inclusive; `None`: no bound) that might start to `each`: those
    /// that are not an exclusive gang larger than the free units, and of
    /// whose shape no gang of no more units failed since capacity last
    /// grew. The jobs passed over would be refused by
    /// [`Scheduler::offer`] before placement is asked, with no effect, so
    /// offering only these decides exactly as offering every job of the
    /// window. `each` may start the job it is given, nothing else that
    /// changes the queue.
    pub(crate) fn each_candidate(
        &mut self,
        after: Option<QKey>,
        end: Option<QKey>,
        mut each: impl FnMut(&mut Scheduler, QKey),
    ) {
        let mut c = std::mem::take(&mut self.candidates);
        self.queue.candidates(after, end, &mut c);
        loop {
            self.misfits.renew(self.epoch);
            let free = self.cluster.free_units();
            let misfits = &self.misfits;
            let next = self
                .queue
                .next_candidate(&mut c, |(shape, exclusive, gang)| {
                    (exclusive && gang > free) || misfits.fails(shape, gang)
                });
            let Some(key) = next else {
                break;
            };
            each(self, key);
        }
        self.candidates = c;
    }

    /// Whether the job may start now (quotas, tokens).
    pub(crate) fn allowed(&self, key: QKey, now: UnixMillis) -> bool {
        self.queue
            .get(key)
            .is_some_and(|w| self.limits.may_start(&w.req, now))
    }

    /// Whether the job may start and, if so, where it would go.
    pub(crate) fn offer(&mut self, key: QKey, now: UnixMillis) -> (Offer, Option<Placement>) {
        let epoch = self.epoch;
        self.misfits.renew(epoch);
        let Some(w) = self.queue.get_mut(key) else {
            return (Offer::NotAllowed, None);
        };
        if !self.limits.may_start(&w.req, now) {
            return (Offer::NotAllowed, None);
        }
        if w.failed_epoch == Some(epoch)
            || (w.req.sharing == Sharing::Exclusive && w.req.gpu_count > self.cluster.free_units())
            || self.misfits.fails(w.shape, w.req.gpu_count)
        {
            return (Offer::NoFit, None);
        }
        match place_with(
            &self.cluster,
            &w.req,
            self.config.strategy_for(&w.req),
            &self.workload,
        ) {
            Some(p) => (Offer::Fits, Some(p)),
            None => {
                w.failed_epoch = Some(epoch);
                self.misfits.record(w.shape, w.req.gpu_count);
                (Offer::NoFit, None)
            }
        }
    }

    /// Allocates the placement and starts the job; false (and the job
    /// stays waiting) if the cluster refuses the placement.
    pub(crate) fn start(&mut self, key: QKey, placement: Placement, now: UnixMillis) -> bool {
        if self.cluster.allocate(placement.clone()).is_err() {
            let epoch = self.epoch;
            if let Some(w) = self.queue.get_mut(key) {
                w.failed_epoch = Some(epoch);
            }
            return false;
        }
        let Some(w) = self.queue.take(key) else {
            self.cluster.release(&placement.job);
            return false;
        };
        self.limits.on_start(&w.req, now);
        // Running jobs' ends changed: a backfill reservation is stale
        // (backfill restamps it after its own starts, which keep it valid).
        self.res_version += 1;
        self.insert_running(
            w.req,
            w.submitted,
            now,
            w.attained_gpu_ms,
            w.preemptions,
            placement.clone(),
        );
        self.actions.push(Action::Start { placement });
        true
    }

    /// Offers the job and starts it if it fits.
    pub(crate) fn try_start(&mut self, key: QKey, now: UnixMillis) -> Offer {
        match self.offer(key, now) {
            (Offer::Fits, Some(p)) => {
                if self.start(key, p, now) {
                    Offer::Fits
                } else {
                    Offer::NoFit
                }
            }
            (Offer::Fits, None) => Offer::NoFit,
            (other, _) => other,
        }
    }
}
