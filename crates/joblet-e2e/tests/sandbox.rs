//! The job sandbox through the real daemon: what a job sees (identity,
//! pids, hostname, `/dev`, no `/sys`), escape attempts that must fail, the
//! device filter, resource limits, and nothing left behind after 1,000 jobs.
//!
//! Jobs run `joblet-probe` (a copy bound read-only into every job) or a
//! shell. Each test has its own node and its own cgroup base, removed
//! again when the test ends, passed or not. Needs root, like the daemon.

use std::collections::BTreeSet;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions};
use joblet_proto::pb;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

/// Where jobs find `joblet-probe`: a copy in a directory of its own under
/// `/var/tmp`, bound read-only into every job. The build directory itself
/// cannot be bound when it lies under a path the sandbox provides itself
/// (`/work`, `/tmp`: the init refuses such mounts), so the copy is made
/// for every node, wherever the workspace is.
struct ProbeDir(tempfile::TempDir);

impl ProbeDir {
    fn new() -> ProbeDir {
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

    fn bin(&self) -> String {
        self.0
            .path()
            .join("joblet-probe")
            .to_str()
            .expect("utf-8 temp path")
            .to_owned()
    }
}

/// The mount point of every cgroup hierarchy on this host (v1 and v2).
fn cgroup_mounts() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            let point = left.split(' ').nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(point))
        })
        .collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// A cgroup base of one test's node (`sandbox.cgroup_base`). On drop its
/// directories are removed from every hierarchy (killing any process of
/// that node's jobs still in them), so a failed test leaves nothing.
struct CgroupBase(String);

impl CgroupBase {
    fn new() -> CgroupBase {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        CgroupBase(format!(
            "joblet-e2e-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// `<hierarchy>/<base>` wherever it exists.
    fn dirs(&self) -> Vec<PathBuf> {
        cgroup_mounts()
            .into_iter()
            .map(|m| m.join(&self.0))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// Every cgroup below the base, in any hierarchy.
    fn children(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo: Vec<PathBuf> = self.dirs().iter().flat_map(|d| subdirs(d)).collect();
        while let Some(d) = todo.pop() {
            todo.extend(subdirs(&d));
            out.push(d);
        }
        out
    }

    /// The job cgroup `<hierarchy>/<base>/<job>` in each hierarchy.
    fn job_dirs(&self, job: &str) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join(job))
            .filter(|d| d.is_dir())
            .collect()
    }
}

fn remove_cgroup_tree(dir: &Path) {
    for sub in subdirs(dir) {
        remove_cgroup_tree(&sub);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() > deadline => {
                eprintln!("cannot remove cgroup {}: {e}", dir.display());
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl Drop for CgroupBase {
    fn drop(&mut self) {
        for dir in self.dirs() {
            remove_cgroup_tree(&dir);
        }
    }
}

/// A node whose jobs can run the probe, with a cgroup base of its own.
/// Fields drop in order: the node (daemon and jobs killed) before the base.
struct SandboxNode {
    node: Node,
    base: CgroupBase,
    probe: ProbeDir,
}

impl SandboxNode {
    /// The probe's path, the same on the host and in jobs.
    fn probe_bin(&self) -> String {
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
fn start(jobs_keys: &str) -> SandboxNode {
    start_with(jobs_keys, 64)
}

fn start_with(jobs_keys: &str, max_running: usize) -> SandboxNode {
    let base = CgroupBase::new();
    let probe = ProbeDir::new();
    let mounts: Vec<String> = [
        "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc",
    ]
    .iter()
    .map(|m| format!("\"{m}\""))
    .chain([format!("\"{}\"", probe.0.path().display())])
    .collect();
    let extra_config = format!(
        "{jobs_keys}filesystem:\n  allowed_mounts: [{}]\nsandbox:\n  cgroup_base: {}\n",
        mounts.join(", "),
        base.0
    );
    let node = Node::start_with(NodeOptions {
        max_running,
        extra_config,
    })
    .unwrap();
    SandboxNode { node, base, probe }
}

struct Done {
    id: String,
    status: Value,
    stdout: String,
    stderr: String,
}

/// Runs a job to its end; returns its status and output.
fn run_job(node: &Node, args: &[&str]) -> Done {
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
fn probe(node: &SandboxNode, args: &[&str]) -> (Value, String) {
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
fn tried(report: &Value, op: &str) -> String {
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
fn tried_on(report: &Value, op: &str, target: &str) -> String {
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

// --- 1. identity and view -------------------------------------------------

#[test]
fn a_job_is_nobody_without_privileges_in_its_own_small_world() {
    let node = start("");
    let (p, id) = probe(&node, &["--try-read", "/sys/kernel/notes"]);

    // Identity: the unprivileged job user, nothing to gain.
    assert_eq!(
        (p["uid"].as_u64(), p["euid"].as_u64()),
        (Some(65534), Some(65534)),
        "{p}"
    );
    assert_eq!(p["gid"], p["egid"], "{p}");
    assert_eq!(
        p["groups"],
        serde_json::json!([]),
        "no supplementary groups: {p}"
    );
    for cap in ["cap_eff", "cap_prm", "cap_inh", "cap_amb", "cap_bnd"] {
        assert_eq!(p[cap].as_u64(), Some(0), "{cap}: {p}");
    }
    assert_eq!(p["status"]["NoNewPrivs"], "1", "{p}");
    assert_eq!(p["status"]["Seccomp"], "2", "seccomp filter mode: {p}");

    // Pid namespace: the job is a child of its own init, and sees only a
    // few small pids, none of them the host's.
    assert_eq!(p["ppid"], 1, "{p}");
    let pid = p["pid"].as_u64().unwrap();
    assert!(
        pid <= 3,
        "the job is one of the first pids of its namespace: {p}"
    );
    let pids: BTreeSet<u64> = p["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    // Its init (pid 1, root) is not even listed: /proc is hidepid=invisible.
    assert!(
        pids.contains(&pid) && pids.iter().all(|&p| p == 1 || p == pid),
        "only the job's own pids are visible: {pids:?}"
    );
    let daemon = node.daemon_pid().unwrap() as u64;
    assert!(daemon > 3 && !pids.contains(&daemon));

    assert_eq!(p["hostname"], format!("job-{}", &id[..8]));
    assert_eq!(p["cwd"], "/work");

    // /dev: the minimal set only, no host disks.
    let dev: BTreeSet<&str> = p["dev"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let expected: BTreeSet<&str> = [
        "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd", "stdin",
        "stdout", "stderr",
    ]
    .into();
    assert_eq!(dev, expected, "/dev holds exactly the minimal set");

    // No sysfs at all, and no trace of the host root.
    let mounts = p["mounts"].as_array().unwrap();
    for m in mounts {
        let point = m["mount_point"].as_str().unwrap();
        assert!(
            !point.starts_with("/sys") && m["fstype"] != "sysfs",
            "sysfs visible: {m}"
        );
        assert!(!point.starts_with("/.oldroot"), "host root visible: {m}");
    }
    assert_eq!(tried(&p, "read"), "ENOENT", "/sys must not exist: {p}");
}

// --- 2. escape attempts ---------------------------------------------------

#[test]
fn escape_writing_to_usr_hits_a_read_only_mount() {
    let node = start("");
    let target = format!("/usr/joblet-e2e-escape-{}", std::process::id());
    let (p, _) = probe(&node, &["--try-write", &target]);
    assert_eq!(tried(&p, "write"), "EROFS", "{p}");
    assert!(!Path::new(&target).exists(), "nothing written on the host");
    let usr = p["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mount_point"] == "/usr")
        .unwrap_or_else(|| panic!("/usr not mounted: {p}"));
    assert_eq!(usr["ro"], true, "{usr}");
}

#[test]
fn escape_host_pids_are_invisible() {
    let node = start("");
    let daemon = node.daemon_pid().unwrap().to_string();
    let me = std::process::id().to_string();
    let daemon_status = format!("/proc/{daemon}/status");
    let (p, _) = probe(
        &node,
        &["--try-read", &daemon_status, "--try-ptrace", &daemon],
    );
    let pids: Vec<String> = p["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert!(
        !pids.contains(&daemon) && !pids.contains(&me),
        "host pids {daemon} (daemon) and {me} (test) visible in {pids:?}"
    );
    assert_eq!(tried(&p, "read"), "ENOENT", "{p}");
    assert_eq!(tried(&p, "ptrace"), "ESRCH", "{p}");
    assert!(Path::new(&daemon_status).exists(), "the daemon does exist");
}

#[test]
fn escape_mount_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-mount"]);
    assert_eq!(tried(&p, "mount"), "EPERM", "{p}");
}

#[test]
fn escape_loading_bpf_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-bpf"]);
    assert_eq!(tried(&p, "bpf"), "EPERM", "{p}");
}

#[test]
fn escape_setns_is_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-setns"]);
    assert_eq!(tried(&p, "setns"), "EPERM", "{p}");
}

/// Host pids of the processes whose parent is `ppid`.
fn children_of(ppid: i32) -> Vec<i32> {
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

fn status_line(pid: i32, key: &str) -> String {
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
fn start_gated_probe(node: &SandboxNode, args: &str) -> (String, PathBuf) {
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

#[test]
fn escape_pid_1_is_the_sandbox_init_and_unreadable() {
    let node = start("");
    let (id, gate) = start_gated_probe(
        &node,
        "--try-read /proc/1/environ --try-read /proc/1/cmdline",
    );

    // From the host: the job's leader has one child, pid 1 of a new pid
    // namespace, which is joblet's sandbox init, not the host's init.
    let leader =
        joblet_e2e::read_pid_file(&node.state_dir().join("jobs").join(&id).join("job.pid"))
            .unwrap();
    let kids = children_of(leader);
    assert_eq!(kids.len(), 1, "the leader forks only pid 1: {kids:?}");
    let init = kids[0];
    assert_eq!(status_line(init, "NSpid:"), format!("{init} 1"));
    let cmdline = std::fs::read(format!("/proc/{init}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("sandbox-init"), "{cmdline}");
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).unwrap();
    assert_ne!(
        ns(&init.to_string()),
        ns("self"),
        "a pid namespace of its own"
    );
    let job = children_of(init);
    assert_eq!(job.len(), 1, "{job:?}");
    assert_eq!(status_line(job[0], "NSpid:"), format!("{} 2", job[0]));
    assert_eq!(ns(&job[0].to_string()), ns(&init.to_string()));

    // From the job: its pid 1 is not even listed (hidepid), so neither the
    // init's environment nor its command line can be read.
    std::fs::write(&gate, "").unwrap();
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let out = node.rnx(&["job", "log", &id]);
    let p: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(p["ppid"], 1, "{p}");
    assert_eq!(tried_on(&p, "read", "/proc/1/environ"), "ENOENT", "{p}");
    assert_eq!(tried_on(&p, "read", "/proc/1/cmdline"), "ENOENT", "{p}");
}

#[test]
fn escape_user_namespaces_are_refused() {
    let node = start("");
    let (p, _) = probe(&node, &["--try-unshare-user", "--try-clone-newuser"]);
    assert_eq!(tried(&p, "unshare-user"), "EPERM", "{p}");
    assert_eq!(tried(&p, "clone-newuser"), "EPERM", "{p}");
}

// --- 3. devices -----------------------------------------------------------

/// Removes the files it names on drop.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn open_rw(path: &Path) -> Option<i32> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .err()
        .map(|e| e.raw_os_error().unwrap())
}

#[test]
fn a_gpu_device_node_planted_in_the_work_dir_cannot_be_opened() {
    let node = start("");
    let (id, gate) = start_gated_probe(&node, "--try-open /work/nvidia0");
    let dev = gate.with_file_name("nvidia0");
    let _cleanup = RemoveOnDrop(vec![dev.clone(), gate.clone()]);
    nix::sys::stat::mknod(
        &dev,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(195, 0),
    )
    .unwrap();
    // mknod honours the umask; the job user must pass the mode bits so
    // that only the sandbox can refuse the open.
    std::fs::set_permissions(&dev, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();

    // Control: on the host the node opens as far as the (absent) driver.
    assert_eq!(
        open_rw(&dev),
        Some(nix::errno::Errno::ENXIO as i32),
        "host open of {}",
        dev.display()
    );

    // A host process moved into the job's cgroups is stopped by the
    // daemon's device filter for the job before any driver is reached.
    let mut join = String::new();
    for d in node.base.job_dirs(&id) {
        join.push_str(&format!("echo $$ > '{}/cgroup.procs' && ", d.display()));
    }
    let inside = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{join}exec {} --try-open '{}'",
            node.probe_bin(),
            dev.display()
        ))
        .output()
        .unwrap();
    assert!(inside.status.success(), "{inside:?}");
    let report: Value = serde_json::from_slice(&inside.stdout).unwrap();
    assert_eq!(
        tried(&report, "open"),
        "EPERM",
        "the job's cgroup device filter denies 195:0: {report}"
    );

    std::fs::write(&gate, "").unwrap();
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let out = node.rnx(&["job", "log", &id]);
    let p: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    // In the job the open stops even earlier: /work is mounted nodev, so
    // the kernel refuses any device node there (EACCES) before the device
    // filter is asked.
    assert_eq!(tried(&p, "open"), "EACCES", "{p}");
    let work = p["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mount_point"] == "/work")
        .unwrap_or_else(|| panic!("/work not mounted: {p}"));
    assert!(
        work["options"]
            .as_str()
            .unwrap()
            .split(',')
            .any(|o| o == "nodev"),
        "{work}"
    );
}

// --- 4. limits ------------------------------------------------------------

#[test]
fn memory_limit_kills_the_job_as_out_of_memory() {
    let node = start("");
    let done = run_job(
        &node,
        &[
            "--max-memory=32",
            "--",
            "/usr/bin/python3",
            "-c",
            "bytearray(200*1024*1024)",
        ],
    );
    assert_eq!(done.status["state"], "FAILED", "{}", done.status);
    let reason = done.status["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("out of memory"), "reason: {}", done.status);
}

/// Seconds in a `times` field like `0m1.499000s`.
fn times_secs(field: &str) -> f64 {
    let (m, s) = field.trim_end_matches('s').split_once('m').unwrap();
    m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
}

#[test]
fn cpu_limit_holds_a_busy_loop_to_half_a_core() {
    let node = start("");
    let done = run_job(
        &node,
        &[
            "--max-cpu=50",
            "--",
            "sh",
            "-c",
            "timeout 3 sh -c 'while :; do :; done'; times",
        ],
    );
    assert_eq!(
        done.status["state"], "COMPLETED",
        "{}: {}",
        done.status, done.stderr
    );
    let children = done
        .stdout
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("{}", done.stdout));
    let used: f64 = children.split_whitespace().map(times_secs).sum();
    eprintln!("CPU used in 3 s at --max-cpu=50: {used:.3} s");
    assert!(
        used > 1.0 && used <= 1.65,
        "3 s of busy loop at --max-cpu=50 used {used:.3} s of CPU ({})",
        done.stdout
    );
}

#[test]
fn cpu_cores_pin_the_job() {
    let node = start("");
    let done = run_job(
        &node,
        &[
            "--cpu-cores=0",
            "--",
            "grep",
            "Cpus_allowed_list",
            "/proc/self/status",
        ],
    );
    assert_eq!(
        done.status["state"], "COMPLETED",
        "{}: {}",
        done.status, done.stderr
    );
    assert_eq!(done.stdout, "Cpus_allowed_list:\t0\n");
}

/// Forks 50 children that sleep for a second; reports how many forks
/// worked, the fork errors on stderr, and how many pids the job can see
/// (itself and its children; its init is hidden) while they all live.
const FORK_50: &str = r#"
import os, sys, time
kids = []
for _ in range(50):
    try:
        pid = os.fork()
    except OSError as e:
        print(f"fork failed: {e}", file=sys.stderr)
        continue
    if pid == 0:
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
visible = sum(1 for p in os.listdir("/proc") if p.isdigit())
for k in kids:
    os.waitpid(k, 0)
print(len(kids), visible)
"#;

#[test]
fn pids_limit_caps_the_processes_of_a_job() {
    let node = start("  pids_max: 16\n");
    let done = run_job(&node, &["--", "/usr/bin/python3", "-c", FORK_50]);
    assert_eq!(
        done.status["state"], "COMPLETED",
        "{}: {}",
        done.status, done.stderr
    );
    let nums: Vec<usize> = done
        .stdout
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [forked, visible] = nums[..] else {
        panic!("{}", done.stdout)
    };
    // 16 = the job's leader (host pid namespace) + init + python + kids.
    assert!(
        (10..=13).contains(&forked),
        "16 pids allow 13 children (leader, init and python count), got {forked}"
    );
    assert!(
        visible <= 16 && visible == forked + 1,
        "visible pids: {visible}"
    );
    let failures = done.stderr.matches("fork failed").count();
    assert_eq!(failures, 50 - forked, "{}", done.stderr);
    assert!(
        done.stderr.contains("Resource temporarily unavailable"),
        "fork fails with EAGAIN: {}",
        done.stderr
    );
}

// --- 5. no leaks ----------------------------------------------------------

/// Host mounts that mention the node's state dir or `/work`.
fn job_mounts(state: &Path) -> Vec<String> {
    let state = state.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&state) || l.contains("/work"))
        .map(str::to_owned)
        .collect()
}

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Host processes whose command line mentions `needle` (the shims of a
/// node name their job dir under its state dir).
fn processes_naming(needle: &str) -> Vec<(i32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some((pid, cmd))
        })
        .collect()
}

/// Pids of host processes in a cgroup at or below `base` in any hierarchy
/// (`/proc/<pid>/cgroup` lines are `id:controllers:/path`).
fn processes_in(base: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| {
                c.lines().any(|l| {
                    l.splitn(3, ':')
                        .nth(2)
                        .is_some_and(|path| path.split('/').any(|comp| comp == base))
                })
            })
        })
        .collect()
}

#[test]
fn a_thousand_jobs_leave_no_cgroups_processes_or_mounts() {
    const JOBS: usize = 1000;
    const IN_FLIGHT: usize = 16;
    let node = start_with("", 16);
    let mounts_before = job_mounts(&node.state_dir());
    let daemon = node.daemon_pid().unwrap();

    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resolved = rnx::config::load_node(&node.client_config(), None).unwrap();
    let client = rt.block_on(rnx::client::connect(&resolved)).unwrap();
    // Warm the connection up first so that the daemon's descriptors are
    // counted with it.
    rt.block_on(client.clone().list_jobs(pb::ListJobsRequest::default()))
        .unwrap();
    let fds_before = fd_count(daemon);
    let ids: Vec<String> = rt.block_on(async {
        let workers: Vec<_> = (0..IN_FLIGHT)
            .map(|w| {
                let mut client = client.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for _ in (w..JOBS).step_by(IN_FLIGHT) {
                        let req = pb::RunJobRequest {
                            command: "true".into(),
                            ..Default::default()
                        };
                        let job = client.run_job(req).await.unwrap().into_inner().job.unwrap();
                        ids.push(job.id);
                    }
                    ids
                })
            })
            .collect();
        let mut ids = Vec::new();
        for w in workers {
            ids.extend(w.await.unwrap());
        }
        ids
    });
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), JOBS);
    let submitted = started.elapsed();

    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let list = rt
            .block_on(client.clone().list_jobs(pb::ListJobsRequest {
                states: vec![],
                limit: 0,
            }))
            .unwrap()
            .into_inner()
            .jobs;
        let done = list
            .iter()
            .filter(|j| j.state == pb::JobState::Completed as i32)
            .count();
        let ended_badly: Vec<_> = list
            .iter()
            .filter(|j| {
                j.state == pb::JobState::Failed as i32 || j.state == pb::JobState::Stopped as i32
            })
            .collect();
        assert!(ended_badly.is_empty(), "{:?}", ended_badly.first());
        if list.len() == JOBS && done == JOBS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{done}/{JOBS} completed after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "{JOBS} jobs: submitted in {submitted:?}, all completed in {:?}",
        started.elapsed()
    );

    // The shim removes a job's cgroup after the job's end is recorded, so
    // allow a moment for the last ones.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.base.children().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = node.base.children();
    assert!(left.is_empty(), "job cgroups left behind: {left:?}");
    assert!(!node.base.dirs().is_empty(), "the base was used");
    let procs = processes_in(&node.base.0);
    assert!(
        procs.is_empty(),
        "processes still in {}: {procs:?}",
        node.base.0
    );
    assert_eq!(
        job_mounts(&node.state_dir()),
        mounts_before,
        "no job mount leaked into the host's mount table"
    );
    let state = format!("{}/", node.state_dir().display());
    let shims = processes_naming(&state);
    assert!(
        shims.is_empty(),
        "processes of finished jobs left: {shims:?}"
    );
    let fds_after = fd_count(daemon);
    eprintln!("daemon descriptors: {fds_before} before, {fds_after} after");
    assert!(
        fds_after <= fds_before + 4,
        "the daemon holds {fds_after} descriptors after {JOBS} jobs, {fds_before} before"
    );

    // The test's own cleanup leaves no base directory in any hierarchy.
    let SandboxNode { node, base, probe } = node;
    drop(node);
    let name = base.0.clone();
    drop(base);
    drop(probe);
    let left: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .map(|m| m.join(&name))
        .filter(|d| d.exists())
        .collect();
    assert!(left.is_empty(), "cgroup base dirs left: {left:?}");
}
