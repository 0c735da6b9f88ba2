//! How a shim receives its job's spec on stdin: a cold shim reads it to
//! end-of-file; a warm one reads its first line ([`WarmSpec`]) and later
//! the claim, which [`ClaimWatch`] watches for while the sandbox is still
//! being built.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;

use super::ShimRunError;
use crate::priority;
use crate::spec::{ShimSpec, WarmSpec};

/// Largest spec accepted on stdin.
const MAX_SPEC: u64 = 16 << 20;

/// Reads the spec to end-of-file, then points stdin at /dev/null. `None`:
/// stdin was closed without one.
pub(super) fn read_spec() -> Result<Option<ShimSpec>, ShimRunError> {
    parse_spec(&read_stdin()?)
}

/// The rest of stdin, after which stdin is /dev/null.
pub(super) fn read_stdin() -> Result<Vec<u8>, ShimRunError> {
    let mut buf = Vec::new();
    io::stdin()
        .lock()
        .take(MAX_SPEC)
        .read_to_end(&mut buf)
        .map_err(|source| ShimRunError::ReadSpec { source })?;
    let null = File::open("/dev/null").map_err(|source| ShimRunError::NullStdin { source })?;
    nix::unistd::dup2_stdin(&null).map_err(|e| ShimRunError::NullStdin { source: e.into() })?;
    Ok(buf)
}

pub(super) fn parse_spec(buf: &[u8]) -> Result<Option<ShimSpec>, ShimRunError> {
    if buf.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(buf)
        .map(Some)
        .map_err(|source| ShimRunError::ParseSpec { source })
}

/// A warm shim's watch for a claim that comes while its sandbox is still
/// being built: a thread in the normal class polls stdin (it reads
/// nothing) and, when the job's spec arrives, moves the shim's threads and
/// everything the shim started into the normal class, so that the rest of
/// the build does not wait behind other work on a busy machine. Stopped
/// once the sandbox is built: the main thread then reads the claim itself.
pub(super) struct ClaimWatch {
    /// Dropped to stop the thread (it sees the pipe hang up).
    stop: OwnedFd,
}

impl ClaimWatch {
    pub(super) fn start() -> Result<ClaimWatch, ShimRunError> {
        let thread_err = |source| ShimRunError::Thread {
            what: "claim watch",
            source,
        };
        let (stop_r, stop_w) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| thread_err(e.into()))?;
        std::thread::Builder::new()
            .name("claim-watch".into())
            .spawn(move || {
                if let Err(e) = priority::leave_idle_thread() {
                    tracing::warn!("the claim watch stays in SCHED_IDLE: {e}");
                }
                if claim_waiting(&stop_r) {
                    if let Err(e) = priority::leave_idle_tree() {
                        tracing::warn!("cannot take the warm sandbox out of SCHED_IDLE: {e}");
                    }
                }
            })
            .map_err(thread_err)?;
        Ok(ClaimWatch { stop: stop_w })
    }

    pub(super) fn stop(self) {
        drop(self.stop);
    }
}

/// Waits until stdin has bytes to read (true) or `stop` hangs up, stdin
/// reaches its end, or polling fails (false).
fn claim_waiting(stop: &OwnedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = io::stdin();
    loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => return false,
        }
        if fds[1].any().unwrap_or(true) {
            return false;
        }
        if let Some(ready) = fds[0].revents() {
            if !ready.is_empty() {
                // A pipe polls readable only with bytes in it; its end
                // alone (the daemon discarded the shim) is a hang-up.
                return ready.contains(PollFlags::POLLIN);
            }
        }
    }
}

/// Reads a warm shim's first line. Stdin stays open (buffered by `Stdin`)
/// for the job's spec.
pub(super) fn read_warm_spec() -> Result<WarmSpec, ShimRunError> {
    let mut line = String::new();
    io::stdin()
        .lock()
        .take(MAX_SPEC)
        .read_line(&mut line)
        .map_err(|source| ShimRunError::ReadSpec { source })?;
    serde_json::from_str(&line).map_err(|source| ShimRunError::ParseSpec { source })
}
