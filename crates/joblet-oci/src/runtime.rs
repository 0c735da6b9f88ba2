//! The command lines of the OCI runtimes joblet drives (runc, crun,
//! runsc): global options first (state root, log), then the operation.
//! Pure: the runner executes them.
//!
//! A job's container lives through `run --detach` (create and start in one
//! call: the runtime's own process exits once the container runs, and its
//! init becomes a child of the shim), then the init's exit (the shim waits
//! for it like any job leader), then `delete --force`. Signals go to the
//! init's process group, as to any job leader.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which runtime CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cli {
    Runc,
    Crun,
    Runsc,
}

/// One runtime as a node runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runtime {
    pub cli: Cli,
    pub binary: PathBuf,
    /// The runtime's state directory (`--root`), joblet's own.
    pub root: PathBuf,
    /// Options before the operation besides `--root` and the log (runsc's
    /// `--platform`, `--network`, nvproxy flags, debug logging).
    #[serde(default)]
    pub global: Vec<String>,
}

fn os(s: &str) -> OsString {
    OsString::from(s)
}

impl Runtime {
    /// `--root R` and the runtime's own log in `log` (its errors, read
    /// back when an operation fails).
    fn global(&self, log: &Path) -> Vec<OsString> {
        let mut a = vec![os("--root"), self.root.clone().into_os_string()];
        match self.cli {
            Cli::Runc => {
                a.push(os("--log"));
                a.push(log.as_os_str().to_owned());
                a.push(os("--log-format"));
                a.push(os("json"));
            }
            Cli::Crun => {
                let mut l = OsString::from("--log=file:");
                l.push(log.as_os_str());
                a.push(l);
                a.push(os("--log-format=json"));
            }
            Cli::Runsc => {
                let mut l = OsString::from("--log=");
                l.push(log.as_os_str());
                a.push(l);
            }
        }
        a.extend(self.global.iter().map(OsString::from));
        a
    }

    /// `run --detach`: `create` and `start` in one call; the runtime
    /// returns once the container's process runs.
    pub fn run_detached(
        &self,
        id: &str,
        bundle: &Path,
        pid_file: &Path,
        log: &Path,
        preserve_fds: u32,
    ) -> Vec<OsString> {
        let mut a = self.global(log);
        a.extend([os("run"), os("--detach")]);
        if preserve_fds > 0 {
            a.push(os("--preserve-fds"));
            a.push(OsString::from(preserve_fds.to_string()));
        }
        a.extend([
            os("--bundle"),
            bundle.as_os_str().to_owned(),
            os("--pid-file"),
            pid_file.as_os_str().to_owned(),
            os(id),
        ]);
        a
    }

    /// `delete --force ID`: whatever is left of the container goes, its
    /// cgroup and state with it.
    pub fn delete(&self, id: &str, log: &Path) -> Vec<OsString> {
        let mut a = self.global(log);
        a.extend([os("delete"), os("--force"), os(id)]);
        a
    }

    /// Where the runtime keeps the state of container `id` (gone once it
    /// is deleted).
    pub fn state_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }
}

/// The first non-empty line `binary --version` prints (runc, crun and
/// runsc all answer it), the command killed after `timeout`; `None` when it
/// printed nothing. Errors name the binary and the command.
pub fn version(
    binary: &Path,
    timeout: std::time::Duration,
) -> Result<Option<String>, crate::runsc::RunscError> {
    let out = crate::runsc::probe::run(binary, &["--version"], timeout)?;
    if !out.status.success() {
        return Err(crate::runsc::RunscError::Failed {
            binary: binary.to_owned(),
            command: "--version".into(),
            status: out.status,
            output: crate::runsc::probe::tail(&out.stderr),
        });
    }
    Ok(out
        .stdout
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned))
}

/// The last error a runtime wrote to its log (runc and crun write JSON
/// lines with `level` and `msg`; runsc plain text): what a failed
/// operation tells the user.
pub fn last_error(log: &str) -> Option<String> {
    let mut last = None;
    for line in log.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) => {
                let level = v["level"].as_str().unwrap_or("");
                if matches!(level, "error" | "fatal" | "panic") {
                    if let Some(msg) = v["msg"].as_str() {
                        last = Some(msg.to_string());
                    }
                }
            }
            Err(_) => {
                // runsc (glog): "W1207 12:00:00.000000  1 main.go:42] message";
                // info and debug lines are not errors.
                let msg = line.split_once("] ").map(|(_, m)| m).unwrap_or(line);
                if !(line.starts_with('I') || line.starts_with('D')) {
                    last = Some(msg.to_string());
                }
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(cli: Cli) -> Runtime {
        Runtime {
            cli,
            binary: "/usr/sbin/runc".into(),
            root: "/run/joblet/runc".into(),
            global: vec![],
        }
    }

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    #[test]
    fn runc_takes_root_and_a_json_log_before_the_operation() {
        let a = strs(rt(Cli::Runc).run_detached(
            "joblet-1",
            Path::new("/b"),
            Path::new("/b/pid"),
            Path::new("/b/runtime.log"),
            1,
        ));
        assert_eq!(
            a,
            [
                "--root",
                "/run/joblet/runc",
                "--log",
                "/b/runtime.log",
                "--log-format",
                "json",
                "run",
                "--detach",
                "--preserve-fds",
                "1",
                "--bundle",
                "/b",
                "--pid-file",
                "/b/pid",
                "joblet-1"
            ]
        );
    }

    #[test]
    fn run_detached_creates_and_starts_in_one_call() {
        // runsc: no joblet pid 1, no descriptor to preserve.
        let a = strs(rt(Cli::Runsc).run_detached(
            "j",
            Path::new("/b"),
            Path::new("/b/pid"),
            Path::new("/b/l"),
            0,
        ));
        assert_eq!(
            &a[3..],
            [
                "run",
                "--detach",
                "--bundle",
                "/b",
                "--pid-file",
                "/b/pid",
                "j"
            ]
        );
        let a = strs(rt(Cli::Crun).run_detached(
            "j",
            Path::new("/b"),
            Path::new("/b/pid"),
            Path::new("/b/l"),
            1,
        ));
        assert_eq!(
            &a[4..],
            [
                "run",
                "--detach",
                "--preserve-fds",
                "1",
                "--bundle",
                "/b",
                "--pid-file",
                "/b/pid",
                "j"
            ]
        );
    }

    #[test]
    fn crun_and_runsc_spell_their_log_their_way() {
        let log = Path::new("/b/runtime.log");
        let c = strs(rt(Cli::Crun).delete("j", log));
        assert!(
            c.contains(&"--log=file:/b/runtime.log".to_string()),
            "{c:?}"
        );
        let mut runsc = rt(Cli::Runsc);
        runsc.global = vec!["--platform=ptrace".into(), "--network=none".into()];
        let s = strs(runsc.delete("j", log));
        assert_eq!(
            s,
            [
                "--root",
                "/run/joblet/runc",
                "--log=/b/runtime.log",
                "--platform=ptrace",
                "--network=none",
                "delete",
                "--force",
                "j"
            ]
        );
    }

    #[test]
    fn the_last_logged_error_is_what_the_user_hears() {
        let runc = r#"{"level":"info","msg":"starting","time":"x"}
{"level":"error","msg":"runc create failed: unable to start container process: exec: \"nope\": executable file not found in $PATH","time":"x"}"#;
        assert_eq!(
            last_error(runc).unwrap(),
            "runc create failed: unable to start container process: exec: \"nope\": executable file not found in $PATH"
        );
        let runsc = "I1207 12:00:00.000000       1 main.go:1] starting\nW1207 12:00:00.100000       1 main.go:2] creating container: cannot read spec: bad";
        assert_eq!(
            last_error(runsc).unwrap(),
            "creating container: cannot read spec: bad"
        );
        assert_eq!(last_error(""), None);
    }
}
