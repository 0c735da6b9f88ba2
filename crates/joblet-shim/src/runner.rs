//! How the shim starts a job: the [`Runner`] seam (isolation plugs in here)
//! and [`HostRunner`], which runs the job unisolated on the host.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use nix::unistd::Pid;

use crate::spec::ShimSpec;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The job could not be started; the message becomes the job's exit
    /// message, so it names the command and the OS error.
    #[error("failed to start: {source}: {command}")]
    Spawn { command: String, source: io::Error },
    /// The isolation the job asked for could not be set up (a cgroup limit,
    /// a device filter, a mount): the job was not started (fail closed).
    #[error("failed to start: {0}")]
    Isolation(String),
}

/// An interactive job's standard streams (see [`Runner::spawn_interactive`]).
#[derive(Debug)]
pub struct JobIo {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The three are one pseudo-terminal, which the job must take as its
    /// controlling terminal (in a session of its own), so the keys that
    /// signal (Ctrl-C, Ctrl-Z, Ctrl-\\) reach its foreground process group.
    pub tty: bool,
}

/// A prepared job leader (see [`Runner::prepared_leader`]).
#[derive(Debug)]
pub struct PreparedLeader {
    pub pid: Pid,
    /// The early word of the job's end, as `Runner::early_exit` gives it.
    pub end: Option<OwnedFd>,
}

/// Starts a job's leader process.
///
/// Contract: the returned process is a child of the calling process, leads
/// its own process group (pgid == pid) and has `stdout`/`stderr` as its
/// standard output and error and `/dev/null` as its standard input. It must
/// not inherit any other descriptor of the shim.
pub trait Runner {
    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError>;

    /// [`Runner::spawn`] for an interactive job (`-i`/`-t`): `io.stdin` as
    /// its standard input instead of `/dev/null`, and with `io.tty` the
    /// terminal as its controlling terminal (the leader then leads a
    /// session of its own, and so its own process group as well). The
    /// default refuses: the job does not start.
    fn spawn_interactive(&self, spec: &ShimSpec, io: JobIo) -> Result<Pid, RunnerError> {
        drop(io);
        Err(RunnerError::Isolation(format!(
            "job {}: this runner cannot start interactive jobs (-i/-t)",
            spec.job_id
        )))
    }

    /// A warm shim's head start, before its job is known: build from
    /// `warm` (the runner's settings for a placeholder job of this node,
    /// opaque to the shim) what every job shares, with `stdout`/`stderr`
    /// as the future job's output. `spawn` then uses it when the job fits
    /// and otherwise discards it and starts afresh. On error nothing is
    /// left built. The default builds nothing.
    fn prepare(
        &self,
        _warm: &serde_json::Value,
        _stdout: BorrowedFd<'_>,
        _stderr: BorrowedFd<'_>,
    ) -> Result<(), RunnerError> {
        Ok(())
    }

    /// A warm shim calls this once before `prepare`, while it still has a
    /// single thread, with the future job's output: a runner whose
    /// `prepare` needs a process forked from the shim (cheaper than
    /// exec'ing a fresh image, but only sound before any other thread
    /// exists) starts it here. Nothing here may fail the shim: without it,
    /// `prepare` starts what it needs its usual way. The default does
    /// nothing.
    fn fork_ahead(&self, _stdout: BorrowedFd<'_>, _stderr: BorrowedFd<'_>) {}

    /// Tears down what `prepare` built, when no job came for it.
    fn discard(&self) {}

    /// After a successful `prepare`: the process `spawn` will return for a
    /// job that fits what was prepared, and a duplicate of the descriptor
    /// `early_exit` will give then, so the shim can record the leader and
    /// wait for the job's end before the job comes instead of on its path.
    /// `None` (the default): nothing is known ahead.
    fn prepared_leader(&self) -> Option<PreparedLeader> {
        None
    }

    /// Called once after a successful `spawn`: a descriptor that yields the
    /// job's raw wait status (4 bytes, native endian) as soon as every
    /// process of the job has ended, which can be well before the leader
    /// itself exits (a sandbox's leader still tears its namespaces down).
    /// Giving one promises that nothing of the job runs once the status is
    /// written: the shim then records the job's end at once and reaps the
    /// leader afterwards. A status that comes after the leader's exit (at
    /// most a second after) is still the job's; end of file without one
    /// leaves it to the leader's exit. The default gives none.
    fn early_exit(&self) -> Option<OwnedFd> {
        None
    }

    /// Called once after the job has ended (its leader has exited and its
    /// process group is gone, or [`Runner::early_exit`] told its end): when
    /// the runner knows why the job died better than its exit status does
    /// (an out-of-memory kill), returns that reason.
    fn finish(&self) -> Option<String> {
        None
    }

    /// Called once the job's end is recorded, before the shim waits for the
    /// leader's exit (or at once, when the shim will only learn the end
    /// from that exit): a runner whose leader holds heavy teardown work back
    /// until the end is recorded (a sandbox's namespaces) lets it go on.
    /// The default does nothing.
    fn end_told(&self) {}

    /// Called once after the job's exit record is written (and the daemon
    /// told) and its leader reaped: releases what `spawn` set up (cgroups,
    /// filters).
    fn cleanup(&self) {}
}

/// Runs the job as a plain host process: exactly `spec.env` as environment,
/// `spec.cwd` as working directory, in a new process group.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostRunner;

impl HostRunner {
    /// The command that [`Runner::spawn`] starts for `spec`, for a runner
    /// that adds to it.
    pub fn command(spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Command {
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .env_clear()
            .envs(&spec.env)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .process_group(0);
        cmd
    }
}

impl Runner for HostRunner {
    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        let fail = |source| RunnerError::Spawn {
            command: spec.command.clone(),
            source,
        };
        // Dropping the Child neither waits for nor kills the job: the shim
        // reaps it by pid.
        let child = HostRunner::command(spec, stdout, stderr)
            .spawn()
            .map_err(fail)?;
        // Pids are positive pid_t values, so the cast is exact.
        Ok(Pid::from_raw(child.id() as i32))
    }

    fn spawn_interactive(&self, spec: &ShimSpec, io: JobIo) -> Result<Pid, RunnerError> {
        let fail = |source| RunnerError::Spawn {
            command: spec.command.clone(),
            source,
        };
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .env_clear()
            .envs(&spec.env)
            .current_dir(&spec.cwd)
            .stdin(Stdio::from(io.stdin))
            .stdout(Stdio::from(io.stdout))
            .stderr(Stdio::from(io.stderr));
        if io.tty {
            crate::tty::take_terminal_at_exec(&mut cmd);
        } else {
            cmd.process_group(0);
        }
        let child = cmd.spawn().map_err(fail)?;
        Ok(Pid::from_raw(child.id() as i32))
    }
}
