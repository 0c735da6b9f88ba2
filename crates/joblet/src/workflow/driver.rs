//! The workflow driver: one task that owns every live run's decision core
//! ([`WorkflowCore`]), feeds it what happens (a run started or stopped
//! through the API, a job's end as the engine announces it, time for
//! retries), stores its snapshot after every step, then carries out its
//! actions in order: submit a job attempt through the job service, stop a
//! job through the engine, record a cancellation, end the run.
//!
//! A job's end reaches the driver through the engine's broadcast of ends;
//! a missed one (the broadcast overflowed) or a restart is squared by
//! reading the run's jobs back from the store
//! ([`joblet_workflow::Event::Restored`]).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use joblet_core::{FieldError, JobId, JobSpec, JobState, UnixMillis, WorkflowJobRef};
use joblet_store::{Store, TransitionExtra, WorkflowRecord};
use joblet_workflow::{Action, Event, JobPhase, Limits, Workflow, WorkflowCore};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::found::{end_state, found};
use super::{files, snapshot};
use crate::clock::now_ms;
use crate::engine::Ended;
use crate::service::{ApiError, Jobs};
use crate::state_dir::StateDir;

/// What the API asks of the driver.
pub(super) enum Msg {
    /// Run `id`, recorded PENDING a moment ago.
    Start { id: String },
    /// Stop run `id`: stop its running jobs, cancel the rest.
    Stop {
        id: String,
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
}

/// One live run.
struct Run {
    owner: String,
    workflow: Workflow,
    core: WorkflowCore,
    /// `STATE/workflows/ID`.
    dir: PathBuf,
    /// The run's shared volume, mounted read-write in every job; `None`:
    /// none (the node makes none, or runs jobs without a sandbox).
    volume: Option<String>,
    /// `$JOBLET_WORKFLOW_SHARED` in its jobs.
    shared: Option<String>,
    /// Each job's phase as the store has it, in file order.
    saved: Vec<JobPhase>,
    /// The run's part of the snapshot as the store has it.
    saved_head: String,
}

pub(super) struct Driver {
    runs: HashMap<String, Run>,
    store: Arc<Store>,
    jobs: Arc<Jobs>,
    dirs: StateDir,
    ended: broadcast::Receiver<Ended>,
    /// Jobs run in the sandbox (a shared area is a volume, seen at
    /// `/volumes/NAME`); without one it is a host directory.
    sandboxed: bool,
}

impl Driver {
    pub(super) fn new(
        store: Arc<Store>,
        jobs: Arc<Jobs>,
        dirs: StateDir,
        sandboxed: bool,
    ) -> Driver {
        let ended = jobs.engine().subscribe_ended();
        Driver {
            runs: HashMap::new(),
            store,
            jobs,
            dirs,
            ended,
            sandboxed,
        }
    }

    /// Resumes the runs a previous daemon left live: each core is rebuilt
    /// from its snapshot and squared with the store's records of its jobs,
    /// so no attempt is submitted twice and none is lost; a run accepted
    /// but not started yet starts.
    pub(super) async fn resume(&mut self) {
        let live = match self.store.live_workflows() {
            Ok(live) => live,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the workflows to resume; they stay as recorded");
                return;
            }
        };
        for rec in live {
            let id = rec.id.clone();
            match self.load(rec) {
                Ok(()) => {
                    let found = self.found(&id);
                    self.drive(&id, Event::Restored { found }).await;
                    let pending = self
                        .runs
                        .get(&id)
                        .is_some_and(|r| r.core.state() == joblet_workflow::WorkflowState::Pending);
                    if pending {
                        self.drive(&id, Event::Started).await;
                    }
                    tracing::info!(workflow = %id, "workflow resumed");
                }
                Err(why) => {
                    tracing::error!(workflow = %id, %why, "cannot resume a workflow; it is marked FAILED");
                    if let Err(e) =
                        self.store
                            .save_workflow(&id, "FAILED", "{}", &[], Some(now_ms()))
                    {
                        tracing::error!(workflow = %id, error = %e, "cannot mark a workflow FAILED");
                    }
                }
            }
        }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        loop {
            let due = self.next_tick();
            let sleep = async {
                match due {
                    Some(at) => {
                        let wait = u64::try_from(at.saturating_sub(now_ms())).unwrap_or(0);
                        tokio::time::sleep(std::time::Duration::from_millis(wait)).await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                m = rx.recv() => match m {
                    None => break,
                    Some(Msg::Start { id }) => self.start(&id).await,
                    Some(Msg::Stop { id, reply }) => {
                        let r = self.stop(&id).await;
                        let _ = reply.send(r);
                    }
                },
                e = self.ended.recv() => match e {
                    Ok(e) => self.job_ended(e).await,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "missed job ends; re-reading every live workflow's jobs");
                        self.resync().await;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                () = sleep => {
                    let ids: Vec<String> = self.runs.keys().cloned().collect();
                    for id in ids {
                        self.drive(&id, Event::Tick).await;
                    }
                }
            }
        }
    }

    /// The earliest retry any run waits for.
    fn next_tick(&self) -> Option<UnixMillis> {
        self.runs.values().filter_map(|r| r.core.next_tick()).min()
    }

    /// Builds the core of a stored run.
    fn load(&mut self, rec: WorkflowRecord) -> Result<(), String> {
        let workflow = Workflow::parse(
            &rec.yaml,
            &rec.file,
            &Limits {
                max_gpus_per_node: None,
            },
        )
        .map_err(|e| format!("its stored file no longer reads: {e}"))?;
        let phases = self
            .store
            .workflow_phases(&rec.id)
            .map_err(|e| e.to_string())?;
        let snapshot = snapshot::join(&rec.snapshot_json, &phases).map_err(|e| e.to_string())?;
        let core = WorkflowCore::restore(&workflow, snapshot).map_err(|e| e.to_string())?;
        // What the store holds now: a step writes what differs.
        let saved = core.jobs().map(|(_, p)| p.clone()).collect();
        let dir = self.dirs.workflow(&rec.id);
        let volume = (!rec.shared_volume.is_empty()).then(|| rec.shared_volume.clone());
        let shared = match &volume {
            Some(name) => Some(format!("/volumes/{name}")),
            // Without the sandbox jobs run on the host: a directory.
            None if !self.sandboxed => {
                let host = dir.join("shared");
                std::fs::create_dir_all(&host).map_err(|e| {
                    format!("cannot make its shared directory {}: {e}", host.display())
                })?;
                Some(host.display().to_string())
            }
            None => None,
        };
        self.runs.insert(
            rec.id,
            Run {
                saved,
                saved_head: rec.snapshot_json,
                owner: rec.owner,
                workflow,
                core,
                dir,
                volume,
                shared,
            },
        );
        Ok(())
    }

    async fn start(&mut self, id: &str) {
        let rec = match self.store.workflow(id) {
            Ok(Some(rec)) => rec,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(workflow = %id, error = %e, "cannot read a workflow to start");
                return;
            }
        };
        if let Err(why) = self.load(rec) {
            tracing::error!(workflow = %id, %why, "cannot start a workflow");
            return;
        }
        tracing::info!(workflow = %id, "workflow started");
        self.drive(id, Event::Started).await;
    }

    async fn stop(&mut self, id: &str) -> Result<(), ApiError> {
        if !self.runs.contains_key(id) {
            let state = match self.store.workflow(id) {
                Ok(Some(rec)) => rec.state,
                Ok(None) => {
                    return Err(ApiError::NotFound(format!(
                        "no workflow with id {id} (see `rnx workflow list`)"
                    )))
                }
                Err(e) => return Err(crate::service::store_error(e)),
            };
            return Err(ApiError::WorkflowState {
                id: id.to_owned(),
                state,
                hint: "it has finished; there is nothing to stop",
            });
        }
        tracing::info!(workflow = %id, "workflow stop asked");
        self.drive(id, Event::Stop).await;
        Ok(())
    }

    async fn job_ended(&mut self, e: Ended) {
        let rec = match self.jobs.record(&e.id) {
            Ok(Some(rec)) => rec,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(job = %e.id, error = %err, "cannot read an ended job; its workflow is squared with the store");
                self.resync().await;
                return;
            }
        };
        let Some(wf) = rec.spec.workflow.clone() else {
            return;
        };
        if !self.runs.contains_key(&wf.id) {
            return;
        }
        let (state, at) = match (end_state(rec.state), e.recorded.as_ref()) {
            (Some(state), _) => (state, rec.ended_ms.unwrap_or_else(now_ms)),
            // A full state disk: the end is known, not recorded yet.
            (None, Some(fin)) => match end_state(fin.state) {
                Some(state) => (state, now_ms()),
                None => return,
            },
            (None, None) => return,
        };
        self.drive(
            &wf.id,
            Event::JobEnded {
                job: wf.job,
                attempt: wf.attempt,
                job_id: rec.id,
                state,
                at,
            },
        )
        .await;
    }

    /// Squares every live run with the store's records of its jobs.
    async fn resync(&mut self) {
        let ids: Vec<String> = self.runs.keys().cloned().collect();
        for id in ids {
            let found = self.found(&id);
            self.drive(&id, Event::Restored { found }).await;
        }
    }

    fn found(&self, id: &str) -> Vec<joblet_workflow::Found> {
        match self.store.workflow_jobs(id) {
            Ok(jobs) => found(&jobs),
            Err(e) => {
                tracing::error!(workflow = %id, error = %e, "cannot read a workflow's jobs");
                Vec::new()
            }
        }
    }

    /// Feeds `first` to run `id`'s core, then what carrying out its
    /// actions reports, until nothing is left; the snapshot is stored
    /// after each step, before its actions are carried out.
    async fn drive(&mut self, id: &str, first: Event) {
        let mut events = VecDeque::from([first]);
        while let Some(event) = events.pop_front() {
            let Some(run) = self.runs.get_mut(id) else {
                return;
            };
            let now = now_ms();
            let actions = run.core.handle(event, now);
            self.save(id, now);
            for action in actions {
                match action {
                    Action::Submit { job, attempt } => {
                        events.extend(self.submit(id, &job, attempt).await);
                    }
                    Action::StopJob { job, job_id } => self.stop_job(id, &job, job_id).await,
                    Action::Cancel { job, reason } => {
                        tracing::info!(workflow = %id, job = %job, %reason, "workflow job canceled");
                    }
                    Action::Finished { state, outcome } => {
                        tracing::info!(workflow = %id, %state, %outcome, "workflow finished");
                        self.runs.remove(id);
                    }
                }
            }
        }
    }

    /// Stores run `id`'s state: the run's part of its snapshot and the
    /// phases of the jobs that changed since the last save, in one
    /// transaction.
    fn save(&mut self, id: &str, now: UnixMillis) {
        let Some(run) = self.runs.get_mut(id) else {
            return;
        };
        let state = run.core.state();
        let ended = state.is_final().then_some(now);
        let changed: Vec<usize> = run
            .core
            .jobs()
            .enumerate()
            .filter(|(i, (_, p))| run.saved.get(*i) != Some(*p))
            .map(|(i, _)| i)
            .collect();
        let written = (|| {
            let head = snapshot::head(&run.core)?;
            let phases = run
                .core
                .jobs()
                .enumerate()
                .filter(|(i, _)| changed.binary_search(i).is_ok())
                .map(|(_, (job, p))| Ok((job, snapshot::phase(p)?)))
                .collect::<Result<Vec<_>, snapshot::SnapshotError>>()?;
            Ok::<_, snapshot::SnapshotError>((head, phases))
        })()
        .map_err(|e| e.to_string())
        .and_then(|(head, phases)| {
            self.store
                .save_workflow(id, state.as_str(), &head, &phases, ended)
                .map(|()| head)
                .map_err(|e| e.to_string())
        });
        match written {
            Ok(head) => {
                run.saved_head = head;
                for (i, (_, p)) in run.core.jobs().enumerate() {
                    if changed.binary_search(&i).is_ok() {
                        if let Some(slot) = run.saved.get_mut(i) {
                            *slot = p.clone();
                        }
                    }
                }
            }
            // Not fatal: what was not written is written with the next
            // step, and after a restart an older snapshot is squared with
            // the jobs the store has.
            Err(why) => {
                tracing::error!(workflow = %id, %why, "cannot store a workflow's progress")
            }
        }
    }

    /// Creates attempt `attempt` of `job`; returns what the core must hear
    /// of it: the job's id, and its end if it could not even be queued.
    async fn submit(&mut self, id: &str, job: &str, attempt: u32) -> Vec<Event> {
        let Some(run) = self.runs.get(id) else {
            return Vec::new();
        };
        let Some(spec) = run.workflow.job(job) else {
            return Vec::new();
        };
        let mut req = spec.request();
        if let Some(volume) = &run.volume {
            req.volumes.push(volume.clone());
        }
        let reference = WorkflowJobRef {
            id: id.to_owned(),
            job: job.to_owned(),
            attempt,
            shared: run.shared.clone(),
        };
        let owner = run.owner.clone();
        let staging = crate::uploads::staging_root(self.dirs.root());
        let created = match files::stage_copy(&run.dir, &spec.uploads, &staging) {
            Ok(work) => {
                self.jobs
                    .submit_workflow_job(&owner, &req, reference.clone(), Some(work))
                    .await
            }
            Err(e) => Err(ApiError::Internal(format!(
                "cannot copy the workflow's files for the job: {e}"
            ))),
        };
        match created {
            Ok(rec) => {
                tracing::info!(workflow = %id, job = %job, attempt, job_id = %rec.id, "workflow job submitted");
                vec![Event::JobSubmitted {
                    job: job.to_owned(),
                    attempt,
                    job_id: rec.id,
                }]
            }
            Err(why) => self.refused(id, job, attempt, &owner, &req, reference, &why),
        }
    }

    /// An attempt the node refused (a runtime or volume gone, a full
    /// disk): recorded as a FAILED job saying why, so the run's history
    /// has it and its retries and dependents follow as for any failure.
    #[allow(clippy::too_many_arguments)]
    fn refused(
        &self,
        id: &str,
        job: &str,
        attempt: u32,
        owner: &str,
        req: &joblet_core::JobRequest,
        reference: WorkflowJobRef,
        why: &ApiError,
    ) -> Vec<Event> {
        tracing::warn!(workflow = %id, job = %job, attempt, error = %why, "workflow job refused");
        let job_id = match JobId::parse(&uuid::Uuid::new_v4().to_string()) {
            Ok(j) => j,
            Err(_) => return Vec::new(),
        };
        let mut spec = match req.validate() {
            Ok((spec, _)) => spec,
            Err(_) => JobSpec {
                command: req.command.clone(),
                args: req.args.clone(),
                ..refused_spec()
            },
        };
        spec.secret_env_keys.clear();
        spec.workflow = Some(reference);
        let now = now_ms();
        let reason = format!("not started: {why}");
        let made = self.store.create_job_and_transition(
            &job_id,
            owner,
            &spec,
            &Default::default(),
            now,
            (
                JobState::Failed,
                TransitionExtra {
                    reason: Some(reason),
                    ..Default::default()
                },
            ),
        );
        if let Err(e) = made {
            tracing::error!(workflow = %id, job = %job, error = %e, "cannot record a refused workflow job; the workflow is squared at the next restart");
            return Vec::new();
        }
        vec![
            Event::JobSubmitted {
                job: job.to_owned(),
                attempt,
                job_id: job_id.clone(),
            },
            Event::JobEnded {
                job: job.to_owned(),
                attempt,
                job_id,
                state: joblet_workflow::EndState::Failed,
                at: now,
            },
        ]
    }

    async fn stop_job(&self, id: &str, job: &str, job_id: JobId) {
        match self.jobs.engine().stop(job_id.clone(), None, false).await {
            Ok(_) => tracing::info!(workflow = %id, job = %job, %job_id, "workflow job stopped"),
            // It ended meanwhile: its end comes as any other.
            Err(e) => {
                tracing::debug!(workflow = %id, job = %job, %job_id, error = %e, "workflow job not stopped")
            }
        }
    }
}

/// A spec for a refused attempt whose request does not validate (it did
/// when the workflow was accepted; the node's rules changed since).
fn refused_spec() -> JobSpec {
    let req = joblet_core::JobRequest {
        command: "true".into(),
        ..Default::default()
    };
    req.validate()
        .map(|(spec, _)| spec)
        .unwrap_or_else(|e: FieldError| unreachable!("a bare command validates: {e}"))
}
