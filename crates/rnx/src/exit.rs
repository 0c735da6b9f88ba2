//! rnx's exit codes, the contract scripts rely on (also printed by
//! `rnx --help`).
//!
//! | code | meaning |
//! |------|---------|
//! | 0    | success |
//! | 1    | the node refused or failed the request; `rnx workflow run --follow`: the workflow ended FAILED, STOPPED or CANCELED |
//! | 2    | usage error: a bad flag or value (clap's own code) |
//! | 3    | cannot connect to the node, or the TLS handshake failed; or the connection broke while attached to a job or running `rnx job exec` |
//! | 4    | the client config file is missing or invalid |
//! | N    | `rnx job run --follow` / `-i` / `-t`, `rnx job attach`, `rnx runtime test`: the job's own exit code; `rnx job exec`: the command's (126: it could not enter the job, 127: not found there, 128+N: signal N) |
//! | 125  | `rnx job run --follow`, `rnx runtime test`: the job ended without an exit code |
//! | 130  | `rnx workflow run --follow` interrupted (Ctrl-C): the workflow keeps running |

use crate::error::Error;
use crate::follow::FollowError;

pub const SUCCESS: u8 = 0;
pub const REFUSED: u8 = 1;
pub const USAGE: u8 = 2;
pub const CONNECT: u8 = 3;
pub const CONFIG: u8 = 4;
pub const JOB_WITHOUT_EXIT_CODE: u8 = 125;
/// Following was interrupted (128 + SIGINT, as a shell reports it).
pub const INTERRUPTED: u8 = 130;

/// The exit code for an error.
pub fn for_error(e: &Error) -> u8 {
    match e {
        Error::InvalidRequest { .. }
        | Error::Upload(_)
        | Error::BuildFiles(_)
        | Error::WorkflowFile { .. }
        | Error::WorkflowFormat(_) => USAGE,
        Error::UnknownWorkflowJob { .. } | Error::WorkflowJobNotStarted { .. } => REFUSED,
        Error::Config(_) => CONFIG,
        Error::Connect(c) if c.is_config_problem() => CONFIG,
        Error::Connect(_) => CONNECT,
        Error::Node(status) if status.code() == tonic::Code::Unavailable => CONNECT,
        Error::Node(_) | Error::BadResponse { .. } | Error::Output(_) => REFUSED,
        Error::Logs(FollowError::Lost { .. }) | Error::Lost { .. } => CONNECT,
        Error::Logs(FollowError::Status(s)) if s.code() == tonic::Code::Unavailable => CONNECT,
        Error::Logs(_) => REFUSED,
        Error::Runtime(_) => REFUSED,
    }
}

/// What `rnx job run --follow` and `rnx runtime test` exit with for a job's exit code: the code
/// itself when it fits, else [`JOB_WITHOUT_EXIT_CODE`].
pub fn for_job(exit_code: Option<i32>) -> u8 {
    exit_code
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(JOB_WITHOUT_EXIT_CODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_codes() {
        assert_eq!(for_job(Some(0)), 0);
        assert_eq!(for_job(Some(3)), 3);
        assert_eq!(for_job(Some(255)), 255);
        assert_eq!(for_job(Some(256)), JOB_WITHOUT_EXIT_CODE);
        assert_eq!(for_job(Some(-1)), JOB_WITHOUT_EXIT_CODE);
        assert_eq!(for_job(None), JOB_WITHOUT_EXIT_CODE);
    }

    #[test]
    fn error_codes() {
        let unavailable = Error::Node(tonic::Status::unavailable("down"));
        assert_eq!(for_error(&unavailable), CONNECT);
        let refused = Error::Node(tonic::Status::invalid_argument("bad"));
        assert_eq!(for_error(&refused), REFUSED);
        let invalid = Error::InvalidRequest {
            flag: "--gpu",
            source: joblet_core::FieldError::new("resources.gpu_count", "bad"),
        };
        assert_eq!(for_error(&invalid), USAGE);
        let config = Error::Config(crate::config::ConfigError::NotFound { home: "h".into() });
        assert_eq!(for_error(&config), CONFIG);
    }
}
