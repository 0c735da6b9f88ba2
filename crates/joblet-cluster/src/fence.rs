//! When a node cut off from etcd must have killed its jobs.
//!
//! A node's lease lives at least `ttl` past the moment its last answered
//! keep-alive was *sent* (etcd renews on receipt, after the send). So once
//! `sent + ttl - margin` passes without a newer answer, the majority side
//! may expire the lease at any moment and place the node's jobs elsewhere:
//! before then the node must have killed them. `margin` covers the kill
//! itself and clock-rate differences. Times are a monotonic clock's
//! milliseconds (the shell uses `CLOCK_BOOTTIME`, which shims read too).

/// The node's fencing deadline, advanced by answered keep-alives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceClock {
    margin_ms: u64,
    deadline: Option<u64>,
}

impl FenceClock {
    /// No deadline until the first keep-alive is answered (a node without
    /// a lease runs no cluster job).
    pub fn new(margin_ms: u64) -> FenceClock {
        FenceClock {
            margin_ms,
            deadline: None,
        }
    }

    /// A keep-alive (or the grant) sent at `sent` was answered with `ttl_ms`
    /// to live. Never moves the deadline back.
    pub fn renewed(&mut self, sent: u64, ttl_ms: u64) {
        let d = sent
            .saturating_add(ttl_ms)
            .saturating_sub(self.margin_ms.min(ttl_ms / 2));
        self.deadline = Some(self.deadline.map_or(d, |old| old.max(d)));
    }

    /// The lease is gone (revoked, expired, not found): fence at once.
    pub fn lost(&mut self) {
        self.deadline = Some(0);
    }

    /// After this moment the node's cluster jobs must be dead.
    pub fn deadline(&self) -> Option<u64> {
        self.deadline
    }

    /// Whether the node must fence itself at `now`.
    pub fn expired(&self, now: u64) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_send_plus_ttl_less_the_margin_and_never_goes_back() {
        let mut f = FenceClock::new(1_000);
        assert_eq!(f.deadline(), None);
        assert!(!f.expired(u64::MAX));
        f.renewed(10_000, 5_000);
        assert_eq!(f.deadline(), Some(14_000));
        // A late answer to an earlier keep-alive does not shorten it.
        f.renewed(9_000, 5_000);
        assert_eq!(f.deadline(), Some(14_000));
        assert!(!f.expired(13_999));
        assert!(f.expired(14_000));
        // A margin larger than half the TTL is capped there.
        let mut g = FenceClock::new(10_000);
        g.renewed(0, 4_000);
        assert_eq!(g.deadline(), Some(2_000));
        f.lost();
        assert!(f.expired(0));
    }
}
