//! The daemon's one loop: it owns the schedulers (the slot scheduler for
//! CPU jobs, `joblet-sched` for GPU jobs through [`GpuJobs`]), feeds them
//! events (submissions, stop requests, shim exits, GPU health changes,
//! finished release checks) and carries out the actions they return (start
//! a shim, record a transition). Every transition is written to the store
//! before anyone is told about it.
//!
//! API handlers talk to it through [`EngineHandle`]; reads (status, list,
//! logs) go straight to the store and do not pass through the loop.

mod gpu;
mod handle;
mod stop;
mod warm;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::gpu::GpuUpdate;
use joblet_core::scheduler::{Action, Event, Scheduler};
use joblet_core::{JobId, JobSpec, JobState, UnixMillis};
use joblet_shim::{JobDir, ShimError, ShimExit, ShimHandle, ShimSpec, WarmShim};
use joblet_store::{JobRecord, Store, TransitionExtra};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::gpu::jobs::{Allocated, GpuAction, GpuJobs};
use crate::jobenv;
use crate::outcome::{self, Final};
use crate::sandbox::NodeSandbox;
use crate::service::{store_error, ApiError};
use crate::state_dir::StateDir;
pub use handle::{Ended, EngineHandle};
use warm::reap;

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

/// How long no job must have started or ended before the pool of warm
/// sandboxes is refilled (see [`Engine::run`]); submissions closer than
/// this make a burst, during which it is refilled at once.
const WARM_REFILL_QUIET: Duration = Duration::from_millis(20);

/// How long a stop request waits for a starting shim to listen on its
/// control socket, and how often it asks meanwhile.
const STOP_RETRY_FOR: Duration = Duration::from_secs(10);
const STOP_RETRY_EVERY: Duration = Duration::from_millis(20);

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
    /// A GPU job's release check finished: `dirty` GPUs are quarantined.
    Released {
        id: JobId,
        dirty: Vec<(String, String)>,
    },
    /// A warm shim's launch of that flavour ended (`None`: it failed, and
    /// was logged).
    Warm(warm::Flavour, Option<(JobId, WarmShim)>),
    /// The build of the warm shim launched for that job id is over: its
    /// sandbox is built (`true`), or it could not be, or the shim died, or
    /// the build is past `warm::BUILD_WAIT` (`false`).
    WarmBuilt(JobId, bool),
    /// The daemon is stopping: tear the warm sandboxes down, then answer
    /// and end the loop.
    Shutdown(tokio::sync::oneshot::Sender<()>),
}

/// What the engine needs from the daemon's configuration.
#[derive(Debug)]
pub struct EngineConfig {
    pub max_running: usize,
    pub stop_grace: Duration,
    /// The program and arguments that start a shim for a job dir
    /// (`joblet-shim --job-dir DIR`; the dir is appended).
    pub shim_program: PathBuf,
    pub shim_args: Vec<OsString>,
    /// `sandbox.warm_pool`: warm sandboxes to keep (with a sandbox only).
    pub warm_pool: usize,
    /// `gpu.warm_pool`: GPU-ready warm sandboxes to keep besides them
    /// (with GPU jobs only).
    pub gpu_warm_pool: usize,
    /// `None`: jobs run unisolated (`sandbox.enabled: false`).
    pub sandbox: Option<NodeSandbox>,
    /// GPU jobs (`gpu.enabled` with a sandbox), with the pool's updates.
    pub gpu: Option<(
        GpuJobs,
        tokio::sync::mpsc::UnboundedReceiver<Vec<GpuUpdate>>,
    )>,
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
    gpu: Option<GpuJobs>,
    /// How jobs ended by the node (GPU failure, quota, GPU time) are
    /// recorded, whatever their shim reports.
    overrides: HashMap<JobId, Final>,
    /// Jobs whose wall limit is their GPU time budget: the reason to give
    /// if they time out.
    gpu_time_reason: HashMap<JobId, String>,
    /// GPU decisions made during recovery, carried out when the loop starts.
    pending_gpu: Vec<GpuAction>,
    /// The record of the job just submitted, while its submission is being
    /// handled: a job that starts at once needs not read it back.
    submitted: Option<JobRecord>,
    /// Sandboxes built ahead of their jobs.
    warm: warm::WarmPool,
    tx: mpsc::Sender<Msg>,
    ended: broadcast::Sender<Ended>,
}

impl Engine {
    /// Recovers what a previous daemon left (reattaching to live shims,
    /// failing jobs whose shim is gone, re-queueing queued jobs), then runs
    /// the loop in a task.
    pub fn start(
        store: Arc<Store>,
        dirs: StateDir,
        mut cfg: EngineConfig,
    ) -> Result<EngineHandle, ApiError> {
        let (tx, rx) = mpsc::channel(1024);
        let (ended, _) = broadcast::channel(1024);
        let (gpu, gpu_rx) = match cfg.gpu.take() {
            Some((g, r)) => (Some(g), Some(r)),
            None => (None, None),
        };
        let warm = match (&cfg.sandbox, &gpu) {
            (None, _) => warm::WarmPool::new(0, 0),
            (Some(_), None) => warm::WarmPool::new(cfg.warm_pool, 0),
            (Some(_), Some(_)) => warm::WarmPool::new(cfg.warm_pool, cfg.gpu_warm_pool),
        };
        let mut engine = Engine {
            store,
            dirs,
            sched: Scheduler::new(cfg.max_running),
            gpu,
            overrides: HashMap::new(),
            gpu_time_reason: HashMap::new(),
            pending_gpu: Vec::new(),
            submitted: None,
            warm,
            cfg,
            tx: tx.clone(),
            ended: ended.clone(),
        };
        engine.recover()?;
        tokio::spawn(engine.run(rx, gpu_rx));
        Ok(EngineHandle { tx, ended })
    }

    fn recover(&mut self) -> Result<(), ApiError> {
        let now = now_ms();
        let mut running = Vec::new();
        let mut queued = Vec::new();
        let unfinished = self.store.unfinished().map_err(store_error)?;
        let (mut reattached, mut finished, mut lost) = (0, 0, 0);
        let mut gpu_queued = Vec::new();
        let mut to_release = Vec::new();
        for rec in unfinished {
            let id = rec.id.clone();
            let is_gpu = rec.spec.resources.gpu_count > 0;
            if is_gpu && self.gpu.is_none() && !rec.state.is_terminal() {
                self.finish(&id, Final { state: JobState::Failed, exit_code: None, reason: "No GPUs available: the daemon restarted without GPU support (gpu.enabled or the sandbox is off)".into() }, now);
                continue;
            }
            match rec.state {
                JobState::Pending | JobState::Preempted | JobState::Queued if is_gpu => {
                    if rec.state != JobState::Queued {
                        self.transition(
                            &id,
                            JobState::Queued,
                            now,
                            "re-queued after daemon restart",
                        )?;
                    }
                    gpu_queued.push(rec);
                }
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
                            if is_gpu {
                                if let Some(g) = &mut self.gpu {
                                    g.reattach(id.as_str());
                                }
                            } else {
                                running.push(id);
                            }
                            reattached += 1;
                        }
                        Ok(None) => match joblet_shim::read_exit(&dir) {
                            Ok(Some(exit)) => {
                                self.finish(&id, outcome::from_shim(&exit), now);
                                finished += 1;
                                if is_gpu {
                                    to_release.push(id.clone());
                                }
                            }
                            Ok(None) | Err(_) => {
                                self.reap_lost(&id);
                                self.finish(&id, outcome::lost(true), now);
                                lost += 1;
                                if is_gpu {
                                    to_release.push(id.clone());
                                }
                            }
                        },
                        Err(e) => {
                            tracing::error!(job = %id, error = %e, "cannot check the job's shim; marking it lost");
                            self.reap_lost(&id);
                            self.finish(&id, outcome::lost(true), now);
                            lost += 1;
                            if is_gpu {
                                to_release.push(id.clone());
                            }
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
        if let Some(g) = &mut self.gpu {
            g.recovered();
            // Allocations of jobs that ended while the daemon was down (or
            // between their end and their release) are released now.
            for job in g.allocated_jobs() {
                if let Ok(id) = JobId::parse(&job) {
                    let done = self
                        .store
                        .get(&id)
                        .ok()
                        .flatten()
                        .is_none_or(|r| r.state.is_terminal());
                    if done && !to_release.contains(&id) {
                        to_release.push(id);
                    }
                }
            }
            for rec in gpu_queued {
                let req = g.request(rec.id.as_str(), &rec.owner, &rec.spec);
                let actions = g.handle(joblet_sched::model::Event::Submit(Box::new(req)), now);
                self.pending_gpu.extend(actions);
            }
        }
        for id in to_release {
            self.begin_release(&id, None);
        }
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

    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Msg>,
        mut gpu_rx: Option<tokio::sync::mpsc::UnboundedReceiver<Vec<GpuUpdate>>>,
    ) {
        // Start whatever the restored queues allow.
        let actions = self.sched.handle(Event::Tick, now_ms());
        self.apply(actions);
        let pending = std::mem::take(&mut self.pending_gpu);
        self.apply_gpu(pending);
        if let Some(g) = &mut self.gpu {
            let actions = g.handle(joblet_sched::model::Event::Tick, now_ms());
            self.apply_gpu(actions);
        }
        // The pool is built at start-up, and refilled once no job has
        // started or ended for `WARM_REFILL_QUIET`: building a sandbox
        // takes the same kernel locks (mounts, cgroups, namespaces) as a
        // job starting or ending beside it, which would wait for it. A
        // flavour with none left, or a burst of submissions, is refilled
        // at once (`WarmPool::refill_now`). Sandboxes are built one at a
        // time (`refill_warm`).
        self.refill_warm();
        let mut refill_at: Option<tokio::time::Instant> = None;
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break,
                },
                () = async {
                    match refill_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {
                    refill_at = None;
                    self.refill_warm();
                    continue;
                }
                Some(updates) = async {
                    match gpu_rx.as_mut() {
                        Some(r) => r.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.gpu_updates(updates);
                    continue;
                }
            };
            let job_event = matches!(
                msg,
                Msg::Submit { .. } | Msg::ShimExited { .. } | Msg::Released { .. }
            );
            if matches!(msg, Msg::Submit { .. }) {
                self.warm.submitted(std::time::Instant::now());
            }
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
                            self.submitted = Some(rec.clone());
                            let _ = reply.send(Ok(rec));
                            self.apply(actions);
                            let gpu = std::mem::take(&mut self.pending_gpu);
                            self.apply_gpu(gpu);
                            self.submitted = None;
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
                        Ok(exit) => {
                            let mut fin = outcome::from_shim(&exit);
                            if exit.outcome == joblet_shim::Outcome::TimedOut {
                                if let Some(why) = self.gpu_time_reason.get(&id) {
                                    fin.reason = why.clone();
                                }
                            }
                            fin
                        }
                        Err(e) => {
                            tracing::error!(job = %id, error = %e, "job's shim ended without an exit record");
                            self.reap_lost(&id);
                            outcome::lost(false)
                        }
                    };
                    self.gpu_time_reason.remove(&id);
                    let fin = self.overrides.remove(&id).unwrap_or(fin);
                    let ended = now_ms();
                    self.finish(&id, fin, ended);
                    if self.gpu.as_ref().is_some_and(|g| g.holds(id.as_str())) {
                        self.begin_release(&id, Some(ended));
                    } else {
                        let actions = self.sched.handle(Event::Exited { job: id }, now_ms());
                        self.apply(actions);
                    }
                }
                Msg::Released { id, dirty } => self.released(&id, &dirty),
                Msg::Warm(flavour, shim) => {
                    if let Some(extra) = self.warm.landed(flavour, shim) {
                        reap(extra.discard());
                    }
                }
                Msg::WarmBuilt(id, built) => {
                    self.warm.built(&id, built);
                    // The next build, one at a time (see `refill_warm`).
                    self.refill_when(&mut refill_at);
                }
                Msg::Shutdown(done) => {
                    self.close_warm(&mut rx).await;
                    let _ = done.send(());
                    break;
                }
            }
            if job_event {
                self.refill_when(&mut refill_at);
            }
        }
    }

    /// After a job event or a finished build: the pool's next build now
    /// (see [`warm::WarmPool::refill_now`]) or once the node has been
    /// quiet for `WARM_REFILL_QUIET` (`refill_at`).
    fn refill_when(&mut self, refill_at: &mut Option<tokio::time::Instant>) {
        if self.warm.wanted() == 0 {
            return;
        }
        if self.warm.refill_now() {
            self.refill_warm();
        } else {
            *refill_at = Some(tokio::time::Instant::now() + WARM_REFILL_QUIET);
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
        // A warm sandbox's id when one is idle: the job then starts in it.
        let flavour = if spec.resources.gpu_count > 0 {
            warm::Flavour::Gpu
        } else {
            warm::Flavour::Cpu
        };
        let id = match self.warm.reserve(flavour) {
            Some(id) => id,
            None => JobId::parse(&uuid::Uuid::new_v4().to_string())?,
        };
        let dir = self.dirs.job(&id);
        if let Some(staged) = work {
            // Uploads move in whole before the job exists, so a recorded job
            // always has all its files. A warm shim's directory exists
            // already, with an empty `work` the rename replaces.
            let moved = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::rename(&staged, JobDir::new(&dir).work_path()));
            if let Err(e) = moved {
                let _ = std::fs::remove_dir_all(&staged);
                self.abandon_submit(&id);
                return Err(ApiError::Internal(format!(
                    "cannot move the upload into {}: {e}",
                    dir.display()
                )));
            }
        }
        let gpu_request = if spec.resources.gpu_count > 0 {
            let Some(g) = &self.gpu else {
                self.abandon_submit(&id);
                return Err(ApiError::GpuRequest("No GPUs available: GPU jobs are off on this node (they need gpu.enabled: true and sandbox.enabled: true); run the job without --gpu or ask an admin".into()));
            };
            let req = g.request(id.as_str(), &owner, &spec);
            if let Err(e) = g.check(&req, &spec) {
                self.abandon_submit(&id);
                return Err(e);
            }
            Some(req)
        } else {
            None
        };
        // Recorded and QUEUED in one commit, before it is acknowledged.
        let rec = match self.store.create_job_and_transition(
            &id,
            &owner,
            &spec,
            &secrets,
            now,
            (JobState::Queued, TransitionExtra::default()),
        ) {
            Ok(rec) => rec,
            Err(e) => {
                self.abandon_submit(&id);
                return Err(store_error(e));
            }
        };
        tracing::info!(job = %id, %owner, command = %spec.command, gpus = spec.resources.gpu_count, "job queued");
        if let (Some(req), Some(g)) = (gpu_request, self.gpu.as_mut()) {
            let actions = g.handle(joblet_sched::model::Event::Submit(Box::new(req)), now);
            self.pending_gpu.extend(actions);
            return Ok((rec, Vec::new()));
        }
        let actions = self.sched.handle(Event::Submit { job: id }, now);
        Ok((rec, actions))
    }

    /// Carries out scheduler actions; failures to start feed back as exits.
    fn apply(&mut self, actions: Vec<Action>) {
        let mut work: VecDeque<Action> = actions.into();
        while let Some(action) = work.pop_front() {
            match action {
                Action::Start { job } => {
                    if let Err(fin) = self.start_job(&job, None) {
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

    /// RUNNING is recorded before the shim is launched (a GPU job's with its
    /// allocation, `gpus`): a daemon that dies in between leaves a RUNNING
    /// job without a shim, which the next start reports as lost, never a
    /// job that runs twice.
    fn start_job(&mut self, id: &JobId, gpus: Option<&Allocated>) -> Result<(), Final> {
        let fail = |reason: String| Final {
            state: JobState::Failed,
            exit_code: None,
            reason,
        };
        // Just submitted (as it was committed), or read back.
        let rec = match self.submitted.take().filter(|r| &r.id == id) {
            Some(rec) => rec,
            None => self
                .store
                .get(id)
                .map_err(|e| fail(format!("cannot read job record: {e}")))?
                .ok_or_else(|| fail("job record vanished".into()))?,
        };
        // A job without secret variables has nothing sealed: no transaction.
        let secrets = if rec.spec.secret_env_keys.is_empty() {
            BTreeMap::new()
        } else {
            self.store
                .take_secrets(id)
                .map_err(|e| fail(format!("cannot unseal the job's secret env: {e}")))?
        };
        let dir = self.dirs.job(id);
        let workdir = JobDir::new(&dir).work_path();
        std::fs::create_dir_all(&workdir).map_err(|e| {
            fail(format!(
                "cannot create job directory {}: {e}",
                workdir.display()
            ))
        })?;
        // In the sandbox the job sees its work dir as /work and runs as the
        // node's job user, who must own it (uploads included).
        let mut gpu_env = None;
        let (home, runner) = match &self.cfg.sandbox {
            Some(sb) => {
                crate::uploads::chown_tree(&workdir, sb.uid, sb.gid).map_err(|e| {
                    fail(format!(
                        "cannot give {} to uid {}: {e}",
                        workdir.display(),
                        sb.uid
                    ))
                })?;
                let gpu_part = match (&self.gpu, gpus) {
                    (Some(g), Some(a)) => crate::gpu::setup::gpu_job(
                        &g.settings,
                        &rec.spec,
                        &a.gpus,
                        a.quota_mb,
                        &dir,
                    )
                    .map_err(fail)?,
                    (Some(g), None) => crate::gpu::setup::cpu_job(&g.settings),
                    (None, _) => Default::default(),
                };
                gpu_env = gpu_part.env.clone();
                let job = sb.job(id, &rec.spec, &workdir, gpu_part);
                let value = serde_json::to_value(&job)
                    .map_err(|e| fail(format!("cannot encode the sandbox settings: {e}")))?;
                (PathBuf::from("/work"), Some(value))
            }
            None => (workdir.clone(), None),
        };
        let mut env = jobenv::build(id, &rec.spec, &secrets, &home);
        if let Some(g) = &gpu_env {
            crate::gpu::setup::merge_env(&mut env, g);
        }
        let mut timeout = rec.spec.timeout;
        if let (Some(g), Some(_)) = (&self.gpu, gpus) {
            timeout = g.wall_limit(&rec.spec);
            if let Some((budget, wall)) = g.gpu_time_wall(&rec.spec) {
                if rec.spec.timeout.is_none_or(|t| wall < t) {
                    self.gpu_time_reason.insert(
                        id.clone(),
                        format!(
                            "GPU time limit reached: {} of GPU time ({} GPUs × {})",
                            humantime::format_duration(budget),
                            rec.spec.resources.gpu_count,
                            humantime::format_duration(wall)
                        ),
                    );
                }
            }
        }
        let spec = ShimSpec {
            job_id: id.to_string(),
            command: rec.spec.command.clone(),
            args: rec.spec.args.clone(),
            env,
            cwd: workdir,
            timeout_ms: timeout.map(|t| t.as_millis() as u64),
            stop_grace_ms: self.cfg.stop_grace.as_millis() as u64,
            runner,
        };
        // A GPU job's allocation recorded RUNNING with it.
        if gpus.is_none() {
            self.store
                .transition_of(id, JobState::Running, now_ms(), TransitionExtra::default())
                .map_err(|e| fail(store_error(e).to_string()))?;
        }
        // The sandbox it started in: a warm shim's, or a fresh shim's.
        let launched = match self.warm.claim(id) {
            Some(shim) => match shim.claim(&spec) {
                Ok(handle) => {
                    // The claim woke the shim, likely on this CPU (a pipe's
                    // wake-up is a "sync" one), where this SCHED_BATCH
                    // thread would keep it waiting until it sleeps: through
                    // the job's bookkeeping and the client's answer, none of
                    // which the job's start needs (~0.1 ms). Yielding lets
                    // the shim start the job first.
                    std::thread::yield_now();
                    Ok((handle, "warm"))
                }
                Err(e) => {
                    // Its shim died waiting; the job gets a fresh one.
                    tracing::warn!(job = %id, error = %e, "the job's warm shim is gone; starting a fresh one");
                    self.launch(&dir, &spec).map(|h| (h, "cold"))
                }
            },
            None => self.launch(&dir, &spec).map(|h| (h, "cold")),
        };
        match launched {
            Ok((handle, sandbox)) => {
                tracing::info!(job = %id, shim_pid = handle.pid(), sandbox, "job started");
                self.watch(id.clone(), handle);
                Ok(())
            }
            Err(e) => Err(fail(format!("could not start the job's shim: {e}"))),
        }
    }

    /// Starts a shim for the job whose directory is `dir`.
    fn launch(&self, dir: &std::path::Path, spec: &ShimSpec) -> Result<ShimHandle, ShimError> {
        let mut args = self.cfg.shim_args.clone();
        args.push(dir.as_os_str().to_owned());
        joblet_shim::launch(
            &self.cfg.shim_program,
            &args,
            &JobDir::new(dir.to_owned()),
            spec,
        )
    }

    fn watch(&self, id: JobId, handle: joblet_shim::ShimHandle) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = handle.wait().await;
            let _ = tx.send(Msg::ShimExited { id, result }).await;
        });
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
    fn finish(&mut self, id: &JobId, fin: Final, now: UnixMillis) {
        // A job that ends before it started leaves its warm shim unused.
        if let Some(shim) = self.warm.forget(id) {
            reap(shim.discard());
        }
        let extra = TransitionExtra {
            reason: Some(fin.reason.clone()),
            exit_code: fin.exit_code,
            ..Default::default()
        };
        let recorded = match self.store.transition_of(id, fin.state, now, extra) {
            Ok(_) => Some(fin),
            Err(e) => {
                tracing::error!(job = %id, error = %e, "cannot record the job's final state");
                None
            }
        };
        // Followers first, then the log line.
        let _ = self.ended.send(Ended {
            id: id.clone(),
            recorded: recorded.clone(),
        });
        if let Some(fin) = recorded {
            tracing::info!(job = %id, state = %fin.state, exit_code = ?fin.exit_code, reason = %fin.reason, "job finished");
        }
    }

    fn record(&self, id: &JobId) -> Result<JobRecord, ApiError> {
        self.store
            .get(id)
            .map_err(store_error)?
            .ok_or_else(|| ApiError::JobRef(joblet_core::PrefixError::NotFound(id.to_string())))
    }
}
