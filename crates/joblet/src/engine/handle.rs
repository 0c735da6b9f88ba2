//! The engine's handle: what API handlers hold to submit, stop and delete
//! jobs through the engine's loop, and to hear of jobs' ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use joblet_core::{JobId, JobSpec};
use joblet_store::JobRecord;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{Msg, Reply};
use crate::outcome::Final;
use crate::service::ApiError;

/// Cheap to clone; every API handler holds one.
#[derive(Clone)]
pub struct EngineHandle {
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) ended: broadcast::Sender<Ended>,
}

/// A job that reached its final state.
#[derive(Debug, Clone)]
pub struct Ended {
    pub id: JobId,
    /// Its final state: recorded, or (on a full state disk) to be recorded
    /// as soon as there is room; `None`: not known here (the store says).
    pub recorded: Option<Final>,
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
            id: None,
            owner,
            spec: Box::new(spec),
            secrets,
            work,
            reply,
        })
        .await
    }

    /// Cluster mode: records and starts run `id` of a job the cluster's
    /// leader placed here (`spec.cluster` names the placement; see
    /// `joblet_engine`'s pinned jobs). Nothing is uploaded and no secret
    /// travels with it.
    pub async fn submit_assigned(
        &self,
        id: JobId,
        owner: String,
        spec: JobSpec,
    ) -> Result<JobRecord, ApiError> {
        self.call(|reply| Msg::Submit {
            id: Some(id),
            owner,
            spec: Box::new(spec),
            secrets: BTreeMap::new(),
            work: None,
            reply,
        })
        .await
    }

    /// Refuses `specs` as [`EngineHandle::submit`] would if the node could
    /// never run one (more CPU, memory or GPUs than it offers), naming the
    /// index of the first; records nothing.
    pub async fn check(&self, owner: String, specs: Vec<JobSpec>) -> Result<(), (usize, ApiError)> {
        let (reply, rx) = oneshot::channel();
        let shutting = |_| (0, ApiError::ShuttingDown);
        self.tx
            .send(Msg::Check {
                owner,
                specs,
                reply,
            })
            .await
            .map_err(shutting)?;
        rx.await.map_err(|_| (0, ApiError::ShuttingDown))?
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

    /// Deletes a job's record and files: a finished job, or a queued one
    /// (taken off the queue first; it never ran, so nothing is lost). A
    /// starting or running job is refused: stop it first.
    pub async fn delete(&self, id: JobId) -> Result<(), ApiError> {
        self.call(|reply| Msg::Delete { id, reply }).await
    }

    /// Stops the engine (the daemon is stopping): the node agent's warm
    /// sandboxes are torn down and their shims reaped, for a few seconds at
    /// most, so none is left behind the daemon. Running jobs keep running
    /// under their shims.
    pub async fn shutdown(&self) {
        let (done, rx) = oneshot::channel();
        if self.tx.send(Msg::Shutdown(done)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Announces every job that reaches a final state (log followers wait on it).
    pub fn subscribe_ended(&self) -> broadcast::Receiver<Ended> {
        self.ended.subscribe()
    }
}
