//! [`RunscFeatures::probe`]: runs an installed runsc's informational
//! commands, each under a timeout, and parses what they print.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::parse::{parse_help, ParseError, ProbeOutputs};
use super::RunscFeatures;

/// How long each probe command may run.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most output kept from one command; the rest is read and dropped.
const MAX_OUTPUT: u64 = 4 << 20;
/// How often a running command is polled.
const POLL: Duration = Duration::from_millis(5);

/// Why probing a runsc binary failed.
#[derive(Debug, thiserror::Error)]
pub enum RunscError {
    /// The binary could not be started.
    #[error("cannot run `{} {command}`: {source}", binary.display())]
    Spawn {
        /// The runsc binary.
        binary: PathBuf,
        /// The arguments.
        command: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Waiting for the command failed.
    #[error("waiting for `{} {command}` failed: {source}", binary.display())]
    Wait {
        /// The runsc binary.
        binary: PathBuf,
        /// The arguments.
        command: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The command ran past its timeout and was killed.
    #[error("`{} {command}` did not finish within {after:?} and was killed", binary.display())]
    Timeout {
        /// The runsc binary.
        binary: PathBuf,
        /// The arguments.
        command: String,
        /// The timeout.
        after: Duration,
    },
    /// The command exited unsuccessfully.
    #[error("`{} {command}` failed ({status}): {output}", binary.display())]
    Failed {
        /// The runsc binary.
        binary: PathBuf,
        /// The arguments.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// The end of what it printed on stderr.
        output: String,
    },
    /// What it printed does not look like runsc.
    #[error("{} does not look like gVisor's runsc: {source}", binary.display())]
    Parse {
        /// The runsc binary.
        binary: PathBuf,
        /// What was wrong.
        #[source]
        source: ParseError,
    },
}

/// One command's output.
pub(crate) struct Captured {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl RunscFeatures {
    /// Probes `binary` with [`DEFAULT_PROBE_TIMEOUT`] per command.
    pub fn probe(binary: &Path) -> Result<RunscFeatures, RunscError> {
        Self::probe_with_timeout(binary, DEFAULT_PROBE_TIMEOUT)
    }

    /// Runs `--version`, `help`, `flags`, `help platforms` (when `help` lists
    /// that topic) and `nvproxy list-supported-drivers` (when `help` lists
    /// `nvproxy`), each killed after `timeout`, and parses their output. A
    /// failing driver listing leaves [`RunscFeatures::supported_drivers`]
    /// empty (GPU jobs are then refused) rather than failing the probe.
    pub fn probe_with_timeout(
        binary: &Path,
        timeout: Duration,
    ) -> Result<RunscFeatures, RunscError> {
        let ok = |args: &[&str]| -> Result<Captured, RunscError> {
            let out = run(binary, args, timeout)?;
            if out.status.success() {
                Ok(out)
            } else {
                Err(RunscError::Failed {
                    binary: binary.to_owned(),
                    command: args.join(" "),
                    status: out.status,
                    output: tail(&out.stderr),
                })
            }
        };
        let version = ok(&["--version"])?;
        let help = ok(&["help"])?;
        let flags = ok(&["flags"])?;
        let flags_text = format!("{}{}", flags.stdout, flags.stderr);
        let listed = parse_help(&help.stdout);
        let platforms = if listed.topics.contains("platforms") {
            Some(ok(&["help", "platforms"])?)
        } else {
            None
        };
        let drivers = if listed.subcommands.contains("nvproxy") {
            match ok(&["nvproxy", "list-supported-drivers"]) {
                Ok(out) => Some(out),
                Err(err) => {
                    tracing::warn!(binary = %binary.display(), error = %err, "runsc cannot list nvproxy's supported drivers; GPU jobs will be refused");
                    None
                }
            }
        } else {
            None
        };
        let features = RunscFeatures::from_outputs(&ProbeOutputs {
            version: &version.stdout,
            help: &help.stdout,
            flags: &flags_text,
            help_platforms: platforms.as_ref().map(|p| p.stdout.as_str()),
            supported_drivers: drivers.as_ref().map(|d| d.stdout.as_str()),
        })
        .map_err(|source| RunscError::Parse {
            binary: binary.to_owned(),
            source,
        })?;
        tracing::debug!(
            binary = %binary.display(),
            release = %features.release,
            nvproxy = features.has_nvproxy(),
            platforms = ?features.platforms,
            "probed runsc"
        );
        Ok(features)
    }
}

pub(crate) fn tail(s: &str) -> String {
    let s = s.trim();
    let start = s.char_indices().rev().nth(499).map_or(0, |(i, _)| i);
    s[start..].to_owned()
}

/// Runs `binary args` with stdin closed, killing it after `timeout`
/// (also what [`crate::runtime::version`] asks any runtime with).
pub(crate) fn run(binary: &Path, args: &[&str], timeout: Duration) -> Result<Captured, RunscError> {
    let command = args.join(" ");
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RunscError::Spawn {
            binary: binary.to_owned(),
            command: command.clone(),
            source,
        })?;
    let deadline = Instant::now() + timeout;
    let (stdout, stderr) = readers(&mut child);
    let timed_out = || RunscError::Timeout {
        binary: binary.to_owned(),
        command: command.clone(),
        after: timeout,
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill(&mut child);
                return Err(timed_out());
            }
            Ok(None) => thread::sleep(POLL),
            Err(source) => {
                kill(&mut child);
                return Err(RunscError::Wait {
                    binary: binary.to_owned(),
                    command,
                    source,
                });
            }
        }
    };
    // A process it left behind may hold the pipes open: wait no longer than the deadline.
    let collect = |rx: mpsc::Receiver<Vec<u8>>| {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    };
    let stdout = collect(stdout).map_err(|_| timed_out())?;
    let stderr = collect(stderr).map_err(|_| timed_out())?;
    Ok(Captured {
        status,
        stdout,
        stderr,
    })
}

fn kill(child: &mut Child) {
    // It may have exited in between; either way it is reaped below.
    let _ = child.kill();
    let _ = child.wait();
}

/// Threads that read stdout and stderr to the end, so neither pipe fills up.
fn readers(child: &mut Child) -> (mpsc::Receiver<Vec<u8>>, mpsc::Receiver<Vec<u8>>) {
    fn read_all<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = (&mut pipe).take(MAX_OUTPUT).read_to_end(&mut buf);
                let _ = io::copy(&mut pipe, &mut io::sink());
            }
            let _ = tx.send(buf);
        });
        rx
    }
    let stdout: Option<ChildStdout> = child.stdout.take();
    let stderr: Option<ChildStderr> = child.stderr.take();
    (read_all(stdout), read_all(stderr))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Writes an executable script and waits until it can be executed: a
    /// child forked by another test thread may briefly hold the written file
    /// open (ETXTBSY).
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        for _ in 0..500 {
            let spawned = Command::new(&path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match spawned {
                Ok(mut child) => {
                    kill(&mut child);
                    return path;
                }
                Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy => {
                    thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("cannot run {}: {e}", path.display()),
            }
        }
        panic!("{} stayed busy", path.display());
    }

    #[test]
    fn missing_binary_is_a_spawn_error_naming_it() {
        let err = RunscFeatures::probe(Path::new("/nonexistent/runsc")).unwrap_err();
        assert!(matches!(err, RunscError::Spawn { .. }));
        assert!(
            err.to_string().contains("/nonexistent/runsc --version"),
            "{err}"
        );
    }

    #[test]
    fn a_hanging_binary_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "runsc", "exec sleep 30\n");
        let started = Instant::now();
        let err = RunscFeatures::probe_with_timeout(&bin, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, RunscError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_failing_command_reports_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(
            dir.path(),
            "runsc",
            "echo 'flag provided but not defined: -version' >&2\nexit 2\n",
        );
        let err = RunscFeatures::probe(&bin).unwrap_err();
        assert!(matches!(err, RunscError::Failed { .. }), "{err}");
        assert!(
            err.to_string().contains("flag provided but not defined"),
            "{err}"
        );
    }

    #[test]
    fn another_program_is_not_taken_for_runsc() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "runc", "echo 'runc version 1.1.5'\n");
        let err = RunscFeatures::probe(&bin).unwrap_err();
        assert!(
            matches!(
                err,
                RunscError::Parse {
                    source: ParseError::Version { .. },
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn flags_on_stderr_and_a_failing_driver_list_are_handled() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(
            dir.path(),
            "runsc",
            r#"case "$*" in
--version) printf 'runsc version release-20260831.0\nspec: 1.2.1\n' ;;
help) printf 'Subcommands:\n\trun   run\n\nSubcommands for helpers:\n\tnvproxy   nvproxy\n\nAdditional help topics (x):\n\tplatforms   list\n' ;;
flags) printf '  -nvproxy\n    \tenable\n  -platform string\n    \tuse: systrap (default), ptrace.\n' >&2 ;;
"help platforms") printf 'ptrace\nsystrap\n' ;;
*) echo "nvproxy: cannot load driver ABI table" >&2; exit 128 ;;
esac
"#,
        );
        let f = RunscFeatures::probe(&bin).unwrap();
        assert!(f.has_nvproxy_flag() && f.has_flag("platform"));
        assert!(f.has_list_supported_drivers());
        assert_eq!(f.supported_drivers, None);
        assert!(f.has_platform("systrap") && f.has_platform("ptrace"));
    }
}
