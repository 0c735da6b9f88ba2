//! The transitions of a run: start, submissions, ends, retries, the
//! cancellations that follow an end, stop.

use std::collections::VecDeque;

use joblet_core::{JobId, UnixMillis};

use super::event::Action;
use super::phase::{JobPhase, WorkflowState};
use super::reason::CancelReason;
use super::WorkflowCore;
use crate::need::{EndState, Need};

impl WorkflowCore {
    pub(super) fn start(&mut self, out: &mut Vec<Action>) {
        if self.state != WorkflowState::Pending || self.stopping {
            return;
        }
        self.state = WorkflowState::Running;
        for j in 0..self.jobs.len() {
            if self.jobs[j] == JobPhase::Waiting && self.unmet[j] == 0 {
                self.submit(j, 1, out);
            }
        }
    }

    pub(super) fn submit(&mut self, j: usize, attempt: u32, out: &mut Vec<Action>) {
        self.jobs[j] = JobPhase::Submitting { attempt };
        self.unmet[j] = 0;
        out.push(Action::Submit {
            job: self.names[j].clone(),
            attempt,
        });
    }

    /// The daemon created (or started, `running`) the attempt.
    pub(super) fn submitted(
        &mut self,
        j: usize,
        attempt: u32,
        job_id: JobId,
        running: bool,
        out: &mut Vec<Action>,
    ) {
        let fresh = match &self.jobs[j] {
            JobPhase::Submitting { attempt: a } => *a == attempt,
            JobPhase::Submitted {
                attempt: a,
                job_id: id,
            } => *a == attempt && *id == job_id && running,
            _ => false,
        };
        if !fresh {
            return;
        }
        let was_known = self.jobs[j].job_id().is_some();
        self.jobs[j] = if running {
            JobPhase::Running { attempt, job_id }
        } else {
            JobPhase::Submitted { attempt, job_id }
        };
        if self.stopping && !was_known {
            self.stop_job(j, out);
        }
    }

    pub(super) fn stop_job(&self, j: usize, out: &mut Vec<Action>) {
        if let Some(job_id) = self.jobs[j].job_id() {
            out.push(Action::StopJob {
                job: self.names[j].clone(),
                job_id: job_id.clone(),
            });
        }
    }

    /// The attempt ended: a retry, or the job's final state and what
    /// follows from it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ended(
        &mut self,
        j: usize,
        attempt: u32,
        job_id: &JobId,
        state: EndState,
        at: UnixMillis,
        now: UnixMillis,
        out: &mut Vec<Action>,
    ) {
        let current = match &self.jobs[j] {
            JobPhase::Submitting { attempt: a } => *a == attempt,
            JobPhase::Submitted {
                attempt: a,
                job_id: id,
            }
            | JobPhase::Running {
                attempt: a,
                job_id: id,
            } => *a == attempt && id == job_id,
            _ => false,
        };
        if !current {
            return;
        }
        let retry = state == EndState::Failed
            && attempt <= u32::from(self.retries[j])
            && !self.stopping
            && self.state == WorkflowState::Running;
        if retry {
            let until = at.saturating_add(self.retry_delay(j, attempt));
            self.jobs[j] = JobPhase::RetryWait {
                attempt,
                job_id: job_id.clone(),
                until,
            };
            if until <= now {
                self.submit(j, attempt + 1, out);
            }
            return;
        }
        self.jobs[j] = JobPhase::Ended {
            attempt,
            job_id: job_id.clone(),
            state,
            at,
        };
        self.settle(j, out);
    }

    /// The wait after attempt `attempt` failed: the job's backoff, doubled
    /// for each earlier retry.
    fn retry_delay(&self, j: usize, attempt: u32) -> i64 {
        let doublings = attempt.saturating_sub(1).min(62);
        self.backoff_ms[j].saturating_mul(1i64 << doublings)
    }

    /// Job `first` became final: each WAITING dependent whose requirement
    /// on it now holds counts one fewer to wait for (and is submitted when
    /// none is left); each whose requirement can no longer hold is
    /// canceled, and so on down.
    pub(super) fn settle(&mut self, first: usize, out: &mut Vec<Action>) {
        let mut queue = VecDeque::from([first]);
        while let Some(x) = queue.pop_front() {
            self.open -= 1;
            let Some(fin) = self.jobs[x].final_state() else {
                continue;
            };
            for k in 0..self.graph.dependents[x].len() {
                let (y, need) = self.graph.dependents[x][k];
                if self.jobs[y] != JobPhase::Waiting {
                    continue;
                }
                if need.accepts(fin) {
                    self.unmet[y] -= 1;
                    if self.unmet[y] == 0 && self.state == WorkflowState::Running && !self.stopping
                    {
                        self.submit(y, 1, out);
                    }
                } else {
                    self.cancel(y, self.cancel_reason(x, need), out);
                    queue.push_back(y);
                }
            }
        }
    }

    /// Why a job whose requirement (`need`) on final job `x` cannot hold
    /// is canceled.
    pub(super) fn cancel_reason(&self, x: usize, need: Need) -> CancelReason {
        let requires = self.names[x].clone();
        match &self.jobs[x] {
            JobPhase::Ended { state, .. } => CancelReason::Unmet {
                requires,
                need,
                ended: *state,
            },
            JobPhase::Canceled {
                reason:
                    CancelReason::Unmet {
                        requires: origin,
                        ended,
                        ..
                    }
                    | CancelReason::Upstream { origin, ended, .. },
            } => CancelReason::Upstream {
                requires,
                need,
                origin: origin.clone(),
                ended: *ended,
            },
            JobPhase::Canceled { reason } => reason.clone(),
            _ => CancelReason::Stopped,
        }
    }

    /// Marks `j` CANCELED (the caller settles what follows).
    pub(super) fn cancel(&mut self, j: usize, reason: CancelReason, out: &mut Vec<Action>) {
        out.push(Action::Cancel {
            job: self.names[j].clone(),
            reason: reason.clone(),
        });
        self.jobs[j] = JobPhase::Canceled { reason };
        self.unmet[j] = 0;
    }

    pub(super) fn stop(&mut self, out: &mut Vec<Action>) {
        let reason = match self.state {
            WorkflowState::Pending => CancelReason::NeverStarted,
            WorkflowState::Running if !self.stopping => CancelReason::Stopped,
            _ => return,
        };
        self.stopping = true;
        for j in 0..self.jobs.len() {
            match self.jobs[j] {
                JobPhase::Waiting | JobPhase::RetryWait { .. } => {
                    self.cancel(j, reason.clone(), out);
                    self.open -= 1;
                }
                JobPhase::Submitted { .. } | JobPhase::Running { .. } => self.stop_job(j, out),
                _ => {}
            }
        }
    }

    pub(super) fn tick(&mut self, now: UnixMillis, out: &mut Vec<Action>) {
        if self.state != WorkflowState::Running || self.stopping {
            return;
        }
        for j in 0..self.jobs.len() {
            if let JobPhase::RetryWait { attempt, until, .. } = self.jobs[j] {
                if until <= now {
                    self.submit(j, attempt + 1, out);
                }
            }
        }
    }
}
