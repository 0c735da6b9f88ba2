//! A finished job's GPUs: checked clean before they go back
//! (`gpu.scrub_policy`, [`crate::gpu::scrub`]), then released to the pool
//! or quarantined.

use std::time::Duration;

use joblet_core::{JobId, UnixMillis};
use joblet_engine::DirtyGpu;
use joblet_sched::model::Placement;
use joblet_store::StoreError;

use super::{AgentReport, LocalAgent, PersistRelease};

/// How long after a GPU job's end its release check starts. The check
/// samples every GPU of the node at once (NVML), which on a small node
/// took the CPU from the job's client hearing of the end (~0.2 ms of a
/// 2-core node's start-to-end); the driver also needs a moment to free the
/// job's memory. The GPUs stay allocated meanwhile.
const RELEASE_SETTLE: Duration = Duration::from_millis(5);

impl LocalAgent {
    pub(super) fn begin_release_check(&mut self, job: &JobId, ended_at: UnixMillis) {
        let reports = self.reports.clone();
        let job = job.clone();
        let Some(g) = &self.gpus else {
            // No GPU support now: nothing to check.
            let _ = reports.send(AgentReport::ReleaseChecked {
                job,
                dirty: Vec::new(),
            });
            return;
        };
        let targets = g.scrub_targets(job.as_str());
        let shared = g.shared.clone();
        let s = &g.settings;
        let (policy, timeout, can_verify, bins) =
            (s.scrub, s.scrub_timeout, s.can_verify, s.bin_dirs.clone());
        tokio::spawn(async move {
            tokio::time::sleep(RELEASE_SETTLE).await;
            let dirty = crate::gpu::scrub::verify(
                &shared, &targets, policy, timeout, ended_at, can_verify, &bins,
            )
            .await
            .into_iter()
            .map(|(uuid, why)| DirtyGpu {
                index: targets
                    .iter()
                    .find(|t| t.uuid == uuid)
                    .map_or(0, |t| t.index),
                uuid,
                why,
            })
            .collect();
            let _ = reports.send(AgentReport::ReleaseChecked { job, dirty });
        });
    }

    pub(super) fn release_gpus(
        &mut self,
        job: &JobId,
        placement: &Placement,
        dirty: &[DirtyGpu],
        now: UnixMillis,
        persist: PersistRelease<'_>,
    ) -> Result<(), StoreError> {
        match &mut self.gpus {
            Some(g) => g.release(job.as_str(), placement, dirty, now, |e, u| persist(e, u)),
            None => persist(&[], &[]),
        }
    }
}
