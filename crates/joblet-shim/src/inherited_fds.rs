//! Descriptors crossing into the shim: the locked `shim.lock` handed over as
//! file descriptor 3 (a `pre_exec` hook on the daemon side, taken over on the
//! shim side), and stray inherited descriptors, which must not reach the job.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// The descriptor number the lock arrives on in the shim.
pub(crate) const LOCK_FD: RawFd = 3;
/// The descriptor number of the exit notification pipe in the shim: its
/// write end, closed once `exit.json` is in place (the daemon holds the
/// read end and so learns of the job's end before the shim's own teardown).
pub(crate) const NOTIFY_FD: RawFd = 4;

/// The lowest number the parent moves the passed descriptors to before the
/// fork, so that placing them at 3 and 4 in the child can never overwrite
/// one with the other.
const HIGH_FD: RawFd = 10;

/// Copies of the descriptors passed to a shim, above [`HIGH_FD`]; keep it
/// until the command has been spawned.
pub(crate) struct Passed {
    _lock: OwnedFd,
    _notify: Option<OwnedFd>,
}

/// Makes `lock` appear as [`LOCK_FD`] and `notify` (if any) as
/// [`NOTIFY_FD`], without close-on-exec, in the program `cmd` runs, and
/// every descriptor above them close-on-exec there, so the shim starts with
/// exactly 0, 1, 2, 3 (and 4). The originals stay close-on-exec in this
/// process. `idle`: the program starts in `SCHED_IDLE` (a warm shim, so not
/// even its start competes with running jobs); otherwise in the normal
/// class, whatever the caller's (the daemon's threads run in `SCHED_BATCH`).
pub(crate) fn inherit_fds(
    cmd: &mut Command,
    lock: BorrowedFd<'_>,
    notify: Option<BorrowedFd<'_>>,
    idle: bool,
) -> std::io::Result<Passed> {
    let high = |fd: BorrowedFd<'_>| -> std::io::Result<OwnedFd> {
        let raw = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(HIGH_FD))?;
        // SAFETY: F_DUPFD_CLOEXEC just created `raw`, and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    };
    let lock = high(lock)?;
    let notify = notify.map(high).transpose()?;
    let lock_raw = lock.as_raw_fd();
    let notify_raw = notify.as_ref().map(AsRawFd::as_raw_fd);
    let hook = move || -> std::io::Result<()> {
        if idle {
            crate::priority::enter_idle()?;
        } else {
            crate::priority::leave_idle_thread()?;
        }
        // SAFETY: dup2 touches no memory and is async-signal-safe; both
        // sources are above HIGH_FD, so neither target overwrites the other
        // source, and the new descriptors have close-on-exec cleared.
        if unsafe { libc::dup2(lock_raw, LOCK_FD) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let last = match notify_raw {
            Some(raw) => {
                // SAFETY: as above.
                if unsafe { libc::dup2(raw, NOTIFY_FD) } < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                NOTIFY_FD
            }
            None => LOCK_FD,
        };
        cloexec_above(last)
    };
    // SAFETY: the hook runs in the forked child before exec and only makes
    // the async-signal-safe calls above, in `enter_idle` and in
    // `cloexec_above`; it allocates nothing and takes no locks. Standard
    // I/O has already been set up when hooks run, so 3 and 4 are no longer
    // needed for anything else in the child.
    unsafe {
        cmd.pre_exec(hook);
    }
    Ok(Passed {
        _lock: lock,
        _notify: notify,
    })
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

/// Takes the exit notification pipe, [`NOTIFY_FD`], if the parent passed
/// one. Call it with [`take_fd3`], before opening any file, so that 4 can
/// only be what the parent passed.
pub(crate) fn take_notify() -> Option<OwnedFd> {
    static NOTIFY_TAKEN: AtomicBool = AtomicBool::new(false);
    if NOTIFY_TAKEN.swap(true, Ordering::SeqCst) {
        return None;
    }
    // SAFETY: F_GETFD only queries the flags of a descriptor number.
    if unsafe { libc::fcntl(NOTIFY_FD, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: descriptor 4 is open (checked above) and was inherited from
    // the parent, not opened by this process's code; NOTIFY_TAKEN
    // guarantees it is wrapped in an OwnedFd only once. It is made
    // close-on-exec so no job inherits it.
    let fd = unsafe { OwnedFd::from_raw_fd(NOTIFY_FD) };
    let _ = nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    Some(fd)
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
        let passed = inherit_fds(&mut cmd, f.as_fd(), None, false).unwrap();
        let out = cmd.output().unwrap();
        drop(passed);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..4], &["0", "1", "2", "3"], "{text}");
        assert!(lines[4].ends_with("shim.lock"), "{text}");
        assert_eq!(lines.len(), 5, "{text}");
    }

    #[test]
    fn the_notify_pipe_arrives_as_fd4() {
        let tmp = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(tmp.path().join("shim.lock")).unwrap();
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "ls /proc/$$/fd; readlink /proc/$$/fd/3 /proc/$$/fd/4; echo done >&4",
        ]);
        let passed = inherit_fds(&mut cmd, f.as_fd(), Some(w.as_fd()), false).unwrap();
        let out = cmd.output().unwrap();
        drop(passed);
        drop(w);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..5], &["0", "1", "2", "3", "4"], "{text}");
        assert!(lines[5].ends_with("shim.lock"), "{text}");
        assert!(lines[6].starts_with("pipe:"), "{text}");
        let mut got = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(r), &mut got).unwrap();
        assert_eq!(got, "done\n");
    }
}
