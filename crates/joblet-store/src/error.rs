//! The store's error type: every message names the database, key file or job involved.

use std::path::PathBuf;

use joblet_core::id::PrefixError;
use joblet_core::{JobId, JobState, TransitionError};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation (disk full, file not writable, database locked for longer
    /// than the busy timeout, ...).
    #[error("job database {path}: could not {op}: {source}")]
    Sqlite {
        path: PathBuf,
        op: String,
        #[source]
        source: rusqlite::Error,
    },

    /// A file the store needs (the database, the key file) could not be created or read.
    #[error("could not {op} {path}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// SQLite would not put the database in WAL mode.
    #[error(
        "job database {path}: could not switch to the WAL journal (SQLite kept {got:?}); \
         put the state directory on a local filesystem"
    )]
    JournalMode { path: PathBuf, got: String },

    /// The secret-sealing key file is unusable.
    #[error("secret key file {path}: {problem}")]
    Key { path: PathBuf, problem: String },

    /// A schema migration step failed; the database is left at the version before it.
    #[error(
        "job database {path}: migration to schema version {version} failed: {source}; \
         the database was left unchanged at version {from}"
    )]
    Migration {
        path: PathBuf,
        from: u32,
        version: u32,
        #[source]
        source: rusqlite::Error,
    },

    /// The database was written by a newer joblet.
    #[error(
        "job database {path} has schema version {found}, but this joblet supports at most \
         version {supported}: upgrade joblet (or point it at another state directory)"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error("no job with id {0} (see `rnx job list`)")]
    NotFound(JobId),

    #[error("a job with id {0} already exists")]
    AlreadyExists(JobId),

    /// A user-typed id or prefix does not name exactly one job.
    #[error(transparent)]
    JobRef(#[from] PrefixError),

    /// The job state machine does not allow the requested transition.
    #[error("job {id}: {source}")]
    Transition {
        id: JobId,
        #[source]
        source: TransitionError,
    },

    /// The job is still active; only finished jobs may be deleted.
    #[error("job {id} is {state}: stop it (`rnx job stop {id}`) before deleting it")]
    NotFinished { id: JobId, state: JobState },

    /// A stored value could not be read back (bad JSON, unknown state name, a sealed secret
    /// that does not decrypt with the key file).
    #[error("job {id}: stored data is corrupt: {what}")]
    Corrupt { id: String, what: String },

    /// A stored GPU record could not be read back.
    #[error("GPU {uuid}: stored data is corrupt: {what}")]
    GpuCorrupt { uuid: String, what: String },

    /// A GPU record could not be encoded for storage.
    #[error("GPU {uuid}: could not encode its job list: {source}")]
    GpuEncode {
        uuid: String,
        #[source]
        source: serde_json::Error,
    },

    /// A GPU allocation could not be stored or read back.
    #[error("GPU allocation of job {job}: {what}")]
    Allocation { job: String, what: String },

    /// A GPU audit record could not be stored or read back.
    #[error("GPU audit record of job {job}: {what}")]
    Audit { job: String, what: String },

    /// A volume of that name is recorded already.
    #[error("a volume named {0} already exists (see `rnx volume list`)")]
    VolumeExists(String),

    #[error("no volume named {0} (see `rnx volume list`)")]
    VolumeNotFound(String),

    /// A volume record could not be stored or read back.
    #[error("volume {name}: {what}")]
    Volume { name: String, what: String },

    /// No workflow run has this id or prefix.
    #[error("no workflow with id or prefix {0:?} (see `rnx workflow list`)")]
    WorkflowNotFound(String),

    /// A workflow id prefix that is not one, or matches several runs.
    #[error("{0}")]
    WorkflowRef(String),

    /// A stored workflow row that does not read back.
    #[error("workflow {id}: stored data is corrupt: {what}")]
    WorkflowCorrupt { id: String, what: String },

    /// A workflow that is not finished cannot be deleted.
    #[error("workflow {id} is {state}: stop it (`rnx workflow stop {id}`) and let its jobs end before deleting it")]
    WorkflowNotFinished { id: String, state: String },

    /// A token of that name exists already.
    #[error("a token named {0} already exists (see `rnx token list`); pick another name, or revoke it first")]
    CredentialExists(String),

    /// A stored credential that does not read back.
    #[error("credential {id}: {what}")]
    Credential { id: String, what: String },

    /// A value could not be encoded for storage.
    #[error("job {id}: could not encode {what}: {source}")]
    Encode {
        id: JobId,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },

    /// Sealing the job's secrets failed.
    #[error("job {id}: could not seal its secrets (encryption failed)")]
    Seal { id: JobId },
}

impl StoreError {
    /// Whether it failed for want of disk space (SQLite's `SQLITE_FULL`, or
    /// `ENOSPC`/`EDQUOT` from a file): the operation can succeed once
    /// space is freed.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Sqlite { source, .. } | StoreError::Migration { source, .. } => {
                matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DiskFull)
                )
            }
            StoreError::Io { source, .. } => matches!(source.raw_os_error(), Some(ENOSPC | EDQUOT)),
            _ => false,
        }
    }
}

/// `ENOSPC` and `EDQUOT` on Linux.
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;
