//! Test helper binary for joblet-shim's integration tests.
//!
//! - `shim --job-dir DIR [--warm]`: the shim itself (what `joblet-shim`
//!   does; `--warm`: a warm shim, whose runner is the host runner unless
//!   the warm spec's runner settings say `{"prestart": true}`: then
//!   `prepare` starts the job's leader ahead, like a warm sandbox, see
//!   `PrestartRunner`). A cold shim's
//!   runner is the host runner with two test hooks, set from the job's env:
//!   `JOBLET_SHIM_TEST_CLEANUP_MS` makes the cleanup after its exit record
//!   take that long; `JOBLET_SHIM_TEST_EARLY_EXIT=1` gives the job the write
//!   end of the runner's early-exit pipe (`Runner::early_exit`) as fd 3,
//!   and as fd 4 the read end of a pipe whose write end the runner closes
//!   in `Runner::end_told`;
//! - `launch-detached --job-dir DIR`: reads a `ShimSpec` from stdin, launches
//!   a shim running this same binary, prints its pid and exits at once, like
//!   a daemon dying right after a launch.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::Mutex;
use std::time::Duration;

use joblet_shim::{
    launch, run_shim_with, run_warm_shim_with, HostRunner, JobDir, JobIo, PreparedLeader, Runner,
    RunnerError, ShimSpec,
};
use nix::fcntl::OFlag;
use nix::unistd::Pid;

/// The host runner with the test hooks of the module doc: a cleanup that
/// takes as long as `JOBLET_SHIM_TEST_CLEANUP_MS` says (like a sandbox
/// whose cgroup takes a while to remove), and with
/// `JOBLET_SHIM_TEST_EARLY_EXIT=1` an early-exit pipe whose write end is the
/// job's fd 3 (like a sandbox init that tells the job's end before its own
/// exit), and a pipe whose read end is the job's fd 4 and whose write end
/// `end_told` closes (like the sandbox init's teardown pipe); with
/// `JOBLET_SHIM_TEST_CLEANUP_POLICY=FILE`, the cleanup writes the
/// scheduling policy it runs in to FILE.
#[derive(Default)]
struct TestRunner {
    cleanup: Mutex<Duration>,
    policy_file: Mutex<Option<PathBuf>>,
    early: Mutex<Option<OwnedFd>>,
    teardown: Mutex<Option<OwnedFd>>,
}

impl Runner for TestRunner {
    fn spawn_interactive(&self, spec: &ShimSpec, io: JobIo) -> Result<Pid, RunnerError> {
        HostRunner.spawn_interactive(spec, io)
    }

    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        if let Some(ms) = spec
            .env
            .get("JOBLET_SHIM_TEST_CLEANUP_MS")
            .and_then(|v| v.parse().ok())
        {
            *self.cleanup.lock().unwrap() = Duration::from_millis(ms);
        }
        if let Some(file) = spec.env.get("JOBLET_SHIM_TEST_CLEANUP_POLICY") {
            *self.policy_file.lock().unwrap() = Some(PathBuf::from(file));
        }
        if spec
            .env
            .get("JOBLET_SHIM_TEST_EARLY_EXIT")
            .map(String::as_str)
            != Some("1")
        {
            return HostRunner.spawn(spec, stdout, stderr);
        }
        let fail = |e: std::io::Error| RunnerError::Spawn {
            command: spec.command.clone(),
            source: e,
        };
        let mut cmd = HostRunner::command(spec, stdout, stderr);
        let (r, w) = early_pipe(&mut cmd).map_err(fail)?;
        let (held_r, held_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| fail(e.into()))?;
        pass_fd(&mut cmd, &held_r, 4);
        let child = cmd.spawn().map_err(fail)?;
        drop(w);
        drop(held_r);
        *self.early.lock().unwrap() = Some(r);
        *self.teardown.lock().unwrap() = Some(held_w);
        Ok(Pid::from_raw(child.id() as i32))
    }

    fn early_exit(&self) -> Option<OwnedFd> {
        self.early.lock().unwrap().take()
    }

    fn end_told(&self) {
        self.teardown.lock().unwrap().take();
    }

    fn cleanup(&self) {
        if let Some(file) = self.policy_file.lock().unwrap().as_ref() {
            // SAFETY: sched_getscheduler only reads this thread's policy.
            let policy = unsafe { libc::sched_getscheduler(0) };
            if let Err(e) = std::fs::write(file, policy.to_string()) {
                eprintln!("cannot write {}: {e}", file.display());
            }
        }
        std::thread::sleep(*self.cleanup.lock().unwrap());
    }
}

/// An early-exit pipe (`Runner::early_exit`) whose write end `cmd`'s
/// process gets as its fd 3; the caller drops the write end once it has
/// spawned, and keeps the read end.
fn early_pipe(cmd: &mut std::process::Command) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    pass_fd(cmd, &w, 3);
    Ok((r, w))
}

/// Gives `cmd`'s process `fd` as its descriptor `target` (which keeps it
/// across exec); `fd` must stay open until the spawn.
fn pass_fd(cmd: &mut std::process::Command, fd: &OwnedFd, target: i32) {
    let raw = fd.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe and touches no memory; the new
    // descriptor has close-on-exec cleared.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A warm runner that starts the job's leader in `prepare`, before the job
/// is known, the way a warm sandbox forks its job process ahead: a shell
/// that reads the job's script (`sh -c SCRIPT`'s SCRIPT) from a pipe and
/// execs it, with the write end of an early-exit pipe as its fd 3 (like a
/// sandbox init telling the job's end). It offers that leader through
/// `prepared_leader` and, to show the shim used it, gives no `early_exit`
/// of its own. A job whose env has `JOBLET_SHIM_TEST_MISFIT=1` does not fit:
/// the prepared leader is killed and the job runs on the host runner.
#[derive(Default)]
struct PrestartRunner {
    leader: Mutex<Option<Prestarted>>,
}

struct Prestarted {
    child: std::process::Child,
    script: std::process::ChildStdin,
    end: OwnedFd,
}

impl PrestartRunner {
    fn take(&self) -> Option<Prestarted> {
        self.leader.lock().unwrap().take()
    }
}

impl Runner for PrestartRunner {
    fn prepare(
        &self,
        warm: &serde_json::Value,
        stdout: std::os::fd::BorrowedFd<'_>,
        stderr: std::os::fd::BorrowedFd<'_>,
    ) -> Result<(), RunnerError> {
        if warm.get("fail_prepare") == Some(&serde_json::Value::Bool(true)) {
            return Err(RunnerError::Isolation("asked to fail".into()));
        }
        if warm.get("prestart") != Some(&serde_json::Value::Bool(true)) {
            return Ok(());
        }
        let fail = |e: std::io::Error| RunnerError::Isolation(format!("prestart: {e}"));
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            r#"IFS= read -r line; exec /bin/sh -c "$line" </dev/null"#,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(stdout.try_clone_to_owned().map_err(fail)?)
        .stderr(stderr.try_clone_to_owned().map_err(fail)?)
        .process_group(0);
        let (r, w) = early_pipe(&mut cmd).map_err(fail)?;
        let mut child = cmd.spawn().map_err(fail)?;
        drop(w);
        let script = child.stdin.take().expect("piped stdin");
        *self.leader.lock().unwrap() = Some(Prestarted {
            child,
            script,
            end: r,
        });
        Ok(())
    }

    fn prepared_leader(&self) -> Option<PreparedLeader> {
        let leader = self.leader.lock().unwrap();
        let p = leader.as_ref()?;
        Some(PreparedLeader {
            pid: Pid::from_raw(p.child.id() as i32),
            end: p.end.try_clone().ok(),
        })
    }

    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        let Some(mut p) = self.take() else {
            return HostRunner.spawn(spec, stdout, stderr);
        };
        if spec.env.get("JOBLET_SHIM_TEST_MISFIT").map(String::as_str) == Some("1") {
            // The shim's reaper may reap it first.
            let _ = p.child.kill();
            let _ = p.child.wait();
            return HostRunner.spawn(spec, stdout, stderr);
        }
        let script = spec.args.last().cloned().unwrap_or_default();
        use std::io::Write;
        writeln!(p.script, "{script}").map_err(|e| RunnerError::Spawn {
            command: spec.command.clone(),
            source: e,
        })?;
        Ok(Pid::from_raw(p.child.id() as i32))
    }

    fn discard(&self) {
        if let Some(mut p) = self.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
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
            run_warm_shim_with(&dir, &PrestartRunner::default()).map(drop)
        } else {
            run_shim_with(&dir, &TestRunner::default()).map(drop)
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
