//! Errors of the daemon-side API: launching, reattaching to, waiting for and
//! signalling a shim, and reading what it leaves in its job directory.

use std::io;
use std::path::PathBuf;

use crate::procstat::ProcStatError;

#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error("cannot create job directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },

    #[error("cannot open or lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },

    #[error("a shim already holds {path}: the job is still running; reattach to it instead of launching another")]
    AlreadyRunning { path: PathBuf },

    #[error("cannot open the shim's log {path}: {source}")]
    ShimLog { path: PathBuf, source: io::Error },

    #[error("cannot encode the shim spec for job {job_id}: {source}")]
    EncodeSpec {
        job_id: String,
        source: serde_json::Error,
    },

    #[error("cannot start the shim {program}: {source}")]
    Spawn { program: PathBuf, source: io::Error },

    #[error("cannot send the spec to the shim (pid {pid}) of {dir}: {source}; see its shim.log")]
    SendSpec {
        pid: i32,
        dir: PathBuf,
        source: io::Error,
    },

    #[error("the warm shim was started for job {warm}, not {job}")]
    WrongWarmShim { warm: String, job: String },

    #[error("cannot open a pidfd for shim pid {pid}: {source}")]
    PidFd { pid: i32, source: io::Error },

    #[error("cannot read {path}: {source}")]
    ReadFile { path: PathBuf, source: io::Error },

    #[error("{path} is not valid JSON of the expected shape: {source}")]
    BadJson {
        path: PathBuf,
        source: serde_json::Error,
    },

    #[error("the shim holds {lock} but has not written {path}; it may be stuck at startup, see its shim.log")]
    PidFileMissing { lock: PathBuf, path: PathBuf },

    #[error("{lock} is held but pid {pid} from {path} is not that shim (pid reused?); find the holder with `fuser {lock}`")]
    PidMismatch {
        lock: PathBuf,
        path: PathBuf,
        pid: i32,
    },

    #[error("cannot identify process {pid}: {source}")]
    ProcStat { pid: i32, source: ProcStatError },

    #[error("cannot wait for shim pid {pid}: {source}")]
    Wait { pid: i32, source: io::Error },

    #[error("the shim of {dir} exited without writing exit.json; see its shim.log")]
    Lost { dir: PathBuf },

    #[error("no shim is listening on {path}: the job has already ended (or never started)")]
    NotRunning { path: PathBuf },

    #[error("cannot talk to the shim on {path}: {source}")]
    Control { path: PathBuf, source: io::Error },

    #[error("the shim on {path} did not answer within {secs}s")]
    ControlTimeout { path: PathBuf, secs: u64 },

    #[error("the shim on {path} refused the request: {message}")]
    Refused { path: PathBuf, message: String },

    #[error("the shim on {path} answered something unexpected: {reply:?}")]
    BadReply { path: PathBuf, reply: String },

    #[error("cannot read job output {path}: {source}")]
    ReadLog { path: PathBuf, source: io::Error },

    #[error("job output {path}: {source}")]
    LogCorrupt {
        path: PathBuf,
        source: joblet_core::joblog::LogError,
    },
}
