//! Shared helpers of the `init_*` tests: a default sandbox config around a
//! temp work dir, and running a job to the end.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use joblet_sandbox::init::{self, InitConfig, InitError, NetMode, PendingInit};
use tempfile::TempDir;

pub const NOBODY: u32 = 65534;

pub fn init_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_joblet-sandbox-init-test"))
}

/// A work dir owned by nobody.
pub fn work_dir() -> TempDir {
    let d = tempfile::Builder::new()
        .prefix("joblet-init-test-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::chown(d.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    d
}

/// A host file holding `text` that the job's user may read (to bind in).
pub fn host_file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new()
        .prefix("joblet-init-bind-")
        .tempfile()
        .unwrap();
    fs::write(f.path(), text).unwrap();
    fs::set_permissions(f.path(), fs::Permissions::from_mode(0o644)).unwrap();
    f
}

/// Host paths bound read-only, those that exist here.
pub fn ro_mounts() -> Vec<PathBuf> {
    ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| fs::symlink_metadata(p).is_ok())
        .collect()
}

pub fn config(work: &Path, command: &str, args: &[&str]) -> InitConfig {
    InitConfig {
        command: command.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::from([
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("JOB_MARK".into(), "x y".into()),
        ]),
        hostname: "job-test".into(),
        uid: NOBODY,
        gid: NOBODY,
        allow_root: false,
        ro_mounts: ro_mounts(),
        root: None,
        extra_devices: vec![],
        work_dir: work.to_path_buf(),
        work_size_mb: 0,
        tmp_size_mb: 16,
        net: NetMode::None,
        seccomp: true,
        seccomp_allow: vec![],
        binds: vec![],
        masks: vec![],
        device_binds: vec![],
        dev_shm: None,
        warm: false,
        stdin: None,
    }
}

/// Copies the probe into `work` and returns its path inside the sandbox.
pub fn install_probe(work: &Path) -> String {
    let dst = work.join("joblet-probe");
    fs::copy(env!("CARGO_BIN_EXE_joblet-probe"), &dst).unwrap();
    fs::set_permissions(&dst, fs::Permissions::from_mode(0o755)).unwrap();
    "/work/joblet-probe".into()
}

/// Output files of one job.
pub struct Logs {
    dir: TempDir,
}

impl Logs {
    pub fn new() -> (Logs, OwnedFd, OwnedFd) {
        let dir = tempfile::tempdir().unwrap();
        let out = File::create(dir.path().join("stdout")).unwrap();
        let err = File::create(dir.path().join("stderr")).unwrap();
        (Logs { dir }, out.into(), err.into())
    }
    pub fn stdout(&self) -> String {
        fs::read_to_string(self.dir.path().join("stdout")).unwrap()
    }
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap()
    }
}

pub fn spawn(config: &InitConfig) -> (Result<PendingInit, InitError>, Logs) {
    let (logs, out, err) = Logs::new();
    let r = init::spawn(
        &init_bin(),
        &[OsString::from("sandbox-init")],
        config,
        out,
        err,
    );
    (r, logs)
}

/// Spawns and releases; the caller must reap the pid.
pub fn start(config: &InitConfig) -> (Result<i32, InitError>, Logs) {
    let (pending, logs) = spawn(config);
    (pending.and_then(PendingInit::release).map(|s| s.pid), logs)
}

/// Builds a warm sandbox from `base` (made warm here), lets it fork its
/// pid 1 (no cgroup: the init does not need one) and gives it `job`; the
/// caller must reap the pid.
pub fn start_warm(base: &InitConfig, job: &InitConfig) -> (Result<i32, InitError>, Logs) {
    let base = InitConfig {
        warm: true,
        ..base.clone()
    };
    let (pending, logs) = spawn(&base);
    let started = pending.and_then(|mut p| {
        p.enter(init::RELEASE_TIMEOUT)?;
        p.start(job, init::RELEASE_TIMEOUT).map(|s| s.pid)
    });
    (started, logs)
}

/// [`run`] in a warm sandbox built from `base`.
pub fn run_warm(base: &InitConfig, job: &InitConfig) -> Ended {
    let (pid, logs) = start_warm(base, job);
    let pid = pid.unwrap_or_else(|e| panic!("warm sandbox did not start: {e}"));
    let status = wait(pid);
    Ended { status, logs }
}

/// Waits (at most 10 s) until `path` exists.
pub fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` exists (a zombie counts).
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Raw wait status of `pid`.
pub fn wait(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
    status
}

pub struct Ended {
    pub status: i32,
    pub logs: Logs,
}

impl Ended {
    pub fn code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }
    pub fn signal(&self) -> Option<i32> {
        libc::WIFSIGNALED(self.status).then(|| libc::WTERMSIG(self.status))
    }
}

/// Runs the job to the end.
pub fn run(config: &InitConfig) -> Ended {
    let (pid, logs) = start(config);
    let pid = pid.unwrap_or_else(|e| panic!("sandbox did not start: {e}"));
    let status = wait(pid);
    Ended { status, logs }
}

/// Runs the probe with `args` and parses its JSON.
pub fn probe(config: &InitConfig) -> serde_json::Value {
    let ended = run(config);
    assert_eq!(
        ended.code(),
        Some(0),
        "probe failed: status {:#x}, stderr: {}",
        ended.status,
        ended.logs.stderr()
    );
    serde_json::from_str(&ended.logs.stdout())
        .unwrap_or_else(|e| panic!("probe output is not JSON ({e}): {}", ended.logs.stdout()))
}

/// The result of the probe's attempt `op` (on `target`).
pub fn tried(v: &serde_json::Value, op: &str, target: Option<&str>) -> String {
    v["tries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["op"] == op && target.is_none_or(|tg| t["target"] == tg))
        .unwrap_or_else(|| panic!("no try {op} {target:?} in {v}"))["result"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The probe's mount entry for `mount_point` (the last, topmost one).
pub fn mount<'a>(v: &'a serde_json::Value, mount_point: &str) -> Option<&'a serde_json::Value> {
    v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["mount_point"] == mount_point)
}

/// The host's mount table as seen by this test process.
pub fn host_mounts() -> String {
    fs::read_to_string("/proc/self/mountinfo").unwrap()
}

/// The probe's whole record of attempt `op` on `target`.
pub fn attempt<'a>(v: &'a serde_json::Value, op: &str, target: &str) -> &'a serde_json::Value {
    v["tries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["op"] == op && t["target"] == target)
        .unwrap_or_else(|| panic!("no try {op} {target} in {v}"))
}
