//! Default signal dispositions for the job. An ignored signal stays ignored
//! across fork and exec, so a daemon started with, say, SIGHUP or SIGCHLD
//! ignored would pass that on to the shim (breaking its waits) and to jobs.

use std::io;

/// Resets every standard signal (1-31) that this process ignores to its
/// default action, except SIGPIPE, which Rust programs ignore on purpose
/// (spawned programs get it reset by the standard library). Returns the
/// signals reset.
pub(crate) fn reset_ignored() -> io::Result<Vec<i32>> {
    let mut reset = Vec::new();
    for sig in 1..=31 {
        if matches!(sig, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE) {
            continue;
        }
        // SAFETY: sigaction is plain old data; all-zero bytes are valid.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null `act` only queries; `old` is valid and writable.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction != libc::SIG_IGN {
            continue;
        }
        // SAFETY: as above; SIG_DFL with an empty mask and no flags.
        let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        // SAFETY: `dfl` is a valid sigaction installing no handler, so no
        // code runs in signal context as a result.
        if unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        reset.push(sig);
    }
    Ok(reset)
}
