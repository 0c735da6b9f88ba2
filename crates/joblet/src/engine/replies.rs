//! Requests waiting for the core's answer, by ticket.

use std::collections::HashMap;

use joblet_core::JobId;
use joblet_engine::Ticket;
use joblet_store::JobRecord;

use super::Reply;

/// A request the core will answer.
pub(super) enum Pending {
    /// Stop or kill: answered with the job's record.
    Record { id: JobId, reply: Reply<JobRecord> },
    /// Delete.
    Delete { id: JobId, reply: Reply<()> },
}

/// The waiting requests. A daemon that dies drops them: their callers
/// hear that it went away.
#[derive(Default)]
pub(super) struct Replies {
    next: u64,
    waiting: HashMap<Ticket, Pending>,
}

impl Replies {
    pub(super) fn add(&mut self, pending: Pending) -> Ticket {
        self.next += 1;
        let ticket = Ticket(self.next);
        self.waiting.insert(ticket, pending);
        ticket
    }

    pub(super) fn take(&mut self, ticket: Ticket) -> Option<Pending> {
        self.waiting.remove(&ticket)
    }
}
