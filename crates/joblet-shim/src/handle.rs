//! The daemon's handle on a running shim: wait for it to exit and read the
//! job's exit record.

use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::wait::{waitid, Id, WaitPidFlag};

use crate::error::ShimError;
use crate::jobdir::{read_json, JobDir};
use crate::pidfd;
use crate::spec::ShimExit;

/// A live shim, found by [`launch`](crate::launch) or
/// [`reattach`](crate::reattach). Holds a pidfd, so its pid cannot be
/// confused with a later process.
#[derive(Debug)]
pub struct ShimHandle {
    pub(crate) pid: i32,
    pub(crate) pidfd: OwnedFd,
    pub(crate) dir: JobDir,
    /// The read end of the shim's exit notification pipe (a shim this
    /// process launched): it reaches end of file once `exit.json` is in
    /// place, before the shim removes the job's cgroup and exits.
    pub(crate) notify: Option<OwnedFd>,
}

impl ShimHandle {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn dir(&self) -> &JobDir {
        &self.dir
    }

    /// Resolves when the shim has exited, then returns its `exit.json`.
    /// Reaps the shim if it is this process's child. Needs a tokio runtime
    /// with IO enabled. [`ShimError::Lost`] if the shim died without writing
    /// `exit.json` (killed with SIGKILL, crashed).
    ///
    /// A shim this process launched tells of the job's end as soon as its
    /// `exit.json` is in place (the notification pipe): the record is
    /// returned then, and the shim is reaped in the background once it has
    /// removed the job's cgroup and exited.
    pub async fn wait(self) -> Result<ShimExit, ShimError> {
        let pid = self.pid;
        let wait_err = |source| ShimError::Wait { pid, source };
        let afd = pidfd::register(self.pidfd).map_err(wait_err)?;
        if let Some(notify) = self.notify {
            let notify = pidfd::register(notify).map_err(wait_err)?;
            // End of file (the shim closed it, or died) or the shim's exit.
            tokio::select! {
                r = notify.readable() => drop(r.map_err(wait_err)?),
                r = afd.readable() => drop(r.map_err(wait_err)?),
            }
            if let Some(exit) = read_exit(&self.dir)? {
                tokio::spawn(async move {
                    if let Ok(guard) = afd.readable().await {
                        drop(guard);
                        reap(pid, &afd);
                    }
                });
                return Ok(exit);
            }
        }
        // A pidfd becomes readable, and stays so, once the process exits.
        let guard = afd.readable().await.map_err(wait_err)?;
        drop(guard);
        reap(pid, &afd);
        read_exit(&self.dir)?.ok_or_else(|| ShimError::Lost {
            dir: self.dir.path().to_owned(),
        })
    }
}

/// Reaps an exited shim through its pidfd (if it is this process's child).
fn reap(pid: i32, afd: &tokio::io::unix::AsyncFd<OwnedFd>) {
    match waitid(
        Id::PIDFd(afd.get_ref().as_fd()),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
    ) {
        // Reaped, or not our child (a reattached shim): nothing to do.
        Ok(_) | Err(Errno::ECHILD) => {}
        Err(e) => tracing::warn!("reaping shim {pid}: {e}"),
    }
}

/// The job's `exit.json`, or `None` if the shim has not written it (it is
/// still running, or it died without finishing).
pub fn read_exit(dir: &JobDir) -> Result<Option<ShimExit>, ShimError> {
    read_json(&dir.exit_path())
}
