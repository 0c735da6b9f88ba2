//! Durability: the core's state as data the daemon stores
//! ([`Snapshot`]), the core rebuilt from it, and [`Event::Restored`](super::Event::Restored),
//! which squares it with what the store records of the jobs.
//!
//! The daemon's part: after each `handle`, store the snapshot before
//! carrying out the actions; create each submitted attempt with its
//! (workflow, job, attempt) record in one commit. After a restart, rebuild
//! the core with [`WorkflowCore::restore`] and send [`Event::Restored`](super::Event::Restored)
//! with the latest attempt the store records for each job. Then:
//!
//! - an attempt the snapshot shows as asked for (SUBMITTING) and the store
//!   has is adopted, never submitted again; one the store lacks was never
//!   created, and is submitted again under the same attempt number (or
//!   canceled, if the workflow is stopping);
//! - an end the store has and the snapshot lacks is applied as
//!   [`Event::JobEnded`](super::Event::JobEnded) would; nothing that ended is submitted again;
//! - a job the snapshot shows as submitted or running that the store has
//!   no record of is lost: it ends FAILED (and may be retried);
//! - a stopping workflow's jobs are asked to stop again;
//! - retries that came due meanwhile are submitted.
//!
//! An older snapshot than the protocol asks for is squared too: a later
//! attempt the store has is adopted, and WAITING jobs are recounted (those
//! whose requirements hold are submitted, those whose requirements can no
//! longer hold are canceled).

use std::collections::HashMap;

use joblet_core::UnixMillis;
use serde::{Deserialize, Serialize};

use super::event::{Action, Found, FoundState};
use super::phase::{JobPhase, WorkflowState};
use super::reason::{CancelReason, Outcome};
use super::WorkflowCore;
use crate::format::Workflow;
use crate::need::EndState;

/// A run's state, to store and restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub state: WorkflowState,
    pub stopping: bool,
    pub outcome: Option<Outcome>,
    /// Every job, in file order.
    pub jobs: Vec<JobRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job: String,
    #[serde(flatten)]
    pub phase: JobPhase,
}

/// A snapshot that does not belong to the workflow it is restored with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("the snapshot has job `{job}`, which the workflow does not have")]
    UnknownJob { job: String },
    #[error("the snapshot lacks job `{job}` of the workflow")]
    MissingJob { job: String },
    #[error("the snapshot has job `{job}` twice")]
    RepeatedJob { job: String },
    #[error("the snapshot says the workflow is {state}, yet job `{job}` is {phase}")]
    Inconsistent {
        state: WorkflowState,
        job: String,
        phase: &'static str,
    },
}

impl WorkflowCore {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.state,
            stopping: self.stopping,
            outcome: self.outcome.clone(),
            jobs: self
                .names
                .iter()
                .zip(&self.jobs)
                .map(|(job, phase)| JobRecord {
                    job: job.clone(),
                    phase: phase.clone(),
                })
                .collect(),
        }
    }

    /// The run of `workflow` that `snapshot` describes. Send
    /// [`Event::Restored`](super::Event::Restored) next.
    pub fn restore(workflow: &Workflow, snapshot: Snapshot) -> Result<WorkflowCore, RestoreError> {
        let mut core = WorkflowCore::new(workflow);
        let mut given = vec![false; core.jobs.len()];
        for JobRecord { job, phase } in snapshot.jobs {
            let Some(j) = core.position(&job) else {
                return Err(RestoreError::UnknownJob { job });
            };
            if std::mem::replace(&mut given[j], true) {
                return Err(RestoreError::RepeatedJob { job });
            }
            let fits = match snapshot.state {
                WorkflowState::Pending => {
                    phase == JobPhase::Waiting || matches!(phase, JobPhase::Canceled { .. })
                }
                WorkflowState::Running => true,
                _ => phase.final_state().is_some(),
            };
            if !fits {
                return Err(RestoreError::Inconsistent {
                    state: snapshot.state,
                    job,
                    phase: phase.name(),
                });
            }
            core.jobs[j] = phase;
        }
        if let Some(j) = given.iter().position(|g| !g) {
            return Err(RestoreError::MissingJob {
                job: core.names[j].clone(),
            });
        }
        core.state = snapshot.state;
        core.stopping = snapshot.stopping;
        core.outcome = snapshot.outcome;
        core.open = core
            .jobs
            .iter()
            .filter(|p| p.final_state().is_none())
            .count();
        core.recount();
        Ok(core)
    }

    /// What each WAITING job still waits for, from its requirements'
    /// phases (0 for the others).
    fn recount(&mut self) {
        for y in 0..self.jobs.len() {
            if self.jobs[y] != JobPhase::Waiting {
                self.unmet[y] = 0;
                continue;
            }
            self.unmet[y] = self.graph.requires[y]
                .iter()
                .filter(|&&(x, need)| !self.jobs[x].final_state().is_some_and(|f| need.accepts(f)))
                .count();
        }
    }

    pub(super) fn restored(&mut self, found: Vec<Found>, now: UnixMillis, out: &mut Vec<Action>) {
        if self.state != WorkflowState::Running {
            return;
        }
        let mut latest: HashMap<usize, Found> = HashMap::new();
        for f in found {
            if let Some(j) = self.position(&f.job) {
                if latest.get(&j).is_none_or(|l| l.attempt < f.attempt) {
                    latest.insert(j, f);
                }
            }
        }
        let mut ends = Vec::new();
        for j in 0..self.jobs.len() {
            // The first attempt the store's record may be.
            let first = match &self.jobs[j] {
                JobPhase::Waiting => 1,
                JobPhase::RetryWait { attempt, .. } => attempt + 1,
                JobPhase::Submitting { attempt }
                | JobPhase::Submitted { attempt, .. }
                | JobPhase::Running { attempt, .. } => *attempt,
                JobPhase::Ended { .. } | JobPhase::Canceled { .. } => continue,
            };
            match latest.remove(&j).filter(|f| f.attempt >= first) {
                Some(f) => {
                    let (attempt, job_id) = (f.attempt, f.job_id);
                    self.unmet[j] = 0;
                    self.jobs[j] = match f.state {
                        FoundState::Running => JobPhase::Running { attempt, job_id },
                        FoundState::Queued => JobPhase::Submitted { attempt, job_id },
                        FoundState::Ended { state, at } => {
                            ends.push((j, attempt, job_id.clone(), state, at));
                            JobPhase::Submitted { attempt, job_id }
                        }
                    };
                }
                None => match &self.jobs[j] {
                    JobPhase::Submitting { attempt } if !self.stopping => {
                        let attempt = *attempt;
                        self.submit(j, attempt, out);
                    }
                    JobPhase::Submitting { .. } => {
                        self.cancel(j, CancelReason::Stopped, out);
                        self.settle(j, out);
                    }
                    JobPhase::Submitted { attempt, job_id }
                    | JobPhase::Running { attempt, job_id } => {
                        ends.push((j, *attempt, job_id.clone(), EndState::Failed, now));
                    }
                    _ => {}
                },
            }
        }
        for (j, attempt, job_id, state, at) in ends {
            self.ended(j, attempt, &job_id, state, at, now, out);
        }
        if self.stopping {
            for j in 0..self.jobs.len() {
                if matches!(
                    self.jobs[j],
                    JobPhase::Submitted { .. } | JobPhase::Running { .. }
                ) {
                    self.stop_job(j, out);
                }
            }
        }
        self.reconcile(out);
        self.tick(now, out);
    }

    /// WAITING jobs recounted in requirement order: canceled if a
    /// requirement can no longer hold, submitted if all hold.
    fn reconcile(&mut self, out: &mut Vec<Action>) {
        for k in 0..self.order.len() {
            let y = self.order[k];
            if self.jobs[y] != JobPhase::Waiting {
                continue;
            }
            let blocked = self.graph.requires[y]
                .iter()
                .find(|&&(x, need)| self.jobs[x].final_state().is_some_and(|f| !need.accepts(f)));
            if let Some(&(x, need)) = blocked {
                let reason = if self.stopping {
                    CancelReason::Stopped
                } else {
                    self.cancel_reason(x, need)
                };
                self.cancel(y, reason, out);
                self.open -= 1;
                continue;
            }
            self.unmet[y] = self.graph.requires[y]
                .iter()
                .filter(|&&(x, _)| self.jobs[x].final_state().is_none())
                .count();
            if self.unmet[y] == 0 && !self.stopping {
                self.submit(y, 1, out);
            }
        }
    }
}
