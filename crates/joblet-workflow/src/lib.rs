//! Joblet's workflows: the file format, checked before anything runs, and
//! the decision core of a workflow run.
//!
//! - [`format`](mod@format): YAML text in, a checked [`Workflow`] out, or a
//!   [`FormatError`] naming the file, line and column at fault and the
//!   accepted form. Each job becomes the [`joblet_core::JobRequest`] that
//!   `rnx job run` would send ([`Job::request`]), checked under the same
//!   rules.
//! - [`core`]: [`WorkflowCore::handle`]`(event, now) -> Vec<Action>`, the
//!   pure state machine of one run, whose state is plain data
//!   ([`Snapshot`]) to store and restore.
//!
//! `docs/workflows.md` describes the format and these rules for users.
//!
//! # Requirements
//!
//! A job lists its requirements as `- JOB: STATE`. `COMPLETED`, `FAILED`
//! or `STOPPED` holds once JOB's last attempt ended in that state; `ANY`
//! holds once JOB is final in any state, CANCELED included (for jobs that
//! must follow another whatever became of it: cleanup, reports).
//! Requirements form a DAG, and a file in which some job can never start
//! (two requirement paths ask one job for two different end states) is
//! refused, so in a run a job is only ever CANCELED because of how other
//! jobs ended.
//!
//! # A job in a run
//!
//! - It is submitted as soon as the run is RUNNING, not stopping, and each
//!   of its requirements holds. [`Event::Started`] submits every job
//!   without requirements, together; independent branches run side by
//!   side.
//! - It is CANCELED as soon as one of its requirements can no longer hold:
//!   the job it names is final in a state the requirement does not accept.
//!   A CANCELED job satisfies only `ANY`, so cancellation runs down the
//!   graph; each [`CancelReason`] names the requirement, and the end that
//!   began the chain.
//! - An attempt that ends FAILED with retries left (attempt `n` of
//!   `retries + 1`) waits in RETRY_WAIT until its end time plus
//!   `retry_backoff × 2^(n−1)` (1 s, 2 s, 4 s… by default), then attempt
//!   `n + 1` is submitted (on the first [`Event::Tick`] at or after that
//!   time). COMPLETED and STOPPED are never retried. The job's final state
//!   is its last attempt's.
//! - Final states are COMPLETED, FAILED, STOPPED and CANCELED; a final
//!   state never changes.
//!
//! # The run
//!
//! PENDING until [`Event::Started`], RUNNING until every job is final;
//! then exactly one of:
//!
//! - **CANCELED**: it was stopped while PENDING. Every job is CANCELED;
//!   nothing ran.
//! - **STOPPED**: it was stopped while RUNNING. Jobs that were submitted
//!   are asked to stop ([`Action::StopJob`]), jobs that wait (for their
//!   requirements or for a retry) are CANCELED, nothing new is submitted;
//!   it is STOPPED once every job is final, whatever those last jobs ended
//!   as.
//! - **FAILED**: some job ended FAILED or STOPPED, and no job that requires
//!   it in that state (or `ANY`) ran. [`Outcome::Failed`] names the first
//!   such job in file order.
//! - **COMPLETED**: otherwise. Every job ended COMPLETED, was CANCELED
//!   because a requirement could not hold, or ended FAILED or STOPPED and a
//!   job that accepts that ran (an `alert` job requiring `train: FAILED`
//!   handles `train`'s failure).
//!
//! A failure does not stop the other branches: the verdict comes when
//! every job is final.
//!
//! # Durability
//!
//! The core's state is its [`Snapshot`]. Stored after every `handle`
//! before the actions are carried out, and squared with the store's
//! records of the jobs by [`Event::Restored`] after a restart, it resumes a
//! run with no attempt submitted twice and none lost; the contract is in
//! [`core`]'s `restore` module documentation and on [`Event::Restored`].
//!
//! This crate does no IO besides reading the text it is given: no files,
//! no clock, no store, no async runtime. It must not depend on tokio,
//! nix, std::fs, the store or gRPC.

pub mod core;
pub mod format;
mod graph;
mod need;

pub use crate::core::{
    Action, CancelReason, Event, Found, FoundState, JobPhase, JobRecord, Outcome, RestoreError,
    Snapshot, WorkflowCore, WorkflowState,
};
pub use format::{FormatError, Job, JobResources, Limits, Problem, Requirement, Route, Workflow};
pub use need::{EndState, Final, Need};
