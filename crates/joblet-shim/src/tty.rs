//! The one `unsafe` step of a host job on a terminal: between fork and
//! exec, a session of its own with its stdin (the terminal) as the
//! controlling terminal.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd`'s child call `setsid()` and `ioctl(0, TIOCSCTTY)` before
/// it executes: it leads a new session and process group whose
/// controlling terminal is its standard input.
pub(crate) fn take_terminal_at_exec(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec; it calls
    // only setsid(2) and ioctl(2) (through rustix, no allocation, no locks),
    // both async-signal-safe, and touches no state shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            Ok(())
        });
    }
}
