//! Stop and kill requests: a queued job is taken off its queue, a running
//! one is asked through its shim's control socket (SIGTERM, then SIGKILL
//! after the grace period; or SIGKILL at once).

use std::time::Duration;

use joblet_core::scheduler::Event;
use joblet_core::{JobId, JobState};
use joblet_shim::{JobDir, ShimError};
use joblet_store::JobRecord;

use super::{now_ms, Engine, Final, Reply, STOP_RETRY_EVERY, STOP_RETRY_FOR};
use crate::service::ApiError;

impl Engine {
    pub(super) fn stop(
        &mut self,
        id: JobId,
        grace: Option<Duration>,
        kill: bool,
        reply: Reply<JobRecord>,
    ) {
        let rec = match self.record(&id) {
            Ok(r) => r,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        match rec.state {
            s if s.is_terminal() => {
                let _ = reply.send(Err(ApiError::WrongState {
                    id: id.to_string(),
                    state: s,
                    hint: "it has already finished",
                }));
            }
            JobState::Running => {
                let dir = JobDir::new(self.dirs.job(&id));
                let grace = grace.unwrap_or(self.cfg.stop_grace);
                tokio::spawn(async move {
                    // RUNNING is recorded before the shim listens on its
                    // control socket (a warm shim may still be setting up):
                    // until it does, or the job's exit is recorded, ask again.
                    let deadline = tokio::time::Instant::now() + STOP_RETRY_FOR;
                    let sent = loop {
                        let sent = if kill {
                            joblet_shim::request_kill(&dir).await
                        } else {
                            joblet_shim::request_stop(&dir, grace).await
                        };
                        match sent {
                            Err(ShimError::NotRunning { .. })
                                if joblet_shim::read_exit(&dir).ok().flatten().is_none()
                                    && tokio::time::Instant::now() < deadline =>
                            {
                                tokio::time::sleep(STOP_RETRY_EVERY).await;
                            }
                            other => break other,
                        }
                    };
                    let res = match sent {
                        Ok(()) => Ok(rec),
                        // The job ended between our read and the request: nothing left to stop.
                        Err(e @ ShimError::NotRunning { .. })
                            if joblet_shim::read_exit(&dir).ok().flatten().is_some() =>
                        {
                            tracing::debug!(job = %id, error = %e, "stop raced with the job's exit");
                            Ok(rec)
                        }
                        Err(e) if joblet_shim::read_exit(&dir).ok().flatten().is_some() => {
                            tracing::debug!(job = %id, error = %e, "stop raced with the job's exit");
                            Ok(rec)
                        }
                        Err(e) => Err(ApiError::Internal(format!("cannot signal job {id}: {e}"))),
                    };
                    let _ = reply.send(res);
                });
            }
            _ if rec.spec.resources.gpu_count > 0 => {
                if let Some(g) = &mut self.gpu {
                    g.handle(joblet_sched::model::Event::Cancel(id.to_string()), now_ms());
                }
                self.finish(
                    &id,
                    Final {
                        state: JobState::Stopped,
                        exit_code: None,
                        reason: "stopped before it started".into(),
                    },
                    now_ms(),
                );
                let _ = reply.send(self.record(&id));
            }
            _ => {
                let actions = self
                    .sched
                    .handle(Event::Cancel { job: id.clone() }, now_ms());
                self.apply(actions);
                let _ = reply.send(self.record(&id));
            }
        }
    }
}
