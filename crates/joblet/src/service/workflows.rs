//! The workflow operations: run (or only check) a workflow file with its
//! uploaded files, status, list, stop and delete. Runs are driven by the
//! workflow driver ([`crate::workflow`]); reads go to the store.
//!
//! A run gets, before anything of it runs: its file checked against this
//! node (the format, each job's request under `rnx job run`'s rules, GPUs
//! no node has, runtimes and volumes that are not here), its uploaded
//! files kept at `STATE/workflows/ID/files`, and a shared volume
//! (`workflows.shared_volume_mb`, `wf-` and the first 8 characters of its
//! id) that every job mounts read-write at `$JOBLET_WORKFLOW_SHARED`.
//! Whatever fails, what was made for the run is undone.

use std::sync::Arc;

use joblet_core::{FieldError, JobId, UnixMillis, UploadEntry};
use joblet_store::{Store, WorkflowRecord};
use joblet_volume::VolumeKind;
use joblet_workflow::{Limits, Workflow, WorkflowCore};

use super::workflow_view::{self, WorkflowInfo};
use super::{store_error, Access, ApiError, Caller, Jobs};
use crate::storage::NodeStorage;
use crate::uploads::{self, UploadData};
use crate::workflow::{files, snapshot, WorkflowHandle};

/// A workflow file as submitted.
#[derive(Debug, Clone, Default)]
pub struct WorkflowSubmission {
    pub yaml: String,
    /// Its name, for errors.
    pub file: String,
    pub uploads: Vec<UploadEntry>,
    /// Check only.
    pub validate_only: bool,
}

/// The workflow operations of one node.
pub struct Workflows {
    store: Arc<Store>,
    jobs: Arc<Jobs>,
    storage: Option<Arc<NodeStorage>>,
    driver: WorkflowHandle,
    limits: Limits,
    /// `workflows.shared_volume_mb` (0: none).
    shared_volume_mb: u64,
    now: fn() -> UnixMillis,
}

/// A RunWorkflow whose caller may run workflows; see
/// [`Workflows::submission`].
pub struct Submission<'a> {
    workflows: &'a Workflows,
    caller: Caller,
}

impl Workflows {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<Store>,
        jobs: Arc<Jobs>,
        storage: Option<Arc<NodeStorage>>,
        driver: WorkflowHandle,
        max_gpus_per_node: u32,
        shared_volume_mb: u64,
        now: fn() -> UnixMillis,
    ) -> Workflows {
        Workflows {
            store,
            jobs,
            storage,
            driver,
            limits: Limits {
                max_gpus_per_node: Some(max_gpus_per_node),
            },
            shared_volume_mb,
            now,
        }
    }

    /// RunWorkflow, first step: may the caller run workflows? Checked
    /// before the transport reads the request, so a refused caller's
    /// upload is not read at all.
    pub fn submission(&self, caller: &Caller) -> Result<Submission<'_>, ApiError> {
        caller.check(Access::Admin("run workflows"))?;
        if self.jobs.cluster().is_some() {
            // Its jobs would bypass the cluster's scheduler on this node.
            return Err(ApiError::NodeCannot(
                "workflows are not placed across a cluster yet: run them on a node without `cluster:` in its joblet-config.yml".into(),
            ));
        }
        Ok(Submission {
            workflows: self,
            caller: caller.clone(),
        })
    }

    /// A run with its jobs.
    pub fn status(&self, caller: &Caller, id: &str) -> Result<WorkflowInfo, ApiError> {
        caller.check(Access::Read)?;
        let id = self.resolve(id)?;
        let rec = self
            .store
            .workflow(&id)
            .map_err(store_error)?
            .ok_or_else(|| not_found(&id))?;
        self.info(rec)
    }

    /// Runs newest first; `limit` 0 = all.
    pub fn list(&self, caller: &Caller, limit: i64) -> Result<Vec<WorkflowInfo>, ApiError> {
        caller.check(Access::Read)?;
        let limit = super::admission::list_limit(limit)?;
        let runs = self.store.list_workflows(limit).map_err(store_error)?;
        runs.into_iter().map(|r| self.info(r)).collect()
    }

    /// Stops what runs and cancels what waits; returns the run as it is
    /// once that is asked for.
    pub async fn stop(&self, caller: &Caller, id: &str) -> Result<WorkflowInfo, ApiError> {
        caller.check(Access::Admin("stop workflows"))?;
        let id = self.resolve(id)?;
        self.driver.stop_run(id.clone()).await?;
        self.status(caller, &id)
    }

    /// Deletes a finished run: its jobs (records and output), its files,
    /// its shared volume and its record. Returns its id and how many job
    /// records went with it.
    pub async fn delete(&self, caller: &Caller, id: &str) -> Result<(String, u32), ApiError> {
        caller.check(Access::Admin("delete workflows"))?;
        let id = self.resolve(id)?;
        let rec = self
            .store
            .workflow(&id)
            .map_err(store_error)?
            .ok_or_else(|| not_found(&id))?;
        if !rec.is_final() {
            return Err(ApiError::WorkflowState {
                id,
                state: rec.state,
                hint: "stop it first (`rnx workflow stop`) and let its jobs end",
            });
        }
        let jobs = self.store.workflow_jobs(&id).map_err(store_error)?;
        let mut deleted = 0;
        for job in &jobs {
            self.jobs.engine().delete(job.id.clone()).await?;
            deleted += 1;
        }
        if let (Some(storage), false) = (&self.storage, rec.shared_volume.is_empty()) {
            remove_volume(storage, &rec.shared_volume).await;
        }
        files::remove(&self.jobs_dirs().workflow(&id));
        self.store.delete_workflow(&id).map_err(store_error)?;
        tracing::info!(workflow = %id, jobs = deleted, "workflow deleted");
        Ok((id, deleted))
    }

    fn jobs_dirs(&self) -> crate::state_dir::StateDir {
        self.jobs.dirs().clone()
    }

    fn resolve(&self, prefix: &str) -> Result<String, ApiError> {
        self.store
            .resolve_workflow(prefix.trim())
            .map_err(store_error)
    }

    fn info(&self, rec: WorkflowRecord) -> Result<WorkflowInfo, ApiError> {
        let jobs = self.store.workflow_jobs(&rec.id).map_err(store_error)?;
        let phases = self.store.workflow_phases(&rec.id).map_err(store_error)?;
        let gpus = |id: &JobId| {
            self.store
                .job_gpus(id.as_str())
                .ok()
                .flatten()
                .map(|a| a.gpu_indices)
        };
        workflow_view::info(rec, &phases, &jobs, gpus)
    }

    /// Checks `sub` against this node; returns the checked workflow.
    async fn check(&self, caller: &Caller, sub: &WorkflowSubmission) -> Result<Workflow, ApiError> {
        if sub.yaml.trim().is_empty() {
            return Err(FieldError::new(
                "yaml",
                "the workflow file is empty; give a file with a `jobs:` map (see docs/workflows.md)",
            )
            .into());
        }
        let file = if sub.file.trim().is_empty() {
            "workflow.yaml"
        } else {
            sub.file.as_str()
        };
        let workflow = Workflow::parse(&sub.yaml, file, &self.limits)
            .map_err(|e| ApiError::InvalidWorkflow(e.to_string()))?;
        let requests: Vec<_> = workflow.jobs().iter().map(|j| j.request()).collect();
        if let Err((i, e)) = self.jobs.check_requests(caller, &requests).await {
            return Err(in_job(&workflow, &sub.yaml, &workflow.jobs()[i], e));
        }
        Ok(workflow)
    }

    /// Makes the run's shared volume; `None` when the node makes none.
    async fn make_volume(&self, id: &str, owner: &str) -> Result<Option<String>, ApiError> {
        let Some(storage) = self.storage.clone() else {
            return Ok(None);
        };
        if self.shared_volume_mb == 0 {
            return Ok(None);
        }
        let name = shared_volume_name(id);
        let size = self.shared_volume_mb.saturating_mul(1024 * 1024);
        let (owner, now, made_name) = (owner.to_owned(), (self.now)(), name.clone());
        tokio::task::spawn_blocking(move || {
            storage
                .volumes
                .create(&made_name, VolumeKind::Filesystem, size, &owner, false, now)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("volume create task: {e}")))?
        .map_err(|e| {
            ApiError::NodeCannot(format!(
                "cannot make the workflow's shared volume {name} ({} MiB, workflows.shared_volume_mb): {e}; nothing of the workflow was kept",
                self.shared_volume_mb
            ))
        })?;
        Ok(Some(name))
    }
}

impl Submission<'_> {
    /// RunWorkflow, second step: checks `sub` and, unless it only checks,
    /// receives `data` (its uploads' file data), records the run and has
    /// the driver start it.
    pub async fn run(
        self,
        sub: WorkflowSubmission,
        data: impl UploadData,
    ) -> Result<WorkflowInfo, ApiError> {
        let wf = self.workflows;
        let workflow = wf.check(&self.caller, &sub).await?;
        if sub.validate_only {
            if !sub.uploads.is_empty() {
                return Err(FieldError::new(
                    "uploads",
                    "a workflow only validated uploads nothing; send no upload entries with validate_only",
                )
                .into());
            }
            return Ok(workflow_view::checked(&workflow, &self.caller.name));
        }
        let admission = wf.jobs.admission();
        let total = joblet_core::upload::check_manifest(&sub.uploads, admission.max_upload_bytes)?;
        // Each job's /work starts as a copy of the upload.
        if let Some(work) = admission.work_size_bytes.filter(|&w| total > w) {
            return Err(FieldError::new(
                "uploads",
                format!("{total} bytes in total do not fit in each job's /work ({work} bytes, filesystem.work_size_mb); list `uploads:` in every job to send less, or ask an admin for a larger filesystem.work_size_mb"),
            )
            .into());
        }
        let dirs = wf.jobs_dirs();
        let staged =
            uploads::receive(&sub.uploads, data, &uploads::staging_root(dirs.root())).await?;
        let id = uuid::Uuid::new_v4().to_string();
        let run_dir = dirs.workflow(&id);
        let undo_files = || files::remove(&run_dir);
        if let Err(e) = files::keep(&staged, &run_dir) {
            let _ = std::fs::remove_dir_all(&staged);
            undo_files();
            return Err(ApiError::Internal(format!(
                "cannot keep the workflow's files in {}: {e}",
                run_dir.display()
            )));
        }
        let volume = match wf.make_volume(&id, &self.caller.name).await {
            Ok(v) => v,
            Err(e) => {
                undo_files();
                return Err(e);
            }
        };
        let core = WorkflowCore::new(&workflow);
        let encoded = snapshot::head(&core).and_then(|head| Ok((head, snapshot::phases(&core)?)));
        let (snapshot, phases) = match encoded {
            Ok(parts) => parts,
            Err(e) => {
                if let (Some(storage), Some(name)) = (&wf.storage, &volume) {
                    remove_volume(storage, name).await;
                }
                undo_files();
                return Err(ApiError::Internal(format!(
                    "cannot encode a workflow's state: {e}"
                )));
            }
        };
        let rec = WorkflowRecord {
            id: id.clone(),
            seq: 0,
            owner: self.caller.name.clone(),
            name: workflow.name().unwrap_or_default().to_owned(),
            file: workflow.file().to_owned(),
            yaml: sub.yaml,
            sealed: workflow
                .jobs()
                .iter()
                .any(|j| !j.secret_environment.is_empty()),
            state: "PENDING".into(),
            snapshot_json: snapshot,
            shared_volume: volume.clone().unwrap_or_default(),
            created_ms: (wf.now)(),
            ended_ms: None,
        };
        let rec = match wf.store.create_workflow(&rec, &phases) {
            Ok(rec) => rec,
            Err(e) => {
                if let (Some(storage), Some(name)) = (&wf.storage, &volume) {
                    remove_volume(storage, name).await;
                }
                undo_files();
                return Err(store_error(e));
            }
        };
        tracing::info!(workflow = %id, owner = %rec.owner, file = %rec.file, jobs = workflow.jobs().len(), "workflow accepted");
        wf.driver.start_run(id).await?;
        wf.info(rec)
    }
}

/// `wf-` and the first 8 characters of the run's id.
pub fn shared_volume_name(id: &str) -> String {
    format!("wf-{}", &id[..8.min(id.len())])
}

async fn remove_volume(storage: &Arc<NodeStorage>, name: &str) {
    let storage = storage.clone();
    let name = name.to_owned();
    let _gate = storage.gate.write().await;
    let removed = {
        let (storage, name) = (storage.clone(), name.clone());
        tokio::task::spawn_blocking(move || storage.volumes.remove(&name)).await
    };
    match removed {
        Ok(Ok(_)) => tracing::info!(volume = %name, "workflow volume removed"),
        Ok(Err(e)) => {
            tracing::warn!(volume = %name, error = %e, "cannot remove a workflow's volume; remove it with `rnx volume remove`")
        }
        Err(e) => tracing::warn!(volume = %name, error = %e, "volume remove task failed"),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no workflow with id {id} (see `rnx workflow list`)"
    ))
}

/// A node's refusal of one of the workflow's jobs: a field's at the line
/// and column that asked for it; otherwise naming the file and the job.
fn in_job(workflow: &Workflow, text: &str, job: &joblet_workflow::Job, e: ApiError) -> ApiError {
    let (file, name) = (workflow.file(), &job.name);
    match e {
        ApiError::InvalidField(f) => {
            ApiError::InvalidWorkflow(workflow.refusal(text, job, &f.field, f.problem).to_string())
        }
        ApiError::NotFound(why) => ApiError::NotFound(format!("{file}: job `{name}`: {why}")),
        e @ (ApiError::Unsupported(_)
        | ApiError::NotAllowed { .. }
        | ApiError::GpuRequest(_)
        | ApiError::InUse(_)) => ApiError::InvalidWorkflow(format!("{file}: job `{name}`: {e}")),
        other => other,
    }
}
