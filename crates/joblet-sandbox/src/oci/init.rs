//! `joblet-shim oci-init -- PROGRAM ARGS…`: pid 1 of a job's container
//! under runc or crun, as the native sandbox has its own pid 1. The
//! runtime starts it as the job's user (bound read-only into the container
//! at [`INIT_PATH`]); it starts the job as its child in its own process
//! group, which the shim signals (a namespace's init ignores the signals
//! it has no handler for, so the job, not pid 1, gets a stop's SIGTERM). Once the job has exited it kills and reaps whatever
//! is left, writes the job's raw wait status to fd 3 (the shim's early
//! word, given with `--preserve-fds 1`), then exits with the job's code.
//! A program that cannot be started is told on standard error and ends
//! the job with code 127, as a shell's would.

use std::ffi::OsString;
use std::io::Write;
use std::process::Command;

use crate::init::{sys_kill, sys_wait_any, sys_write_all};

/// Where the init is in a job's container.
pub const INIT_PATH: &str = "/run/joblet/init";
/// Its arguments before the job's program.
pub const INIT_ARGS: [&str; 2] = ["oci-init", "--"];
/// The descriptor the job's raw wait status goes to.
const STATUS_FD: i32 = 3;

/// Runs the init for `args` (after `oci-init`).
pub fn run(args: &[OsString]) -> ! {
    let [dash, program, rest @ ..] = args else {
        eprintln!("usage: joblet-shim oci-init -- PROGRAM [ARGS...] (pid 1 of a job under an OCI runtime)");
        std::process::exit(2);
    };
    if dash != "--" {
        eprintln!("usage: joblet-shim oci-init -- PROGRAM [ARGS...]");
        std::process::exit(2);
    }
    // The status descriptor must not reach the job.
    let status_fd = crate::init::sys_take_inherited_fd(STATUS_FD).ok();
    let spawned = Command::new(program).args(rest).spawn();
    let job = match spawned {
        Ok(child) => child.id() as i32,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "joblet: cannot run {:?}: {e}",
                program.to_string_lossy()
            );
            finish(status_fd, 127 << 8);
        }
    };
    loop {
        match sys_wait_any() {
            Ok((pid, status)) if pid == job => {
                // What this exit would kill anyway, killed and reaped now,
                // so the status promises that nothing of the job runs.
                let _ = sys_kill(-1, libc::SIGKILL);
                while sys_wait_any().is_ok() {}
                finish(status_fd, status);
            }
            Ok(_) => continue,
            Err(_) => finish(status_fd, 127 << 8),
        }
    }
}

/// Writes `status` to the shim and exits with the job's code.
fn finish(status_fd: Option<std::os::fd::OwnedFd>, status: i32) -> ! {
    if let Some(fd) = &status_fd {
        let _ = sys_write_all(std::os::fd::AsRawFd::as_raw_fd(fd), &status.to_ne_bytes());
    }
    if libc::WIFEXITED(status) {
        std::process::exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        // A namespace's init cannot die of the job's signal.
        std::process::exit(128 + libc::WTERMSIG(status));
    }
    std::process::exit(127)
}
