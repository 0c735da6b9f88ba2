//! The node's scheduler: a pure state machine, `handle(event, now) -> actions`.
//!
//! The daemon feeds it events and carries out the actions it returns; it
//! reads no clock and touches no file, so tests drive it directly and a
//! restarted daemon rebuilds it from the store with [`Scheduler::restore`].
//!
//! Policy today: strict FIFO with a fixed number of running slots
//! (`jobs.max_running`). GPU-aware placement replaces the slot count later;
//! the event/action shape stays.

use std::collections::{BTreeSet, VecDeque};

use crate::{JobId, UnixMillis};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A job was recorded as QUEUED.
    Submit { job: JobId },
    /// The user stopped a job (queued or running).
    Cancel { job: JobId },
    /// A running job's process ended (any way).
    Exited { job: JobId },
    /// Time passed; lets the scheduler start work freed by other means.
    Tick,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start the job now (QUEUED -> RUNNING).
    Start { job: JobId },
    /// The job was still queued when cancelled: it never starts (QUEUED -> STOPPED).
    Dequeued { job: JobId },
}

#[derive(Debug, Clone)]
pub struct Scheduler {
    max_running: usize,
    queue: VecDeque<JobId>,
    running: BTreeSet<JobId>,
}

impl Scheduler {
    /// `max_running` of 0 is treated as 1: a node that can run nothing is a
    /// configuration error caught earlier.
    pub fn new(max_running: usize) -> Self {
        Scheduler {
            max_running: max_running.max(1),
            queue: VecDeque::new(),
            running: BTreeSet::new(),
        }
    }

    /// Rebuilds the state a previous daemon had: jobs still running hold
    /// their slots, queued jobs keep their order. Call `handle(Tick)` next to
    /// start what fits.
    pub fn restore(
        max_running: usize,
        running: impl IntoIterator<Item = JobId>,
        queued: impl IntoIterator<Item = JobId>,
    ) -> Self {
        let mut s = Scheduler::new(max_running);
        s.running.extend(running);
        s.queue.extend(queued);
        s
    }

    pub fn handle(&mut self, event: Event, _now: UnixMillis) -> Vec<Action> {
        let mut actions = Vec::new();
        match event {
            Event::Submit { job } => {
                if !self.running.contains(&job) && !self.queue.contains(&job) {
                    self.queue.push_back(job);
                }
            }
            Event::Cancel { job } => {
                if let Some(pos) = self.queue.iter().position(|j| *j == job) {
                    self.queue.remove(pos);
                    actions.push(Action::Dequeued { job });
                }
            }
            Event::Exited { job } => {
                self.running.remove(&job);
            }
            Event::Tick => {}
        }
        while self.running.len() < self.max_running {
            let Some(job) = self.queue.pop_front() else {
                break;
            };
            self.running.insert(job.clone());
            actions.push(Action::Start { job });
        }
        actions
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u32) -> JobId {
        JobId::parse(&format!("00000000-0000-4000-8000-{n:012}")).unwrap()
    }

    #[test]
    fn fifo_within_slots() {
        let mut s = Scheduler::new(2);
        assert_eq!(
            s.handle(Event::Submit { job: id(1) }, 0),
            vec![Action::Start { job: id(1) }]
        );
        assert_eq!(
            s.handle(Event::Submit { job: id(2) }, 0),
            vec![Action::Start { job: id(2) }]
        );
        assert_eq!(s.handle(Event::Submit { job: id(3) }, 0), vec![]);
        assert_eq!(s.handle(Event::Submit { job: id(4) }, 0), vec![]);
        assert_eq!(
            s.handle(Event::Exited { job: id(2) }, 1),
            vec![Action::Start { job: id(3) }]
        );
        assert_eq!(
            s.handle(Event::Cancel { job: id(4) }, 2),
            vec![Action::Dequeued { job: id(4) }]
        );
        assert_eq!(s.handle(Event::Exited { job: id(1) }, 3), vec![]);
        assert_eq!((s.running(), s.queued()), (1, 0));
    }

    #[test]
    fn restore_keeps_order_and_slots() {
        let mut s = Scheduler::restore(2, [id(1)], [id(5), id(6)]);
        assert_eq!(s.handle(Event::Tick, 0), vec![Action::Start { job: id(5) }]);
        assert_eq!(
            s.handle(Event::Exited { job: id(1) }, 0),
            vec![Action::Start { job: id(6) }]
        );
    }

    #[test]
    fn duplicate_submit_is_ignored() {
        let mut s = Scheduler::new(1);
        s.handle(Event::Submit { job: id(1) }, 0);
        assert_eq!(s.handle(Event::Submit { job: id(1) }, 0), vec![]);
        assert_eq!((s.running(), s.queued()), (1, 0));
    }

    proptest! {
        /// Whatever happens, never more than `max_running` run, every job
        /// starts at most once, and jobs start in submission order.
        #[test]
        fn never_over_slots_and_fifo(max in 1usize..5, ops in prop::collection::vec((0u8..3, 0u32..20), 1..200)) {
            let mut s = Scheduler::new(max);
            let mut started: Vec<JobId> = Vec::new();
            let mut submitted: Vec<JobId> = Vec::new();
            let mut cancelled: BTreeSet<JobId> = BTreeSet::new();
            for (op, n) in ops {
                let ev = match op {
                    // Fresh ids only: re-queueing a finished id is preemption's business.
                    0 if submitted.contains(&id(n)) => Event::Tick,
                    0 => { submitted.push(id(n)); Event::Submit { job: id(n) } }
                    1 => Event::Exited { job: id(n) },
                    _ => Event::Cancel { job: id(n) },
                };
                for a in s.handle(ev, 0) {
                    match a {
                        Action::Start { job } => { prop_assert!(!started.contains(&job)); started.push(job); }
                        Action::Dequeued { job } => { cancelled.insert(job); }
                    }
                }
                prop_assert!(s.running() <= max);
            }
            let order: Vec<&JobId> = submitted.iter().filter(|j| started.contains(j)).collect();
            prop_assert_eq!(order, started.iter().collect::<Vec<_>>());
        }
    }
}
