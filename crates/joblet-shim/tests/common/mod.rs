//! Helpers shared by the shim integration tests: starting shims (the
//! `joblet-shim-test` binary), waiting with deadlines, reading the log, and
//! killing whatever a failed test leaves behind.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Once;
use std::time::{Duration, Instant};

use joblet_core::joblog::Record;
use joblet_shim::procstat::{start_time, PROC_ROOT};
use joblet_shim::{launch, reattach, JobDir, LogReader, ShimExit, ShimHandle, ShimSpec};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

pub const SHIM_BIN: &str = env!("CARGO_BIN_EXE_joblet-shim-test");

/// Makes this test process the reaper of orphans it causes (shims whose
/// launcher exited, background job children), so none are left as zombies
/// of an init that does not reap.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| nix::sys::prctl::set_child_subreaper(true).unwrap());
}

pub fn spec(cwd: &Path, command: &str, args: &[&str]) -> ShimSpec {
    ShimSpec {
        job_id: "test-job".into(),
        command: command.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        cwd: cwd.to_owned(),
        timeout_ms: None,
        stop_grace_ms: 5_000,
        runner: None,
        fence: None,
        stdio: Default::default(),
    }
}

pub fn sh(cwd: &Path, script: &str) -> ShimSpec {
    spec(cwd, "sh", &["-c", script])
}

pub fn shim_args(dir: &JobDir) -> Vec<OsString> {
    vec!["shim".into(), "--job-dir".into(), dir.path().into()]
}

/// A job dir inside `tmp`, plus a guard that kills leftovers on drop.
pub fn job_dir(tmp: &Path) -> (JobDir, Cleanup) {
    let dir = JobDir::new(tmp.join("job"));
    (dir.clone(), Cleanup { dir })
}

pub fn start(dir: &JobDir, spec: &ShimSpec) -> ShimHandle {
    init();
    launch(Path::new(SHIM_BIN), &shim_args(dir), dir, spec).unwrap()
}

pub async fn finish(h: ShimHandle) -> ShimExit {
    let dir = h.dir().clone();
    match tokio::time::timeout(Duration::from_secs(30), h.wait()).await {
        Ok(r) => r.unwrap(),
        Err(_) => panic!("shim of {} did not exit within 30s", dir.path().display()),
    }
}

/// Every record of the log, in order.
pub fn records(dir: &JobDir, from_seq: u64) -> Vec<Record> {
    let mut r = LogReader::open(&dir.output_log_path(), from_seq).unwrap();
    let mut all = Vec::new();
    loop {
        let recs = r.read_available(256 * 1024).unwrap();
        if recs.is_empty() {
            return all;
        }
        all.extend(recs);
    }
}

pub fn output(dir: &JobDir) -> String {
    let bytes: Vec<u8> = records(dir, 0).into_iter().flat_map(|r| r.data).collect();
    String::from_utf8(bytes).unwrap()
}

/// Polls the log until it contains `needle`.
pub async fn wait_for_output(dir: &JobDir, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = output(dir);
        if out.contains(needle) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} not in output within 20s: {out:?}; shim.log: {}",
            std::fs::read_to_string(dir.shim_log_path()).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `pid` has died, reaping it if it is our child (an orphan
/// handed to this subreaper). Returns false if it is still alive after `t`.
pub fn wait_gone(pid: i32, t: Duration) -> bool {
    let deadline = Instant::now() + t;
    loop {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(_) => return true,
            Err(_) => {
                // Not our child: look at it.
                match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                    Err(_) => return true,
                    Ok(s)
                        if s.rsplit(')')
                            .next()
                            .is_some_and(|r| r.trim_start().starts_with('Z')) =>
                    {
                        return true
                    }
                    Ok(_) => {}
                }
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the job's group and the shim if a test ends (or panics) with them
/// still running.
pub struct Cleanup {
    dir: JobDir,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let alive = |pid: i32, st: u64| start_time(Path::new(PROC_ROOT), pid).ok() == Some(st);
        if let Ok(Some(job)) = self.dir.read_job_pid() {
            if alive(job.pid, job.start_time) {
                let _ = killpg(Pid::from_raw(job.pid), Signal::SIGKILL);
            }
        }
        if let Ok(Some(h)) = reattach(&self.dir) {
            let _ = kill(Pid::from_raw(h.pid()), Signal::SIGKILL);
            let _ = waitpid(Pid::from_raw(h.pid()), None);
        }
    }
}
