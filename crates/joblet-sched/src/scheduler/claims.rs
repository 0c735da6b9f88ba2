//! Room freed by preemption is held for the job it was freed for.
//!
//! Victims exit one at a time. Without a hold, the pass run on the first
//! victim's exit hands its GPUs to whatever fits next (often the victim
//! itself, requeued), the job the room was made for still does not fit,
//! and a minute later it preempts again: the simulator measured millions
//! of preemptions on the Philly trace that way. So each GPU a victim frees
//! is paused in the cluster state (nobody is placed there) and remembered
//! with its real health, and the CPU, memory and job slot it frees on each
//! of its nodes are claimed there (`ClusterState::claim_host`), until
//! the beneficiary's last victim has exited; then the GPUs get their real
//! health back, the claims are given back, and the beneficiary is offered
//! the room before anyone else. A hold also ends when its beneficiary
//! stops waiting for victims (cancelled, started elsewhere, node gone).

use std::collections::BTreeSet;

use crate::cluster::HostLoad;
use crate::model::{GpuHealth, JobKey, NodeId, Placement};
use crate::scheduler::Scheduler;

/// A GPU held for a waiting job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub beneficiary: JobKey,
    /// The GPU's health as the daemon last reported it.
    pub real: GpuHealth,
}

impl Scheduler {
    /// A victim of `beneficiary` exited, freeing `freed`: hold its GPUs,
    /// CPU, memory and job slots.
    pub(crate) fn claim_freed(&mut self, beneficiary: &str, freed: &Placement) {
        let load = HostLoad::of(freed);
        for node in freed.nodes() {
            self.cluster.claim_host(node, load);
            self.host_claims.push((beneficiary.to_string(), node, load));
        }
        for u in &freed.units {
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

    /// Gives the GPUs held for `beneficiary` their real health back, and
    /// its claimed CPU, memory and job slots back to their nodes.
    pub(crate) fn unclaim(&mut self, beneficiary: &str) {
        let gpus: Vec<(NodeId, u32)> = self
            .claims
            .iter()
            .filter(|(_, c)| c.beneficiary == beneficiary)
            .map(|(g, _)| *g)
            .collect();
        let mut host = std::mem::take(&mut self.host_claims);
        let before = host.len();
        host.retain(|(b, node, load)| {
            if b != beneficiary {
                return true;
            }
            self.cluster.unclaim_host(*node, *load);
            false
        });
        let host_freed = host.len() != before;
        self.host_claims = host;
        if gpus.is_empty() && !host_freed {
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
        if self.claims.is_empty() && self.host_claims.is_empty() {
            return;
        }
        let stale: BTreeSet<JobKey> = self
            .claims
            .values()
            .map(|c| &c.beneficiary)
            .chain(self.host_claims.iter().map(|(b, ..)| b))
            .filter(|b| !self.awaits_victims(b))
            .cloned()
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
