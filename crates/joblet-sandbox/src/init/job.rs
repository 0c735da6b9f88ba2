//! The job process (pid 2): own process group, default signal handling,
//! dropped privileges, `/work` as working directory, the seccomp filter,
//! then `execve`. Any failure is reported on the status pipe and the
//! process exits 127 without running the command.

use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow};
use nix::unistd::{chdir, execve, setpgid, Pid};
use seccompiler::BpfProgram;

use super::config::InitConfig;
use super::error::Stage;
use super::exec::{executable, prepare, resolve};
use super::report::{self, Context, SetupError};
use super::{privileges, seccomp, sys};

/// Exit code of a job process that never reached its command.
const EXIT_NOT_RUN: i32 = 127;

/// `filters`: the seccomp filter, compiled before release (empty when
/// `config.seccomp` is off).
pub(crate) fn run(config: &InitConfig, filters: &[BpfProgram]) -> ! {
    let e = match start(config, filters) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    report::error(e.stage, &e.message);
    std::process::exit(EXIT_NOT_RUN)
}

fn start(
    config: &InitConfig,
    filters: &[BpfProgram],
) -> Result<std::convert::Infallible, SetupError> {
    // pid 1 does the same from its side; whichever runs first wins.
    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    sys::reset_signal_dispositions()
        .stage(Stage::Exec, || "resetting signal dispositions".into())?;

    privileges::apply(config)?;

    chdir("/work").stage(Stage::Exec, || "chdir /work".into())?;
    let program = resolve(&config.command, &config.env, executable)?;
    let prepared = prepare(&program, &config.command, &config.args, &config.env)?;

    if config.seccomp {
        seccomp::apply(filters).stage(Stage::Seccomp, || "loading the filter".into())?;
    }

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
