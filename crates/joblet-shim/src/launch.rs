//! Starting a shim for a job, and finding a running one again after a
//! daemon restart.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::ShimError;
use crate::handle::ShimHandle;
use crate::inherited_fds::READY_BUILT;
use crate::jobdir::JobDir;
use crate::pidfd::pidfd_open;
use crate::procstat::{self, ProcStatError, PROC_ROOT};
use crate::spawn;
use crate::spec::{ShimSpec, WarmSpec};

/// How long [`reattach`] waits for a live shim to write `shim.pid` (it may
/// have just been started when the daemon died).
const PID_FILE_WAIT: Duration = Duration::from_secs(2);
const PID_FILE_POLL: Duration = Duration::from_millis(20);

/// Starts a shim for `dir`: creates the directory, opens and locks
/// `shim.lock`, spawns `program args...` (the daemon's own executable and
/// `["shim", "--job-dir", DIR]`) with the locked file as fd 3, its stdout
/// and stderr appended to `shim.log`, and `spec` as JSON on its stdin.
///
/// Blocks only while the spec is written to the pipe. The shim is not
/// killed when the handle (or this process) goes away.
pub fn launch(
    program: &Path,
    args: &[OsString],
    dir: &JobDir,
    spec: &ShimSpec,
) -> Result<ShimHandle, ShimError> {
    let json = serde_json::to_vec(spec).map_err(|source| ShimError::EncodeSpec {
        job_id: spec.job_id.clone(),
        source,
    })?;
    let (handle, mut stdin) = start(program, args, dir, &spec.job_id, None)?;
    if let Err(source) = stdin.write_all(&json) {
        return Err(handle.abandon_after(source));
    }
    tracing::debug!(pid = handle.pid, dir = %dir.path().display(), "shim launched");
    Ok(handle)
}

/// A warm shim started by [`launch_warm`], waiting for its job. Dropping it
/// (or [`WarmShim::discard`]) closes the shim's stdin: it then tears down
/// what it built and exits without an `exit.json`.
#[derive(Debug)]
pub struct WarmShim {
    handle: ShimHandle,
    stdin: File,
    job_id: String,
    /// The read end of its ready pipe, until [`WarmShim::take_ready`].
    ready: Option<File>,
}

/// Waits for a warm shim to have built its sandbox ([`WarmShim::take_ready`]).
#[derive(Debug)]
pub struct WarmReady {
    pipe: File,
}

/// How a warm shim's build ended, as [`WarmReady::wait`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmBuild {
    /// Its sandbox is built as far as it goes without the job.
    Built,
    /// It could not build its sandbox ahead (its job will get a fresh one),
    /// or it is gone.
    NotBuilt,
    /// The wait's timeout passed first: the build is still going on, or
    /// stuck.
    StillBuilding,
}

impl WarmReady {
    /// Blocks until the shim has said how its build ended, or died, or
    /// `timeout` passed. For a thread of its own.
    pub fn wait(mut self, timeout: Duration) -> WarmBuild {
        let mut fds = [nix::poll::PollFd::new(
            self.pipe.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        loop {
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
                Ok(0) => return WarmBuild::StillBuilding,
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    tracing::debug!("cannot wait on a warm shim's ready pipe: {e}");
                    return WarmBuild::NotBuilt;
                }
            }
        }
        // Its byte, or end of file (it died without one).
        let mut word = [0u8; 1];
        match io::Read::read(&mut self.pipe, &mut word) {
            Ok(1) if word[0] == READY_BUILT => WarmBuild::Built,
            Ok(_) => WarmBuild::NotBuilt,
            Err(e) => {
                tracing::debug!("cannot read a warm shim's ready pipe: {e}");
                WarmBuild::NotBuilt
            }
        }
    }
}

impl WarmShim {
    /// The job id it was started for.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// What waits for its sandbox to be built, once (then `None`). A job
    /// may claim the shim before: the build then finishes for that job.
    pub fn take_ready(&mut self) -> Option<WarmReady> {
        self.ready.take().map(|pipe| WarmReady { pipe })
    }

    /// Hands the shim its job (`spec.job_id` must be the warm one's) and
    /// returns the handle of a shim running it, like [`launch`].
    pub fn claim(self, spec: &ShimSpec) -> Result<ShimHandle, ShimError> {
        let WarmShim {
            handle,
            mut stdin,
            job_id,
            ..
        } = self;
        if spec.job_id != job_id {
            drop(stdin);
            handle.abandon_after(io::Error::other("wrong job"));
            return Err(ShimError::WrongWarmShim {
                warm: job_id,
                job: spec.job_id.clone(),
            });
        }
        let json = serde_json::to_vec(spec).map_err(|source| ShimError::EncodeSpec {
            job_id: spec.job_id.clone(),
            source,
        })?;
        if let Err(source) = stdin.write_all(&json) {
            return Err(handle.abandon_after(source));
        }
        drop(stdin);
        Ok(handle)
    }

    /// Tells the shim no job is coming; returns its handle, to reap it with
    /// [`ShimHandle::wait`] (which then reports it lost: no `exit.json`).
    pub fn discard(self) -> ShimHandle {
        drop(self.stdin);
        self.handle
    }
}

/// Starts a warm shim for the job `warm.job_id` in `dir` (`program args…`
/// as for [`launch`] plus `--warm`): it builds what it can before the job is
/// known, in `SCHED_IDLE`, and waits for [`WarmShim::claim`]. Its process
/// is in `SCHED_IDLE` from its creation, and the calling thread waits
/// until it has executed the shim's program (see `spawn`): call it from a
/// blocking thread of its own.
pub fn launch_warm(
    program: &Path,
    args: &[OsString],
    dir: &JobDir,
    warm: &WarmSpec,
) -> Result<WarmShim, ShimError> {
    let mut line = serde_json::to_vec(warm).map_err(|source| ShimError::EncodeSpec {
        job_id: warm.job_id.clone(),
        source,
    })?;
    line.push(b'\n');
    let mut args = args.to_vec();
    args.push("--warm".into());
    let (ready_r, ready_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| ShimError::Spawn {
            program: program.to_owned(),
            source: e.into(),
        })?;
    let (handle, mut stdin) = start(program, &args, dir, &warm.job_id, Some(ready_w))?;
    if let Err(source) = stdin.write_all(&line) {
        return Err(handle.abandon_after(source));
    }
    tracing::debug!(pid = handle.pid, dir = %dir.path().display(), "warm shim launched");
    Ok(WarmShim {
        handle,
        stdin,
        job_id: warm.job_id.clone(),
        ready: Some(File::from(ready_r)),
    })
}

/// Creates `dir`, locks `shim.lock` and spawns the shim with it as fd 3,
/// its output appended to `shim.log`; a warm shim (`ready`, the write end
/// of its ready pipe, passed as fd 5) in `SCHED_IDLE`. Returns its handle
/// and stdin.
fn start(
    program: &Path,
    args: &[OsString],
    dir: &JobDir,
    job_id: &str,
    ready: Option<OwnedFd>,
) -> Result<(ShimHandle, File), ShimError> {
    let idle = ready.is_some();
    std::fs::create_dir_all(dir.path()).map_err(|source| ShimError::CreateDir {
        path: dir.path().to_owned(),
        source,
    })?;

    let lock_path = dir.lock_path();
    let lock_err = |source| ShimError::Lock {
        path: lock_path.clone(),
        source,
    };
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(lock_err)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(ShimError::AlreadyRunning { path: lock_path }),
        Err(TryLockError::Error(e)) => return Err(lock_err(e)),
    }

    let log_path = dir.shim_log_path();
    let log_err = |source| ShimError::ShimLog {
        path: log_path.clone(),
        source,
    };
    let log = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(log_err)?;

    let (notify_r, notify_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| ShimError::Spawn {
            program: program.to_owned(),
            source: e.into(),
        })?;
    // Ours is read from the daemon's event loop (`ShimHandle::wait`).
    nix::fcntl::fcntl(
        &notify_r,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .map_err(|e| ShimError::Spawn {
        program: program.to_owned(),
        source: e.into(),
    })?;
    let fds = spawn::ShimFds {
        stdout: log.as_fd(),
        stderr: log.as_fd(),
        lock: lock.as_fd(),
        notify: Some(notify_w.as_fd()),
        ready: ready.as_ref().map(|fd| fd.as_fd()),
    };
    let spawn::Spawned { pid, stdin } =
        spawn::spawn(program, args, fds, idle).map_err(|source| ShimError::Spawn {
            program: program.to_owned(),
            source,
        })?;
    // The shim holds the lock through its own descriptor now. Closing ours
    // does not release it (flock locks belong to the shared open file).
    // Only the shim may hold the write ends of the notify and ready pipes.
    drop(notify_w);
    drop(ready);
    drop(lock);
    drop(log);

    // The child is not reaped until we wait for it, so this names it.
    let pidfd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(source) => {
            abandon(pid);
            return Err(ShimError::PidFd { pid, source });
        }
    };
    tracing::trace!(job_id, pid, "shim spawned");
    // `ShimHandle::wait` reaps it through the pidfd.
    Ok((
        ShimHandle {
            pid,
            pidfd,
            dir: dir.clone(),
            notify: Some(notify_r),
        },
        File::from(stdin),
    ))
}

/// Kills and reaps a shim (our child) whose pidfd could not be opened.
fn abandon(pid: libc::pid_t) {
    let pid = nix::unistd::Pid::from_raw(pid);
    if let Err(e) = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL) {
        tracing::warn!("killing shim {pid}: {e}");
    }
    if let Err(e) = nix::sys::wait::waitpid(pid, None) {
        tracing::warn!("reaping shim {pid}: {e}");
    }
}

impl ShimHandle {
    /// Kills and reaps a shim (our child) that could not be given its spec.
    fn abandon_after(self, source: io::Error) -> ShimError {
        let pid = self.pid;
        if let Err(e) = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            tracing::warn!("killing shim {pid}: {e}");
        }
        if let Err(e) = nix::sys::wait::waitid(
            nix::sys::wait::Id::PIDFd(self.pidfd.as_fd()),
            nix::sys::wait::WaitPidFlag::WEXITED,
        ) {
            tracing::warn!("reaping shim {pid}: {e}");
        }
        ShimError::SendSpec {
            pid,
            dir: self.dir.path().to_owned(),
            source,
        }
    }
}

/// After a daemon restart: `Some(handle)` if the shim of `dir` is alive
/// (holds `shim.lock`), `None` if it is gone (read `exit.json` then).
pub fn reattach(dir: &JobDir) -> Result<Option<ShimHandle>, ShimError> {
    if !lock_held(dir)? {
        return Ok(None);
    }
    let deadline = Instant::now() + PID_FILE_WAIT;
    let rec = loop {
        if let Some(rec) = dir.read_shim_pid()? {
            break rec;
        }
        // Polling: the shim writes shim.pid right after starting, and there
        // is no cheaper primitive to wait for a rename than a short sleep.
        if !lock_held(dir)? {
            return Ok(None);
        }
        if Instant::now() >= deadline {
            return Err(ShimError::PidFileMissing {
                lock: dir.lock_path(),
                path: dir.shim_pid_path(),
            });
        }
        std::thread::sleep(PID_FILE_POLL);
    };
    let pid = rec.pid;
    let gone_or_mismatch = |dir: &JobDir| -> Result<Option<ShimHandle>, ShimError> {
        if lock_held(dir)? {
            Err(ShimError::PidMismatch {
                lock: dir.lock_path(),
                path: dir.shim_pid_path(),
                pid,
            })
        } else {
            Ok(None)
        }
    };
    let pidfd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return gone_or_mismatch(dir),
        Err(source) => return Err(ShimError::PidFd { pid, source }),
    };
    // Opened before this check, the pidfd names the process checked here.
    match procstat::start_time(Path::new(PROC_ROOT), pid) {
        Ok(t) if t == rec.start_time => {}
        Ok(_) | Err(ProcStatError::NoSuchProcess { .. }) => return gone_or_mismatch(dir),
        Err(source) => return Err(ShimError::ProcStat { pid, source }),
    }
    Ok(Some(ShimHandle {
        pid,
        pidfd,
        dir: dir.clone(),
        notify: None,
    }))
}

/// Whether some process (the shim) holds `shim.lock`: a non-blocking lock
/// attempt on a fresh open fails exactly then. A successful attempt is
/// released at once.
fn lock_held(dir: &JobDir) -> Result<bool, ShimError> {
    let path = dir.lock_path();
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(ShimError::Lock { path, source }),
    };
    match file.try_lock() {
        // Closing the file releases the lock we just took.
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(source)) => Err(ShimError::Lock { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready_pipe() -> (WarmReady, OwnedFd) {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        (
            WarmReady {
                pipe: File::from(r),
            },
            w,
        )
    }

    #[test]
    fn the_wait_ends_with_the_shims_word() {
        let (ready, w) = ready_pipe();
        File::from(w).write_all(&[READY_BUILT]).unwrap();
        assert_eq!(ready.wait(Duration::from_secs(10)), WarmBuild::Built);
        let (ready, w) = ready_pipe();
        File::from(w)
            .write_all(&[crate::inherited_fds::READY_NOT_BUILT])
            .unwrap();
        assert_eq!(ready.wait(Duration::from_secs(10)), WarmBuild::NotBuilt);
    }

    #[test]
    fn the_wait_ends_when_the_shim_is_gone() {
        let (ready, w) = ready_pipe();
        drop(w);
        assert_eq!(ready.wait(Duration::from_secs(10)), WarmBuild::NotBuilt);
    }

    #[test]
    fn the_wait_gives_up_after_its_timeout() {
        let (ready, _w) = ready_pipe();
        let t0 = Instant::now();
        assert_eq!(
            ready.wait(Duration::from_millis(50)),
            WarmBuild::StillBuilding
        );
        assert!(t0.elapsed() >= Duration::from_millis(50));
    }
}
