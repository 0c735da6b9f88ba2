//! Waiting for and reaping the shim's children without losing a status:
//! nix's wrappers fail on signals they have no name for (real-time signals)
//! after the child has already been reaped, so these call libc directly.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Blocks until some child has exited and returns its pid, without reaping
/// it (`WNOWAIT`): a job leader stays a zombie, keeping its pid and process
/// group id reserved, until [`reap`] is called for it.
pub(crate) fn wait_any_exited_nowait() -> io::Result<i32> {
    loop {
        // SAFETY: siginfo_t is plain old data for which all-zero bytes are a
        // valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t that outlives the call.
        let ret = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if ret == 0 {
            // SAFETY: waitid succeeded without WNOHANG, so it filled `info`
            // for an exited child (si_code CLD_*), whose si_pid is valid.
            return Ok(unsafe { info.si_pid() });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reaps a child, blocking until one has exited: `which` > 0 is that pid,
/// -1 any child, < -1 any child in process group `-which` (waitpid(2)).
/// Returns the reaped pid and its status.
pub(crate) fn reap(which: i32) -> io::Result<(i32, ExitStatus)> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable c_int that outlives the call.
        let ret = unsafe { libc::waitpid(which, &mut status, 0) };
        if ret > 0 {
            return Ok((ret, ExitStatus::from_raw(status)));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    #[allow(clippy::zombie_processes)] // reaped by pid below: that is what is tested
    fn waits_without_reaping_then_reaps_with_the_real_status() {
        // SIGRTMIN+1: a signal nix has no name for. A new process group, so
        // that reaping by group cannot take another test's child.
        let sig = libc::SIGRTMIN() + 1;
        let child = std::process::Command::new("sh")
            .args(["-c", &format!("kill -{sig} $$")])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Other tests in this process may have children exiting too.
        while wait_any_exited_nowait().unwrap() != pid {
            std::thread::yield_now();
        }
        // Not reaped yet: still visible.
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        let (got, st) = reap(-pid).unwrap();
        assert_eq!(got, pid);
        assert_eq!(st.signal(), Some(sig));
        assert_eq!(reap(pid).unwrap_err().raw_os_error(), Some(libc::ECHILD));
    }
}
