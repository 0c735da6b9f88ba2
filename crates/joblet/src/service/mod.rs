//! The daemon's operations, transport-neutral: admission, authorisation
//! and validation of every request live here, once per operation, so the
//! gRPC handlers ([`crate::grpc`]) and any later transport only translate
//! into these calls and out of their results.
//!
//! Seven services, one per area: [`Jobs`] (run, submit, status, list, logs,
//! stop, kill, delete, whoami), [`Audit`] (the GPU audit log), [`Gpus`]
//! (status, health, drain / offline / online), [`Runtimes`] (list, info,
//! install, build, remove, test), [`Volumes`] (create, list, inspect,
//! remove, share) and [`Workflows`] (run or validate, status, list, stop,
//! delete), and [`History`] (GPU readings over time, GPU-hours, queue
//! waits, failures: the web console's charts); [`Tokens`] mints and checks
//! the REST API's tokens and console sessions. Each method takes the
//! [`Caller`] and domain values, checks the caller's role first
//! ([`Access`]), and returns domain values ([`joblet_core::record`],
//! [`GpuStatus`], a [`LogStream`]) or an [`ApiError`].
//!
//! Reads go to the store; changes go through the engine's handle, the only
//! part of the engine this uses.

pub mod admission;
mod attach;
mod audit;
mod caller;
mod error;
mod exec;
mod gpus;
mod history;
mod jobs;
pub mod logs;
mod logwatch;
mod mounts;
mod nodes;
mod runtimes;
pub mod tokens;
mod volumes;
mod workflow_view;
mod workflows;

pub use admission::Admission;
pub use attach::{Attachment, Input, JobInput, TakesInput};
pub use audit::{Audit, AuditQuery};
pub use caller::{Access, Caller, IdentityError};
pub use error::{store_error, ApiError};
pub use exec::{ExecEvent, ExecInput, ExecRequest, ExecSession, ExecSetup};
pub use gpus::{GpuHealth, GpuReport, GpuStatus, Gpus, HISTORY};
pub use history::{
    FailureGroup, GpuHistory, GpuHoursRow, GroupBy, History, HistoryPoint, QueueWaitDay, Window,
    DEFAULT_DAYS, MAX_DAYS,
};
pub use jobs::{CallerExecutor, JobFilter, Jobs, Submission, WhoAmI};
pub use logs::{LogError, LogStream};
pub use logwatch::LogWatch;
pub use nodes::{NodeList, Nodes};
pub use runtimes::{RuntimeInfo, Runtimes};
pub use tokens::{CredentialError, Tokens};
pub use volumes::{VolumeInfo, Volumes};
pub use workflow_view::{WorkflowInfo, WorkflowJobInfo};
pub use workflows::{shared_volume_name, WorkflowSubmission, Workflows};

#[cfg(test)]
mod tests;
