//! Running jobs' bookkeeping: what each holds, its expected end, and the
//! indexes kept from them (preemptible jobs by priority, jobs by end, jobs
//! per unit), always changed together. A job "holds" from its start until
//! its allocation leaves the cluster state (its `Exited`, or its node
//! removed): units if it has GPUs, and CPU, memory and a job slot on its
//! node(s) either way.

use joblet_core::UnixMillis;

use super::keyed::{key, ByJob, JobView};
use super::Scheduler;
use crate::model::{after, JobKey, JobRequest, Placement};
use crate::policy::cost::RunCost;
use crate::policy::las::MIN_RUN_MS;

/// A job that runs (or ran and is stopping).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Running {
    pub req: JobRequest,
    pub submitted: UnixMillis,
    /// Start of the current run.
    pub started: UnixMillis,
    /// Service of earlier runs (and of this run up to losing its units).
    pub attained_before: u64,
    /// Its allocation in the cluster state (None: given back, or dropped
    /// with a removed node).
    pub placement: Option<Placement>,
    /// Its key in `by_end`, if any.
    pub end: Option<UnixMillis>,
    /// Preempted (or its node removed): requeue at `Exited`.
    pub stopping: bool,
    pub cancelled: bool,
    /// The waiting job it was preempted for.
    pub beneficiary: Option<JobKey>,
    /// Times it was preempted (or lost its node) before this run.
    pub preemptions: u32,
    /// Its queue's slot in the size model.
    pub slot: u32,
}

impl Running {
    pub fn held(&self) -> bool {
        self.placement.is_some()
    }

    /// Units × ms of service up to `now`.
    pub fn attained_at(&self, now: UnixMillis) -> u64 {
        let gpus = if self.held() { self.req.gpu_count } else { 0 };
        attained(self.attained_before, self.started, gpus, now)
    }
}

/// Service up to `now` of a job that had `before` when it (re)started at
/// `started` and holds `gpus` units since.
fn attained(before: u64, started: UnixMillis, gpus: u32, now: UnixMillis) -> u64 {
    let ms = u64::try_from(now.saturating_sub(started)).unwrap_or(0);
    before.saturating_add(ms.saturating_mul(u64::from(gpus)))
}

/// What the victim search needs of a preemptible running job, kept in the
/// `preemptible` index so that most candidates are judged without looking
/// the job up (fixed while the job is in the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub started: UnixMillis,
    /// First submission (the Gittins order's base time).
    pub submitted: UnixMillis,
    pub gpus: u32,
    pub attained_before: u64,
    /// Not preempted before this (its first checkpoint of the run).
    pub guard_until: UnixMillis,
    /// What a preemption costs this run.
    pub cost: RunCost,
    /// Its queue's slot in the size model.
    pub slot: u32,
}

impl Candidate {
    /// [`Running::attained_at`] of the job.
    pub fn attained_at(&self, now: UnixMillis) -> u64 {
        attained(self.attained_before, self.started, self.gpus, now)
    }

    /// Run time lost if preempted at `now`, ms.
    pub fn lost_ms(&self, now: UnixMillis) -> u64 {
        self.cost
            .lost_ms(u64::try_from(now.saturating_sub(self.started)).unwrap_or(0))
    }
}

impl Scheduler {
    /// Records a job that started (its placement already allocated).
    pub(crate) fn insert_running(
        &mut self,
        req: JobRequest,
        submitted: UnixMillis,
        started: UnixMillis,
        attained_before: u64,
        preemptions: u32,
        placement: Placement,
    ) {
        let slot = self.sizes.slot(&req.queue);
        for u in &placement.units {
            *self.unit_jobs.entry(u.clone()).or_insert(0) += 1;
        }
        let end = req.time_limit_ms.map(|l| after(started, l));
        if let Some(e) = end {
            self.by_end.insert(ByJob::new(e, &req.job));
        }
        if req.preemptible {
            let cost = RunCost::of(&self.config, &req, preemptions > 0);
            let guard = i64::try_from(cost.guard_ms()).unwrap_or(i64::MAX);
            let c = Candidate {
                started,
                submitted,
                gpus: req.gpu_count,
                attained_before,
                guard_until: started.saturating_add(guard.max(MIN_RUN_MS)),
                cost,
                slot,
            };
            self.preemptible
                .insert(ByJob::new(req.priority, &req.job), c);
        }
        self.running.insert(
            req.job.clone(),
            Running {
                req,
                submitted,
                started,
                attained_before,
                placement: Some(placement),
                end,
                stopping: false,
                cancelled: false,
                beneficiary: None,
                preemptions,
                slot,
            },
        );
    }

    /// The job's allocation is gone from the cluster state (released, or
    /// its node removed): drop it from every index and the quotas.
    pub(crate) fn unhold(&mut self, job: &str, now: UnixMillis) {
        let Some(r) = self.running.get_mut(job) else {
            return;
        };
        r.attained_before = r.attained_at(now);
        let placement = r.placement.take();
        if let Some(e) = r.end.take() {
            self.by_end.remove(&key(e, &r.req.job) as &dyn JobView<_>);
        }
        if r.req.preemptible {
            self.preemptible
                .remove(&key(r.req.priority, &r.req.job) as &dyn JobView<_>);
        }
        let Some(placement) = placement else {
            return;
        };
        self.limits.release(&r.req);
        for u in placement.units {
            if let Some(n) = self.unit_jobs.get_mut(&u) {
                *n -= 1;
                if *n == 0 {
                    self.unit_jobs.remove(&u);
                }
            }
        }
    }

    /// The job was told to stop: it may not be chosen again, and it is
    /// expected to end now.
    pub(crate) fn mark_stopping(
        &mut self,
        job: &str,
        now: UnixMillis,
        beneficiary: Option<JobKey>,
    ) {
        let Some(r) = self.running.get_mut(job) else {
            return;
        };
        r.stopping = true;
        r.beneficiary = beneficiary;
        if r.req.preemptible {
            self.preemptible
                .remove(&key(r.req.priority, &r.req.job) as &dyn JobView<_>);
        }
        if r.held() {
            if let Some(e) = r.end.replace(now) {
                self.by_end.remove(&key(e, &r.req.job) as &dyn JobView<_>);
            }
            self.by_end.insert(ByJob::new(now, &r.req.job));
        }
    }
}
