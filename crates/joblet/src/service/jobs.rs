//! The job operations: run and submit (with a staged upload), status, list,
//! logs, stop, kill, delete, whoami. Reads go to the store; changes go
//! through the engine's handle.

use std::collections::BTreeMap;
use std::sync::Arc;

use joblet_core::executor::ExecutorInfo;
use joblet_core::record::{JobDetails, JobGpus, JobRecord};
use joblet_core::{FieldError, JobId, JobRequest, JobState, PrefixError};
use joblet_pki::Role;
use joblet_store::Store;

use super::admission::{self, Admission};
use super::logs::{self, LogStream};
use super::{store_error, Access, ApiError, Caller};
use crate::cluster::ClusterNode;
use crate::engine::EngineHandle;
use crate::state_dir::StateDir;
use crate::storage::NodeStorage;
use crate::uploads::{self, UploadData};

/// The job operations of one node.
pub struct Jobs {
    store: Arc<Store>,
    engine: EngineHandle,
    dirs: StateDir,
    admission: Admission,
    /// The node's runtimes and volumes (`None` without a sandbox).
    storage: Option<Arc<NodeStorage>>,
    /// Cluster mode: jobs are the cluster's (see [`crate::cluster`]).
    cluster: Option<Arc<ClusterNode>>,
    /// What execs into jobs need (`None` without a sandbox).
    exec: Option<super::ExecSetup>,
    /// Wakes log followers at each write (disabled: they poll).
    log_watch: super::LogWatch,
}

/// Which jobs a list shows, as the client asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in these states; empty = all.
    pub states: Vec<JobState>,
    /// At most this many, newest first; 0 = all (negative is refused).
    pub limit: i64,
}

/// What a caller learns about itself and the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhoAmI {
    pub name: String,
    pub role: Role,
    pub node_version: &'static str,
    /// Features this node enforces (`timeout`, `env`, `gpu`, ...).
    pub supported: Vec<&'static str>,
    /// The state disk: where, and its space now (`None`: unreadable).
    pub state_disk: Option<(std::path::PathBuf, crate::disk::Space)>,
    /// Every executor of the node, in the catalog's order.
    pub executors: Vec<CallerExecutor>,
    /// The executor of a job that names none.
    pub default_executor: String,
}

/// One executor of the node, and whether the caller may run jobs on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerExecutor {
    pub info: ExecutorInfo,
    pub allowed: bool,
}

/// A SubmitJob whose caller may run jobs; see [`Jobs::submission`].
pub struct Submission<'a> {
    jobs: &'a Jobs,
    owner: String,
}

impl Jobs {
    pub fn new(
        store: Arc<Store>,
        engine: EngineHandle,
        dirs: StateDir,
        admission: Admission,
        storage: Option<Arc<NodeStorage>>,
        cluster: Option<Arc<ClusterNode>>,
    ) -> Jobs {
        Jobs {
            store,
            engine,
            dirs,
            admission,
            storage,
            cluster,
            exec: None,
            log_watch: super::LogWatch::default(),
        }
    }

    /// Wakes followers of job logs at each write instead of their next
    /// poll ([`super::LogWatch::start`]).
    pub fn with_log_watch(mut self, watch: super::LogWatch) -> Jobs {
        self.log_watch = watch;
        self
    }

    /// Lets callers run processes inside running jobs (`rnx job exec`).
    pub fn with_exec(mut self, exec: Option<super::ExecSetup>) -> Jobs {
        self.exec = exec;
        self
    }

    /// Cluster mode's part of this node, if it is in a cluster.
    pub fn cluster(&self) -> Option<&Arc<ClusterNode>> {
        self.cluster.as_ref()
    }

    /// RunJob: records and schedules a job that uploads nothing.
    pub async fn run(&self, caller: &Caller, req: JobRequest) -> Result<JobDetails, ApiError> {
        let (owner, mut spec, secrets) = self.accept_run(caller, &req)?;
        let _gate = self.admit_mounts(caller, &mut spec).await?;
        if let Some(c) = &self.cluster {
            cluster_only(&secrets)?;
            return c.submit(owner, spec, restart_policy(&req.restart)?).await;
        }
        let rec = self.engine.submit(owner, spec, secrets, None).await?;
        self.details(rec, false)
    }

    /// RunJobFollow: [`Jobs::run`], then the job's output until it ends.
    pub async fn run_follow(
        &self,
        caller: &Caller,
        req: JobRequest,
    ) -> Result<(JobDetails, LogStream), ApiError> {
        let (owner, mut spec, secrets) = self.accept_run(caller, &req)?;
        let gate = self.admit_mounts(caller, &mut spec).await?;
        if let Some(c) = &self.cluster {
            cluster_only(&secrets)?;
            let accepted = c.submit(owner, spec, restart_policy(&req.restart)?).await?;
            drop(gate);
            let id = accepted.record.id.to_string();
            let output = c
                .logs(&id, 0, true, |run| self.local_logs(run, 0, true))
                .await?;
            return Ok((accepted, output));
        }
        // Before the job exists: its end cannot be announced unheard.
        let ended = self.engine.subscribe_ended();
        let rec = self.engine.submit(owner, spec, secrets, None).await?;
        drop(gate);
        let accepted = self.details(rec, false)?;
        let id = accepted.record.id.clone();
        let output =
            logs::follow_new_job(self.store.clone(), ended, &self.dirs, &self.log_watch, id)?;
        Ok((accepted, output))
    }

    /// SubmitJob, first step: may the caller run jobs? Checked before the
    /// transport reads the request, so a refused caller's upload is not
    /// read at all.
    pub fn submission(&self, caller: &Caller) -> Result<Submission<'_>, ApiError> {
        caller.check(Access::Admin("run jobs"))?;
        if self.cluster.is_some() {
            // The files would have to reach whichever node runs the job.
            return Err(FieldError::new(
                "uploads",
                "uploaded files are not carried between the nodes of a cluster yet; put them on a volume every node mounts, or in a runtime",
            )
            .into());
        }
        Ok(Submission {
            jobs: self,
            owner: caller.name.clone(),
        })
    }

    /// A job with its history.
    pub async fn status(&self, caller: &Caller, job: &str) -> Result<JobDetails, ApiError> {
        caller.check(Access::Read)?;
        if let Some(c) = &self.cluster {
            return c.status(job, |run| self.local_status(run)).await;
        }
        let id = self.resolve(job)?;
        self.local_status(&id)
    }

    /// A job of this node's store, with its history.
    fn local_status(&self, id: &JobId) -> Result<JobDetails, ApiError> {
        let id = id.clone();
        let rec = self
            .store
            .get(&id)
            .map_err(store_error)?
            .ok_or_else(|| ApiError::JobRef(PrefixError::NotFound(id.to_string())))?;
        self.details(rec, true)
    }

    /// Jobs newest first, without their histories.
    pub async fn list(
        &self,
        caller: &Caller,
        filter: &JobFilter,
    ) -> Result<Vec<JobDetails>, ApiError> {
        caller.check(Access::Read)?;
        let limit = admission::list_limit(filter.limit)?;
        if let Some(c) = &self.cluster {
            return c.list(&filter.states, limit.unwrap_or(0)).await;
        }
        let jobs = self
            .store
            .list(&filter.states, limit)
            .map_err(store_error)?;
        jobs.into_iter().map(|j| self.details(j, false)).collect()
    }

    /// A job's output from byte `from_seq`; with `follow`, until it ends.
    pub async fn logs(
        &self,
        caller: &Caller,
        job: &str,
        from_seq: u64,
        follow: bool,
    ) -> Result<LogStream, ApiError> {
        caller.check(Access::Read)?;
        if let Some(c) = &self.cluster {
            return c
                .logs(job, from_seq, follow, |run| {
                    self.local_logs(run, from_seq, follow)
                })
                .await;
        }
        let id = self.resolve(job)?;
        self.local_logs(id, from_seq, follow)
    }

    /// Attaches to an interactive job (`-i`/`-t`): its output from the
    /// last `replay_bytes` already recorded, until it ends; unless
    /// `read_only`, its input too (the role that runs jobs; one writer at a
    /// time). A job not started yet is waited for.
    pub async fn attach(
        &self,
        caller: &Caller,
        job: &str,
        read_only: bool,
        replay_bytes: u64,
    ) -> Result<super::Attachment, ApiError> {
        caller.check(Access::Read)?;
        if !read_only {
            caller.check(Access::Admin("type into jobs (attach read-only to watch)"))?;
        }
        if self.cluster.is_some() {
            return Err(ApiError::NodeCannot(
                "attaching to jobs is not available in cluster mode yet: follow the job's output with `rnx job log -f`".into(),
            ));
        }
        let id = self.resolve(job)?;
        let rec = self.existing(&id)?;
        if rec.spec.stdio.is_batch() {
            return Err(ApiError::WrongState {
                id: id.to_string(),
                state: rec.state,
                hint: "it was started without -i or -t and takes no input; follow its output with `rnx job log -f`",
            });
        }
        if !read_only && rec.state.is_terminal() {
            return Err(ApiError::WrongState {
                id: id.to_string(),
                state: rec.state,
                hint: "it has ended and takes no more input; its output: `rnx job log`",
            });
        }
        let recorded = logs::log_bytes(&self.dirs, &id);
        let output = self.local_logs(id.clone(), recorded.saturating_sub(replay_bytes), true)?;
        let input = if read_only {
            None
        } else {
            let dir = joblet_shim::JobDir::new(self.dirs.job(&id));
            super::attach::connect_input(self.store.clone(), dir, &id).await?
        };
        Ok(super::Attachment {
            job: id,
            output,
            input,
        })
    }

    /// Runs a process inside the running job `job` (`rnx job exec`): the
    /// job's owner, or the node's admin identity; the job must be running
    /// and not being stopped, on the native executor. Recorded in the exec
    /// audit ([`Jobs::execs`]).
    pub async fn exec(
        &self,
        caller: &Caller,
        job: &str,
        req: super::ExecRequest,
    ) -> Result<super::ExecSession, ApiError> {
        caller.check(Access::Admin("run commands in jobs"))?;
        req.check()?;
        if self.cluster.is_some() {
            return Err(ApiError::NodeCannot(
                "exec into jobs is not available in cluster mode yet".into(),
            ));
        }
        let Some(setup) = &self.exec else {
            return Err(ApiError::NodeCannot(
                "exec into jobs needs the job sandbox, and this node runs jobs unisolated (sandbox.enabled: false)".into(),
            ));
        };
        let id = self.resolve(job)?;
        let rec = self.existing(&id)?;
        if caller.name != rec.owner && caller.name != crate::local::ADMIN {
            return Err(ApiError::PermissionDenied {
                name: caller.name.clone(),
                role: caller.role.to_string(),
                action:
                    "run commands in another user's job (only its owner or the node's admin may)",
            });
        }
        if rec.state != JobState::Running {
            return Err(ApiError::WrongState {
                id: id.to_string(),
                state: rec.state,
                hint: "exec runs a process beside a running job's; start one, or read this one's output with `rnx job log`",
            });
        }
        let executor = rec.spec.executor.as_deref().unwrap_or("native");
        if executor != "native" {
            return Err(ApiError::NodeCannot(format!(
                "job {id} runs on the {executor} executor; exec enters jobs of the native executor only"
            )));
        }
        let dir = joblet_shim::JobDir::new(self.dirs.job(&id));
        match joblet_shim::request_state(&dir).await.as_deref() {
            Ok("running") => {}
            Ok("stopping") => {
                return Err(ApiError::WrongState {
                    id: id.to_string(),
                    state: rec.state,
                    hint: "it is being stopped; exec is refused",
                })
            }
            Ok(_) => {
                return Err(ApiError::WrongState {
                    id: id.to_string(),
                    state: rec.state,
                    hint: "it is ending; exec is refused",
                })
            }
            Err(e) => {
                return Err(ApiError::NodeCannot(format!(
                    "job {id}: its shim did not say whether the job runs ({e}); exec is refused"
                )))
            }
        }
        // A job just marked running may not have its leader recorded yet.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        let leader = loop {
            if let Some(leader) = dir.read_job_pid().ok().flatten() {
                break leader;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ApiError::WrongState {
                    id: id.to_string(),
                    state: rec.state,
                    hint: "its process has not started yet; try again in a moment",
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        super::exec::start(
            setup,
            self.store.clone(),
            &dir,
            &id,
            &caller.name,
            (leader.pid, leader.start_time),
            req,
        )
        .await
    }

    /// The execs into a job, oldest first (any caller who may read jobs).
    pub fn execs(
        &self,
        caller: &Caller,
        job: &str,
    ) -> Result<Vec<joblet_store::ExecRecord>, ApiError> {
        caller.check(Access::Read)?;
        let id = self.resolve(job)?;
        self.store.execs(id.as_str()).map_err(store_error)
    }

    /// The output of a job of this node's store.
    fn local_logs(&self, id: JobId, from_seq: u64, follow: bool) -> Result<LogStream, ApiError> {
        logs::stream(
            self.store.clone(),
            &self.engine,
            &self.dirs,
            &self.log_watch,
            id,
            from_seq,
            follow,
        )
    }

    /// SIGTERM, then SIGKILL after `grace_seconds` (`None` = the node's
    /// `jobs.stop_grace_period`); a job not started yet is taken off the
    /// queue.
    pub async fn stop(
        &self,
        caller: &Caller,
        job: &str,
        grace_seconds: Option<i64>,
    ) -> Result<JobDetails, ApiError> {
        caller.check(Access::Admin("stop jobs"))?;
        let grace = admission::grace(grace_seconds)?;
        if let Some(c) = &self.cluster {
            return c.stop(job, false).await;
        }
        let id = self.resolve(job)?;
        let rec = self.engine.stop(id, grace, false).await?;
        self.details(rec, false)
    }

    /// SIGKILL at once.
    pub async fn kill(&self, caller: &Caller, job: &str) -> Result<JobDetails, ApiError> {
        caller.check(Access::Admin("kill jobs"))?;
        if let Some(c) = &self.cluster {
            return c.stop(job, true).await;
        }
        let id = self.resolve(job)?;
        let rec = self.engine.stop(id, None, true).await?;
        self.details(rec, false)
    }

    /// Deletes a finished job; returns its full id.
    pub async fn delete(&self, caller: &Caller, job: &str) -> Result<JobId, ApiError> {
        caller.check(Access::Admin("delete jobs"))?;
        if let Some(c) = &self.cluster {
            let deleted = c
                .delete(job, |run| {
                    let engine = self.engine.clone();
                    async move { engine.delete(run).await }
                })
                .await;
            match deleted {
                // No such job in the cluster: a run of one whose entry is
                // gone (the node that deleted it asks each node to delete
                // its runs) is deleted from this node's store.
                Err(ApiError::JobRef(PrefixError::NotFound(_))) => {}
                other => return other,
            }
        }
        let id = self.resolve(job)?;
        self.engine.delete(id.clone()).await?;
        Ok(id)
    }

    pub fn whoami(&self, caller: &Caller) -> WhoAmI {
        WhoAmI {
            name: caller.name.clone(),
            role: caller.role,
            node_version: env!("CARGO_PKG_VERSION"),
            supported: self.admission.caps.supported_names(),
            state_disk: crate::disk::space(self.dirs.root())
                .ok()
                .map(|space| (self.dirs.root().to_owned(), space)),
            executors: self
                .admission
                .executors
                .executors
                .iter()
                .map(|e| CallerExecutor {
                    allowed: e.allows(&caller.name),
                    info: e.clone(),
                })
                .collect(),
            default_executor: self.admission.executors.default.clone(),
        }
    }

    /// An attempt of a workflow's job, for the workflow driver: `req` is
    /// the job as the file asks for it, checked as any job's request is
    /// and run as the workflow's owner; `work` (a staged copy of the
    /// workflow's files) becomes its `/work`, and is removed if the job is
    /// refused. The reference to the run is recorded with the job, in the
    /// same commit.
    pub(crate) async fn submit_workflow_job(
        &self,
        owner: &str,
        req: &JobRequest,
        workflow: joblet_core::WorkflowJobRef,
        work: Option<std::path::PathBuf>,
    ) -> Result<JobRecord, ApiError> {
        let discard = |work: &Option<std::path::PathBuf>| {
            if let Some(dir) = work {
                let _ = std::fs::remove_dir_all(dir);
            }
        };
        let (mut spec, secrets) = match self.admission.accept(owner, req) {
            Ok(accepted) => accepted,
            Err(e) => {
                discard(&work);
                return Err(e);
            }
        };
        spec.workflow = Some(workflow);
        let caller = Caller {
            name: owner.to_owned(),
            role: Role::Admin,
        };
        let _gate = match self.admit_mounts(&caller, &mut spec).await {
            Ok(gate) => gate,
            Err(e) => {
                discard(&work);
                return Err(e);
            }
        };
        self.engine
            .submit(owner.to_owned(), spec, secrets, work)
            .await
    }

    /// Whether this node would take each of `reqs` from `caller`: its
    /// fields, what the node enforces, its runtime and volumes, and CPU,
    /// memory and GPUs it could ever offer (a workflow's jobs are checked
    /// so before anything of it runs). Requests that are equal are checked
    /// once. The error names the index of the first refused.
    pub(crate) async fn check_requests(
        &self,
        caller: &Caller,
        reqs: &[JobRequest],
    ) -> Result<(), (usize, ApiError)> {
        let mut seen = std::collections::HashSet::new();
        let mut specs = Vec::new();
        let mut at = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            if !seen.insert(req) {
                continue;
            }
            let (mut spec, _) = self
                .admission
                .accept(&caller.name, req)
                .map_err(|e| (i, e))?;
            if let Some(storage) = self.storage.as_deref() {
                if spec.runtime.is_some() || !spec.volumes.is_empty() {
                    super::mounts::admit(storage, caller, &mut spec).map_err(|e| (i, e))?;
                }
            }
            specs.push(spec);
            at.push(i);
        }
        self.engine
            .check(caller.name.clone(), specs)
            .await
            .map_err(|(k, e)| (at.get(k).copied().unwrap_or(0), e))
    }

    /// The node's state directory.
    pub(crate) fn dirs(&self) -> &StateDir {
        &self.dirs
    }

    /// The node's admission rules (upload limits).
    pub(crate) fn admission(&self) -> &Admission {
        &self.admission
    }

    /// The store's record of `id`, with no role check (for the workflow
    /// driver and views that checked already).
    pub(crate) fn record(&self, id: &JobId) -> Result<Option<JobRecord>, ApiError> {
        self.store.get(id).map_err(store_error)
    }

    /// The record of `id`, resolved a moment ago: gone means deleted since.
    fn existing(&self, id: &JobId) -> Result<JobRecord, ApiError> {
        self.record(id)?
            .ok_or_else(|| ApiError::NotFound(format!("job {id} was deleted")))
    }

    /// The engine's handle (the workflow driver stops and deletes jobs
    /// through it).
    pub(crate) fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    /// RunJob and RunJobFollow: the caller may run jobs, the request
    /// uploads nothing and is acceptable. Returns the owner, spec and
    /// secrets.
    fn accept_run(
        &self,
        caller: &Caller,
        req: &JobRequest,
    ) -> Result<(String, joblet_core::JobSpec, BTreeMap<String, String>), ApiError> {
        caller.check(Access::Admin("run jobs"))?;
        admission::no_uploads(req)?;
        let (spec, secrets) = self.admission.accept(&caller.name, req)?;
        if self.cluster.is_some() && spec.stdio.is_interactive() {
            return Err(ApiError::NodeCannot(format!(
                "interactive jobs ({}) are not available in cluster mode yet: run it on a single node, or without -i/-t and follow its output with `rnx job log -f`",
                spec.stdio.flags()
            )));
        }
        Ok((caller.name.clone(), spec, secrets))
    }

    /// The job's runtime and volumes, checked and pinned
    /// ([`super::mounts::admit`]); the guard keeps them from being removed
    /// until the job is recorded.
    async fn admit_mounts(
        &self,
        caller: &Caller,
        spec: &mut joblet_core::JobSpec,
    ) -> Result<Option<tokio::sync::RwLockReadGuard<'_, ()>>, ApiError> {
        if spec.runtime.is_none() && spec.volumes.is_empty() {
            return Ok(None);
        }
        // Without storage the node's capabilities refused them already.
        let Some(storage) = self.storage.as_deref() else {
            return Ok(None);
        };
        let gate = storage.gate.read().await;
        super::mounts::admit(storage, caller, spec)?;
        Ok(Some(gate))
    }

    fn resolve(&self, prefix: &str) -> Result<JobId, ApiError> {
        self.store.resolve(prefix.trim()).map_err(store_error)
    }

    /// `rec` as reported: with its history where asked, its output size
    /// and its GPUs.
    fn details(&self, rec: JobRecord, with_transitions: bool) -> Result<JobDetails, ApiError> {
        let transitions = if with_transitions {
            self.store.transitions(&rec.id).map_err(store_error)?
        } else {
            Vec::new()
        };
        let gpus = if rec.spec.resources.gpu_count == 0 {
            None
        } else {
            let last = self.store.job_gpus(rec.id.as_str()).map_err(store_error)?;
            JobGpus::of(&rec, last)
        };
        Ok(JobDetails {
            log_bytes: logs::log_bytes(&self.dirs, &rec.id),
            record: rec,
            transitions,
            gpus,
            cluster: None,
        })
    }
}

impl Submission<'_> {
    /// SubmitJob, second step: `job` is the request the stream opened with
    /// (`None`: it opened with something else), `data` the file data that
    /// followed, staged before the job is recorded.
    pub async fn submit(
        self,
        job: Option<JobRequest>,
        data: impl UploadData,
    ) -> Result<JobDetails, ApiError> {
        let raw = job.ok_or_else(|| {
            FieldError::new(
                "job",
                "SubmitJob must start with the job (a RunJobRequest), then file data",
            )
        })?;
        let jobs = self.jobs;
        let (mut spec, secrets) = jobs.admission.accept(&self.owner, &raw)?;
        let caller = Caller {
            name: self.owner.clone(),
            role: Role::Admin,
        };
        let staging = uploads::staging_root(jobs.dirs.root());
        let staged = uploads::receive(&raw.uploads, data, &staging).await?;
        let _gate = jobs.admit_mounts(&caller, &mut spec).await?;
        let rec = jobs
            .engine
            .submit(self.owner, spec, secrets, Some(staged))
            .await?;
        jobs.details(rec, false)
    }
}

/// What cluster mode does not carry yet, refused before anything is
/// recorded: secret values would have to travel through etcd.
fn cluster_only(secrets: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if secrets.is_empty() {
        Ok(())
    } else {
        Err(FieldError::new(
            "secret_env",
            "secret variables are not carried between the nodes of a cluster yet; pass them as files on a volume, or run on a single node",
        )
        .into())
    }
}

/// `restart` as a request gives it.
fn restart_policy(s: &str) -> Result<joblet_cluster::RestartPolicy, ApiError> {
    match s {
        "" | "never" => Ok(joblet_cluster::RestartPolicy::Never),
        "on-node-failure" => Ok(joblet_cluster::RestartPolicy::OnNodeFailure),
        other => Err(FieldError::new(
            "restart",
            format!(
                "{:?} is not a restart policy; expected never or on-node-failure",
                joblet_core::text::clip(other)
            ),
        )
        .into()),
    }
}
