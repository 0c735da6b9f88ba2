//! Workflow runs on this node: the thin async shell around
//! `joblet-workflow`'s pure [`joblet_workflow::WorkflowCore`].
//!
//! - [`driver`]: the task that owns every live run's core, stores its
//!   snapshot after every step and carries out its actions (job attempts go
//!   through the job service and the one scheduler, like any job);
//! - [`found`]: the store's records of a run's jobs in the core's terms;
//! - [`snapshot`]: a run's snapshot as the store keeps it (a job a row);
//! - [`files`]: a run's uploaded files and each attempt's copy of them.
//!
//! The API reaches the driver through [`WorkflowHandle`]; reads (status,
//! list) go to the store. `docs/workflows.md` describes what users see.

mod driver;
pub mod files;
mod found;
pub mod snapshot;

use std::sync::Arc;

use joblet_store::Store;
use tokio::sync::{mpsc, oneshot};

use crate::service::{ApiError, Jobs};
use crate::state_dir::StateDir;
use driver::{Driver, Msg};

/// Cheap to clone; the workflow service holds one.
#[derive(Clone)]
pub struct WorkflowHandle {
    tx: mpsc::Sender<Msg>,
}

impl WorkflowHandle {
    /// Resumes the runs a previous daemon left (see
    /// [`driver::Driver::resume`]), then drives runs in a task. Call once
    /// the engine runs: the driver hears of jobs' ends from it.
    pub async fn start(
        store: Arc<Store>,
        jobs: Arc<Jobs>,
        dirs: StateDir,
        sandboxed: bool,
    ) -> WorkflowHandle {
        let (tx, rx) = mpsc::channel(256);
        let mut driver = Driver::new(store, jobs, dirs, sandboxed);
        driver.resume().await;
        tokio::spawn(driver.run(rx));
        WorkflowHandle { tx }
    }

    /// Starts run `id` (recorded PENDING). Should the daemon stop before
    /// the driver does, the run starts when the daemon comes back.
    pub async fn start_run(&self, id: String) -> Result<(), ApiError> {
        self.tx
            .send(Msg::Start { id })
            .await
            .map_err(|_| ApiError::ShuttingDown)
    }

    /// Stops run `id`: its running jobs are stopped, its waiting ones
    /// canceled. Returns once that is asked for, not once they ended.
    pub async fn stop_run(&self, id: String) -> Result<(), ApiError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Stop { id, reply })
            .await
            .map_err(|_| ApiError::ShuttingDown)?;
        rx.await.map_err(|_| ApiError::ShuttingDown)?
    }
}
