//! The engine's GPU side: health changes from the pool reach the GPU
//! scheduler, jobs the node ends (XID, quota, offline) get the node's
//! reason, and finished GPU jobs go through the release check before their
//! GPUs are handed back.

use std::collections::VecDeque;
use std::time::Duration;

use joblet_core::gpu::GpuUpdate;
use joblet_core::{JobId, JobState, UnixMillis};
use joblet_shim::JobDir;

use super::{now_ms, Engine, Msg};

/// How long after a GPU job's end its release check starts. The check
/// samples every GPU of the node at once (NVML), which on a small node
/// took the CPU from the job's client hearing of the end (~0.2 ms of a
/// 2-core node's start-to-end); the driver also needs a moment to free the
/// job's memory. The GPUs stay allocated meanwhile.
const RELEASE_SETTLE: Duration = Duration::from_millis(5);
use crate::gpu::jobs::GpuAction;
use crate::outcome::Final;

impl Engine {
    /// The pool changed: the GPU scheduler learns the new health; jobs the
    /// change ends (GPU failure, forced offline, memory quota) are ended
    /// with the reason.
    pub(super) fn gpu_updates(&mut self, updates: Vec<GpuUpdate>) {
        let Some(g) = &mut self.gpu else { return };
        let now = now_ms();
        let mut actions = Vec::new();
        for ev in g.health_events(&updates) {
            actions.extend(g.handle(ev, now));
        }
        self.apply_gpu(actions);
        for u in updates {
            if let GpuUpdate::EndJobs {
                jobs,
                reason,
                failed,
                ..
            } = u
            {
                for job in jobs {
                    match JobId::parse(&job) {
                        Ok(id) => self.end_job(id, &reason, failed),
                        Err(_) => tracing::error!(%job, "GPU record names a malformed job id"),
                    }
                }
            }
        }
    }

    /// Ends a job for a reason of the node's: killed at once when `failed`
    /// (its GPU failed, its quota was exceeded), stopped with the grace
    /// period otherwise (an admin took its GPU offline). The final record
    /// carries `reason`, whatever the shim reports.
    pub(super) fn end_job(&mut self, id: JobId, reason: &str, failed: bool) {
        let Ok(rec) = self.record(&id) else { return };
        if rec.state.is_terminal() || self.overrides.contains_key(&id) {
            return;
        }
        tracing::warn!(job = %id, %reason, failed, "ending job");
        let state = if failed {
            JobState::Failed
        } else {
            JobState::Stopped
        };
        if rec.state != JobState::Running {
            if let Some(g) = &mut self.gpu {
                g.handle(joblet_sched::model::Event::Cancel(id.to_string()), now_ms());
            }
            self.finish(
                &id,
                Final {
                    state,
                    exit_code: None,
                    reason: reason.to_string(),
                },
                now_ms(),
            );
            return;
        }
        self.overrides.insert(
            id.clone(),
            Final {
                state,
                exit_code: None,
                reason: reason.to_string(),
            },
        );
        let dir = JobDir::new(self.dirs.job(&id));
        let grace = self.cfg.stop_grace;
        tokio::spawn(async move {
            let sent = if failed {
                joblet_shim::request_kill(&dir).await
            } else {
                joblet_shim::request_stop(&dir, grace).await
            };
            if let Err(e) = sent {
                tracing::debug!(job = %id, error = %e, "ending a job raced with its exit");
            }
        });
    }

    /// Starts the release check of a finished GPU job's GPUs; the result
    /// comes back as [`Msg::Released`]. The GPUs stay allocated meanwhile.
    /// `ended`: when the job's end was recorded (read from its record when
    /// not given). The check waits [`RELEASE_SETTLE`] first.
    pub(super) fn begin_release(&mut self, id: &JobId, ended: Option<UnixMillis>) {
        let Some(g) = &self.gpu else { return };
        let targets = g.scrub_targets(id.as_str());
        let shared = g.shared.clone();
        let s = &g.settings;
        let (policy, timeout, can_verify, bins) =
            (s.scrub, s.scrub_timeout, s.can_verify, s.bin_dirs.clone());
        let ended = ended
            .or_else(|| self.record(id).ok().and_then(|r| r.ended_ms))
            .unwrap_or_else(now_ms);
        let tx = self.tx.clone();
        let id = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(RELEASE_SETTLE).await;
            let dirty = crate::gpu::scrub::verify(
                &shared, &targets, policy, timeout, ended, can_verify, &bins,
            )
            .await;
            let _ = tx.send(Msg::Released { id, dirty }).await;
        });
    }

    /// Hands a finished job's GPUs back (quarantining those that failed the
    /// release check), closes its audit record, and starts what now fits.
    pub(super) fn released(&mut self, id: &JobId, dirty: &[(String, String)]) {
        let Some(g) = &mut self.gpu else { return };
        let rec = self.store.get(id).ok().flatten();
        let (state, reason, end) = match &rec {
            Some(r) => (
                r.state.to_string(),
                r.reason.clone(),
                r.ended_ms.unwrap_or_else(now_ms),
            ),
            None => ("DELETED".to_string(), String::new(), now_ms()),
        };
        for (uuid, why) in dirty {
            tracing::error!(job = %id, gpu = %uuid, %why, "GPU did not come back clean; quarantined");
        }
        let (audit, actions) = g.release(id.as_str(), dirty, (&state, &reason, end), now_ms());
        if let Some(a) = audit {
            let path = self.dirs.root().join(crate::gpu::audit::FILE);
            if let Err(e) = crate::gpu::audit::append(&path, &a) {
                tracing::error!(path = %path.display(), error = %e, "cannot append to the GPU audit log");
            }
        }
        self.apply_gpu(actions);
    }

    /// Carries out the GPU scheduler's decisions.
    pub(super) fn apply_gpu(&mut self, actions: Vec<GpuAction>) {
        let mut work: VecDeque<GpuAction> = actions.into();
        while let Some(a) = work.pop_front() {
            let now = now_ms();
            let fail = |reason: String| Final {
                state: JobState::Failed,
                exit_code: None,
                reason,
            };
            match a {
                GpuAction::Start { job, allocated } => {
                    let Ok(id) = JobId::parse(&job) else { continue };
                    if let Err(fin) = self.start_job(&id, Some(&allocated)) {
                        self.finish(&id, fin, now);
                        self.begin_release(&id, Some(now));
                    }
                }
                GpuAction::StartFailed { job, reason } => {
                    let Ok(id) = JobId::parse(&job) else { continue };
                    self.finish(&id, fail(reason), now);
                    self.begin_release(&id, Some(now));
                }
                GpuAction::Reject { job, reason } => {
                    let Ok(id) = JobId::parse(&job) else { continue };
                    self.finish(&id, fail(reason), now);
                }
            }
        }
    }
}
