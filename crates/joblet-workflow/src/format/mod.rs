//! The workflow file: YAML text in, a checked [`Workflow`] out, or a
//! [`FormatError`] with the file, line and column at fault.
//!
//! ```yaml
//! name: ml-training            # optional
//! description: nightly run     # optional
//! resources: {max_memory: 4096} # optional defaults for every job
//! retries: 1                   # optional default for every job
//! jobs:
//!   data-preprocessing:
//!     command: "python3"
//!     args: ["preprocess.py"]
//!   model-training:
//!     command: "python3"
//!     requires:
//!       - data-preprocessing: "COMPLETED"
//!     resources: {gpu_count: 2, gpu_memory_mb: 8192}
//! ```
//!
//! Everything is checked before anything runs: the keys (unknown ones are
//! refused), each value's form, job names, requirements (unknown jobs, a
//! job requiring itself, cycles, jobs that can never start), GPUs beyond
//! what any node has, and each job's request under the rules `rnx job run`
//! follows ([`joblet_core::JobRequest::validate`]). `docs/workflows.md`
//! describes every key.

mod check;
mod dag;
mod error;
mod locate;
mod raw;
mod request;
mod values;

use std::collections::HashMap;
use std::time::Duration;

pub use error::{FormatError, Problem, Route};
pub use values::{MAX_RETRIES, MAX_RETRY_BACKOFF};

use crate::graph::Graph;
use crate::need::Need;

/// The most jobs one workflow may have.
pub const MAX_JOBS: usize = 100_000;

/// A job's `retry_backoff` when neither it nor the workflow gives one.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// What the nodes that will run the workflow can offer, for the checks of
/// requests no node could run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most GPUs any node has; `None`: not checked (a workflow read
    /// back from the store, already checked when it was submitted).
    pub max_gpus_per_node: Option<u32>,
}

/// A checked workflow: jobs in file order, requirements that form a DAG in
/// which every job can start in some run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    file: String,
    name: Option<String>,
    description: Option<String>,
    jobs: Vec<Job>,
    index: HashMap<String, usize>,
    graph: Graph,
}

/// One job of a workflow, the workflow's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub runtime: Option<String>,
    pub requires: Vec<Requirement>,
    pub resources: JobResources,
    /// Files and directories on the submitting machine, relative to the
    /// workflow file, copied into the job's `/work`.
    pub uploads: Vec<String>,
    /// `NAME` or `NAME:ro`.
    pub volumes: Vec<String>,
    pub network: Option<String>,
    pub environment: Vec<(String, String)>,
    pub secret_environment: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// How many times a FAILED attempt is run again (0 to [`MAX_RETRIES`]).
    pub retries: u8,
    /// The wait before the first retry; it doubles before each next one.
    pub retry_backoff: Duration,
    /// What runs it (`--executor`); `None`: the node's default.
    pub executor: Option<String>,
    /// CDI devices, `vendor.com/class=name` each (`--device`).
    pub devices: Vec<String>,
}

/// `- JOB: STATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub job: String,
    pub need: Need,
}

/// A job's resources; `None`: not asked for (neither by the job nor by
/// the workflow's defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobResources {
    /// Percent of one CPU (100 = one core).
    pub max_cpu: Option<u64>,
    pub max_memory_mb: Option<u64>,
    /// Bytes per second (`max_iobps`, or its alias `max_io_bps`).
    pub max_iobps: Option<u64>,
    /// A CPU list like `0-3`.
    pub cpu_cores: Option<String>,
    /// Whole GPUs (1 with `gpu_milli`).
    pub gpu_count: Option<u64>,
    /// A share of one GPU in thousandths (`gpu_count: 0.5` → 500).
    pub gpu_milli: Option<u64>,
    /// MiB per GPU.
    pub gpu_memory_mb: Option<u64>,
}

impl Workflow {
    /// Reads and checks a workflow file's `text`; `file` names it in
    /// errors.
    pub fn parse(text: &str, file: &str, limits: &Limits) -> Result<Workflow, FormatError> {
        check::workflow(text, file, limits)
    }

    /// The file name given to [`Workflow::parse`].
    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The jobs, in file order.
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    pub fn job(&self, name: &str) -> Option<&Job> {
        self.index.get(name).map(|&i| &self.jobs[i])
    }

    /// A node's refusal of job `job`'s request (`field` as
    /// [`joblet_core::JobRequest::validate`] names fields: more CPU or
    /// memory than the node offers, a runtime it lacks) as an error at the
    /// key of `text` that asked for it. `text` is the file this workflow
    /// was read from.
    pub fn refusal(&self, text: &str, job: &Job, field: &str, problem: String) -> FormatError {
        check::refusal(self, text, job, field, problem)
    }

    pub(crate) fn graph(&self) -> &Graph {
        &self.graph
    }
}
