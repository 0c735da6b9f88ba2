//! Errors of starting a sandboxed job, and the setup [`Stage`] a failure
//! inside the init process is attributed to.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::config::ConfigError;

/// Where inside the sandbox init a setup step failed (or warned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Reading or checking the config; the process environment.
    Config,
    /// Creating the namespaces.
    Unshare,
    /// Entering the job's cgroups (v1 `tasks`, `clone3` into cgroup2).
    Cgroup,
    /// Forking pid 1 or the job.
    Fork,
    /// The root filesystem: tmpfs root, read-only binds, `/work`, `/tmp`,
    /// `pivot_root`.
    Rootfs,
    /// `/proc` and its masked paths.
    Proc,
    /// `/dev` and the extra devices.
    Dev,
    /// The configured binds of host paths at other paths.
    Binds,
    /// The configured masked paths.
    Masks,
    Hostname,
    /// Bringing up `lo` in the new network namespace.
    Network,
    /// `no_new_privs`, uid/gid, capabilities.
    Privileges,
    Seccomp,
    /// Looking up and executing the command.
    Exec,
    /// A bug: the init process panicked.
    Internal,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Config => "config",
            Stage::Unshare => "unshare",
            Stage::Cgroup => "cgroup",
            Stage::Fork => "fork",
            Stage::Rootfs => "rootfs",
            Stage::Proc => "proc",
            Stage::Dev => "dev",
            Stage::Binds => "binds",
            Stage::Masks => "masks",
            Stage::Hostname => "hostname",
            Stage::Network => "network",
            Stage::Privileges => "privileges",
            Stage::Seccomp => "seccomp",
            Stage::Exec => "exec",
            Stage::Internal => "internal",
        }
    }

    pub(crate) const ALL: [Stage; 15] = [
        Stage::Config,
        Stage::Unshare,
        Stage::Cgroup,
        Stage::Fork,
        Stage::Rootfs,
        Stage::Proc,
        Stage::Dev,
        Stage::Binds,
        Stage::Masks,
        Stage::Hostname,
        Stage::Network,
        Stage::Privileges,
        Stage::Seccomp,
        Stage::Exec,
        Stage::Internal,
    ];
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Stage {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s).ok_or(())
    }
}

/// Starting a sandboxed job failed; in every case the job did not run and
/// the init process has been killed and reaped.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("invalid sandbox config: {0}")]
    InvalidConfig(#[from] ConfigError),
    #[error("creating the sandbox init's pipes: {0}")]
    Pipe(#[source] io::Error),
    #[error("starting the sandbox init {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("sending the config to sandbox init (pid {pid}): {source}; did the program call run_init first?")]
    SendConfig {
        pid: i32,
        #[source]
        source: io::Error,
    },
    /// A host path of the job's own part (its work directory, a bind's
    /// or device's source) could not be opened for a warm sandbox; the
    /// message names the config field and the paths.
    #[error("the job's host paths: {0}")]
    HostSource(io::Error),
    #[error("releasing sandbox init (pid {pid}): {source}")]
    Release {
        pid: i32,
        #[source]
        source: io::Error,
    },
    /// The init process reported that a setup step failed.
    #[error("sandbox setup failed at stage {stage} (init pid {pid}): {message}")]
    Setup {
        pid: i32,
        stage: Stage,
        message: String,
    },
    #[error("sandbox init (pid {pid}) sent an unexpected status line {line:?}; is the init binary from the same build?")]
    Protocol { pid: i32, line: String },
    #[error("{program} (pid {pid}) ended without running the sandbox init; its main must call run_init() first when given these arguments")]
    NotInit { pid: i32, program: PathBuf },
    #[error("sandbox init (pid {pid}) did not finish setting up within {after:?}; it was killed")]
    Timeout { pid: i32, after: Duration },
}
