//! Descriptors crossing into the shim: the locked `shim.lock` handed over as
//! file descriptor 3 (a `pre_exec` hook on the daemon side, taken over on the
//! shim side), and stray inherited descriptors, which must not reach the job.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// The descriptor number the lock arrives on in the shim.
pub(crate) const LOCK_FD: RawFd = 3;

/// Makes `fd` appear as [`LOCK_FD`], without close-on-exec, in the program
/// `cmd` runs, and every descriptor above it close-on-exec there, so the
/// shim starts with exactly 0, 1, 2 and 3. `fd` itself stays close-on-exec
/// in this process. `idle`: the program starts in `SCHED_IDLE` (a warm
/// shim, so not even its start competes with running jobs).
pub(crate) fn inherit_as_fd3(cmd: &mut Command, fd: BorrowedFd<'_>, idle: bool) {
    let raw = fd.as_raw_fd();
    let hook = move || -> std::io::Result<()> {
        if idle {
            crate::priority::enter_idle()?;
        }
        let ret = if raw == LOCK_FD {
            // SAFETY: fcntl(F_SETFD) on a descriptor number touches no
            // memory and is async-signal-safe, as required after fork.
            unsafe { libc::fcntl(LOCK_FD, libc::F_SETFD, 0) }
        } else {
            // SAFETY: dup2 touches no memory and is async-signal-safe; the
            // new descriptor it creates has close-on-exec cleared.
            unsafe { libc::dup2(raw, LOCK_FD) }
        };
        if ret < 0 {
            return Err(std::io::Error::last_os_error());
        }
        cloexec_above(LOCK_FD)
    };
    // SAFETY: the hook runs in the forked child before exec and only makes
    // the async-signal-safe calls above, in `enter_idle` and in `cloexec_above`; it allocates
    // nothing and takes no locks. Standard I/O has already been set up when hooks run, so fd 3 is
    // no longer needed for anything else in the child.
    unsafe {
        cmd.pre_exec(hook);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn lock_arrives_as_fd3_and_nothing_else_leaks() {
        let tmp = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(tmp.path().join("shim.lock")).unwrap();
        // A stray descriptor without close-on-exec, as a careless parent
        // might leave behind.
        let stray = nix::unistd::dup(&f).unwrap();
        nix::fcntl::fcntl(
            &stray,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "ls /proc/$$/fd; readlink /proc/$$/fd/3"]);
        inherit_as_fd3(&mut cmd, f.as_fd(), false);
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..4], &["0", "1", "2", "3"], "{text}");
        assert!(lines[4].ends_with("shim.lock"), "{text}");
        assert_eq!(lines.len(), 5, "{text}");
    }
}
