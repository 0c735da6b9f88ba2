//! `joblet-shim`: the per-job shim and the sandbox init, in a binary of
//! their own that the daemon starts for every job.
//!
//! - `joblet-shim --job-dir DIR`: the shim (supervises one job, see
//!   `joblet_shim`), started by the daemon with the job's spec on stdin;
//!   with `--warm`, started ahead of its job (the daemon's pool of warm
//!   sandboxes), which it builds and then waits for;
//! - `joblet-shim sandbox-init`: the process that becomes the sandboxed job
//!   (see `joblet_sandbox::init`), started by the shim;
//! - `joblet-shim sandbox-exec CONFIG`: a process started inside a running
//!   job (`rnx job exec`, see `joblet_sandbox::init::run_exec`), started by
//!   the daemon;
//! - `joblet-shim oci-hook loopback`: the hook an OCI runtime runs to bring
//!   a job's loopback up (see `joblet_sandbox::oci::hook`);
//! - `joblet-shim oci-init -- PROGRAM ARGS…`: pid 1 of a job's container
//!   under runc or crun (see `joblet_sandbox::oci::init`).
//!
//! Both used to be modes of the `joblet` binary. A job start execs twice
//! (shim, then init), and the daemon binary — gRPC, TLS, SQLite, hwloc and
//! the scheduler, with libhwloc and libudev to load and ~21,000 relocations
//! to apply — costs about a millisecond more per exec than this one, which
//! links only the shim and the sandbox. Its arguments are parsed by hand
//! for the same reason: two fixed forms, written by the daemon and the
//! shim, never by people.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: joblet-shim --job-dir DIR [--warm] | joblet-shim sandbox-init | joblet-shim sandbox-exec CONFIG | joblet-shim oci-hook loopback | joblet-shim oci-init -- PROGRAM… | joblet-shim --version\n\
joblet-shim is started by the joblet daemon, once per job; run `joblet server` instead.";

fn main() -> ExitCode {
    // Reading the arguments allocates but opens no descriptor and starts
    // no thread, so `sandbox-init` still runs first thing.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [mode] if mode == "sandbox-init" => joblet_sandbox::init::run_init(),
        [mode, config] if mode == "sandbox-exec" => {
            joblet_sandbox::init::run_exec(std::path::Path::new(config))
        }
        [mode, rest @ ..] if mode == "oci-hook" => joblet_sandbox::oci::hook::run(rest),
        [mode, rest @ ..] if mode == "oci-init" => joblet_sandbox::oci::init::run(rest),
        [flag, dir] if flag == "--job-dir" => shim(PathBuf::from(dir), false),
        [flag, dir, warm] if flag == "--job-dir" && warm == "--warm" => {
            shim(PathBuf::from(dir), true)
        }
        [flag] if flag == "--version" || flag == "-V" => {
            println!("joblet-shim {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The shim of the job in `job_dir` (`warm`: started ahead of its job, see
/// `joblet_shim::run_warm_shim_with`). Its fd 3 is the inherited shim lock;
/// it is sync (no async runtime) and its stderr is `shim.log`.
fn shim(job_dir: PathBuf, warm: bool) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // `shim.log`: plain text, no colour codes.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("joblet-shim: cannot locate its own binary to start the sandbox init: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runner =
        joblet_sandbox::SandboxRunner::new(exe, vec!["sandbox-init".into()], Default::default());
    let result = if warm {
        joblet_shim::run_warm_shim_with(&job_dir, &runner).map(drop)
    } else {
        joblet_shim::run_shim_with(&job_dir, &runner).map(drop)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("joblet-shim: {e}");
            ExitCode::FAILURE
        }
    }
}
