//! Cluster mode: jobs the cluster's leader placed on this node. Such a
//! job ([`crate::Submission::pinned`]) never waits in this node's queue:
//! it starts on exactly the placement the leader chose as soon as that is
//! free here. The leader frees a placement only once the job holding it
//! has ended (its node reported so) or its node was lost, so a conflict
//! here is a local job still winding down (being killed, its GPUs being
//! checked): the pinned job waits for it, for [`PIN_WAIT_MS`] at most.
//! A placement that can never be had (a GPU this node does not have, or
//! one that takes no jobs) or that stays taken longer is refused: the job
//! ends FAILED saying why, and the leader hears of it like any end.

use joblet_core::UnixMillis;
use joblet_sched::cluster::AllocError;
use joblet_sched::model::after;

use crate::engine::{EngineCore, Phase};
use crate::outcome::Final;

/// How long a pinned job waits for its placement to be free here.
pub const PIN_WAIT_MS: u64 = 60_000;

/// A job waiting for its pinned placement.
#[derive(Debug, Clone)]
pub(crate) struct Pinned {
    pub job: String,
    /// When it stops waiting.
    pub until: UnixMillis,
}

impl EngineCore {
    /// Queues job `key` (recorded, tracked, with a pinned placement) for
    /// its placement.
    pub(crate) fn pin(&mut self, key: String, now: UnixMillis) {
        self.pinned.push(Pinned {
            job: key,
            until: after(now, PIN_WAIT_MS),
        });
    }

    /// Starts the pinned jobs whose placement is free; refuses those whose
    /// placement can never be had here or waited too long.
    pub(crate) fn start_pinned(&mut self, now: UnixMillis) {
        let mut i = 0;
        while i < self.pinned.len() {
            let key = self.pinned[i].job.clone();
            let waiting = self
                .jobs
                .get(&key)
                .filter(|j| matches!(j.phase, Phase::Queued))
                .and_then(|j| j.pinned.clone().map(|p| (j.request.clone(), p)));
            let Some((req, placement)) = waiting else {
                // Stopped or deleted meanwhile.
                self.pinned.remove(i);
                continue;
            };
            match self.sched.pin(req, placement.clone(), now) {
                Ok(()) => {
                    self.pinned.remove(i);
                    self.launch(&key, placement, now);
                }
                Err(e) if !transient(&e) || now >= self.pinned[i].until => {
                    self.pinned.remove(i);
                    tracing::warn!(job = %key, error = %e, "refusing the cluster's placement");
                    let job = self.jobs.remove(&key).expect("looked up above");
                    let fin = Final::failed(format!(
                        "this node refused the placement the cluster's leader chose: {e}"
                    ));
                    self.finish_unplaced(job, fin, now);
                }
                Err(_) => i += 1,
            }
        }
    }

    /// Jobs waiting for their pinned placement.
    pub fn pinned_waiting(&self) -> usize {
        self.pinned.len()
    }
}

/// Whether the placement may be free later (something holds it now).
fn transient(e: &AllocError) -> bool {
    matches!(
        e,
        AllocError::Busy { .. }
            | AllocError::OutOfMemory { .. }
            | AllocError::HostFull { .. }
            | AllocError::ClassConflict { .. }
    )
}
