//! Test helper binary for joblet-shim's integration tests.
//!
//! - `shim --job-dir DIR [--warm]`: the shim itself (what `joblet-shim`
//!   does; `--warm`: a warm shim, with the host runner; a job with
//!   `JOBLET_SHIM_TEST_CLEANUP_MS` in its env makes the cleanup after its
//!   exit record take that long);
//! - `launch-detached --job-dir DIR`: reads a `ShimSpec` from stdin, launches
//!   a shim running this same binary, prints its pid and exits at once, like
//!   a daemon dying right after a launch.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Duration;

use joblet_shim::{
    launch, run_shim_with, run_warm_shim_with, HostRunner, JobDir, Runner, RunnerError, ShimSpec,
};
use nix::unistd::Pid;

/// The host runner, with a cleanup that takes as long as the job's
/// `JOBLET_SHIM_TEST_CLEANUP_MS` says, like a sandbox whose cgroup takes a
/// while to remove.
#[derive(Default)]
struct SlowCleanup(Mutex<Duration>);

impl Runner for SlowCleanup {
    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        if let Some(ms) = spec
            .env
            .get("JOBLET_SHIM_TEST_CLEANUP_MS")
            .and_then(|v| v.parse().ok())
        {
            *self.0.lock().unwrap() = Duration::from_millis(ms);
        }
        HostRunner.spawn(spec, stdout, stderr)
    }

    fn cleanup(&self) {
        std::thread::sleep(*self.0.lock().unwrap());
    }
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (mode, dir, warm) = match args.as_slice() {
        [mode, flag, dir] if flag == "--job-dir" => (mode.clone(), PathBuf::from(dir), false),
        [mode, flag, dir, warm] if flag == "--job-dir" && warm == "--warm" => {
            (mode.clone(), PathBuf::from(dir), true)
        }
        _ => {
            eprintln!("usage: joblet-shim-test (shim|launch-detached) --job-dir DIR [--warm]");
            return ExitCode::from(2);
        }
    };
    if mode == "shim" {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
        let result = if warm {
            run_warm_shim_with(&dir, &HostRunner).map(drop)
        } else {
            run_shim_with(&dir, &SlowCleanup::default()).map(drop)
        };
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("shim: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if mode == "launch-detached" {
        let mut buf = Vec::new();
        if let Err(e) = std::io::stdin().read_to_end(&mut buf) {
            eprintln!("reading spec: {e}");
            return ExitCode::FAILURE;
        }
        let spec: ShimSpec = match serde_json::from_slice(&buf) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("parsing spec: {e}");
                return ExitCode::FAILURE;
            }
        };
        let exe = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("current_exe: {e}");
                return ExitCode::FAILURE;
            }
        };
        let shim_args = [
            OsString::from("shim"),
            OsString::from("--job-dir"),
            dir.clone().into_os_string(),
        ];
        return match launch(&exe, &shim_args, &JobDir::new(dir), &spec) {
            Ok(h) => {
                println!("{}", h.pid());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("launch: {e}");
                ExitCode::FAILURE
            }
        };
    }
    eprintln!("unknown mode {mode:?}");
    ExitCode::from(2)
}
