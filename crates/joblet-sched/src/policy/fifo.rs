//! Strict FIFO (by priority, then arrival, with aging): the first allowed
//! job that does not fit blocks every job behind it; it may preempt
//! lower-priority preemptible jobs to make room.

use joblet_core::UnixMillis;

use super::Offer;
use crate::queue::QKey;
use crate::scheduler::Scheduler;

impl Scheduler {
    pub(crate) fn pass_fifo(&mut self, now: UnixMillis) {
        if let Some(head) = self.start_in_order(now) {
            self.preempt_for(head, now);
        }
    }

    /// Starts jobs in order until the first allowed one that does not fit
    /// (returned: the blocking head), within the pass budget.
    pub(crate) fn start_in_order(&mut self, now: UnixMillis) -> Option<QKey> {
        let mut cursor: Option<QKey> = None;
        for _ in 0..self.pass_budget() {
            let key = self.queue.next_after(cursor)?;
            match self.try_start(key, now) {
                Offer::NoFit => return Some(key),
                Offer::Fits => {}
                Offer::NotAllowed => cursor = Some(key),
            }
        }
        None
    }
}
