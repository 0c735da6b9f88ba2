//! The decision core of one workflow run: [`WorkflowCore::handle`] takes
//! an [`Event`] and the time and returns the [`Action`]s the daemon must
//! carry out. No IO, no clock: the daemon feeds the results back as
//! events, and keeps the core's [`Snapshot`] in its store.
//!
//! The rules (when a job starts, when it is canceled, retries, stop, the
//! run's final state) are in the crate documentation.

mod event;
mod finish;
mod phase;
mod reason;
mod restore;
mod run;

use std::collections::HashMap;

use joblet_core::UnixMillis;

pub use event::{Action, Event, Found, FoundState};
pub use phase::{JobPhase, WorkflowState};
pub use reason::{CancelReason, Outcome};
pub use restore::{JobRecord, RestoreError, Snapshot};

use crate::format::Workflow;
use crate::graph::Graph;

/// One workflow run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowCore {
    names: Vec<String>,
    index: HashMap<String, usize>,
    graph: Graph,
    /// Every job after the jobs it requires.
    order: Vec<usize>,
    retries: Vec<u8>,
    /// Milliseconds before the first retry.
    backoff_ms: Vec<i64>,
    jobs: Vec<JobPhase>,
    /// For a WAITING job: how many of its requirements do not hold yet;
    /// 0 for the others.
    unmet: Vec<usize>,
    /// Jobs not final yet.
    open: usize,
    state: WorkflowState,
    /// A stop was asked for while it ran.
    stopping: bool,
    outcome: Option<Outcome>,
}

impl WorkflowCore {
    /// A PENDING run of `workflow`: every job WAITING.
    pub fn new(workflow: &Workflow) -> WorkflowCore {
        let jobs = workflow.jobs();
        let graph = workflow.graph().clone();
        let order = graph
            .order()
            .unwrap_or_else(|left| (0..graph.len()).filter(|j| !left.contains(j)).collect());
        let unmet = graph.requires.iter().map(Vec::len).collect();
        WorkflowCore {
            names: jobs.iter().map(|j| j.name.clone()).collect(),
            index: jobs
                .iter()
                .enumerate()
                .map(|(i, j)| (j.name.clone(), i))
                .collect(),
            order,
            retries: jobs.iter().map(|j| j.retries).collect(),
            backoff_ms: jobs
                .iter()
                .map(|j| i64::try_from(j.retry_backoff.as_millis()).unwrap_or(i64::MAX))
                .collect(),
            jobs: vec![JobPhase::Waiting; jobs.len()],
            unmet,
            open: jobs.len(),
            state: WorkflowState::Pending,
            stopping: false,
            outcome: None,
            graph,
        }
    }

    /// Applies one event at time `now`; returns what the daemon must do,
    /// in order.
    #[must_use = "every action must be carried out"]
    pub fn handle(&mut self, event: Event, now: UnixMillis) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::Started => self.start(&mut out),
            Event::JobSubmitted {
                job,
                attempt,
                job_id,
            } => {
                if let Some(j) = self.position(&job) {
                    self.submitted(j, attempt, job_id, false, &mut out);
                }
            }
            Event::JobRunning {
                job,
                attempt,
                job_id,
            } => {
                if let Some(j) = self.position(&job) {
                    self.submitted(j, attempt, job_id, true, &mut out);
                }
            }
            Event::JobEnded {
                job,
                attempt,
                job_id,
                state,
                at,
            } => {
                if let Some(j) = self.position(&job) {
                    self.ended(j, attempt, &job_id, state, at, now, &mut out);
                }
            }
            Event::Stop => self.stop(&mut out),
            Event::Tick => self.tick(now, &mut out),
            Event::Restored { found } => self.restored(found, now, &mut out),
        }
        self.finish_if_done(&mut out);
        out
    }

    pub fn state(&self) -> WorkflowState {
        self.state
    }

    /// A stop was asked for while the run ran; it is STOPPED once every
    /// job is final.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Why the run ended as it did, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    pub fn job(&self, name: &str) -> Option<&JobPhase> {
        self.position(name).map(|j| &self.jobs[j])
    }

    /// Every job and its phase, in file order.
    pub fn jobs(&self) -> impl Iterator<Item = (&str, &JobPhase)> + '_ {
        self.names.iter().map(String::as_str).zip(&self.jobs)
    }

    /// When the next retry is due: the daemon sends [`Event::Tick`] then.
    pub fn next_tick(&self) -> Option<UnixMillis> {
        self.jobs
            .iter()
            .filter_map(|p| match p {
                JobPhase::RetryWait { until, .. } => Some(*until),
                _ => None,
            })
            .min()
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}
