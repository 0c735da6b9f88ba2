//! The daemon's handle on a running shim: wait for it to exit and read the
//! job's exit record.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;

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
    /// The read end (non-blocking) of the shim's exit notification pipe (a
    /// shim this process launched): the shim writes the job's exit record
    /// there and closes it as soon as the job has ended, before it writes
    /// `exit.json`, removes the job's cgroup and exits.
    pub(crate) notify: Option<OwnedFd>,
}

impl ShimHandle {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn dir(&self) -> &JobDir {
        &self.dir
    }

    /// Kills the shim (SIGKILL through its pidfd: never another process
    /// that reused its pid). Its job, if it has one, is left to its cgroup
    /// (the caller removes that). For a shim that will not end by itself.
    pub fn kill(&self) -> io::Result<()> {
        pidfd::send_signal(&self.pidfd, libc::SIGKILL)
    }

    /// Resolves when the shim has exited, then returns its `exit.json`.
    /// Reaps the shim if it is this process's child. Needs a tokio runtime
    /// with IO enabled. [`ShimError::Lost`] if the shim died without writing
    /// `exit.json` (killed with SIGKILL, crashed).
    ///
    /// A shim this process launched tells of the job's end as soon as the
    /// job has ended, with the exit record on the notification pipe: the
    /// record is returned then (from `exit.json` when the pipe closed
    /// without one), and the shim is reaped in the background once it has
    /// removed the job's cgroup and exited.
    pub async fn wait(self) -> Result<ShimExit, ShimError> {
        let pid = self.pid;
        let wait_err = |source| ShimError::Wait { pid, source };
        let afd = pidfd::register(self.pidfd).map_err(wait_err)?;
        if let Some(notify) = self.notify {
            let notify = pidfd::register(notify).map_err(wait_err)?;
            // The record and end of file (the shim closed it, or died), or
            // the shim's exit.
            let told = tokio::select! {
                r = read_told(&notify) => r.map_err(wait_err)?,
                r = afd.readable() => {
                    drop(r.map_err(wait_err)?);
                    None
                }
            };
            if let Some(exit) = told.map_or_else(|| read_exit(&self.dir), |e| Ok(Some(e)))? {
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

/// The most a shim's exit record on the notification pipe may take.
const MAX_TOLD: usize = 1 << 20;

/// Reads the notification pipe to its end: the exit record the shim wrote
/// there, or `None` when it wrote none that parses (an older shim, or one
/// that died), for the caller to look for `exit.json`.
async fn read_told(notify: &AsyncFd<OwnedFd>) -> io::Result<Option<ShimExit>> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut guard = notify.readable().await?;
        match guard.try_io(|fd| nix::unistd::read(fd.get_ref(), &mut buf).map_err(io::Error::from))
        {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) if bytes.len() + n <= MAX_TOLD => bytes.extend_from_slice(&buf[..n]),
            Ok(Ok(_)) => return Ok(None),
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
    Ok(serde_json::from_slice(&bytes)
        .map_err(|e| {
            if !bytes.is_empty() {
                tracing::warn!("the shim's exit record on its pipe does not parse: {e}");
            }
        })
        .ok())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Outcome;
    use std::io::Write;

    fn pipe() -> (AsyncFd<OwnedFd>, std::fs::File) {
        let (r, w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .unwrap();
        (pidfd::register(r).unwrap(), std::fs::File::from(w))
    }

    #[tokio::test]
    async fn the_record_on_the_pipe_is_read_to_its_end() {
        let exit = ShimExit {
            outcome: Outcome::Exited,
            exit_code: Some(3),
            signal: None,
            message: "exited with code 3".into(),
            started_unix_ms: Some(1),
            ended_unix_ms: 2,
            log_bytes: 0,
        };
        let (r, mut w) = pipe();
        let bytes = serde_json::to_vec(&exit).unwrap();
        // In two writes, as a reader may see them.
        w.write_all(&bytes[..5]).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            w.write_all(&bytes[5..]).unwrap();
        });
        assert_eq!(read_told(&r).await.unwrap(), Some(exit));
        writer.join().unwrap();
    }

    #[tokio::test]
    async fn nothing_or_a_broken_record_sends_the_caller_to_exit_json() {
        let (r, w) = pipe();
        drop(w);
        assert_eq!(read_told(&r).await.unwrap(), None);
        let (r, mut w) = pipe();
        w.write_all(b"{\"outcome\":").unwrap();
        drop(w);
        assert_eq!(read_told(&r).await.unwrap(), None);
    }
}
