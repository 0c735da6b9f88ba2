//! [`EngineCore`]: the jobs the engine tracks, their phases, and the one
//! function that decides, [`EngineCore::handle`].
//!
//! A job's phases in the core:
//!
//! ```text
//! Queued ──Start──▶ Starting ──Started──▶ Running ──Exited──▶ Releasing ──ReleaseChecked──▶ (gone)
//!   │                  │                     │         (GPU jobs; a job without
//!   └─stop/delete      └─StartFailed─────────┴──────▶   GPUs is gone at its end)
//! ```
//!
//! Every scheduler action goes through [`EngineCore::on_sched`], so a start
//! the scheduler decides is always launched, whichever event freed the room
//! for it. A job's resources go back to the scheduler exactly once: at its
//! end when it held no GPUs, after its release check when it did.

use std::collections::BTreeMap;

use joblet_core::gpu::GpuState;
use joblet_core::{JobId, JobState, UnixMillis};
use joblet_sched::model::{
    Action, Event as SchedEvent, GpuHealth, JobRequest, NodeSpec, Placement, SchedConfig,
    Unplaceable,
};
use joblet_sched::scheduler::Scheduler;

use crate::effect::{Answer, DirtyGpu, Effect, LaunchOrder, Refusal, StopHow, Ticket};
use crate::event::Event;
use crate::outcome::{Exit, Final};
use crate::request::Submission;

/// What the core is built with.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub sched: SchedConfig,
    /// The node: its GPUs, CPU, memory and job slots.
    pub node: NodeSpec,
    /// `jobs.stop_grace_period`, in ms: SIGTERM to SIGKILL.
    pub stop_grace_ms: u64,
}

/// Where a job is, as tests and views see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseView {
    Queued,
    Starting(Placement),
    Running(Placement),
    /// Ended (recorded) and its GPUs being checked before release.
    Releasing(Placement),
}

#[derive(Debug, Clone)]
pub(crate) enum Phase {
    Queued,
    Starting(Placement),
    Running(Placement),
    Releasing {
        placement: Placement,
        /// `None`: its record was deleted (the audit record says so).
        ended: Option<(Final, UnixMillis)>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub id: JobId,
    pub request: JobRequest,
    pub wall_limit_ms: Option<u64>,
    pub gpu_time_reason: Option<String>,
    pub phase: Phase,
    /// How the node ends it, whatever its process reports (its GPU failed,
    /// its GPU went offline).
    pub ending: Option<Final>,
    /// Stops asked for while it was starting: sent once it runs, answered
    /// then (or when it fails to start).
    pub pending: Vec<(StopHow, Option<Ticket>)>,
    /// Cluster mode: the placement the leader chose (see [`crate::pinned`]).
    pub pinned: Option<Placement>,
}

impl Job {
    pub(crate) fn new(sub: Submission, phase: Phase) -> Job {
        Job {
            id: sub.job,
            request: sub.request,
            wall_limit_ms: sub.wall_limit_ms,
            gpu_time_reason: sub.gpu_time_reason,
            phase,
            ending: None,
            pending: Vec::new(),
            pinned: sub.pinned,
        }
    }
}

/// The engine's decision core. Feed it events in order; carry out every
/// effect it returns, in order.
#[derive(Debug, Clone)]
pub struct EngineCore {
    pub(crate) cfg: CoreConfig,
    pub(crate) sched: Scheduler,
    /// Every job the engine tracks, by id: from submission until its
    /// resources are released.
    pub(crate) jobs: BTreeMap<String, Job>,
    /// The effects of the event being handled.
    pub(crate) out: Vec<Effect>,
    /// Jobs waiting for the placement a cluster leader chose to be free
    /// here, in arrival order (see [`crate::pinned`]).
    pub(crate) pinned: Vec<crate::pinned::Pinned>,
}

impl EngineCore {
    /// An engine with no jobs. A daemon sends [`Event::Recovered`] first.
    pub fn new(cfg: CoreConfig) -> EngineCore {
        let sched = Scheduler::new(cfg.sched.clone(), vec![cfg.node.clone()]);
        EngineCore {
            cfg,
            sched,
            jobs: BTreeMap::new(),
            out: Vec::new(),
            pinned: Vec::new(),
        }
    }

    /// Handles one event at time `now`; returns what must be done, in order.
    #[must_use = "every effect must be carried out"]
    pub fn handle(&mut self, event: Event, now: UnixMillis) -> Vec<Effect> {
        match event {
            Event::Recovered(r) => self.recover(*r, now),
            Event::Submitted(sub) => self.submitted(*sub, now),
            Event::Stop {
                job,
                how,
                stored,
                ticket,
            } => self.stop(job, how, stored, ticket, now),
            Event::Delete {
                job,
                stored,
                ticket,
            } => self.delete(job, stored, ticket, now),
            Event::Started { job } => self.started(&job),
            Event::StartFailed {
                job,
                reason,
                recorded,
            } => self.start_failed(&job, reason, recorded, now),
            Event::Exited { job, exit } => self.exited(&job, exit, now),
            Event::EndJobs {
                jobs,
                reason,
                failed,
            } => {
                for job in jobs {
                    self.end_by_node(&job, &reason, failed, now);
                }
            }
            Event::GpuChanged { index, health } => self.sched(
                SchedEvent::GpuChanged {
                    node: self.cfg.node.id,
                    index,
                    health,
                },
                now,
            ),
            Event::ReleaseChecked { job, dirty } => self.release_checked(&job, dirty, now),
            Event::Tick => self.sched(SchedEvent::Tick, now),
        }
        if !self.pinned.is_empty() {
            self.start_pinned(now);
        }
        std::mem::take(&mut self.out)
    }

    /// Why a request could never be placed on this node (asked before the
    /// job is recorded, so that the user hears it at once); `None` when it
    /// could be, now or later.
    pub fn never_placeable(&self, req: &JobRequest) -> Option<Unplaceable> {
        self.sched.cluster().check_ever_placeable(req).err()
    }

    /// Where a job is; `None` for a job the engine does not track (never
    /// submitted, or ended and released).
    pub fn phase(&self, job: &JobId) -> Option<PhaseView> {
        self.jobs.get(job.as_str()).map(|j| match &j.phase {
            Phase::Queued => PhaseView::Queued,
            Phase::Starting(p) => PhaseView::Starting(p.clone()),
            Phase::Running(p) => PhaseView::Running(p.clone()),
            Phase::Releasing { placement, .. } => PhaseView::Releasing(placement.clone()),
        })
    }

    /// The jobs the engine tracks, by id.
    pub fn jobs(&self) -> impl Iterator<Item = (&JobId, PhaseView)> + '_ {
        self.jobs
            .values()
            .filter_map(|j| self.phase(&j.id).map(|p| (&j.id, p)))
    }

    /// The scheduler (placements, queue), read-only.
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    fn submitted(&mut self, sub: Submission, now: UnixMillis) {
        let key = sub.job.to_string();
        if self.jobs.contains_key(&key) {
            tracing::warn!(job = %key, "submitted twice; the second submission is ignored");
            return;
        }
        let req = sub.request.clone();
        let pinned = sub.pinned.is_some();
        self.jobs.insert(key.clone(), Job::new(sub, Phase::Queued));
        if pinned {
            self.pin(key, now);
        } else {
            self.sched(SchedEvent::Submit(Box::new(req)), now);
        }
    }

    /// Feeds the scheduler and carries out everything it decides.
    pub(crate) fn sched(&mut self, ev: SchedEvent, now: UnixMillis) {
        for action in self.sched.handle(ev, now) {
            self.on_sched(action, now);
        }
    }

    fn on_sched(&mut self, action: Action, now: UnixMillis) {
        match action {
            Action::Start { placement } => {
                let key = placement.job.clone();
                let queued = self
                    .jobs
                    .get(&key)
                    .is_some_and(|j| matches!(j.phase, Phase::Queued));
                if !queued {
                    // The scheduler placed a job that is not waiting here:
                    // give the room back at once.
                    tracing::error!(job = %key, "the scheduler started a job the engine has not queued; released");
                    self.sched(SchedEvent::Exited(key), now);
                    return;
                }
                self.launch(&key, placement, now);
            }
            Action::Reject { job, reason } => {
                let Some(j) = self.jobs.get(&job) else { return };
                let fin = Final::failed(if j.request.gpu_count > 0 {
                    format!("No GPUs available: the job {reason}")
                } else {
                    format!("cannot run on this node: the job {reason}")
                });
                match j.phase {
                    Phase::Queued => {
                        let j = self.jobs.remove(&job).expect("looked up above");
                        self.finish_unplaced(j, fin, now);
                    }
                    Phase::Starting(_) | Phase::Running(_) => {
                        let id = j.id.clone();
                        self.end_by_node(&id, &fin.reason, true, now);
                    }
                    Phase::Releasing { .. } => {}
                }
            }
            Action::Preempt { job, reason } => {
                // Daemon jobs are never preemptible, so the scheduler never
                // asks; a job it did ask for keeps running, and its room is
                // freed when it ends.
                tracing::error!(%job, %reason, "the scheduler asked to preempt a job that is not preemptible; it keeps running");
            }
        }
    }

    /// A queued job holds `placement` now: it starts.
    pub(crate) fn launch(&mut self, key: &str, placement: Placement, now: UnixMillis) {
        let Some(job) = self.jobs.get_mut(key) else {
            return;
        };
        job.phase = Phase::Starting(placement.clone());
        let order = LaunchOrder {
            job: job.id.clone(),
            request: job.request.clone(),
            placement,
            wall_limit_ms: job.wall_limit_ms,
            stop_grace_ms: self.cfg.stop_grace_ms,
            at: now,
        };
        self.out.push(Effect::Launch(Box::new(order)));
    }

    /// Records the end of a job that never started (it holds nothing).
    pub(crate) fn finish_unplaced(&mut self, job: Job, fin: Final, now: UnixMillis) {
        self.out.push(Effect::Finish {
            job: job.id.clone(),
            fin,
            at: now,
            release: None,
        });
        for (_, ticket) in job.pending {
            if let Some(ticket) = ticket {
                self.answer(ticket, Answer::Done);
            }
        }
    }

    fn answer(&mut self, ticket: Ticket, answer: Answer) {
        self.out.push(Effect::Answer { ticket, answer });
    }

    fn stop(&mut self, id: JobId, how: StopHow, stored: JobState, ticket: Ticket, now: UnixMillis) {
        let key = id.to_string();
        let Some(job) = self.jobs.get_mut(&key) else {
            let refusal = if stored.is_terminal() {
                Refusal::Finished { state: stored }
            } else {
                Refusal::Unknown
            };
            self.answer(ticket, Answer::Refused(refusal));
            return;
        };
        match &job.phase {
            Phase::Queued => {
                let job = self.jobs.remove(&key).expect("looked up above");
                self.finish_unplaced(job, Final::stopped("stopped before it started"), now);
                self.answer(ticket, Answer::Done);
                self.sched(SchedEvent::Cancel(key), now);
            }
            Phase::Starting(_) => job.pending.push((how, Some(ticket))),
            Phase::Running(_) => self.out.push(Effect::Signal {
                job: id,
                how,
                ticket: Some(ticket),
            }),
            Phase::Releasing { ended, .. } => {
                let state = ended.as_ref().map_or(stored, |(f, _)| f.state);
                self.answer(ticket, Answer::Refused(Refusal::Finished { state }));
            }
        }
    }

    fn delete(&mut self, id: JobId, stored: JobState, ticket: Ticket, now: UnixMillis) {
        let key = id.to_string();
        let Some(job) = self.jobs.get_mut(&key) else {
            if stored.is_terminal() {
                self.out.push(Effect::Delete { job: id, ticket });
            } else {
                self.answer(ticket, Answer::Refused(Refusal::Unknown));
            }
            return;
        };
        match &mut job.phase {
            Phase::Queued => {
                // It never ran: nothing is lost. Its end is recorded (and
                // announced to followers) before its record goes.
                let job = self.jobs.remove(&key).expect("looked up above");
                self.finish_unplaced(job, Final::stopped("deleted before it started"), now);
                self.out.push(Effect::Delete { job: id, ticket });
                self.sched(SchedEvent::Cancel(key), now);
            }
            Phase::Starting(_) | Phase::Running(_) => {
                self.answer(ticket, Answer::Refused(Refusal::Running));
            }
            Phase::Releasing { ended, .. } => {
                // The release goes on; its audit record says "deleted".
                *ended = None;
                self.out.push(Effect::Delete { job: id, ticket });
            }
        }
    }

    fn started(&mut self, id: &JobId) {
        let Some(job) = self.jobs.get_mut(id.as_str()) else {
            return;
        };
        let Phase::Starting(p) = &job.phase else {
            return;
        };
        job.phase = Phase::Running(p.clone());
        let mut signals = std::mem::take(&mut job.pending);
        if let Some(fin) = &job.ending {
            // Ended by the node while it was starting.
            let how = if fin.state == JobState::Failed {
                StopHow::Kill
            } else {
                StopHow::Stop {
                    grace_ms: self.cfg.stop_grace_ms,
                }
            };
            signals.insert(0, (how, None));
        }
        for (how, ticket) in signals {
            self.out.push(Effect::Signal {
                job: id.clone(),
                how,
                ticket,
            });
        }
    }

    fn start_failed(&mut self, id: &JobId, reason: String, recorded: bool, now: UnixMillis) {
        let key = id.as_str();
        if !matches!(
            self.jobs.get(key).map(|j| &j.phase),
            Some(Phase::Starting(_))
        ) {
            tracing::warn!(job = %id, "start failure of a job that is not starting; ignored");
            return;
        }
        if recorded {
            self.end(key, Final::failed(reason), now);
            return;
        }
        // Nothing of it reached the node: its room goes back at once.
        let job = self.jobs.remove(key).expect("looked up above");
        self.finish_unplaced(job, Final::failed(reason), now);
        self.sched(SchedEvent::Exited(key.to_owned()), now);
    }

    pub(crate) fn exited(&mut self, id: &JobId, exit: Exit, now: UnixMillis) {
        let Some(job) = self.jobs.get_mut(id.as_str()) else {
            tracing::warn!(job = %id, "exit of a job the engine does not track; ignored");
            return;
        };
        if !matches!(job.phase, Phase::Running(_)) {
            tracing::warn!(job = %id, "exit of a job that is not running; ignored");
            return;
        }
        let fin = match job.ending.take() {
            Some(fin) => fin,
            None => {
                let mut fin = exit.fin;
                if exit.timed_out {
                    if let Some(why) = &job.gpu_time_reason {
                        fin.reason = why.clone();
                    }
                }
                fin
            }
        };
        self.end(id.as_str(), fin, now);
    }

    /// A job that was starting or running has ended with `fin`: its end is
    /// recorded; its resources go back at once, or after its GPUs' release
    /// check.
    fn end(&mut self, key: &str, fin: Final, now: UnixMillis) {
        let Some(mut job) = self.jobs.remove(key) else {
            return;
        };
        let placement = match std::mem::replace(&mut job.phase, Phase::Queued) {
            Phase::Starting(p) | Phase::Running(p) => p,
            Phase::Queued => {
                self.finish_unplaced(job, fin, now);
                self.sched(SchedEvent::Cancel(key.to_owned()), now);
                return;
            }
            phase @ Phase::Releasing { .. } => {
                job.phase = phase;
                self.jobs.insert(key.to_owned(), job);
                return;
            }
        };
        let holds_gpus = !placement.units.is_empty();
        self.out.push(Effect::Finish {
            job: job.id.clone(),
            fin: fin.clone(),
            at: now,
            release: (!holds_gpus).then(|| placement.clone()),
        });
        for (_, ticket) in std::mem::take(&mut job.pending) {
            if let Some(ticket) = ticket {
                self.answer(ticket, Answer::Done);
            }
        }
        if holds_gpus {
            self.out.push(Effect::CheckRelease {
                job: job.id.clone(),
                placement: placement.clone(),
                ended_at: now,
            });
            job.phase = Phase::Releasing {
                placement,
                ended: Some((fin, now)),
            };
            self.jobs.insert(key.to_owned(), job);
        } else {
            self.sched(SchedEvent::Exited(key.to_owned()), now);
        }
    }

    /// Ends a job for a reason of the node's (see [`Event::EndJobs`]).
    pub(crate) fn end_by_node(&mut self, id: &JobId, reason: &str, failed: bool, now: UnixMillis) {
        let Some(job) = self.jobs.get_mut(id.as_str()) else {
            return;
        };
        let fin = if failed {
            Final::failed(reason)
        } else {
            Final::stopped(reason)
        };
        match &job.phase {
            Phase::Queued => self.end(id.as_str(), fin, now),
            Phase::Starting(_) => {
                job.ending.get_or_insert(fin);
            }
            Phase::Running(_) => {
                if job.ending.is_some() {
                    return;
                }
                tracing::warn!(job = %id, %reason, failed, "ending job");
                job.ending = Some(fin);
                let how = if failed {
                    StopHow::Kill
                } else {
                    StopHow::Stop {
                        grace_ms: self.cfg.stop_grace_ms,
                    }
                };
                self.out.push(Effect::Signal {
                    job: id.clone(),
                    how,
                    ticket: None,
                });
            }
            Phase::Releasing { .. } => {}
        }
    }

    fn release_checked(&mut self, id: &JobId, dirty: Vec<DirtyGpu>, now: UnixMillis) {
        let key = id.as_str();
        if !matches!(
            self.jobs.get(key).map(|j| &j.phase),
            Some(Phase::Releasing { .. })
        ) {
            tracing::warn!(job = %id, "release check of a job that is not being released; ignored");
            return;
        }
        let job = self.jobs.remove(key).expect("looked up above");
        let Phase::Releasing { placement, ended } = job.phase else {
            unreachable!("checked above");
        };
        let dirty_at: Vec<u32> = dirty.iter().map(|d| d.index).collect();
        self.out.push(Effect::Release {
            job: id.clone(),
            placement,
            dirty,
            ended,
        });
        // A dirty GPU is quarantined (DEGRADED) by the release: the
        // scheduler must not place anything on it when the job's units
        // come back below.
        for index in dirty_at {
            self.sched(
                SchedEvent::GpuChanged {
                    node: self.cfg.node.id,
                    index,
                    health: GpuHealth {
                        state: GpuState::Degraded,
                        paused: false,
                        temperature_c: None,
                    },
                },
                now,
            );
        }
        self.sched(SchedEvent::Exited(key.to_owned()), now);
    }
}
