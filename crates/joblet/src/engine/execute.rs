//! The core's effects, carried out: one function each. Effects run in the
//! order the core returned them; an effect whose result the core needs at
//! once (a launch) returns it as the next event, the rest report later
//! through the node agent.

use std::collections::VecDeque;

use crate::service::ApiError;
use joblet_core::{JobId, JobState, UnixMillis};
use joblet_engine::{Answer, DirtyGpu, Effect, Event, Final, LaunchOrder, Refusal, Ticket};
use joblet_sched::model::Placement;
use joblet_store::{AuditEnd, GpuGrantRecords, JobStart, TransitionExtra};

use super::{Ended, Engine, Pending, Unsaved};
use crate::agent::NodeAgent;

impl<A: NodeAgent> Engine<A> {
    /// Handles `event` and everything it leads to.
    pub(super) fn drive(&mut self, event: Event) {
        let mut events = VecDeque::from([event]);
        while let Some(ev) = events.pop_front() {
            let t0 = std::time::Instant::now();
            let effects = self.core.handle(ev, super::now_ms());
            crate::metrics::engine().decided(t0.elapsed());
            self.carry_out(effects, &mut events);
        }
    }

    /// Carries out `effects` in order; the events they lead to go to
    /// `next`.
    pub(super) fn carry_out(&mut self, effects: Vec<Effect>, next: &mut VecDeque<Event>) {
        for effect in effects {
            match effect {
                Effect::Requeue { job, at } => self.requeue(&job, at),
                Effect::Launch(order) => next.push_back(self.launch(*order)),
                Effect::Signal { job, how, ticket } => self.agent.signal(&job, how, ticket),
                Effect::Finish {
                    job,
                    fin,
                    at,
                    release,
                } => self.finish(&job, fin, at, release.is_some()),
                Effect::CheckRelease {
                    job,
                    placement,
                    ended_at,
                } => self.agent.check_release(&job, &placement, ended_at),
                Effect::Release {
                    job,
                    placement,
                    dirty,
                    ended,
                } => self.release(&job, &placement, &dirty, ended),
                Effect::ReapLost { job } => self.agent.reap_lost(&job),
                Effect::Delete { job, ticket } => self.delete(&job, ticket),
                Effect::Answer { ticket, answer } => self.answer(ticket, answer),
            }
        }
    }

    fn requeue(&mut self, id: &JobId, at: UnixMillis) {
        let reason = |r: &str| TransitionExtra {
            reason: Some(r.into()),
            ..Default::default()
        };
        let state = self.store.progress(id).ok().flatten().map(|p| p.state);
        if state == Some(JobState::Running) {
            // It never ran (see `Final::requeued`): back through PREEMPTED.
            let why = joblet_engine::Final::requeued().reason;
            if let Err(e) = self
                .store
                .transition_of(id, JobState::Preempted, at, reason(&why))
            {
                tracing::error!(job = %id, error = %e, "cannot record the job PREEMPTED");
                return;
            }
        }
        if let Err(e) = self.store.transition_of(
            id,
            JobState::Queued,
            at,
            reason("re-queued after daemon restart"),
        ) {
            tracing::error!(job = %id, error = %e, "cannot record the job QUEUED again");
        }
    }

    /// Starts a placed job through the node agent: `Started`, or
    /// `StartFailed` with why.
    fn launch(&mut self, order: LaunchOrder) -> Event {
        let id = order.job.clone();
        // Just submitted (as it was committed), or read back.
        let rec = match self.submitted.take() {
            Some(rec) if rec.id == id => rec,
            other => {
                self.submitted = other;
                match self.store.get(&id) {
                    Ok(Some(rec)) => rec,
                    Ok(None) => {
                        return Event::StartFailed {
                            job: id,
                            reason: "job record vanished".into(),
                            recorded: false,
                        }
                    }
                    Err(e) => {
                        return Event::StartFailed {
                            job: id,
                            reason: format!("cannot read job record: {e}"),
                            recorded: false,
                        }
                    }
                }
            }
        };
        let store = self.store.clone();
        let mut persist = |gpus: Option<GpuGrantRecords<'_>>| {
            store.record_start(
                &JobStart {
                    job: &id,
                    request: &order.request,
                    placement: &order.placement,
                    gpus,
                },
                order.at,
            )
        };
        let store = self.store.clone();
        let mut secrets = || store.take_secrets(&id);
        let t0 = std::time::Instant::now();
        let started = self.agent.start(&order, &rec, &mut persist, &mut secrets);
        crate::metrics::engine().launched(rec.created_ms, order.at, t0.elapsed(), started.is_ok());
        self.agent.job_event();
        match started {
            Ok(()) => Event::Started { job: id },
            Err(e) => {
                tracing::error!(job = %id, error = %e, "job did not start");
                Event::StartFailed {
                    job: id,
                    reason: e.to_string(),
                    recorded: e.recorded(),
                }
            }
        }
    }

    /// Records a final state (and with `release` the end of the job's
    /// allocation) and tells log followers. A full state disk delays the
    /// record, never the end ([`super::unsaved`]).
    fn finish(&mut self, id: &JobId, fin: Final, at: UnixMillis, release: bool) {
        // A job that ends before it started leaves its warm sandbox unused;
        // its work directory goes after the node's retention.
        self.agent.ended(id);
        self.save(Unsaved::End {
            job: id.clone(),
            fin: fin.clone(),
            at,
            release,
        });
        // Followers first, then the log line.
        let _ = self.ended.send(Ended {
            id: id.clone(),
            recorded: Some(fin.clone()),
        });
        crate::metrics::engine().ended(fin.state.as_str(), fin.exit_code, &fin.reason);
        tracing::info!(job = %id, state = %fin.state, exit_code = ?fin.exit_code, reason = %fin.reason, "job finished");
    }

    /// Gives a finished job's GPUs back: ledger, pool and audit record in
    /// one commit; the closed audit record goes to the audit log file.
    fn release(
        &mut self,
        id: &JobId,
        placement: &Placement,
        dirty: &[DirtyGpu],
        ended: Option<(Final, UnixMillis)>,
    ) {
        let now = super::now_ms();
        let (state, reason, end_ms) = match &ended {
            Some((f, at)) => (f.state.as_str(), f.reason.as_str(), *at),
            None => ("DELETED", "", now),
        };
        let store = self.store.clone();
        let mut closed = None;
        let mut persist = |entries: &[&joblet_core::gpu::GpuEntry],
                           updates: &[joblet_core::gpu::GpuUpdate]| {
            let (_, audit) = store.record_release(
                id.as_str(),
                entries,
                updates,
                AuditEnd {
                    end_ms,
                    ended: state,
                    reason,
                },
                now,
            )?;
            closed = audit;
            Ok(())
        };
        if let Err(e) = self.agent.release(id, placement, dirty, now, &mut persist) {
            tracing::warn!(job = %id, error = %e, "cannot record the release of the job's GPUs; trying again");
            self.save(Unsaved::Release {
                job: id.clone(),
                state: state.to_string(),
                reason: reason.to_string(),
                end_ms,
            });
        }
        if let Some(a) = closed {
            let path = self.dirs.root().join(crate::gpu::audit::FILE);
            if let Err(e) = crate::gpu::audit::append(&path, &a) {
                tracing::error!(path = %path.display(), error = %e, "cannot append to the GPU audit log");
            }
        }
        tracing::debug!(job = %id, "allocation released");
    }

    fn delete(&mut self, id: &JobId, ticket: Ticket) {
        let done = self.store.delete(id).map_err(crate::service::store_error);
        if done.is_ok() {
            let dir = self.dirs.job(id);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(job = %id, dir = %dir.display(), error = %e, "job deleted but its directory could not be removed");
                }
            }
            tracing::info!(job = %id, "job deleted");
        }
        match self.replies.take(ticket) {
            Some(Pending::Delete { reply, .. }) => {
                let _ = reply.send(done);
            }
            Some(Pending::Record { reply, .. }) => {
                let _ = reply.send(done.and_then(|()| self.record(id)));
            }
            None => {}
        }
    }

    fn answer(&mut self, ticket: Ticket, answer: Answer) {
        let Some(pending) = self.replies.take(ticket) else {
            return;
        };
        match pending {
            Pending::Record { id, reply } => {
                let _ = reply.send(match answer {
                    Answer::Done => self.record(&id),
                    Answer::Refused(r) => Err(refusal(&id, r)),
                });
            }
            Pending::Delete { id, reply } => {
                let _ = reply.send(match answer {
                    Answer::Done => Ok(()),
                    Answer::Refused(r) => Err(refusal(&id, r)),
                });
            }
        }
    }

    /// A stop or kill reached the job (or could not): its caller hears.
    pub(super) fn signalled(&mut self, id: &JobId, ticket: Ticket, failed: Option<String>) {
        let Some(pending) = self.replies.take(ticket) else {
            return;
        };
        let result = match failed {
            None => self.record(id),
            Some(why) => Err(ApiError::Internal(why)),
        };
        match pending {
            Pending::Record { reply, .. } => {
                let _ = reply.send(result);
            }
            Pending::Delete { reply, .. } => {
                let _ = reply.send(result.map(|_| ()));
            }
        }
    }
}

/// A refused request in the API's terms.
fn refusal(id: &JobId, r: Refusal) -> ApiError {
    match r {
        Refusal::Finished { state } => ApiError::WrongState {
            id: id.to_string(),
            state,
            hint: "it has already finished",
        },
        Refusal::Running => ApiError::WrongState {
            id: id.to_string(),
            state: JobState::Running,
            hint: "stop it first with `rnx job stop`, then delete it",
        },
        Refusal::Unknown => ApiError::Internal(format!(
            "job {id} is not finished, but the engine does not track it; restart joblet to recover it"
        )),
    }
}
