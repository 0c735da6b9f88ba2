//! `pidfd_open(2)`: a file descriptor that becomes readable when a process
//! exits, immune to pid reuse once opened.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Opens a pidfd for `pid` (close-on-exec, as pidfds always are).
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid_t and an unsigned flags word and returns
    // a new file descriptor or -1; no memory is passed to the kernel.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(ret)
        .map_err(|_| io::Error::other("pidfd_open returned an out-of-range fd"))?;
    // SAFETY: `fd` was just created by pidfd_open and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends `signal` to the process `pidfd` names (`pidfd_send_signal(2)`):
/// never to a later process that reused its pid.
pub(crate) fn send_signal(pidfd: &OwnedFd, signal: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_send_signal takes a pidfd, a signal number, a siginfo
    // pointer (null: the kernel fills it in as for kill(2)) and flags (0);
    // the descriptor is open for the call's duration (borrowed).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers a pidfd with the tokio reactor (of the current runtime, which
/// must have IO enabled), to await its readability: the process's exit.
pub(crate) fn register(pidfd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is a valid open descriptor that stays open, and
    // keeps returning the same number, until the OwnedFd is dropped, which
    // happens only when the AsyncFd that owns it is dropped.
    unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }.map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_for_a_child_and_fails_for_a_missing_pid() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = pidfd_open(child.id() as i32).unwrap();
        child.wait().unwrap();
        drop(fd);
        let err = pidfd_open(1 << 23).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        // A signal reaches the process the pidfd names, and only while it
        // lives.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let fd = pidfd_open(child.id() as i32).unwrap();
        send_signal(&fd, libc::SIGKILL).unwrap();
        child.wait().unwrap();
        let err = send_signal(&fd, libc::SIGKILL).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    }
}
