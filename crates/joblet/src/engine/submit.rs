//! A new job: admission (a state disk too full for it, and what could never
//! run on this node, are refused before anything is recorded, naming the
//! field and the limit), its id (a warm sandbox's when the node agent has
//! one ready), its uploads moved in,
//! its record (QUEUED, one commit, before it is acknowledged), and its
//! submission to the core, which may start it at once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::service::ApiError;
use joblet_core::{FieldError, JobId, JobSpec, JobState};
use joblet_engine::{Event, Submission};
use joblet_sched::model::Unplaceable;
use joblet_shim::JobDir;
use joblet_store::{JobRecord, TransitionExtra};

use super::Engine;
use crate::agent::NodeAgent;
use crate::gpu::admission::Refused;

impl<A: NodeAgent> Engine<A> {
    pub(super) fn submit(
        &mut self,
        given: Option<JobId>,
        owner: String,
        spec: JobSpec,
        secrets: BTreeMap<String, String>,
        work: Option<PathBuf>,
    ) -> Result<JobRecord, ApiError> {
        let now = super::now_ms();
        if let Err(full) = self.disk.admit() {
            if let Some(staged) = work {
                let _ = std::fs::remove_dir_all(staged);
            }
            return Err(full.into());
        }
        // A job the cluster's leader placed here keeps the id it was given
        // (no warm sandbox: they come with ids of their own).
        let id = match given {
            Some(id) => {
                // Recorded already (an assignment seen twice): nothing of
                // the recorded job may be touched.
                if matches!(self.store.get(&id), Ok(Some(_))) {
                    return Err(ApiError::Internal(format!(
                        "job {id} is recorded on this node already"
                    )));
                }
                id
            }
            None => match self.agent.reserve_id(&spec) {
                Some(id) => id,
                None => JobId::parse(&uuid::Uuid::new_v4().to_string())?,
            },
        };
        let sub = Submission::of(id.clone(), &owner, &spec, &self.cfg.rules);
        if let Err(e) = self.admit(&sub, &spec) {
            self.agent.abandon(&id);
            if let Some(staged) = work {
                let _ = std::fs::remove_dir_all(staged);
            }
            return Err(e);
        }
        let dir = self.dirs.job(&id);
        if let Some(staged) = work {
            // Uploads move in whole before the job exists, so a recorded job
            // always has all its files. A warm shim's directory exists
            // already, with an empty `work` the rename replaces.
            let moved = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::rename(&staged, JobDir::new(&dir).work_path()));
            if let Err(e) = moved {
                let _ = std::fs::remove_dir_all(&staged);
                self.agent.abandon(&id);
                return Err(ApiError::Internal(format!(
                    "cannot move the upload into {}: {e}",
                    dir.display()
                )));
            }
        }
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
                self.agent.abandon(&id);
                return Err(crate::service::store_error(e));
            }
        };
        tracing::info!(job = %id, %owner, command = %spec.command, gpus = spec.resources.gpu_count, "job queued");
        self.submitted = Some(rec.clone());
        self.drive(Event::Submitted(Box::new(sub)));
        self.submitted = None;
        Ok(rec)
    }

    /// Whether `spec` could ever run on this node ([`Engine::admit`]),
    /// with nothing recorded or reserved (a workflow's jobs are checked so
    /// before it is accepted).
    pub(super) fn check(&self, owner: &str, spec: &JobSpec) -> Result<(), ApiError> {
        let id = JobId::parse("00000000-0000-4000-8000-000000000000")?;
        let sub = Submission::of(id, owner, spec, &self.cfg.rules);
        self.admit(&sub, spec)
    }

    /// Refuses what could never run on this node: more CPU or memory than
    /// it offers, GPUs it does not have (the node agent's word).
    fn admit(&self, sub: &Submission, spec: &JobSpec) -> Result<(), ApiError> {
        let never = self.core.never_placeable(&sub.request);
        if let Some(e) = never.as_ref().and_then(|why| host_refusal(why, spec)) {
            return Err(e.into());
        }
        let never = never.filter(|_| sub.request.gpu_count > 0);
        self.agent
            .admit(&sub.request, spec, never)
            .map_err(refused_to_api)
    }
}

/// The refusal of a request for more CPU, memory or job slots than the node
/// has, naming the field; `None` for a GPU reason.
fn host_refusal(why: &Unplaceable, spec: &JobSpec) -> Option<FieldError> {
    match why {
        Unplaceable::TooMuchHostMemory {
            asked_mb,
            largest_mb,
        } => Some(FieldError::new(
            "resources.max_memory_mb",
            format!("the job asks for {asked_mb} MiB of memory but this node offers {largest_mb} MiB to jobs; ask for at most {largest_mb} MiB (--max-memory)"),
        )),
        Unplaceable::TooManyCpus {
            asked_millis,
            largest_millis,
        } => {
            let field = if spec.resources.max_cpu_percent.is_some() {
                "resources.max_cpu"
            } else {
                "resources.cpu_cores"
            };
            Some(FieldError::new(
                field,
                format!(
                    "the job asks for {}% of a CPU but this node offers {}% to jobs; ask for at most {}% (--max-cpu) or fewer cores (--cpu-cores), or an admin can raise jobs.cpu_capacity",
                    asked_millis / 10,
                    largest_millis / 10,
                    largest_millis / 10
                ),
            ))
        }
        Unplaceable::NoNodeOffersAll {
            gpus,
            cpu_millis,
            memory_mb,
        } => Some(FieldError::new(
            "resources",
            format!("the job asks for {gpus} GPUs, {}% of a CPU and {memory_mb} MiB of memory together, which this node does not offer at once; ask for less", cpu_millis / 10),
        )),
        Unplaceable::NoJobSlots => Some(FieldError::new(
            "resources",
            "this node runs no jobs (jobs.max_running is 0); ask an admin",
        )),
        _ => None,
    }
}

/// A GPU refusal in the API's terms: a bad variable is the caller's field,
/// the rest is a GPU request this node cannot serve.
fn refused_to_api(r: Refused) -> ApiError {
    match r {
        Refused::Field(f) => ApiError::InvalidField(f),
        other => ApiError::GpuRequest(other.to_string()),
    }
}
