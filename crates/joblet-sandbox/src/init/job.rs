//! The job process (pid 2): own process group, default signal handling,
//! dropped privileges and the seccomp filter ([`enter`]), then `/work` as
//! working directory and `execve` ([`exec`]). Any failure is reported on
//! the status pipe and the process exits 127 without running the command.
//!
//! In a warm sandbox pid 1 forks it before the job comes
//! ([`run_prestarted`]): it enters as the placeholder's config says (the
//! privileges and filter every job of the sandbox shares), then waits for
//! the job's config, so a job's start costs neither the fork nor those
//! steps (with the filter's load, ~0.75 ms on the machine of BENCHMARKS.md).

use std::convert::Infallible;
use std::io::Write;
use std::os::unix::net::UnixStream;

use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow};
use nix::unistd::{chdir, execve, setpgid, Pid};
use seccompiler::BpfProgram;

use super::config::InitConfig;
use super::error::Stage;
use super::exec::{executable, prepare, resolve};
use super::report::{self, Context, SetupError};
use super::{frame, privileges, seccomp, sys};

/// Exit code of a job process that never reached its command.
const EXIT_NOT_RUN: i32 = 127;

/// The byte a prestarted job process sends pid 1 once it has entered.
pub(crate) const ENTERED: u8 = b'E';

/// `filters`: the seccomp filter, compiled before release (empty when
/// `config.seccomp` is off).
pub(crate) fn run(config: &InitConfig, filters: &[BpfProgram]) -> ! {
    match enter(config, filters).and_then(|()| exec(config)) {
        Ok(never) => match never {},
        Err(e) => fail(e),
    }
}

/// A warm sandbox's job process, forked by pid 1 before the job came:
/// enters as `warm` (the placeholder's config) says, tells pid 1 so on
/// `channel` ([`ENTERED`]), then waits there for the job's config (framed,
/// see `frame`) and runs it. The job's privileges and filter must be the
/// ones taken (pid 1 only passes on a job that fits the sandbox, see
/// [`InitConfig::warm_mismatch`]; checked again here). End of file instead
/// of a config: no job comes (pid 1 is going away); exits quietly.
pub(crate) fn run_prestarted(
    warm: &InitConfig,
    filters: &[BpfProgram],
    mut channel: UnixStream,
) -> ! {
    let result = enter(warm, filters)
        .and_then(|()| {
            channel.write_all(&[ENTERED]).stage(Stage::Fork, || {
                "telling pid 1 the job process is ready".into()
            })
        })
        .and_then(|()| {
            frame::read(&mut channel).stage(Stage::Config, || "reading the job's config".into())
        });
    let json = match result {
        Ok(Some(json)) => json,
        Ok(None) => std::process::exit(0),
        Err(e) => fail(e),
    };
    drop(channel);
    let job: InitConfig = match serde_json::from_slice(&json)
        .stage(Stage::Config, || "parsing the job's config JSON".into())
    {
        Ok(job) => job,
        Err(e) => fail(e),
    };
    if let Some(field) = warm.warm_mismatch(&job) {
        fail(SetupError::new(
            Stage::Config,
            format!("the job process entered with another {field} than the job's"),
        ));
    }
    match exec(&job) {
        Ok(never) => match never {},
        Err(e) => fail(e),
    }
}

fn fail(e: SetupError) -> ! {
    report::error(e.stage, &e.message);
    std::process::exit(EXIT_NOT_RUN)
}

/// What needs nothing of the job's command: its own process group, every
/// signal at its default action, the privileges dropped and the filter
/// loaded.
fn enter(config: &InitConfig, filters: &[BpfProgram]) -> Result<(), SetupError> {
    // pid 1 does the same from its side; whichever runs first wins.
    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    sys::reset_signal_dispositions()
        .stage(Stage::Exec, || "resetting signal dispositions".into())?;
    privileges::apply(config)?;
    if config.seccomp {
        seccomp::apply(filters).stage(Stage::Seccomp, || "loading the filter".into())?;
    }
    Ok(())
}

/// `/work`, the command found on the job's `PATH`, and `execve`.
fn exec(config: &InitConfig) -> Result<Infallible, SetupError> {
    chdir("/work").stage(Stage::Exec, || "chdir /work".into())?;
    let program = resolve(&config.command, &config.env, executable)?;
    let prepared = prepare(&program, &config.command, &config.args, &config.env)?;

    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .stage(Stage::Exec, || "unblocking signals".into())?;
    // The status pipe (close-on-exec) must be the only descriptor above
    // stderr, and it must close at exec.
    sys::close_range_cloexec(3)
        .stage(Stage::Exec, || "marking descriptors close-on-exec".into())?;
    let err = match execve(&prepared.program, &prepared.argv, &prepared.envp) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    Err(SetupError::new(
        Stage::Exec,
        format!(
            "executing {} ({}): {err}",
            program.display(),
            config.command
        ),
    ))
}
