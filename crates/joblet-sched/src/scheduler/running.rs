//! Running jobs' bookkeeping: what each holds, its expected end, and the
//! indexes kept from them (preemptible jobs by priority, jobs by end, jobs
//! per unit), always changed together.

use joblet_core::UnixMillis;

use super::Scheduler;
use crate::model::{after, GpuRef, JobKey, JobRequest};

/// A job that runs (or ran and is stopping).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Running {
    pub req: JobRequest,
    pub submitted: UnixMillis,
    /// Start of the current run.
    pub started: UnixMillis,
    /// Service of earlier runs (and of this run up to losing its units).
    pub attained_before: u64,
    /// Units it holds in the cluster state (empty: CPU-only, or dropped
    /// with a removed node).
    pub units: Vec<GpuRef>,
    /// Its key in `by_end`, if any.
    pub end: Option<UnixMillis>,
    /// Preempted (or its node removed): requeue at `Exited`.
    pub stopping: bool,
    pub cancelled: bool,
    /// The waiting job it was preempted for.
    pub beneficiary: Option<JobKey>,
}

impl Running {
    pub fn held(&self) -> bool {
        !self.units.is_empty()
    }

    /// Units × ms of service up to `now`.
    pub fn attained_at(&self, now: UnixMillis) -> u64 {
        let run = if self.held() {
            let ms = u64::try_from(now.saturating_sub(self.started)).unwrap_or(0);
            ms.saturating_mul(u64::from(self.req.gpu_count))
        } else {
            0
        };
        self.attained_before.saturating_add(run)
    }
}

impl Scheduler {
    /// Records a job that started (its units already allocated).
    pub(crate) fn insert_running(
        &mut self,
        req: JobRequest,
        submitted: UnixMillis,
        started: UnixMillis,
        attained_before: u64,
        units: Vec<GpuRef>,
    ) {
        for u in &units {
            *self.unit_jobs.entry(u.clone()).or_insert(0) += 1;
        }
        let held = !units.is_empty();
        let end = req
            .time_limit_ms
            .filter(|_| held)
            .map(|l| after(started, l));
        if let Some(e) = end {
            self.by_end.insert((e, req.job.clone()));
        }
        if req.preemptible && held {
            self.preemptible.insert((req.priority, req.job.clone()));
        }
        self.running.insert(
            req.job.clone(),
            Running {
                req,
                submitted,
                started,
                attained_before,
                units,
                end,
                stopping: false,
                cancelled: false,
                beneficiary: None,
            },
        );
    }

    /// The job's units are gone from the cluster state (released, or its
    /// node removed): drop them from every index and the quotas.
    pub(crate) fn unhold(&mut self, job: &str, now: UnixMillis) {
        let Some(r) = self.running.get_mut(job) else {
            return;
        };
        r.attained_before = r.attained_at(now);
        let units = std::mem::take(&mut r.units);
        if let Some(e) = r.end.take() {
            self.by_end.remove(&(e, r.req.job.clone()));
        }
        self.preemptible
            .remove(&(r.req.priority, r.req.job.clone()));
        if units.is_empty() {
            return;
        }
        self.limits.release(&r.req);
        for u in units {
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
        self.preemptible
            .remove(&(r.req.priority, r.req.job.clone()));
        if r.held() {
            if let Some(e) = r.end.replace(now) {
                self.by_end.remove(&(e, r.req.job.clone()));
            }
            self.by_end.insert((now, r.req.job.clone()));
        }
    }
}
