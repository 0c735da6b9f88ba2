//! The run's final state, once every job is final.

use super::event::Action;
use super::phase::{JobPhase, WorkflowState};
use super::reason::Outcome;
use super::WorkflowCore;
use crate::need::{EndState, Final};

impl WorkflowCore {
    pub(super) fn finish_if_done(&mut self, out: &mut Vec<Action>) {
        if self.open > 0 || self.state.is_final() {
            return;
        }
        let (state, outcome) = match (self.state, self.stopping) {
            (WorkflowState::Pending, _) => (WorkflowState::Canceled, Outcome::Canceled),
            (_, true) => (WorkflowState::Stopped, Outcome::Stopped),
            _ => self.verdict(),
        };
        self.state = state;
        self.outcome = Some(outcome.clone());
        out.push(Action::Finished { state, outcome });
    }

    /// COMPLETED unless some job ended FAILED or STOPPED and no job that
    /// accepts that end ran; then FAILED, naming the first such job.
    fn verdict(&self) -> (WorkflowState, Outcome) {
        let (mut completed, mut canceled, mut handled) = (0, 0, 0);
        let mut first_unhandled: Option<(usize, EndState)> = None;
        let mut unhandled = 0;
        for (x, phase) in self.jobs.iter().enumerate() {
            let state = match phase {
                JobPhase::Ended {
                    state: EndState::Completed,
                    ..
                } => {
                    completed += 1;
                    continue;
                }
                JobPhase::Ended { state, .. } => *state,
                _ => {
                    canceled += 1;
                    continue;
                }
            };
            let accepted = self.graph.dependents[x].iter().any(|&(y, need)| {
                need.accepts(Final::Ended(state)) && matches!(self.jobs[y], JobPhase::Ended { .. })
            });
            if accepted {
                handled += 1;
            } else {
                unhandled += 1;
                first_unhandled.get_or_insert((x, state));
            }
        }
        match first_unhandled {
            Some((x, state)) => (
                WorkflowState::Failed,
                Outcome::Failed {
                    job: self.names[x].clone(),
                    state,
                    unhandled,
                },
            ),
            None => (
                WorkflowState::Completed,
                Outcome::Completed {
                    completed,
                    canceled,
                    handled,
                },
            ),
        }
    }
}
