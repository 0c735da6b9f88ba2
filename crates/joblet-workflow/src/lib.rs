//! Joblet's workflows: the file format, checked before anything runs.
//!
//! [`format`](mod@format): YAML text in, a checked [`Workflow`] out, or a
//! [`FormatError`] naming the file, line and column at fault and the
//! accepted form. Each job becomes the [`joblet_core::JobRequest`] that
//! `rnx job run` would send ([`Job::request`]), checked under the same
//! rules.
//!
//! A job lists its requirements as `- JOB: STATE`. `COMPLETED`, `FAILED`
//! or `STOPPED` holds once JOB's last attempt ended in that state; `ANY`
//! holds once JOB is final in any state, CANCELED included (for jobs that
//! must follow another whatever became of it: cleanup, reports).
//! Requirements form a DAG, and a file in which some job can never start
//! (two requirement paths ask one job for two different end states) is
//! refused.
//!
//! This crate does no IO besides reading the text it is given: no files,
//! no clock, no store, no async runtime. It must not depend on tokio,
//! nix, std::fs, the store or gRPC.

pub mod format;
mod graph;
mod need;

pub use format::{FormatError, Job, JobResources, Limits, Problem, Requirement, Route, Workflow};
pub use need::{EndState, Final, Need};
