//! The shim's JSON documents: the spec the daemon sends, the exit record the
//! shim leaves behind, and the pid files.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the shim is to run. Sent by the daemon on the shim's stdin, never
/// written to disk: `env` may hold secrets.
#[derive(Serialize, Deserialize, Clone)]
pub struct ShimSpec {
    pub job_id: String,
    pub command: String,
    pub args: Vec<String>,
    /// The job's complete environment (the daemon builds it, PATH, HOME and
    /// secrets included); nothing of the shim's own environment leaks in.
    pub env: BTreeMap<String, String>,
    /// Working directory of the job; must exist.
    pub cwd: PathBuf,
    /// `None`: no time limit.
    pub timeout_ms: Option<u64>,
    /// Grace between SIGTERM and SIGKILL when the timeout fires (and when the
    /// shim itself receives SIGTERM).
    pub stop_grace_ms: u64,
    /// Settings for the [`Runner`](crate::Runner) that starts the job (the
    /// sandbox's limits, device rules, mounts), opaque to the shim. `None`:
    /// the runner's default (unisolated for [`HostRunner`](crate::HostRunner)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<serde_json::Value>,
    /// Cluster mode: the node's fencing deadline file (see
    /// [`crate::fence`]); the job is killed once the deadline passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<PathBuf>,
    /// Standard input and terminal: batch (`/dev/null`, output to the log)
    /// unless the job was started with `-i`/`-t` (see [`crate::input`]).
    #[serde(default, skip_serializing_if = "joblet_core::Stdio::is_batch")]
    pub stdio: joblet_core::Stdio,
}

/// What a warm shim gets first, on the first line of its stdin, before its
/// job is known (see [`run_warm_shim_with`](crate::run_warm_shim_with)):
/// the job id it will serve and the runner's settings for a placeholder job
/// of the node ([`Runner::prepare`](crate::Runner::prepare)).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WarmSpec {
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<serde_json::Value>,
}

/// Prints environment variable names only: values may be secrets.
impl fmt::Debug for ShimSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShimSpec")
            .field("job_id", &self.job_id)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env_names", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("timeout_ms", &self.timeout_ms)
            .field("stop_grace_ms", &self.stop_grace_ms)
            .field("runner", &self.runner.is_some())
            .field("fence", &self.fence)
            .finish()
    }
}

/// How a job ended.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Exited on its own, with `exit_code`.
    Exited,
    /// Killed by a signal nobody here asked for.
    Signaled,
    /// Ended after a stop request (or SIGTERM to the shim), however it exited.
    Stopped,
    /// Ended after a kill request.
    Killed,
    /// Ended after its timeout fired.
    TimedOut,
    /// Never ran: the spawn failed (or the shim could not set up).
    FailedToStart,
    /// Never given: the shim's stdin closed before it had the job's spec
    /// (the daemon went away while starting it). Nothing of the job ran; a
    /// restarted daemon queues it again.
    NeverGiven,
}

/// `exit.json`: written by the shim as its last act.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ShimExit {
    pub outcome: Outcome,
    /// The exit code, or 128 + signal when the job was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the job, if one did.
    pub signal: Option<i32>,
    /// Why, for humans: "exited with code 3", "killed by signal 9 (SIGKILL)",
    /// "stopped by request; ...", "timed out after 30s; ...",
    /// "failed to start: No such file or directory (os error 2): nosuchcmd".
    pub message: String,
    pub started_unix_ms: Option<i64>,
    pub ended_unix_ms: i64,
    /// Bytes of output recorded in `output.log` (the next seq).
    pub log_bytes: u64,
}

/// `shim.pid` / `job.pid`: a pid plus its start time (field 22 of
/// `/proc/N/stat`), which together name one process even after pid reuse.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidRecord {
    pub pid: i32,
    pub start_time: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ShimSpec {
        ShimSpec {
            job_id: "j1".into(),
            command: "sh".into(),
            args: vec!["-c".into(), "exit 3".into()],
            env: BTreeMap::from([("TOKEN".to_string(), "s3cret".to_string())]),
            cwd: PathBuf::from("/tmp"),
            timeout_ms: Some(30_000),
            stop_grace_ms: 5_000,
            runner: None,
            fence: None,
            stdio: Default::default(),
        }
    }

    #[test]
    fn spec_round_trips_and_debug_hides_env_values() {
        let s = spec();
        let json = serde_json::to_string(&s).unwrap();
        let back: ShimSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back.env, s.env);
        assert_eq!(back.args, s.args);
        assert_eq!(back.timeout_ms, Some(30_000));
        let dbg = format!("{s:?}");
        assert!(dbg.contains("TOKEN"), "{dbg}");
        assert!(!dbg.contains("s3cret"), "{dbg}");
    }

    #[test]
    fn exit_json_shape() {
        let e = ShimExit {
            outcome: Outcome::TimedOut,
            exit_code: Some(143),
            signal: Some(15),
            message: "timed out after 1s; killed by signal 15 (SIGTERM)".into(),
            started_unix_ms: Some(1),
            ended_unix_ms: 2,
            log_bytes: 7,
        };
        let v: serde_json::Value = serde_json::to_value(&e).unwrap();
        assert_eq!(v["outcome"], "TimedOut");
        assert_eq!(v["exit_code"], 143);
        assert_eq!(v["signal"], 15);
        assert_eq!(v["log_bytes"], 7);
        let back: ShimExit = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
        let failed: ShimExit = serde_json::from_str(
            r#"{"outcome":"FailedToStart","exit_code":null,"signal":null,"message":"m",
                "started_unix_ms":null,"ended_unix_ms":5,"log_bytes":0}"#,
        )
        .unwrap();
        assert_eq!(failed.outcome, Outcome::FailedToStart);
        assert_eq!(failed.started_unix_ms, None);
    }

    #[test]
    fn pid_record_format() {
        let r = PidRecord {
            pid: 42,
            start_time: 123456,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"pid":42,"start_time":123456}"#
        );
    }
}
