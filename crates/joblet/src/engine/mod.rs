//! The daemon's engine: the thin async shell around `joblet-engine`'s pure
//! [`EngineCore`]. One loop owns the core; it turns what happens
//! (requests from the API, reports from the node agent, time) into the
//! core's events, carries out the effects the core returns, in order
//! ([`execute`]: the store, the node agent, replies), and feeds their
//! results back as events. Every state change is written to the store
//! before anyone is told about it.
//!
//! API handlers talk to it through [`EngineHandle`]; reads (status, list,
//! logs) go straight to the store and do not pass through the loop.
//!
//! - [`submit`]: admission of a new job (what could never run here is
//!   refused before it is recorded), its record, its submission;
//! - [`recover`]: what a restarted daemon finds, as the core's first event;
//! - [`execute`]: the effects, one function each;
//! - [`replies`]: requests waiting for the core's answer;
//! - [`unsaved`]: ends and releases a full state disk kept the store from
//!   committing, retried until it does (see [`crate::disk`]).

mod execute;
mod handle;
mod recover;
mod replies;
mod submit;
mod unsaved;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::{JobId, JobSpec};
use joblet_engine::{CoreConfig, EngineCore, Event, JobRules, StopHow};
use joblet_sched::model::SchedConfig;
use joblet_store::{JobRecord, Store, StoreError};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::agent::{AgentReport, NodeAgent};
use crate::disk::StateDisk;
use crate::service::ApiError;
use crate::state_dir::StateDir;
pub use handle::{Ended, EngineHandle};
use replies::{Pending, Replies};
use unsaved::Unsaved;

use crate::clock::now_ms;

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

/// How often the scheduler hears that time passed while jobs wait (rate
/// limits refill, backfill windows move).
const TICK: Duration = Duration::from_secs(1);

enum Msg {
    Submit {
        /// The id it must have (cluster mode: the run id the leader's
        /// assignment names); `None`: a new one.
        id: Option<JobId>,
        owner: String,
        spec: Box<JobSpec>,
        secrets: BTreeMap<String, String>,
        /// Uploaded files, staged; they become the job's work dir.
        work: Option<PathBuf>,
        reply: Reply<JobRecord>,
    },
    /// Would the node ever run these jobs? Nothing is recorded. The
    /// error names the index of the first it would not.
    Check {
        owner: String,
        specs: Vec<JobSpec>,
        reply: oneshot::Sender<Result<(), (usize, ApiError)>>,
    },
    Stop {
        id: JobId,
        grace: Option<Duration>,
        kill: bool,
        reply: Reply<JobRecord>,
    },
    Delete {
        id: JobId,
        reply: Reply<()>,
    },
    /// The daemon is stopping: the agent closes (warm sandboxes go), then
    /// the loop answers and ends.
    Shutdown(oneshot::Sender<()>),
}

/// What the engine needs from the daemon's configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How jobs are scheduled: policy, owner quotas, rate limits.
    pub sched: SchedConfig,
    /// `jobs.stop_grace_period`.
    pub stop_grace: Duration,
    /// The node's rules for jobs' requests (GPU sharing, GPU time).
    pub rules: JobRules,
    /// `jobs.state_reserve_mb` and `jobs.min_free_disk_mb` (see
    /// [`crate::disk`]).
    pub state_reserve_mb: u64,
    pub min_free_disk_mb: u64,
}

/// The engine's loop state.
pub struct Engine<A: NodeAgent> {
    core: EngineCore,
    store: Arc<Store>,
    dirs: StateDir,
    agent: A,
    cfg: EngineConfig,
    replies: Replies,
    /// The record of the job just submitted, while its submission is being
    /// handled: a job that starts at once needs not read it back.
    submitted: Option<JobRecord>,
    ended: broadcast::Sender<Ended>,
    /// The state disk and its reserve.
    disk: StateDisk,
    /// Ends and releases the store could not commit (the state disk is
    /// full): retried until they are.
    unsaved: Vec<Unsaved>,
}

impl<A: NodeAgent> Engine<A> {
    /// Recovers what a previous daemon left (jobs that ended meanwhile are
    /// finished, live ones watched again, queued ones queued again, what
    /// finished jobs still hold released), then runs the loop in a task.
    pub async fn start(
        store: Arc<Store>,
        dirs: StateDir,
        cfg: EngineConfig,
        agent: A,
    ) -> Result<EngineHandle, StoreError> {
        let (tx, rx) = mpsc::channel(1024);
        let (ended, _) = broadcast::channel(1024);
        let core = EngineCore::new(CoreConfig {
            sched: cfg.sched.clone(),
            node: agent.node(),
            stop_grace_ms: u64::try_from(cfg.stop_grace.as_millis()).unwrap_or(u64::MAX),
        });
        let mut disk = StateDisk::new(dirs.root(), cfg.state_reserve_mb, cfg.min_free_disk_mb);
        disk.ensure_reserve();
        let mut engine = Engine {
            core,
            store,
            dirs,
            agent,
            cfg,
            replies: Replies::default(),
            submitted: None,
            ended: ended.clone(),
            disk,
            unsaved: Vec::new(),
        };
        engine.recover().await?;
        tokio::spawn(engine.run(rx));
        Ok(EngineHandle { tx, ended })
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                m = rx.recv() => match m {
                    None => break,
                    Some(Msg::Shutdown(done)) => {
                        self.agent.close().await;
                        let _ = done.send(());
                        break;
                    }
                    Some(m) => self.on_msg(m),
                },
                r = self.agent.next_report() => match r {
                    Some(r) => self.on_report(r),
                    None => break,
                },
                _ = tick.tick() => {
                    if !self.unsaved.is_empty() {
                        self.save_unsaved();
                    } else if self.disk.reserve_missing() {
                        self.disk.ensure_reserve();
                    }
                    if self.core.scheduler().waiting() > 0 {
                        self.drive(Event::Tick);
                    }
                }
            }
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Submit {
                id,
                owner,
                spec,
                secrets,
                work,
                reply,
            } => {
                let _ = reply.send(self.submit(id, owner, *spec, secrets, work));
            }
            Msg::Check {
                owner,
                specs,
                reply,
            } => {
                let checked = specs
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, spec)| self.check(&owner, spec).map_err(|e| (i, e)));
                let _ = reply.send(checked);
            }
            Msg::Stop {
                id,
                grace,
                kill,
                reply,
            } => {
                let stored = match self.record(&id) {
                    Ok(r) => r.state,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                if let Some(state) = self.unsaved_end(&id) {
                    let _ = reply.send(Err(ApiError::WrongState {
                        id: id.to_string(),
                        state,
                        hint: "it has already finished (its end is recorded as soon as the state disk has room)",
                    }));
                    return;
                }
                let how = if kill {
                    StopHow::Kill
                } else {
                    let grace = grace.unwrap_or(self.cfg.stop_grace);
                    StopHow::Stop {
                        grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
                    }
                };
                let ticket = self.replies.add(Pending::Record {
                    id: id.clone(),
                    reply,
                });
                self.drive(Event::Stop {
                    job: id,
                    how,
                    stored,
                    ticket,
                });
            }
            Msg::Delete { id, reply } => {
                let stored = match self.record(&id) {
                    Ok(r) => r.state,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let ticket = self.replies.add(Pending::Delete {
                    id: id.clone(),
                    reply,
                });
                self.drive(Event::Delete {
                    job: id,
                    stored,
                    ticket,
                });
            }
            Msg::Shutdown(_) => unreachable!("handled by the loop"),
        }
    }

    fn on_report(&mut self, report: AgentReport) {
        match report {
            AgentReport::Exited { job, exit } => {
                self.drive(Event::Exited { job, exit });
                self.agent.job_event();
            }
            AgentReport::ReleaseChecked { job, dirty } => {
                self.drive(Event::ReleaseChecked { job, dirty })
            }
            AgentReport::Signalled {
                job,
                ticket,
                failed,
            } => {
                if let Some(ticket) = ticket {
                    self.signalled(&job, ticket, failed);
                }
            }
            AgentReport::GpuHealth(changes) => {
                for (index, health) in changes {
                    self.drive(Event::GpuChanged { index, health });
                }
            }
            AgentReport::EndJobs {
                jobs,
                reason,
                failed,
            } => self.drive(Event::EndJobs {
                jobs,
                reason,
                failed,
            }),
        }
    }

    fn record(&self, id: &JobId) -> Result<JobRecord, ApiError> {
        self.store
            .get(id)
            .map_err(crate::service::store_error)?
            .ok_or_else(|| ApiError::JobRef(joblet_core::PrefixError::NotFound(id.to_string())))
    }
}
