//! Strict FIFO (by priority, then arrival, with aging): the first allowed
//! job that does not fit blocks every job behind it; it may preempt
//! lower-priority preemptible jobs to make room.

use joblet_core::UnixMillis;

use super::Offer;
use crate::queue::QKey;
use crate::scheduler::Scheduler;

impl Scheduler {
    pub(crate) fn pass_fifo(&mut self, now: UnixMillis) {
        if let Some((head, _)) = self.start_in_order(now) {
            self.preempt_for(head, now);
        }
    }

    /// Starts jobs in order until the first allowed one that does not fit,
    /// within the pass budget. Returns that blocking head and how many
    /// jobs (not allowed to start) wait before it.
    pub(crate) fn start_in_order(&mut self, now: UnixMillis) -> Option<(QKey, usize)> {
        let mut cursor: Option<QKey> = None;
        let mut passed = 0;
        for _ in 0..self.pass_budget() {
            let key = self.queue.next_after(cursor)?;
            match self.try_start(key, now) {
                Offer::NoFit => return Some((key, passed)),
                Offer::Fits => {}
                Offer::NotAllowed => {
                    cursor = Some(key);
                    passed += 1;
                }
            }
        }
        None
    }
}
