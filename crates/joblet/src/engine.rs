//! The daemon's one loop: it owns the scheduler core, feeds it events
//! (submissions, stop requests, shim exits) and carries out the actions it
//! returns (start a shim, record a transition). Every transition is written
//! to the store before anyone is told about it.
//!
//! API handlers talk to it through [`EngineHandle`]; reads (status, list,
//! logs) go straight to the store and do not pass through the loop.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::scheduler::{Action, Event, Scheduler};
use joblet_core::{JobId, JobSpec, JobState, UnixMillis};
use joblet_proto::ApiError;
use joblet_shim::{JobDir, ShimError, ShimExit, ShimSpec};
use joblet_store::{JobRecord, Store, TransitionExtra};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::outcome::{self, Final};
use crate::sandbox::NodeSandbox;
use crate::state_dir::StateDir;
use crate::{jobenv, store_error};

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

enum Msg {
    Submit {
        owner: String,
        spec: Box<JobSpec>,
        secrets: BTreeMap<String, String>,
        /// Uploaded files, staged; they become the job's work dir.
        work: Option<PathBuf>,
        reply: Reply<JobRecord>,
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
    ShimExited {
        id: JobId,
        result: Result<ShimExit, ShimError>,
    },
}

/// What the engine needs from the daemon's configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub max_running: usize,
    pub stop_grace: Duration,
    /// The program and arguments that start a shim for a job dir
    /// (`joblet shim --job-dir DIR`; the dir is appended).
    pub shim_program: PathBuf,
    pub shim_args: Vec<OsString>,
    /// `None`: jobs run unisolated (`sandbox.enabled: false`).
    pub sandbox: Option<NodeSandbox>,
}

/// Cheap to clone; every API handler holds one.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Msg>,
    ended: broadcast::Sender<JobId>,
}

impl EngineHandle {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| ApiError::ShuttingDown)?;
        rx.await.map_err(|_| ApiError::ShuttingDown)?
    }

    /// Records a validated job and schedules it; returns its record.
    /// `work`: a staged upload that becomes the job's working directory.
    pub async fn submit(
        &self,
        owner: String,
        spec: JobSpec,
        secrets: BTreeMap<String, String>,
        work: Option<PathBuf>,
    ) -> Result<JobRecord, ApiError> {
        self.call(|reply| Msg::Submit {
            owner,
            spec: Box::new(spec),
            secrets,
            work,
            reply,
        })
        .await
    }

    /// Stops (SIGTERM, then SIGKILL after `grace`) or kills a job; a job
    /// that has not started yet is taken off the queue.
    pub async fn stop(
        &self,
        id: JobId,
        grace: Option<Duration>,
        kill: bool,
    ) -> Result<JobRecord, ApiError> {
        self.call(|reply| Msg::Stop {
            id,
            grace,
            kill,
            reply,
        })
        .await
    }

    pub async fn delete(&self, id: JobId) -> Result<(), ApiError> {
        self.call(|reply| Msg::Delete { id, reply }).await
    }

    /// Announces every job that reaches a final state (log followers wait on it).
    pub fn subscribe_ended(&self) -> broadcast::Receiver<JobId> {
        self.ended.subscribe()
    }
}

pub fn now_ms() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub struct Engine {
    store: Arc<Store>,
    dirs: StateDir,
    cfg: EngineConfig,
    sched: Scheduler,
    tx: mpsc::Sender<Msg>,
    ended: broadcast::Sender<JobId>,
}

impl Engine {
    /// Recovers what a previous daemon left (reattaching to live shims,
    /// failing jobs whose shim is gone, re-queueing queued jobs), then runs
    /// the loop in a task.
    pub fn start(
        store: Arc<Store>,
        dirs: StateDir,
        cfg: EngineConfig,
    ) -> Result<EngineHandle, ApiError> {
        let (tx, rx) = mpsc::channel(1024);
        let (ended, _) = broadcast::channel(1024);
        let mut engine = Engine {
            store,
            dirs,
            sched: Scheduler::new(cfg.max_running),
            cfg,
            tx: tx.clone(),
            ended: ended.clone(),
        };
        engine.recover()?;
        tokio::spawn(engine.run(rx));
        Ok(EngineHandle { tx, ended })
    }

    fn recover(&mut self) -> Result<(), ApiError> {
        let now = now_ms();
        let mut running = Vec::new();
        let mut queued = Vec::new();
        let unfinished = self.store.unfinished().map_err(store_error)?;
        let (mut reattached, mut finished, mut lost) = (0, 0, 0);
        for rec in unfinished {
            let id = rec.id.clone();
            match rec.state {
                JobState::Pending | JobState::Preempted => {
                    self.transition(&id, JobState::Queued, now, "re-queued after daemon restart")?;
                    queued.push(id);
                }
                JobState::Queued => queued.push(id),
                JobState::Running => {
                    let dir = JobDir::new(self.dirs.job(&id));
                    match joblet_shim::reattach(&dir) {
                        Ok(Some(handle)) => {
                            tracing::info!(job = %id, shim_pid = handle.pid(), "reattached to running job");
                            self.watch(id.clone(), handle);
                            running.push(id);
                            reattached += 1;
                        }
                        Ok(None) => match joblet_shim::read_exit(&dir) {
                            Ok(Some(exit)) => {
                                self.finish(&id, outcome::from_shim(&exit), now);
                                finished += 1;
                            }
                            Ok(None) | Err(_) => {
                                self.reap_lost(&id);
                                self.finish(&id, outcome::lost(true), now);
                                lost += 1;
                            }
                        },
                        Err(e) => {
                            tracing::error!(job = %id, error = %e, "cannot check the job's shim; marking it lost");
                            self.reap_lost(&id);
                            self.finish(&id, outcome::lost(true), now);
                            lost += 1;
                        }
                    }
                }
                s if s.is_terminal() => {}
                s => {
                    tracing::warn!(job = %id, state = %s, "unexpected unfinished state at recovery")
                }
            }
        }
        tracing::info!(
            reattached,
            finished_while_down = finished,
            lost,
            queued = queued.len(),
            "recovered jobs"
        );
        self.sched = Scheduler::restore(self.cfg.max_running, running, queued);
        Ok(())
    }

    /// A job whose shim vanished may still have processes: in the sandbox,
    /// its cgroup holds them all; kill them and remove it.
    fn reap_lost(&self, id: &JobId) {
        if let Some(sb) = &self.cfg.sandbox {
            if let Err(e) = sb.destroy_job_cgroup(id) {
                tracing::error!(job = %id, error = %e, "cannot clean up the cgroup of a lost job");
            }
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        // Start whatever the restored queue allows.
        let actions = self.sched.handle(Event::Tick, now_ms());
        self.apply(actions);
        while let Some(msg) = rx.recv().await {
            match msg {
                Msg::Submit {
                    owner,
                    spec,
                    secrets,
                    work,
                    reply,
                } => {
                    // The job is durably QUEUED: acknowledge before starting
                    // it, so submitters never wait for a shim to fork.
                    match self.submit(owner, *spec, secrets, work) {
                        Ok((rec, actions)) => {
                            let _ = reply.send(Ok(rec));
                            self.apply(actions);
                        }
                        Err(e) => {
                            let _ = reply.send(Err(e));
                        }
                    }
                }
                Msg::Stop {
                    id,
                    grace,
                    kill,
                    reply,
                } => self.stop(id, grace, kill, reply),
                Msg::Delete { id, reply } => {
                    let _ = reply.send(self.delete(&id));
                }
                Msg::ShimExited { id, result } => {
                    let fin = match result {
                        Ok(exit) => outcome::from_shim(&exit),
                        Err(e) => {
                            tracing::error!(job = %id, error = %e, "job's shim ended without an exit record");
                            self.reap_lost(&id);
                            outcome::lost(false)
                        }
                    };
                    self.finish(&id, fin, now_ms());
                    let actions = self.sched.handle(Event::Exited { job: id }, now_ms());
                    self.apply(actions);
                }
            }
        }
    }

    fn submit(
        &mut self,
        owner: String,
        spec: JobSpec,
        secrets: BTreeMap<String, String>,
        work: Option<PathBuf>,
    ) -> Result<(JobRecord, Vec<Action>), ApiError> {
        let now = now_ms();
        let id = JobId::parse(&uuid::Uuid::new_v4().to_string())?;
        let dir = self.dirs.job(&id);
        if let Some(staged) = work {
            // Uploads move in whole before the job exists, so a recorded job
            // always has all its files.
            let moved =
                std::fs::create_dir(&dir).and_then(|()| std::fs::rename(&staged, dir.join("work")));
            if let Err(e) = moved {
                let _ = std::fs::remove_dir_all(&staged);
                let _ = std::fs::remove_dir_all(&dir);
                return Err(ApiError::Internal(format!(
                    "cannot move the upload into {}: {e}",
                    dir.display()
                )));
            }
        }
        if let Err(e) = self.store.create_job(&id, &owner, &spec, &secrets, now) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(store_error(e));
        }
        let rec = self.transition(&id, JobState::Queued, now, "")?;
        tracing::info!(job = %id, %owner, command = %spec.command, "job queued");
        let actions = self.sched.handle(Event::Submit { job: id }, now);
        Ok((rec, actions))
    }

    /// Carries out scheduler actions; failures to start feed back as exits.
    fn apply(&mut self, actions: Vec<Action>) {
        let mut work: VecDeque<Action> = actions.into();
        while let Some(action) = work.pop_front() {
            match action {
                Action::Start { job } => {
                    if let Err(fin) = self.start_job(&job) {
                        self.finish(&job, fin, now_ms());
                        work.extend(self.sched.handle(Event::Exited { job }, now_ms()));
                    }
                }
                Action::Dequeued { job } => {
                    self.finish(
                        &job,
                        Final {
                            state: JobState::Stopped,
                            exit_code: None,
                            reason: "stopped before it started".into(),
                        },
                        now_ms(),
                    );
                }
            }
        }
    }

    /// RUNNING is recorded before the shim is launched: a daemon that dies in
    /// between leaves a RUNNING job without a shim, which the next start
    /// reports as lost, never a job that runs twice.
    fn start_job(&mut self, id: &JobId) -> Result<(), Final> {
        let fail = |reason: String| Final {
            state: JobState::Failed,
            exit_code: None,
            reason,
        };
        let rec = self
            .store
            .get(id)
            .map_err(|e| fail(format!("cannot read job record: {e}")))?
            .ok_or_else(|| fail("job record vanished".into()))?;
        let secrets = self
            .store
            .take_secrets(id)
            .map_err(|e| fail(format!("cannot unseal the job's secret env: {e}")))?;
        let dir = self.dirs.job(id);
        let workdir = dir.join("work");
        std::fs::create_dir_all(&workdir).map_err(|e| {
            fail(format!(
                "cannot create job directory {}: {e}",
                workdir.display()
            ))
        })?;
        // In the sandbox the job sees its work dir as /work and runs as the
        // node's job user, who must own it (uploads included).
        let (home, runner) = match &self.cfg.sandbox {
            Some(sb) => {
                crate::uploads::chown_tree(&workdir, sb.uid, sb.gid).map_err(|e| {
                    fail(format!(
                        "cannot give {} to uid {}: {e}",
                        workdir.display(),
                        sb.uid
                    ))
                })?;
                let job = sb.job(id, &rec.spec, &workdir);
                let value = serde_json::to_value(&job)
                    .map_err(|e| fail(format!("cannot encode the sandbox settings: {e}")))?;
                (PathBuf::from("/work"), Some(value))
            }
            None => (workdir.clone(), None),
        };
        let spec = ShimSpec {
            job_id: id.to_string(),
            command: rec.spec.command.clone(),
            args: rec.spec.args.clone(),
            env: jobenv::build(id, &rec.spec, &secrets, &home),
            cwd: workdir,
            timeout_ms: rec.spec.timeout.map(|t| t.as_millis() as u64),
            stop_grace_ms: self.cfg.stop_grace.as_millis() as u64,
            runner,
        };
        self.transition(id, JobState::Running, now_ms(), "")
            .map_err(|e| fail(e.to_string()))?;
        let mut args = self.cfg.shim_args.clone();
        args.push(dir.clone().into_os_string());
        match joblet_shim::launch(&self.cfg.shim_program, &args, &JobDir::new(dir), &spec) {
            Ok(handle) => {
                tracing::info!(job = %id, shim_pid = handle.pid(), "job started");
                self.watch(id.clone(), handle);
                Ok(())
            }
            Err(e) => Err(fail(format!("could not start the job's shim: {e}"))),
        }
    }

    fn watch(&self, id: JobId, handle: joblet_shim::ShimHandle) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = handle.wait().await;
            let _ = tx.send(Msg::ShimExited { id, result }).await;
        });
    }

    fn stop(&mut self, id: JobId, grace: Option<Duration>, kill: bool, reply: Reply<JobRecord>) {
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
                    let sent = if kill {
                        joblet_shim::request_kill(&dir).await
                    } else {
                        joblet_shim::request_stop(&dir, grace).await
                    };
                    let res = match sent {
                        Ok(()) => Ok(rec),
                        // The job ended between our read and the request: nothing left to stop.
                        Err(e @ ShimError::NotRunning { .. }) => {
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
            _ => {
                let actions = self
                    .sched
                    .handle(Event::Cancel { job: id.clone() }, now_ms());
                self.apply(actions);
                let _ = reply.send(self.record(&id));
            }
        }
    }

    fn delete(&mut self, id: &JobId) -> Result<(), ApiError> {
        let rec = self.record(id)?;
        if !rec.state.is_terminal() {
            return Err(ApiError::WrongState {
                id: id.to_string(),
                state: rec.state,
                hint: "stop it first with `rnx job stop`, then delete it",
            });
        }
        self.store.delete(id).map_err(store_error)?;
        let dir = self.dirs.job(id);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(job = %id, dir = %dir.display(), error = %e, "job deleted but its directory could not be removed");
            }
        }
        tracing::info!(job = %id, "job deleted");
        Ok(())
    }

    fn transition(
        &self,
        id: &JobId,
        to: JobState,
        now: UnixMillis,
        reason: &str,
    ) -> Result<JobRecord, ApiError> {
        let extra = TransitionExtra {
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            ..Default::default()
        };
        self.store
            .transition(id, to, now, extra)
            .map_err(store_error)
    }

    /// Records a final state and tells log followers.
    fn finish(&self, id: &JobId, fin: Final, now: UnixMillis) {
        let extra = TransitionExtra {
            reason: Some(fin.reason.clone()),
            exit_code: fin.exit_code,
            ..Default::default()
        };
        match self.store.transition(id, fin.state, now, extra) {
            Ok(_) => {
                tracing::info!(job = %id, state = %fin.state, exit_code = ?fin.exit_code, reason = %fin.reason, "job finished")
            }
            Err(e) => tracing::error!(job = %id, error = %e, "cannot record the job's final state"),
        }
        let _ = self.ended.send(id.clone());
    }

    fn record(&self, id: &JobId) -> Result<JobRecord, ApiError> {
        self.store
            .get(id)
            .map_err(store_error)?
            .ok_or_else(|| ApiError::JobRef(joblet_core::PrefixError::NotFound(id.to_string())))
    }
}
