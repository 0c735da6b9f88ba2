//! The files of one job directory, shared by the shim and the daemon.

use std::io;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::ShimError;
use crate::spec::PidRecord;

/// A job's directory. Every file the shim and the daemon exchange lives here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDir {
    root: PathBuf,
}

impl JobDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JobDir { root: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Locked by the daemon before spawn, held by the shim for its life.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("shim.lock")
    }

    /// The shim's [`PidRecord`].
    pub fn shim_pid_path(&self) -> PathBuf {
        self.root.join("shim.pid")
    }

    /// The job leader's [`PidRecord`].
    pub fn job_pid_path(&self) -> PathBuf {
        self.root.join("job.pid")
    }

    /// The job's output, framed by `joblet_core::joblog`.
    pub fn output_log_path(&self) -> PathBuf {
        self.root.join("output.log")
    }

    /// Where the shim takes `stop <grace_ms>` / `kill` requests.
    pub fn control_sock_path(&self) -> PathBuf {
        self.root.join("control.sock")
    }

    /// An interactive job's input socket (see [`crate::input`]).
    pub fn input_sock_path(&self) -> PathBuf {
        self.root.join("input.sock")
    }

    /// Where the control socket goes once the job has ended (renamed, not
    /// removed: see `shim::close`).
    pub fn closed_control_sock_path(&self) -> PathBuf {
        self.root.join(".control.sock.closed")
    }

    /// The job's [`ShimExit`](crate::ShimExit).
    pub fn exit_path(&self) -> PathBuf {
        self.root.join("exit.json")
    }

    /// The job's files: its uploads, and its `/work` (bound in, or copied
    /// into a sized one). The daemon makes it, ahead for a warm shim.
    pub fn work_path(&self) -> PathBuf {
        self.root.join("work")
    }

    /// The shim's own diagnostics (its stdout and stderr).
    pub fn shim_log_path(&self) -> PathBuf {
        self.root.join("shim.log")
    }

    /// `shim.pid`, or `None` if the shim has not written it (yet).
    pub fn read_shim_pid(&self) -> Result<Option<PidRecord>, ShimError> {
        read_json(&self.shim_pid_path())
    }

    /// `job.pid`, or `None` if the job was never spawned (yet).
    pub fn read_job_pid(&self) -> Result<Option<PidRecord>, ShimError> {
        read_json(&self.job_pid_path())
    }
}

/// Reads and parses a JSON file; a missing file is `None`.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, ShimError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ShimError::ReadFile {
                path: path.to_owned(),
                source,
            })
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| ShimError::BadJson {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_pid_file_is_none_and_garbage_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = JobDir::new(tmp.path());
        assert_eq!(dir.read_shim_pid().unwrap(), None);
        std::fs::write(dir.job_pid_path(), b"{\"pid\":7,\"start_time\":9}").unwrap();
        assert_eq!(
            dir.read_job_pid().unwrap(),
            Some(PidRecord {
                pid: 7,
                start_time: 9
            })
        );
        std::fs::write(dir.shim_pid_path(), b"{\"pid\":").unwrap();
        let err = dir.read_shim_pid().unwrap_err();
        assert!(err.to_string().contains("shim.pid"), "{err}");
    }
}
