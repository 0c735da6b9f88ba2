//! Shared by the sandbox end-to-end tests: a node whose jobs can run
//! `joblet-probe`, a cgroup base of their own removed after each test, and
//! helpers to run and read probes. Each test binary uses a subset.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use joblet_e2e::CgroupBase;
use joblet_e2e::{Node, NodeOptions};
use serde_json::Value;

pub const T: Duration = Duration::from_secs(30);

/// Where jobs find `joblet-probe`: a copy in a directory of its own under
/// `/var/tmp`, bound read-only into every job. The build directory itself
/// cannot be bound when it lies under a path the sandbox provides itself
/// (`/work`, `/tmp`: the init refuses such mounts), so the copy is made
/// for every node, wherever the workspace is.
pub struct ProbeDir(pub tempfile::TempDir);

impl ProbeDir {
    pub fn new() -> ProbeDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("joblet-e2e-probe-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(
            joblet_e2e::bin_dir().join("joblet-probe"),
            dir.path().join("joblet-probe"),
        )
        .unwrap();
        ProbeDir(dir)
    }

    pub fn bin(&self) -> String {
        self.0
            .path()
            .join("joblet-probe")
            .to_str()
            .expect("utf-8 temp path")
            .to_owned()
    }
}

/// A node whose jobs can run the probe, with a cgroup base of its own.
/// Fields drop in order: the node (daemon and jobs killed) before the base.
pub struct SandboxNode {
    pub node: Node,
    pub base: CgroupBase,
    pub probe: ProbeDir,
}

impl SandboxNode {
    /// The probe's path, the same on the host and in jobs.
    pub fn probe_bin(&self) -> String {
        self.probe.bin()
    }
}

impl Deref for SandboxNode {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

/// `jobs_keys` lands in the `jobs:` block (two-space indented lines).
pub fn start(jobs_keys: &str) -> SandboxNode {
    start_with(jobs_keys, 64)
}

pub fn start_with(jobs_keys: &str, max_running: usize) -> SandboxNode {
    start_mounting(jobs_keys, max_running, &[])
}

/// As [`start_with`], with `more_mounts` added to `filesystem.allowed_mounts`.
pub fn start_mounting(jobs_keys: &str, max_running: usize, more_mounts: &[&Path]) -> SandboxNode {
    start_configured(jobs_keys, max_running, more_mounts, "")
}

/// A node with `sandbox_keys` (two-space indented lines, e.g.
/// `"  seccomp_allow: [io_uring]\n"`) in its `sandbox:` block.
pub fn start_sandbox(sandbox_keys: &str) -> SandboxNode {
    start_configured("", 64, &[], sandbox_keys)
}

/// As [`start_mounting`], with `sandbox_keys` in the `sandbox:` block.
pub fn start_configured(
    jobs_keys: &str,
    max_running: usize,
    more_mounts: &[&Path],
    sandbox_keys: &str,
) -> SandboxNode {
    let base = CgroupBase::new();
    let probe = ProbeDir::new();
    let mounts: Vec<String> = [
        "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc",
    ]
    .iter()
    .map(|m| format!("\"{m}\""))
    .chain([format!("\"{}\"", probe.0.path().display())])
    .chain(more_mounts.iter().map(|m| format!("\"{}\"", m.display())))
    .collect();
    let extra_config = format!(
        "{jobs_keys}filesystem:\n  allowed_mounts: [{}]\nsandbox:\n  cgroup_base: {}\n{sandbox_keys}",
        mounts.join(", "),
        base.0
    );
    let node = Node::start_with(NodeOptions {
        max_running,
        extra_config,
        ..Default::default()
    })
    .unwrap();
    SandboxNode { node, base, probe }
}

pub struct Done {
    pub id: String,
    pub status: Value,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a job to its end; returns its status and output.
pub fn run_job(node: &Node, args: &[&str]) -> Done {
    let id = node.run(args);
    let status = node.wait_done(&id, T);
    let out = node.rnx(&["job", "log", &id]);
    assert!(out.status.success(), "rnx job log {id}: {out:?}");
    Done {
        id,
        status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the probe as a job with `args`; returns its report and the job id.
pub fn probe(node: &SandboxNode, args: &[&str]) -> (Value, String) {
    let probe = node.probe_bin();
    let mut all = vec!["--", probe.as_str()];
    all.extend_from_slice(args);
    let done = run_job(node, &all);
    assert_eq!(
        done.status["state"],
        "COMPLETED",
        "probe job: {}\nstderr: {}\n{}",
        done.status,
        done.stderr,
        node.daemon_log()
    );
    let report = serde_json::from_str(done.stdout.trim())
        .unwrap_or_else(|e| panic!("probe output is not JSON ({e}): {}", done.stdout));
    (report, done.id)
}

/// The outcome (`ok` or an errno name) of the probe's attempt `op`.
pub fn tried(report: &Value, op: &str) -> String {
    report["tries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["op"] == op)
        .unwrap_or_else(|| panic!("no attempt {op:?} in {report}"))["result"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The outcome of the probe's attempt `op` on `target`.
pub fn tried_on(report: &Value, op: &str, target: &str) -> String {
    report["tries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["op"] == op && t["target"] == target)
        .unwrap_or_else(|| panic!("no attempt {op:?} on {target:?} in {report}"))["result"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// What a probe report's `/dev` and mounts must show, in a job and in an
/// exec into one: exactly the minimal device set (no host disks), no
/// sysfs, no trace of the host root.
pub fn assert_minimal_dev_no_sys_no_host_root(p: &Value) {
    let dev: std::collections::BTreeSet<&str> = p["dev"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let expected: std::collections::BTreeSet<&str> = [
        "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd", "stdin",
        "stdout", "stderr",
    ]
    .into();
    assert_eq!(dev, expected, "/dev holds exactly the minimal set: {p}");
    for m in p["mounts"].as_array().unwrap() {
        let point = m["mount_point"].as_str().unwrap();
        assert!(
            !point.starts_with("/sys") && m["fstype"] != "sysfs",
            "sysfs visible: {m}"
        );
        assert!(!point.starts_with("/.oldroot"), "host root visible: {m}");
    }
}

/// Host pids of the processes whose parent is `ppid`.
pub fn children_of(ppid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(&ppid.to_string()))
            })
        })
        .collect()
}

pub fn status_line(pid: i32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_default()
}

/// Starts `sh -c 'wait for ./gate; exec probe args'` and waits until it
/// runs in its cgroups; returns the job id and the gate's host path.
pub fn start_gated_probe(node: &SandboxNode, args: &str) -> (String, PathBuf) {
    let script = format!(
        "while [ ! -e gate ]; do sleep 0.05; done; exec {} {args}",
        node.probe_bin()
    );
    let id = node.run(&["--", "sh", "-c", &script]);
    let deadline = Instant::now() + T;
    while node.status(&id)["state"] != "RUNNING"
        || node.base.job_dirs(&id).is_empty()
        || joblet_e2e::read_pid_file(&node.state_dir().join("jobs").join(&id).join("job.pid"))
            .is_none()
    {
        assert!(Instant::now() < deadline, "job {id} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let gate = node
        .state_dir()
        .join("jobs")
        .join(&id)
        .join("work")
        .join("gate");
    (id, gate)
}

/// Removes the files it names on drop.
pub struct RemoveOnDrop(pub Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn open_rw(path: &Path) -> Option<i32> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .err()
        .map(|e| e.raw_os_error().unwrap())
}
