//! What a restarted daemon finds on this node, and what it cleans up.
//!
//! - A job that has not started may have taken the id of a warm sandbox of
//!   the daemon that died: that warm shim, its daemon gone, tears its
//!   sandbox down by itself (its cgroup has the job's name) and frees its
//!   directory's `shim.lock` last. The job must not start before that, or
//!   the teardown removes the new job's cgroup under it: [`settle`] waits
//!   for such shims ([`SETTLE_WAIT`] at most, then kills them and cleans up
//!   after them).
//! - A RUNNING job's shim is alive (watched again), gone after recording
//!   the job's exit, gone without a record, or was never given the job:
//!   the daemon died between recording the start and handing the job to
//!   its shim, so nothing of it ran and it is queued again ([`probe`]).
//! - When the engine has recovered, empty job cgroups no tracked job owns
//!   are removed (directories vanishing meanwhile are fine), the GPU pool
//!   forgets jobs that hold nothing, jobs still on a failed GPU are ended
//!   again (the dead daemon may not have ended them), and MPS
//!   daemons no job uses stop.
//!
//! [`settle`]: LocalAgent::settle_orphans
//! [`probe`]: LocalAgent::probe_shim

use std::collections::BTreeSet;
use std::time::Duration;

use joblet_core::{JobId, UnixMillis};
use joblet_engine::ShimFact;
use joblet_shim::JobDir;

use super::LocalAgent;
use crate::outcome;

/// How long a restarted daemon waits for leftover shims of jobs that have
/// not started to go (a teardown takes milliseconds), and how often it
/// looks.
const SETTLE_WAIT: Duration = Duration::from_secs(10);
const SETTLE_POLL: Duration = Duration::from_millis(20);

impl LocalAgent {
    pub(super) async fn settle_orphans(&mut self, not_started: &[JobId]) {
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        for id in not_started {
            let dir = JobDir::new(self.dirs.job(id));
            let mut waited = false;
            loop {
                match joblet_shim::reattach(&dir) {
                    Ok(None) => break,
                    Ok(Some(shim)) if tokio::time::Instant::now() >= deadline => {
                        tracing::warn!(job = %id, shim_pid = shim.pid(), "a shim of the earlier daemon is still in this job's directory; killed");
                        if let Err(e) = shim.kill() {
                            tracing::error!(job = %id, error = %e, "cannot kill a leftover shim");
                        }
                        // Its sandbox (and any process in it) goes with its
                        // cgroup; its files go too, the job's uploads stay.
                        self.reap_cgroup(id);
                        joblet_shim::remove_shim_files(&dir);
                        break;
                    }
                    Ok(Some(shim)) => {
                        if !waited {
                            tracing::info!(job = %id, shim_pid = shim.pid(), "waiting for a warm shim of the earlier daemon to tear down before the job starts");
                            waited = true;
                        }
                        tokio::time::sleep(SETTLE_POLL).await;
                    }
                    Err(e) => {
                        tracing::warn!(job = %id, error = %e, "cannot tell whether a shim still holds this job's directory");
                        tokio::time::sleep(SETTLE_POLL).await;
                        if tokio::time::Instant::now() >= deadline {
                            break;
                        }
                    }
                }
            }
        }
    }

    pub(super) fn probe_shim(&mut self, id: &JobId) -> ShimFact {
        let dir = JobDir::new(self.dirs.job(id));
        if !dir.path().exists() {
            tracing::error!(job = %id, dir = %dir.path().display(), "a running job's directory is gone");
            return ShimFact::Vanished;
        }
        match joblet_shim::reattach(&dir) {
            Ok(Some(handle)) => {
                tracing::info!(job = %id, shim_pid = handle.pid(), "reattached to running job");
                self.watch(id.clone(), handle);
                ShimFact::Alive
            }
            Ok(None) => match joblet_shim::read_exit(&dir) {
                Ok(Some(exit)) if exit.outcome == joblet_shim::Outcome::NeverGiven => {
                    tracing::info!(job = %id, "the job's shim never got the job before the daemon went away; it is queued again");
                    // Its next shim starts in a clean directory.
                    joblet_shim::remove_shim_files(&dir);
                    ShimFact::NeverStarted
                }
                Ok(Some(exit)) => ShimFact::Exited(outcome::from_shim(&exit)),
                // No shim ever took the job's directory (the daemon died
                // before launching it, or its warm shim was discarded).
                Ok(None) if !dir.shim_pid_path().exists() => {
                    tracing::info!(job = %id, "no shim ever took the job before the daemon went away; it is queued again");
                    ShimFact::NeverStarted
                }
                Ok(None) => ShimFact::Gone,
                Err(e) => {
                    tracing::error!(job = %id, error = %e, "cannot read the job's exit record; marking it lost");
                    ShimFact::Gone
                }
            },
            Err(e) => {
                tracing::error!(job = %id, error = %e, "cannot check the job's shim; marking it lost");
                ShimFact::Gone
            }
        }
    }

    pub(super) fn finish_recovery(&mut self, keep: &BTreeSet<String>, now: UnixMillis) {
        if let Some(sb) = &self.sandbox {
            sb.sweep_stale(keep);
        }
        self.sweep_unowned_dirs(keep);
        self.work
            .recover(&self.dirs.jobs(), std::time::Instant::now());
        if let Some(g) = &mut self.gpus {
            g.recovered(keep, now);
            // Jobs the dead daemon was ending because their GPU failed are
            // ended again, with the same reason.
            let endings = g.shared.lock().pool.endings();
            for report in self.gpu_reports(endings) {
                let _ = self.reports.send(report);
            }
        }
        // The warm pool starts building now.
        self.refill_warm();
    }

    /// Removes the job directories an earlier daemon's warm shims left
    /// (empty, or an empty `work`): no job took them. A directory with
    /// anything else in it belongs to a job, or to a shim still tearing
    /// down, and stays.
    fn sweep_unowned_dirs(&self, keep: &BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(self.dirs.jobs()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if keep.contains(name.to_string_lossy().as_ref()) {
                continue;
            }
            super::warm::remove_unowned_dir(&JobDir::new(entry.path()));
        }
    }

    fn reap_cgroup(&self, id: &JobId) {
        if let Some(sb) = &self.sandbox {
            if let Err(e) = sb.destroy_job_cgroup(id) {
                tracing::error!(job = %id, error = %e, "cannot clean up the cgroup of a leftover shim");
            }
        }
    }
}
