//! Everything an rnx command can fail with. Each message says what went
//! wrong and, where rnx can tell, what to do; [`crate::exit::for_error`]
//! picks the exit code.

use std::io;

use joblet_core::FieldError;
use tonic::{Code, Status};

use crate::client::{self, ConnectError};
use crate::config::ConfigError;
use crate::follow::FollowError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `job run` request the node would refuse, caught before sending.
    #[error("invalid {flag}: {source}")]
    InvalidRequest {
        flag: &'static str,
        source: FieldError,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The node answered with an error.
    #[error("{}", describe(.0))]
    Node(Status),
    /// The node answered, but without what the API promises.
    #[error("the node's {call} answer has no {missing}; is the daemon the same version as rnx?")]
    BadResponse {
        call: &'static str,
        missing: &'static str,
    },
    #[error("{}", describe_follow(.0))]
    Logs(FollowError),
    /// The connection broke while attached to a job or running an exec.
    #[error("lost the connection to the node while {what} job {job}: {last}. {after}")]
    Lost {
        what: &'static str,
        job: String,
        last: String,
        after: String,
    },
    #[error("cannot write to stdout: {0}")]
    Output(#[source] io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] io::Error),
    /// An `--upload` path that cannot be sent.
    #[error(transparent)]
    Upload(#[from] crate::upload::UploadError),
    /// A workflow file that cannot be read.
    #[error("cannot read workflow file {path}: {source}")]
    WorkflowFile {
        path: std::path::PathBuf,
        source: io::Error,
    },
    /// A workflow file that does not check: `file:line:col: message`.
    #[error(transparent)]
    WorkflowFormat(Box<joblet_workflow::FormatError>),
    /// `rnx workflow logs ID JOB` with a JOB the workflow does not have.
    #[error("workflow {workflow} has no job {job:?}; its jobs: {}", .names.join(", "))]
    UnknownWorkflowJob {
        workflow: String,
        job: String,
        names: Vec<String>,
    },
    /// `rnx workflow logs ID JOB` for a job with no job yet.
    #[error("job {job} of workflow {workflow} has no output: it is {state} and has not been submitted{}", .reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    WorkflowJobNotStarted {
        workflow: String,
        job: String,
        state: String,
        reason: Option<String>,
    },
    /// A `rnx runtime build` directory that cannot be sent.
    #[error(transparent)]
    BuildFiles(#[from] crate::runtime_files::BuildFilesError),
}

impl Error {
    /// A failed call: a transport failure is explained as a connection
    /// problem with `address`; anything else is the node's answer.
    pub fn from_status(address: &str, status: Status) -> Error {
        match client::transport_failure(address, &status) {
            Some(connect) => Error::Connect(connect),
            None => Error::Node(status),
        }
    }

    pub fn from_follow(address: &str, e: FollowError) -> Error {
        match e {
            FollowError::Status(status) => Error::from_status(address, status),
            FollowError::Output(io) => Error::Output(io),
            other => Error::Logs(other),
        }
    }

    /// Writing to a closed pipe (`rnx job log ID | head`): not worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// The node's message as is, with a hint for the codes where one helps.
fn describe(status: &Status) -> String {
    let msg = if status.message().is_empty() {
        format!("{:?}", status.code())
    } else {
        status.message().to_owned()
    };
    match status.code() {
        Code::PermissionDenied => format!("permission denied: {msg}"),
        Code::Unauthenticated => format!(
            "the node did not accept this client's certificate: {msg}; use an rnx-config.yml issued by this node"
        ),
        Code::Unavailable => format!(
            "the node is unavailable: {msg}. Is the daemon running? (`joblet server --config …`)"
        ),
        _ => msg,
    }
}

fn describe_follow(e: &FollowError) -> String {
    match e {
        FollowError::Status(s) => describe(s),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_messages_are_kept_with_hints_only_where_useful() {
        let e = Error::Node(Status::invalid_argument(
            "resources.max_cpu: must not be negative",
        ));
        assert_eq!(e.to_string(), "resources.max_cpu: must not be negative");
        let e = Error::Node(Status::permission_denied("bob has role \"viewer\""));
        assert_eq!(e.to_string(), "permission denied: bob has role \"viewer\"");
        let e = Error::from_status("h:1", Status::unavailable("shutting down"));
        assert!(e.to_string().contains("Is the daemon running?"), "{e}");
    }
}
