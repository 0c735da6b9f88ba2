//! Harness for end-to-end tests and benchmarks: a real `joblet server`
//! process in a temporary state dir, driven through the real `rnx` binary
//! over real mutual TLS.
//!
//! A [`Node`] cleans up after itself: on drop it kills the daemon it
//! started and the process groups of jobs still running under it (found
//! through the job dirs of its own state dir), and removes the cgroup base
//! it gave its daemon, and nothing else. Every node gets a cgroup base of
//! its own (`sandbox.cgroup_base`), so parallel tests never share one.
//!
//! [`SimulatedGpus`] and [`SimGpuNode`] give a node the 8-GPU A100 of the
//! fake NVML (or another profile) with device nodes of its own; the
//! `gpu_*` methods of [`Node`] read `rnx --json gpu status`.

pub mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// Directory holding the workspace's built binaries (`target/debug`), or
/// `JOBLET_E2E_BIN` when set (a benchmark driving release binaries from a
/// debug test).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("JOBLET_E2E_BIN") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().expect("deps dir");
    if dir.ends_with("deps") {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

pub fn joblet_bin() -> PathBuf {
    bin_dir().join("joblet")
}

pub fn rnx_bin() -> PathBuf {
    bin_dir().join("rnx")
}

/// A free TCP port on 127.0.0.1 (closed again, so a daemon can bind it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// How much of the daemon's log a failed start reports (a node that was
/// restarted many times has a long one; the end is what explains it).
const START_LOG_TAIL: usize = 200;

pub struct NodeOptions {
    pub max_running: usize,
    /// YAML appended after the `jobs:` block; `{node_dir}` is replaced by
    /// the node's temp dir.
    pub extra_config: String,
    /// The state dir on a tmpfs of this many MiB (a small disk a job can
    /// fill), unmounted when the node is dropped.
    pub state_tmpfs_mb: Option<u64>,
    /// Variables set in the daemon's environment (e.g. a `PATH` whose
    /// first directory holds a failing tool).
    pub daemon_env: Vec<(String, String)>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            max_running: 64,
            extra_config: String::new(),
            state_tmpfs_mb: None,
            daemon_env: Vec::new(),
        }
    }
}

pub struct Node {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// `sandbox.cgroup_base` this harness chose for the node (removed on
    /// drop, after the daemon); `None` when the test's config names its own.
    _cgroup_base: Option<CgroupBase>,
    daemon: Option<Child>,
    /// The state dir is a tmpfs this harness mounted.
    state_tmpfs: bool,
    daemon_env: Vec<(String, String)>,
}

/// A cgroup base (`sandbox.cgroup_base`) no other node of this test run
/// uses. On drop its directories are removed from every hierarchy (killing
/// any process of that node's jobs still in them) with the daemon's lock
/// file for it, so a failed test leaves nothing. Drop it after the daemon.
pub struct CgroupBase(pub String);

impl CgroupBase {
    pub fn new() -> CgroupBase {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        CgroupBase(format!(
            "joblet-e2e-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// `<hierarchy>/<base>` wherever it exists.
    pub fn dirs(&self) -> Vec<PathBuf> {
        cgroup_mounts()
            .into_iter()
            .map(|m| m.join(&self.0))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// Every cgroup below the base, in any hierarchy.
    pub fn children(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo: Vec<PathBuf> = self.dirs().iter().flat_map(|d| subdirs(d)).collect();
        while let Some(d) = todo.pop() {
            todo.extend(subdirs(&d));
            out.push(d);
        }
        out
    }

    /// The job cgroup `<hierarchy>/<base>/<job>` in each hierarchy.
    pub fn job_dirs(&self, job: &str) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join(job))
            .filter(|d| d.is_dir())
            .collect()
    }
}

impl Default for CgroupBase {
    fn default() -> CgroupBase {
        CgroupBase::new()
    }
}

impl Drop for CgroupBase {
    fn drop(&mut self) {
        for dir in self.dirs() {
            remove_cgroup_tree(&dir);
        }
        let _ =
            std::fs::remove_file(Path::new("/run/joblet").join(format!("cgroup-{}.lock", self.0)));
    }
}

/// A fixture file (byte-exact copies of public captures, `fixtures/`).
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// `extra_config` with `section.key_value` (e.g. `sandbox`, `cgroup_base:
/// x`) added to the test's own `section:` block if it has one.
fn with_setting(extra_config: &str, section: &str, key_value: &str) -> String {
    let key = format!("  {key_value}\n");
    let header = format!("{section}:\n");
    match extra_config.find(&header) {
        Some(at) => {
            let end = at + header.len();
            format!("{}{key}{}", &extra_config[..end], &extra_config[end..])
        }
        None => format!("{extra_config}{header}{key}"),
    }
}

/// The mount point of every cgroup hierarchy on this host (v1 and v2).
/// The pids of every process on the host (the numeric entries of `/proc`).
pub fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

pub fn cgroup_mounts() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            let point = left.split(' ').nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(point))
        })
        .collect()
}

pub fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a cgroup and everything below it, killing any process still in
/// it (only ever called on a base this harness created).
pub fn remove_cgroup_tree(dir: &Path) {
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

impl Node {
    pub fn start() -> anyhow::Result<Node> {
        Node::start_with(NodeOptions::default())
    }

    pub fn start_with(opts: NodeOptions) -> anyhow::Result<Node> {
        let dir = tempfile::Builder::new().prefix("joblet-e2e-").tempdir()?;
        // The daemon binds a port of its own choosing (a port picked here
        // and closed again can be taken by any connection before the daemon
        // binds it); `spawn_daemon` records it and pins it for restarts.
        let port = 0;
        let (extra_config, cgroup_base) = if opts.extra_config.contains("cgroup_base:") {
            (opts.extra_config.clone(), None)
        } else {
            let base = CgroupBase::new();
            let key = format!("cgroup_base: {}", base.0);
            (
                with_setting(&opts.extra_config, "sandbox", &key),
                Some(base),
            )
        };
        // Tests open "gates" by writing into a running job's host work dir,
        // so /work is that dir unless a test asks for a sized one.
        let extra_config = if extra_config.contains("work_size_mb:") {
            extra_config
        } else {
            with_setting(&extra_config, "filesystem", "work_size_mb: 0")
        };
        // Parallel nodes must not all bind dcgm-exporter's default port.
        let extra_config = if extra_config.contains("metrics:") {
            extra_config
        } else {
            with_setting(&extra_config, "metrics", "address: \"127.0.0.1:0\"")
        };
        // Nor the REST API's (server.json records the port bound).
        let extra_config = if extra_config.contains("rest:") {
            extra_config
        } else {
            with_setting(&extra_config, "rest", "address: \"127.0.0.1:0\"")
        };
        // The OCI runtimes' state goes with the node, not to /run.
        let extra_config = if extra_config.contains("executors:\n  state_dir:") {
            extra_config
        } else {
            with_setting(&extra_config, "executors", "state_dir: \"{node_dir}/oci\"")
        };
        let state = dir.path().join("state");
        if let Some(mb) = opts.state_tmpfs_mb {
            std::fs::create_dir_all(&state)?;
            nix::mount::mount(
                Some("tmpfs"),
                &state,
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                Some(format!("size={mb}m,mode=0700").as_str()),
            )
            .with_context(|| format!("mounting a tmpfs on {}", state.display()))?;
        }
        let config = format!(
            "server:\n  address: \"127.0.0.1:{port}\"\n  state_dir: \"{}\"\njobs:\n  max_running: {}\n  stop_grace_period: 2s\n{}",
            state.display(),
            opts.max_running,
            extra_config.replace("{node_dir}", &dir.path().display().to_string())
        );
        std::fs::write(dir.path().join("joblet-config.yml"), config)?;
        let mut node = Node {
            dir,
            port,
            _cgroup_base: cgroup_base,
            daemon: None,
            state_tmpfs: opts.state_tmpfs_mb.is_some(),
            daemon_env: opts.daemon_env,
        };
        node.spawn_daemon()?;
        Ok(node)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn client_config(&self) -> PathBuf {
        self.state_dir().join("rnx-config.yml")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("joblet-config.yml")
    }

    /// The address the daemon's `/metrics` listener bound (`metrics` in
    /// `server.json`); `None` when it serves none.
    pub fn metrics_address(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.state_dir().join("server.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        v["metrics"].as_str().map(str::to_owned)
    }

    /// The address the daemon's HTTPS REST API bound (`rest` in
    /// `server.json`); `None` when it serves none.
    pub fn rest_address(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.state_dir().join("server.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        v["rest"].as_str().map(str::to_owned)
    }

    pub fn daemon_pid(&self) -> Option<i32> {
        self.daemon.as_ref().map(|c| c.id() as i32)
    }

    /// The cgroup base the harness chose for this node (`None` when the
    /// test's config names its own).
    pub fn cgroup_base(&self) -> Option<&CgroupBase> {
        self._cgroup_base.as_ref()
    }

    /// The job dirs (`<state_dir>/jobs/<id>`) whose `shim.pid` names a
    /// process that still runs (same pid and start time): `(dir, pid)`.
    /// Warm shims count too: their dirs are made before their jobs come.
    pub fn live_shims(&self) -> Vec<(PathBuf, i32)> {
        let Ok(entries) = std::fs::read_dir(self.state_dir().join("jobs")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| read_pid_file(&e.path().join("shim.pid")).map(|pid| (e.path(), pid)))
            .collect()
    }

    /// Starts the daemon on the node's port; a restart whose port another
    /// process took meanwhile starts once more on a fresh one.
    fn spawn_daemon(&mut self) -> anyhow::Result<()> {
        match self.spawn_daemon_once() {
            Err(e) if self.port != 0 && format!("{e:#}").contains("Address already in use") => {
                eprintln!(
                    "port {} was taken while the daemon was down; restarting on a fresh one",
                    self.port
                );
                self.set_port(0)?;
                self.spawn_daemon_once()
            }
            other => other,
        }
    }

    /// Rewrites `server.address` in the node's config to `127.0.0.1:port`.
    fn set_port(&mut self, port: u16) -> anyhow::Result<()> {
        let path = self.config_path();
        let text = std::fs::read_to_string(&path)?;
        let old = format!("server:\n  address: \"127.0.0.1:{}\"", self.port);
        anyhow::ensure!(
            text.starts_with(&old),
            "{} does not start with {old:?}",
            path.display()
        );
        let new = format!("server:\n  address: \"127.0.0.1:{port}\"");
        std::fs::write(&path, text.replacen(&old, &new, 1))?;
        self.port = port;
        Ok(())
    }

    fn spawn_daemon_once(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))?;
        let _ = std::fs::remove_file(self.state_dir().join("server.json"));
        let child = Command::new(joblet_bin())
            .args(["server", "--config"])
            .arg(self.config_path())
            .env(
                "RUST_LOG",
                std::env::var("JOBLET_TEST_RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(self.daemon_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", joblet_bin().display()))?;
        let pid = child.id();
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let server_json = self.state_dir().join("server.json");
        while Instant::now() < deadline {
            if let Ok(text) = std::fs::read_to_string(&server_json) {
                let v = serde_json::from_str::<Value>(&text).unwrap_or_default();
                if v["pid"].as_u64() == Some(u64::from(pid)) {
                    if self.port == 0 {
                        let bound = v["address"]
                            .as_str()
                            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                            .with_context(|| format!("server.json has no address: {text}"))?;
                        self.set_port(bound.port())?;
                    }
                    return Ok(());
                }
            }
            if let Some(status) = self
                .daemon
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!(
                    "joblet exited during start-up ({status}); log tail:\n{}",
                    self.daemon_log_tail(START_LOG_TAIL)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "joblet did not become ready in 30s; log tail:\n{}",
            self.daemon_log_tail(START_LOG_TAIL)
        )
    }

    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// The last `lines` lines of the daemon's log (every daemon this node
    /// started appends to it), for assertion messages of long tests.
    pub fn daemon_log_tail(&self, lines: usize) -> String {
        let log = self.daemon_log();
        let all: Vec<&str> = log.lines().collect();
        let from = all.len().saturating_sub(lines);
        let mut out = String::new();
        if from > 0 {
            out.push_str(&format!("[... {from} earlier lines of daemon.log]\n"));
        }
        for line in &all[from..] {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Whether the daemon this node started is still running (`false`
    /// after [`Node::kill_daemon`] or when it exited on its own).
    pub fn daemon_running(&mut self) -> bool {
        self.daemon
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// `kill -9` the daemon (jobs and shims keep running).
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM the daemon and wait for it.
    pub fn stop_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.spawn_daemon()
    }

    /// An `rnx` command with this node's admin config.
    pub fn rnx_cmd(&self) -> Command {
        let mut c = Command::new(rnx_bin());
        c.arg("--config")
            .arg(self.client_config())
            .stdin(Stdio::null());
        c
    }

    /// Mints the client identity `name` with `role` (`joblet cert issue`)
    /// into `<node dir>/<name>`; returns its `rnx-config.yml`.
    pub fn issue_identity(&self, name: &str, role: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        let o = Command::new(joblet_bin())
            .args(["cert", "issue", "--name", name, "--role", role, "--out"])
            .arg(&dir)
            .arg("--config")
            .arg(self.config_path())
            .output()
            .expect("running joblet cert issue");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dir.join("rnx-config.yml")
    }

    /// `rnx` as another identity (see [`Node::issue_identity`]).
    pub fn rnx_as(&self, config: &Path, args: &[&str]) -> Output {
        Command::new(rnx_bin())
            .arg("--config")
            .arg(config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running rnx")
    }

    pub fn rnx(&self, args: &[&str]) -> Output {
        self.rnx_cmd().args(args).output().expect("running rnx")
    }

    /// Runs rnx and requires success; returns stdout.
    pub fn rnx_ok(&self, args: &[&str]) -> String {
        let out = self.rnx(args);
        assert!(
            out.status.success(),
            "rnx {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// `rnx --json ...` parsed.
    pub fn rnx_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.rnx_ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("rnx {args:?}: bad JSON ({e}): {out}"))
    }

    /// Submits a job, returns its id.
    pub fn run(&self, args: &[&str]) -> String {
        let mut all = vec!["job", "run"];
        all.extend_from_slice(args);
        self.rnx_ok(&all).trim().to_owned()
    }

    pub fn status(&self, id: &str) -> Value {
        self.rnx_json(&["job", "status", id])
    }

    /// Waits until the job is in a final state; returns its status.
    pub fn wait_done(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let st = self.status(id);
            if matches!(
                st["state"].as_str(),
                Some("COMPLETED" | "FAILED" | "STOPPED")
            ) {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} not done after {timeout:?}: {st}\n{}",
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `pred(list)` holds for `rnx job list --json`.
    pub fn wait_list(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let list = self.rnx_json(&["job", "list"]);
            let jobs = list.as_array().cloned().unwrap_or_default();
            if pred(&jobs) {
                return jobs;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {list}\n{}",
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One line per job of `rnx job list` (id, state, exit code, reason,
    /// GPUs), for assertion messages.
    pub fn job_summary(&self) -> String {
        let list = self.rnx_json(&["job", "list"]);
        list.as_array()
            .map(|jobs| {
                jobs.iter()
                    .map(|j| {
                        format!(
                            "  {} {} exit {} reason {} gpus {}\n",
                            j["id"].as_str().unwrap_or("?"),
                            j["state"],
                            j["exit_code"],
                            j["reason"],
                            j["gpus"]["indices"]
                        )
                    })
                    .collect()
            })
            .unwrap_or_else(|| list.to_string())
    }

    /// `rnx --json gpu status --all`: the node's GPUs (objects of
    /// `rnx`'s `GpuView`: `index`, `uuid`, `state`, `jobs`, …).
    pub fn gpus(&self) -> Vec<Value> {
        let s = self.rnx_json(&["gpu", "status", "--all"]);
        s["gpus"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("rnx --json gpu status has no gpus array: {s}"))
    }

    /// The GPUs that are not AVAILABLE or list a job, one line each
    /// (`GPU 3: ALLOCATED (cause) jobs [..]`); empty when every GPU is
    /// free.
    pub fn busy_gpus(&self) -> Vec<String> {
        self.gpus()
            .iter()
            .filter(|g| {
                g["state"] != "AVAILABLE" || g["jobs"].as_array().is_some_and(|j| !j.is_empty())
            })
            .map(|g| {
                format!(
                    "GPU {}: {} ({}) jobs {}",
                    g["index"], g["state"], g["state_cause"], g["jobs"]
                )
            })
            .collect()
    }

    /// Waits until every GPU is AVAILABLE with no job listed on it;
    /// panics after `timeout` with the GPUs still held, `why` (what the
    /// caller expected) and the daemon log's tail.
    pub fn wait_gpus_free(&self, timeout: Duration, why: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            let busy = self.busy_gpus();
            if busy.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "expected every GPU AVAILABLE with no jobs ({why}) within {timeout:?}, but:\n{}\njobs:\n{}\ndaemon log tail:\n{}",
                busy.join("\n"),
                self.job_summary(),
                self.daemon_log_tail(60)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to 10 s, then SIGKILL) until no shim of this node is left.
    /// Warm shims tear their sandboxes down on their own once the daemon is
    /// gone; one still building could otherwise recreate a cgroup after the
    /// node's cgroup base was removed.
    fn wait_for_shims(&self) {
        let jobs = format!("{}/", self.state_dir().join("jobs").display());
        let shims = || -> Vec<i32> {
            pids()
                .into_iter()
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&jobs))
                })
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = shims();
            if left.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                for pid in left {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process groups of jobs of this node that still run, so a
    /// failing test leaves nothing behind.
    fn kill_jobs(&self) {
        let Ok(entries) = std::fs::read_dir(self.state_dir().join("jobs")) else {
            return;
        };
        for e in entries.flatten() {
            if let Some(pid) = read_pid_file(&e.path().join("job.pid")) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Reads a `{"pid": N, "start_time": T}` file (the shim's `shim.pid` /
/// `job.pid`) and returns N if that process still exists with the same
/// start time, so a recycled pid is never signalled.
pub fn read_pid_file(path: &Path) -> Option<i32> {
    let rec: joblet_shim::PidRecord =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let now =
        joblet_shim::procstat::start_time(Path::new(joblet_shim::procstat::PROC_ROOT), rec.pid)
            .ok()?;
    (now == rec.start_time).then_some(rec.pid)
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_daemon();
        self.kill_jobs();
        self.wait_for_shims();
        // The node's volumes outlive its daemon by design; the test's go
        // with it (their loop devices detach themselves once unmounted).
        for m in mounts_under(self.dir.path()) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
        if self.state_tmpfs {
            let _ = nix::mount::umount2(&self.state_dir(), nix::mount::MntFlags::MNT_DETACH);
        }
        // Then the fields drop: `_cgroup_base` removes the node's cgroups.
    }
}

/// Mount points at or below `dir`, deepest first (`/proc/self/mountinfo`;
/// octal escapes such as `\040` are left as they are, as no test path
/// holds one).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// The uvm nodes' major in a simulated node's device dir: no driver owns it.
pub const UVM_MAJOR: u64 = 4000;

/// Makes a character device node `dir/name` (parents created), mode 0666.
pub fn make_node(dir: &Path, name: &str, major: u64, minor: u64) {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().expect("node path has a parent")).expect("device dir");
    mknod(
        &p,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o666),
        makedev(major, minor),
    )
    .unwrap_or_else(|e| panic!("mknod {}: {e}", p.display()));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod node");
}

/// `nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools` and `nvidia0..7` in `dir`
/// (opening them gives ENXIO where the device filter allows them: no
/// driver is behind them).
pub fn make_dev_dir(dir: &Path) {
    std::fs::create_dir_all(dir).expect("device dir");
    make_node(dir, "nvidiactl", 195, 255);
    make_node(dir, "nvidia-uvm", UVM_MAJOR, 0);
    make_node(dir, "nvidia-uvm-tools", UVM_MAJOR, 1);
    for i in 0..8 {
        make_node(dir, &format!("nvidia{i}"), 195, i);
    }
}

/// What a node needs to simulate GPUs through the fake NVML: a side
/// directory (removed on drop) holding `mknod`-made device nodes (`dev`,
/// the node's `gpu.dev_dir`) and the fake's injection file (`state`, the
/// node's `gpu.simulate_state`, `{}` to begin with). Drop it after the
/// node whose config names it.
pub struct SimulatedGpus {
    pub side: PathBuf,
    pub dev: PathBuf,
    pub state: PathBuf,
    /// The mock-NVML profile or `nvidia-smi -q -x` capture served.
    pub profile: PathBuf,
}

impl SimulatedGpus {
    /// The 8-GPU DGX A100 of NVIDIA's mock-NVML profile.
    pub fn a100() -> SimulatedGpus {
        SimulatedGpus::new(&fixture("nvml-profiles/mock-nvml-config-a100.yaml"))
    }

    pub fn new(profile: &Path) -> SimulatedGpus {
        let side = tempfile::Builder::new()
            .prefix("joblet-e2e-gpu-")
            .tempdir()
            .expect("GPU side dir")
            .keep();
        let dev = side.join("dev");
        make_dev_dir(&dev);
        let state = side.join("nvml-state.json");
        std::fs::write(&state, "{}").expect("NVML state file");
        SimulatedGpus {
            side,
            dev,
            state,
            profile: profile.to_path_buf(),
        }
    }

    /// The node's `gpu:` block: simulated GPUs, no hwloc, a 200 ms health
    /// period and a 1 s release check, then `more` (two-space indented
    /// `gpu:` keys, e.g. `"  policy: fifo\n"`).
    pub fn config(&self, more: &str) -> String {
        format!(
            "gpu:\n  enabled: true\n  hwloc: false\n  health_interval: 200ms\n  scrub_timeout: 1s\n  simulate: \"{}\"\n  simulate_state: \"{}\"\n  dev_dir: \"{}\"\n{more}",
            self.profile.display(),
            self.state.display(),
            self.dev.display(),
        )
    }
}

impl Drop for SimulatedGpus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.side);
    }
}

/// A [`Node`] with the simulated 8-GPU A100 ([`SimulatedGpus::a100`]);
/// derefs to the node. Its fields drop in order: the node (daemon, jobs,
/// cgroups) before the device dir.
pub struct SimGpuNode {
    pub node: Node,
    pub gpus: SimulatedGpus,
}

impl SimGpuNode {
    /// `gpu_keys`: more `gpu:` keys (two-space indented lines, e.g.
    /// `"  policy: fifo\n"`); `extra_config`: other top-level sections.
    pub fn start(
        max_running: usize,
        gpu_keys: &str,
        extra_config: &str,
    ) -> anyhow::Result<SimGpuNode> {
        let gpus = SimulatedGpus::a100();
        let node = Node::start_with(NodeOptions {
            max_running,
            extra_config: format!("{extra_config}{}", gpus.config(gpu_keys)),
            ..Default::default()
        })?;
        Ok(SimGpuNode { node, gpus })
    }
}

impl std::ops::Deref for SimGpuNode {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

impl std::ops::DerefMut for SimGpuNode {
    fn deref_mut(&mut self) -> &mut Node {
        &mut self.node
    }
}
