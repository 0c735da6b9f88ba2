//! Room freed by preemption is held for the job it was freed for.
//!
//! Victims exit one at a time. Without a hold, the pass run on the first
//! victim's exit hands its GPUs to whatever fits next (often the victim
//! itself, requeued), the job the room was made for still does not fit,
//! and a minute later it preempts again: the simulator measured millions
//! of preemptions on the Philly trace that way. So each GPU a victim frees
//! is paused in the cluster state (nobody is placed there) and remembered
//! with its real health, until the beneficiary's last victim has exited;
//! then the GPUs get their real health back and the beneficiary is offered
//! them before anyone else. A hold also ends when its beneficiary stops
//! waiting for victims (cancelled, started elsewhere, node gone).

use std::collections::BTreeSet;

use crate::model::{GpuHealth, GpuRef, JobKey, NodeId};
use crate::scheduler::Scheduler;

/// A GPU held for a waiting job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub beneficiary: JobKey,
    /// The GPU's health as the daemon last reported it.
    pub real: GpuHealth,
}

impl Scheduler {
    /// A victim of `beneficiary` exited, freeing `units`: hold their GPUs.
    pub(crate) fn claim_freed(&mut self, beneficiary: &str, units: &[GpuRef]) {
        for u in units {
            let gpu = (u.node, u.index);
            if self.claims.contains_key(&gpu) {
                continue;
            }
            let Some(real) = self.cluster.health(u.node, u.index) else {
                continue;
            };
            self.cluster.set_health(
                u.node,
                u.index,
                GpuHealth {
                    paused: true,
                    ..real
                },
            );
            self.claims.insert(
                gpu,
                Claim {
                    beneficiary: beneficiary.to_string(),
                    real,
                },
            );
        }
    }

    /// Gives the GPUs held for `beneficiary` their real health back.
    pub(crate) fn unclaim(&mut self, beneficiary: &str) {
        let gpus: Vec<(NodeId, u32)> = self
            .claims
            .iter()
            .filter(|(_, c)| c.beneficiary == beneficiary)
            .map(|(g, _)| *g)
            .collect();
        if gpus.is_empty() {
            return;
        }
        for g in gpus {
            if let Some(c) = self.claims.remove(&g) {
                self.cluster.set_health(g.0, g.1, c.real);
            }
        }
        self.capacity_changed();
    }

    /// Health news for a held GPU: remembered for when the hold ends, and
    /// the GPU stays paused. False when the GPU is not held.
    pub(crate) fn claimed_health(&mut self, node: NodeId, index: u32, health: GpuHealth) -> bool {
        let Some(c) = self.claims.get_mut(&(node, index)) else {
            return false;
        };
        c.real = health;
        self.cluster.set_health(
            node,
            index,
            GpuHealth {
                paused: true,
                ..health
            },
        );
        true
    }

    /// Ends holds whose beneficiary no longer waits for victims.
    pub(crate) fn settle_claims(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        let stale: BTreeSet<JobKey> = self
            .claims
            .values()
            .filter(|c| !self.awaits_victims(&c.beneficiary))
            .map(|c| c.beneficiary.clone())
            .collect();
        for b in stale {
            self.unclaim(&b);
        }
    }

    fn awaits_victims(&self, job: &str) -> bool {
        self.queue
            .key_of(job)
            .and_then(|k| self.queue.get(k))
            .is_some_and(|w| w.awaiting_victims > 0)
    }
}
