//! Running a build tool: a child process in its own process group, its output streamed
//! line by line, killed (the whole group) when the build is cancelled.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::BuildError;

/// Output lines kept for the error message when a tool fails.
const TAIL_LINES: usize = 25;
/// How long a cancelled tool gets to clean up after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// A build tool: its name in messages and how to get it when it is missing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tool {
    pub name: &'static str,
    pub hint: &'static str,
}

pub(crate) const MMDEBSTRAP: Tool = Tool {
    name: "mmdebstrap",
    hint: "apt-get install mmdebstrap",
};
pub(crate) const UV: Tool = Tool {
    name: "uv",
    hint: "pip install uv (or see https://docs.astral.sh/uv/)",
};
pub(crate) const UNSHARE: Tool = Tool {
    name: "unshare",
    hint: "apt-get install util-linux",
};
pub(crate) const CHROOT: Tool = Tool {
    name: "chroot",
    hint: "apt-get install coreutils",
};

/// Finds `program` as `Command` would: a path with a `/` as is, a bare name on `PATH`.
pub(crate) fn locate(tool: Tool, program: &Path) -> Result<PathBuf, BuildError> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.components().count() > 1 || program.is_absolute() {
        executable(program).then(|| program.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| executable(p))
        })
    };
    found.ok_or_else(|| BuildError::ToolMissing {
        tool: tool.name,
        program: program.to_path_buf(),
        hint: tool.hint,
    })
}

/// Runs `cmd` to completion, passing each output line (stdout and stderr) to `on_line`.
/// A failure carries the last lines of output; `cancel` kills the process group.
pub(crate) fn run(
    tool: Tool,
    mut cmd: Command,
    cancel: &AtomicBool,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // A tool outlives no build: if the thread that runs it (the daemon)
    // dies, the kernel kills it.
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl(2), which is async-signal-safe and touches no memory of
    // the parent's.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    tracing::debug!(tool = tool.name, command = ?cmd, "running build tool");
    let mut child = cmd.spawn().map_err(|source| BuildError::Spawn {
        tool: tool.name,
        program: PathBuf::from(cmd.get_program()),
        source,
    })?;
    let (tx, rx) = mpsc::channel();
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    })
    .collect();
    drop(tx);

    let mut tail = VecDeque::with_capacity(TAIL_LINES);
    let mut exited_at: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                on_line(&line);
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if cancel.load(Ordering::Relaxed) {
                    stop(&mut child, tool);
                    return Err(BuildError::Cancelled);
                }
                // A grandchild may keep the pipes open after the tool exited: stop
                // waiting for output a little after the tool itself is gone.
                if exited_at.is_none() && matches!(child.try_wait(), Ok(Some(_))) {
                    exited_at = Some(Instant::now());
                }
                if exited_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
                    break;
                }
            }
        }
    }
    let status = child.wait().map_err(|source| BuildError::Spawn {
        tool: tool.name,
        program: PathBuf::from(cmd.get_program()),
        source,
    })?;
    if exited_at.is_none() {
        for reader in readers {
            let _ = reader.join();
        }
    }
    if status.success() {
        Ok(())
    } else {
        Err(BuildError::ToolFailed {
            tool: tool.name,
            status,
            tail: Vec::from(tail).join("\n"),
        })
    }
}

/// SIGTERM to the tool's process group (mmdebstrap cleans up its mounts on it), then
/// SIGKILL if it is still there after [`TERM_GRACE`].
fn stop(child: &mut Child, tool: Tool) {
    let Ok(raw) = i32::try_from(child.id()) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    let group = Pid::from_raw(raw);
    tracing::info!(tool = tool.name, pid = raw, "cancelling build tool");
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            // The leader is gone; its helpers may not be.
            let _ = killpg(group, Signal::SIGKILL);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_lines_and_reports_failure_tail() {
        let mut lines = Vec::new();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo one; echo two >&2; exit 3"]);
        let err = run(UV, cmd, &AtomicBool::new(false), &mut |l| {
            lines.push(l.to_string())
        })
        .unwrap_err();
        lines.sort();
        assert_eq!(lines, ["one", "two"]);
        let BuildError::ToolFailed { status, tail, .. } = err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(status.code(), Some(3));
        assert!(tail.contains("one") && tail.contains("two"));
    }

    #[test]
    fn cancel_kills_the_process_group() {
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        // The grandchild `sleep` must die too, or it would hold the pipes open.
        cmd.args(["-c", "echo started; sleep 60; echo never"]);
        let err = run(UV, cmd, &cancel, &mut |_| {
            cancel.store(true, Ordering::Relaxed)
        });
        assert!(matches!(err, Err(BuildError::Cancelled)), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn locates_programs() {
        assert!(locate(CHROOT, Path::new("sh")).is_ok());
        let err = locate(MMDEBSTRAP, Path::new("no-such-tool-here")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mmdebstrap not found (no-such-tool-here): apt-get install mmdebstrap"
        );
    }
}
