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
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow};
use nix::unistd::{chdir, setpgid, Pid};
use seccompiler::BpfProgram;

use super::config::InitConfig;
use super::error::Stage;
use super::exec::{self, executable, resolve, Arguments};
use super::report::{self, Context, SetupError};
use super::{frame, privileges, seccomp, sys};

/// Exit code of a job process that never reached its command.
const EXIT_NOT_RUN: i32 = 127;

/// The byte a prestarted job process sends pid 1 once it has entered.
pub(crate) const ENTERED: u8 = b'E';

/// The byte pid 1 sends a prestarted job process, after its config, once
/// the job's tree is finished and the job may run.
pub(crate) const GO: u8 = b'G';

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
/// see `frame`), which pid 1 sends as it starts building the job's part of
/// the tree: the config is parsed and `execve`'s vectors built meanwhile.
/// Then [`GO`], once the tree is finished: `/work`, the `PATH` search and
/// `execve`. The job's privileges and filter must be the ones taken (pid 1
/// only passes on a job that fits the sandbox, see
/// [`InitConfig::warm_mismatch`]; checked again here). End of file instead
/// of the config or the go: no job comes (pid 1 is going away); exits
/// quietly.
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
    let arguments = match exec::arguments(&job.command, &job.args, &job.env) {
        Ok(a) => a,
        Err(e) => fail(e),
    };
    let mut byte = [0u8; 1];
    loop {
        match channel.read(&mut byte) {
            Ok(1) if byte[0] == GO => break,
            Ok(0) => std::process::exit(0),
            Ok(_) => fail(SetupError::new(
                Stage::Config,
                "pid 1 sent something else than the go after the job's config",
            )),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => fail(SetupError::new(
                Stage::Config,
                format!("waiting for pid 1's go: {e}"),
            )),
        }
    }
    drop(channel);
    match exec_with(&job, arguments) {
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
    if config.stdin.is_some_and(|s| s.tty) {
        // A session of its own (and so a group), for its terminal.
        nix::unistd::setsid().stage(Stage::Exec, || "setsid for the job's terminal".into())?;
    } else {
        // pid 1 does the same from its side; whichever runs first wins.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    }
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
    let arguments = exec::arguments(&config.command, &config.args, &config.env)?;
    exec_with(config, arguments)
}

/// [`exec`] with `execve`'s vectors built already.
fn exec_with(config: &InitConfig, arguments: Arguments) -> Result<Infallible, SetupError> {
    chdir("/work").stage(Stage::Exec, || "chdir /work".into())?;
    let program = resolve(&config.command, &config.env, executable)?;
    let prepared = exec::with_program(&program, arguments)?;

    if let Some(stdin) = config.stdin {
        sys::dup2_raw(super::JOB_STDIN_FD, 0)
            .stage(Stage::Exec, || "making the job's input its stdin".into())?;
        if stdin.tty {
            exec::take_terminal()?;
        }
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .stage(Stage::Exec, || "unblocking signals".into())?;
    Err(exec::exec_prepared(&prepared, &program, &config.command))
}
