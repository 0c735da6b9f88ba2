//! `joblet-shim oci-hook loopback`: the `createRuntime` hook that brings a
//! job's loopback interface up in its new network namespace, as the native
//! sandbox does (runc leaves `lo` down). The runtime runs it on the host
//! with the container's state on standard input; it enters the network
//! namespace of the state's `pid` and sets `lo` up. A failure fails the
//! container's creation.

use std::io::Read;
use std::process::ExitCode;

use nix::sched::{setns, CloneFlags};

/// The hook's arguments after the program, as the bundle names them.
pub const LOOPBACK_ARGS: [&str; 2] = ["oci-hook", "loopback"];

fn loopback() -> Result<(), String> {
    let mut state = String::new();
    std::io::stdin()
        .read_to_string(&mut state)
        .map_err(|e| format!("reading the container's state: {e}"))?;
    let state: serde_json::Value =
        serde_json::from_str(&state).map_err(|e| format!("the container's state: {e}"))?;
    let pid = state["pid"]
        .as_i64()
        .filter(|&p| p > 0)
        .ok_or("the container's state has no pid")?;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))
        .map_err(|e| format!("opening /proc/{pid}/ns/net: {e}"))?;
    setns(&ns, CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("entering the job's network namespace: {e}"))?;
    crate::init::loopback_up().map_err(|e| format!("bringing lo up: {e}"))
}

/// Runs the hook named by `args` (after `oci-hook`).
pub fn run(args: &[std::ffi::OsString]) -> ExitCode {
    match args {
        [what] if what == "loopback" => match loopback() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("joblet-shim oci-hook loopback: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!(
                "usage: joblet-shim oci-hook loopback (run by an OCI runtime, state on stdin)"
            );
            ExitCode::from(2)
        }
    }
}
