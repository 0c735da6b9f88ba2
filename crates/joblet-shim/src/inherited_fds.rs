//! Descriptors crossing into the shim: the locked `shim.lock` handed over as
//! file descriptor 3 (placed by `spawn` on the daemon side, taken over here
//! on the shim side), and stray inherited descriptors, which must not reach
//! the job.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The descriptor number the lock arrives on in the shim.
pub(crate) const LOCK_FD: RawFd = 3;
/// The descriptor number of the exit notification pipe in the shim: its
/// write end, closed once `exit.json` is in place (the daemon holds the
/// read end and so learns of the job's end before the shim's own teardown).
pub(crate) const NOTIFY_FD: RawFd = 4;
/// The descriptor number of a warm shim's ready pipe in the shim: its write
/// end, on which the shim writes one byte once its sandbox is built (or
/// could not be), so the daemon builds one warm sandbox at a time and
/// knows which ones a job can start in at once.
pub(crate) const READY_FD: RawFd = 5;
/// The byte a warm shim writes on its ready pipe once its sandbox is built.
pub(crate) const READY_BUILT: u8 = b'b';
/// The byte a warm shim writes on its ready pipe when its sandbox could not
/// be built ahead (its job will get a fresh one).
pub(crate) const READY_NOT_BUILT: u8 = b'n';

/// Marks every descriptor above `fd` close-on-exec (close_range(2) with
/// CLOSE_RANGE_CLOEXEC): inherited strays stay usable by whoever owns them
/// but never reach a program this process executes. Async-signal-safe.
pub(crate) fn cloexec_above(fd: RawFd) -> std::io::Result<()> {
    let first = libc::c_uint::try_from(fd + 1)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on
    // descriptors in the range; it closes nothing and passes no memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

static TAKEN: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
pub enum Fd3Error {
    #[error("file descriptor 3 is not open")]
    NotOpen,
    #[error("file descriptor 3 was already taken over")]
    AlreadyTaken,
}

/// Takes ownership of descriptor [`LOCK_FD`], once per process. Call it
/// before opening any file, so that 3 can only be what the parent passed.
pub(crate) fn take_fd3() -> Result<OwnedFd, Fd3Error> {
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(Fd3Error::AlreadyTaken);
    }
    // SAFETY: F_GETFD only queries the flags of a descriptor number; it
    // fails with EBADF if nothing is open there.
    if unsafe { libc::fcntl(LOCK_FD, libc::F_GETFD) } < 0 {
        return Err(Fd3Error::NotOpen);
    }
    // SAFETY: descriptor 3 is open (checked above), was inherited from the
    // parent rather than opened by this process's code, and the TAKEN flag
    // guarantees it is wrapped in an OwnedFd only once.
    Ok(unsafe { OwnedFd::from_raw_fd(LOCK_FD) })
}

/// Takes the exit notification pipe, [`NOTIFY_FD`], if the parent passed
/// one. Call it with [`take_fd3`], before opening any file, so that 4 can
/// only be what the parent passed.
pub(crate) fn take_notify() -> Option<OwnedFd> {
    static NOTIFY_TAKEN: AtomicBool = AtomicBool::new(false);
    take_passed(NOTIFY_FD, &NOTIFY_TAKEN)
}

/// Takes a warm shim's ready pipe, [`READY_FD`], if the parent passed one;
/// like [`take_notify`].
pub(crate) fn take_ready() -> Option<OwnedFd> {
    static READY_TAKEN: AtomicBool = AtomicBool::new(false);
    take_passed(READY_FD, &READY_TAKEN)
}

/// Descriptor `fd`, passed by the parent, made close-on-exec so no job
/// inherits it; `None` if nothing is open there or it was taken already.
fn take_passed(fd: RawFd, taken: &AtomicBool) -> Option<OwnedFd> {
    if taken.swap(true, Ordering::SeqCst) {
        return None;
    }
    // SAFETY: F_GETFD only queries the flags of a descriptor number.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `fd` is open (checked above) and was inherited from the
    // parent, not opened by this process's code (callers take it before
    // opening any file); `taken` guarantees it is wrapped in an OwnedFd
    // only once.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    Some(fd)
}
