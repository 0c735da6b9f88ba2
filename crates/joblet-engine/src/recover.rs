//! [`Event::Recovered`](crate::Event::Recovered): the engine rebuilt from
//! what a restarted daemon finds.
//!
//! - A RUNNING job whose shim is alive runs on, holding what the ledger
//!   says it holds; one whose shim recorded its exit meanwhile ends with
//!   that exit; one whose shim is gone is reaped and ends FAILED ("lost
//!   while daemon was down"); one no shim ever had (the daemon died while
//!   starting it) is queued again, its allocation released: nothing of it
//!   ran, so it never runs twice.
//! - A queued job waits again, in submission order (PENDING and PREEMPTED
//!   are recorded QUEUED again); one that can never run on this node any
//!   more (it asks for GPUs the node no longer has) fails with the reason.
//! - An allocation in the ledger whose job has ended (or whose record is
//!   gone) is released: GPUs through their release check first. This is
//!   how a GPU of a job that ended while the daemon was dying comes back.
//! - The scheduler learns every GPU's health before any waiting job is
//!   placed.

use std::collections::BTreeMap;

use joblet_core::{JobId, JobState, UnixMillis};
use joblet_sched::cluster::ClusterState;
use joblet_sched::model::{Event as SchedEvent, JobRequest, Placement};
use joblet_sched::scheduler::Scheduler;

use crate::effect::Effect;
use crate::engine::{EngineCore, Job, Phase};
use crate::event::{Recovery, ShimFact};
use crate::outcome::{Exit, Final};
use crate::request::Submission;

type LedgerEntry = (JobRequest, Placement, UnixMillis);

impl EngineCore {
    pub(crate) fn recover(&mut self, r: Recovery, now: UnixMillis) {
        if !self.jobs.is_empty() {
            tracing::error!("the engine was recovered after it had jobs; ignored");
            return;
        }
        let mut ledger: BTreeMap<String, LedgerEntry> =
            r.ledger.into_iter().map(|e| (e.1.job.clone(), e)).collect();
        let mut running: Vec<LedgerEntry> = Vec::new();
        let mut waiting: Vec<JobRequest> = Vec::new();
        let mut exits: Vec<(JobId, Exit)> = Vec::new();
        let mut releases: Vec<String> = Vec::new();
        let mut unplaceable: Vec<(Job, Final)> = Vec::new();
        for rj in r.jobs {
            let key = rj.submission.job.to_string();
            let entry = ledger.remove(&key);
            match rj.state {
                s if s.is_terminal() => {
                    if let Some((req, placement, started)) = entry {
                        running.push((req, placement.clone(), started));
                        let phase = Phase::Releasing {
                            placement,
                            ended: rj.ended,
                        };
                        self.jobs
                            .insert(key.clone(), Job::new(rj.submission, phase));
                        releases.push(key);
                    }
                }
                JobState::Running if rj.shim == ShimFact::NeverStarted => {
                    // Its allocation goes (nothing of it used what it
                    // held), and it waits again.
                    let id = rj.submission.job.clone();
                    self.out.push(Effect::Requeue {
                        job: id.clone(),
                        at: now,
                    });
                    if let Some((_, placement, _)) = entry {
                        self.out.push(Effect::Release {
                            job: id,
                            placement,
                            dirty: Vec::new(),
                            ended: Some((Final::requeued(), now)),
                        });
                    }
                    let job = Job::new(rj.submission, Phase::Queued);
                    waiting.push(job.request.clone());
                    self.jobs.insert(key, job);
                }
                JobState::Running => {
                    let (placement, started) = entry
                        .map(|(_, p, started)| (p, started))
                        .unwrap_or_else(|| (self.unrecorded(&rj.submission), now));
                    running.push((rj.submission.request.clone(), placement.clone(), started));
                    let id = rj.submission.job.clone();
                    self.jobs
                        .insert(key, Job::new(rj.submission, Phase::Running(placement)));
                    match rj.shim {
                        ShimFact::Alive => {}
                        ShimFact::Exited(exit) => exits.push((id, exit)),
                        ShimFact::Gone | ShimFact::NotStarted | ShimFact::NeverStarted => {
                            self.out.push(Effect::ReapLost { job: id.clone() });
                            exits.push((id, Exit::of(Final::lost(true))));
                        }
                        ShimFact::Vanished => {
                            self.out.push(Effect::ReapLost { job: id.clone() });
                            exits.push((id, Exit::of(Final::dir_removed())));
                        }
                    }
                }
                state => {
                    if let Some((_, p, _)) = entry {
                        // Allocations are recorded with RUNNING, in one
                        // commit: a queued job has none. Whatever this is,
                        // the job does not hold it.
                        tracing::error!(job = %key, ?p, "a job that never started has a recorded allocation; released");
                        self.out.push(Effect::Release {
                            job: rj.submission.job.clone(),
                            placement: p,
                            dirty: Vec::new(),
                            ended: None,
                        });
                    }
                    let job = Job::new(rj.submission, Phase::Queued);
                    if let Some(fin) = self.cannot_run_here(&job.request) {
                        unplaceable.push((job, fin));
                        continue;
                    }
                    if state != JobState::Queued {
                        self.out.push(Effect::Requeue {
                            job: job.id.clone(),
                            at: now,
                        });
                    }
                    waiting.push(job.request.clone());
                    self.jobs.insert(key, job);
                }
            }
        }
        // Allocations whose job record is gone (deleted while ending).
        for (key, (req, placement, started)) in ledger {
            let Ok(id) = JobId::parse(&key) else {
                tracing::error!(job = %key, "the allocation ledger names a malformed job id; ignored");
                continue;
            };
            running.push((req.clone(), placement.clone(), started));
            let sub = Submission {
                job: id,
                request: req,
                wall_limit_ms: None,
                gpu_time_reason: None,
                pinned: None,
            };
            let phase = Phase::Releasing {
                placement,
                ended: None,
            };
            self.jobs.insert(key.clone(), Job::new(sub, phase));
            releases.push(key);
        }

        self.restore_sched(running);
        for (index, health) in r.gpus {
            self.sched(
                SchedEvent::GpuChanged {
                    node: self.cfg.node.id,
                    index,
                    health,
                },
                now,
            );
        }
        for (job, fin) in unplaceable {
            self.out.push(Effect::Finish {
                job: job.id,
                fin,
                at: now,
                release: None,
            });
        }
        for (id, exit) in exits {
            self.exited(&id, exit, now);
        }
        for key in releases {
            self.begin_release(&key, now);
        }
        // Waiting jobs last, in submission order, once the scheduler knows
        // what is held and which GPUs are healthy.
        for req in waiting {
            if self.jobs.get(&req.job).is_some_and(|j| j.pinned.is_some()) {
                self.pin(req.job, now);
            } else {
                self.sched(SchedEvent::Submit(Box::new(req)), now);
            }
        }
        self.sched(SchedEvent::Tick, now);
        tracing::info!(
            tracked = self.jobs.len(),
            waiting = self.sched.waiting(),
            running = self.sched.running(),
            "engine recovered"
        );
    }

    /// The placement of a RUNNING job the ledger has nothing for: its CPU
    /// and memory on this node, no GPUs.
    fn unrecorded(&self, sub: &Submission) -> Placement {
        if sub.request.gpu_count > 0 {
            tracing::error!(job = %sub.job, "a running GPU job has no recorded allocation; its GPUs are not known");
        }
        let req = &sub.request;
        Placement {
            gpu_milli: 0,
            job: req.job.clone(),
            node: self.cfg.node.id,
            units: Vec::new(),
            memory_mb: 0,
            sharing: req.sharing,
            class: req.class,
            cpu_millis: req.cpu_millis,
            host_memory_mb: req.host_memory_mb,
        }
    }

    /// Why a job can no longer run on this node, as its final state.
    fn cannot_run_here(&self, req: &JobRequest) -> Option<Final> {
        if req.gpu_count > 0 && self.cfg.node.gpus.is_empty() {
            return Some(Final::failed("No GPUs available: the daemon restarted without GPU support (gpu.enabled or the sandbox is off)"));
        }
        let why = self.never_placeable(req)?;
        Some(Final::failed(format!(
            "cannot run on this node any more: the job {why}"
        )))
    }

    /// The scheduler with the recorded allocations, each checked against
    /// the node as it is now: one that no longer fits (a GPU vanished) is
    /// left out, and its job holds nothing the scheduler knows of.
    fn restore_sched(&mut self, mut running: Vec<LedgerEntry>) {
        let mut probe = ClusterState::new(vec![self.cfg.node.clone()]);
        running.retain(|(_, p, _)| match probe.allocate(p.clone()) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(job = %p.job, error = %e, "a recorded allocation does not fit the node as it is now; left out of scheduling");
                false
            }
        });
        let nodes = vec![self.cfg.node.clone()];
        self.sched = match Scheduler::restore(
            self.cfg.sched.clone(),
            nodes.clone(),
            running,
            Vec::new(),
        ) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot restore the scheduler from the ledger; scheduling from an empty one");
                Scheduler::new(self.cfg.sched.clone(), nodes)
            }
        };
    }

    /// Starts releasing what a finished job still holds.
    fn begin_release(&mut self, key: &str, now: UnixMillis) {
        let Some(job) = self.jobs.get(key) else {
            return;
        };
        let Phase::Releasing { placement, ended } = &job.phase else {
            return;
        };
        if placement.units.is_empty() {
            let job = self.jobs.remove(key).expect("looked up above");
            let Phase::Releasing { placement, ended } = job.phase else {
                unreachable!("checked above");
            };
            self.out.push(Effect::Release {
                job: job.id,
                placement,
                dirty: Vec::new(),
                ended,
            });
            self.sched(SchedEvent::Exited(key.to_owned()), now);
        } else {
            self.out.push(Effect::CheckRelease {
                job: job.id.clone(),
                placement: placement.clone(),
                ended_at: ended.as_ref().map_or(now, |(_, at)| *at),
            });
        }
    }
}
