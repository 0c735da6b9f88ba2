//! What a preemption costs the job preempted, for every policy.
//!
//! A job checkpoints every `C` ms of progress (its request's
//! `checkpoint_interval_ms`, else [`SchedConfig::checkpoint_interval_ms`]);
//! a run that follows a preemption first restores for `R` ms
//! ([`SchedConfig::restore_cost_ms`]) and makes no progress meanwhile.
//! Preempted `t` ms into a run, the job keeps its progress up to its last
//! checkpoint and loses the rest ([`RunCost::lost_ms`]: all of `t` while
//! restoring, else the progress since the last checkpoint, < `C`), and its
//! next run pays `R` again. So:
//! - no job is preempted before its first checkpoint of a run
//!   ([`RunCost::guard_ms`]: `R + C` into a restored run, `C` into a first
//!   one, and never before [`super::las::MIN_RUN_MS`]);
//! - among eligible victims, those that lose the least work (GPUs × lost
//!   ms) go first (see [`super::preempt`]);
//! - the Gittins policy also weighs the cost against the gain (see
//!   [`super::gittins`]).
//!
//! `C` = 0 means a job loses nothing when preempted (continuous
//! checkpoints); with `R` = 0 too, preemption is free (the simulator's
//! `--no-preemption-cost`).

use crate::model::{JobRequest, SchedConfig};

/// The preemption costs of one run of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCost {
    /// Checkpoint interval, ms of progress (0: continuous).
    pub checkpoint_ms: u64,
    /// Restore at the start of this run (0 for a first run).
    pub restore_ms: u64,
    /// Restore the next run would pay after a preemption.
    pub next_restore_ms: u64,
}

impl RunCost {
    /// The costs of a run of `req`; `restored`: the run follows a
    /// preemption.
    pub fn of(config: &SchedConfig, req: &JobRequest, restored: bool) -> RunCost {
        RunCost {
            checkpoint_ms: req
                .checkpoint_interval_ms
                .unwrap_or(config.checkpoint_interval_ms),
            restore_ms: if restored { config.restore_cost_ms } else { 0 },
            next_restore_ms: config.restore_cost_ms,
        }
    }

    /// Run time lost if preempted `t` ms into the run.
    pub fn lost_ms(&self, t: u64) -> u64 {
        if t < self.restore_ms {
            return t;
        }
        match self.checkpoint_ms {
            0 => 0,
            c => (t - self.restore_ms) % c,
        }
    }

    /// Lost run time plus the next restore: what preempting now adds to
    /// the job's remaining run time.
    pub fn cost_ms(&self, t: u64) -> u64 {
        self.lost_ms(t).saturating_add(self.next_restore_ms)
    }

    /// Run time before the run's first checkpoint: no preemption earlier.
    pub fn guard_ms(&self) -> u64 {
        self.restore_ms.saturating_add(self.checkpoint_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(c: u64, r: u64, restored: bool) -> RunCost {
        RunCost {
            checkpoint_ms: c,
            restore_ms: if restored { r } else { 0 },
            next_restore_ms: r,
        }
    }

    #[test]
    fn loses_work_since_the_last_checkpoint() {
        let first = cost(1_000, 200, false);
        assert_eq!(first.lost_ms(999), 999);
        assert_eq!(first.lost_ms(1_000), 0);
        assert_eq!(first.lost_ms(2_500), 500);
        assert_eq!(first.cost_ms(2_500), 700);
        assert_eq!(first.guard_ms(), 1_000);
        let again = cost(1_000, 200, true);
        assert_eq!(again.lost_ms(150), 150);
        assert_eq!(again.lost_ms(1_200), 0);
        assert_eq!(again.lost_ms(1_700), 500);
        assert_eq!(again.guard_ms(), 1_200);
    }

    #[test]
    fn continuous_checkpoints_lose_nothing() {
        let c = cost(0, 0, true);
        assert_eq!(c.lost_ms(12_345), 0);
        assert_eq!(c.cost_ms(12_345), 0);
        assert_eq!(c.guard_ms(), 0);
    }
}
