//! A whole cluster on this machine for the cluster tests: 3 etcd members
//! and N `joblet server` nodes with simulated GPUs, each in a network
//! namespace of its own, brought up, faulted and torn down by
//! `scripts/dev-cluster.sh` (the script a developer uses by hand; see its
//! `usage`).
//!
//! [`DevCluster::up`] gives each instance a tag of its own (this process's
//! pid and a counter), so parallel tests never share a namespace, a cgroup
//! base or a directory; every cluster has its own hub namespace, so all of
//! them use the same subnet (`10.77.0.0/24`: hub `.1`, etcd `.11`–`.13`,
//! nodes `.21`…). Everything runs inside the cluster's namespaces: `rnx`
//! and `etcdctl` through `nsenter --net` (the daemons too: `ip netns exec`
//! would hide `/sys/fs/cgroup` from them).
//!
//! On drop the cluster is taken down (`dev-cluster.sh down`: its
//! processes, its nodes' shims, jobs, mounts and cgroups, its namespaces);
//! its directory (logs of every process, etcd data, state dirs) is removed
//! unless the test is panicking, in which case its path is printed.
//!
//! etcd's history ([`DevCluster::etcd_history`]) is read with `etcdctl
//! watch --rev=1 --prefix "" -w json` (3.4 has no other way to list every
//! revision): the watch replays every change from revision 1, and is
//! stopped once it reaches the revision a `get` returned just before. It
//! watches the whole key space, not only the prefix asked for, because
//! every revision changes at least one key, so the replay is known to be
//! complete when it reaches that revision; the changes are then filtered
//! by the prefix. The members compact periodically with a retention of an
//! hour, so the history is complete for a cluster younger than that (a
//! compacted start is reported as an error, never silently skipped).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use serde_json::Value;

use crate::{bin_dir, cgroup_mounts, fixture, pids};

/// `scripts/dev-cluster.sh` of this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/dev-cluster.sh")
}

/// What every node of a [`DevCluster`] gets.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The mock-NVML profile (or `nvidia-smi -q -x` capture) every node
    /// simulates, with device nodes of its own; `None`: no GPUs.
    pub gpus: Option<PathBuf>,
    /// YAML merged into every node's config (block style; `{node}`,
    /// `{node_dir}` and `{dir}` are replaced; its keys win over the
    /// script's).
    pub extra_config: String,
    /// `cluster.lease_ttl` of every node.
    pub lease_ttl: String,
    /// How long `up` and `restart` wait for each member to be ready.
    pub timeout: Duration,
}

impl Default for ClusterOptions {
    /// The 8-GPU A100, a 3 s lease, and the settings [`crate::Node`] gives
    /// its nodes (a 2 s stop grace, `/work` the job's host dir).
    fn default() -> Self {
        ClusterOptions {
            gpus: Some(fixture("nvml-profiles/mock-nvml-config-a100.yaml")),
            extra_config: "jobs:\n  stop_grace_period: 2s\nfilesystem:\n  work_size_mb: 0\n".into(),
            lease_ttl: "3s".into(),
            timeout: Duration::from_secs(60),
        }
    }
}

/// One change of etcd's history: a put (`value` `Some`, possibly empty) or
/// a delete (`None`) of `key` at `revision`. The same fields as
/// `joblet_cluster::history::Change`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdChange {
    pub revision: i64,
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A cluster started by `dev-cluster.sh up`; taken down on drop.
pub struct DevCluster {
    dir: PathBuf,
    tag: String,
    /// `cluster.env` as `up` left it (the file itself is re-read for pids,
    /// which `restart` changes).
    env: BTreeMap<String, String>,
    timeout: Duration,
    is_down: bool,
}

/// Waits until `pred` holds, polling every 100 ms; panics after `timeout`
/// naming `what`, with `detail()` (e.g. a log tail).
pub fn wait_until(
    timeout: Duration,
    what: &str,
    mut pred: impl FnMut() -> bool,
    detail: impl Fn() -> String,
) {
    let deadline = Instant::now() + timeout;
    loop {
        if pred() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}\n{}",
            detail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn output_text(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}

/// Reads a `KEY=VALUE` file (comments and blank lines skipped).
fn read_env(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

/// `command` under coreutils' `timeout` (SIGKILL 5 s after the TERM).
fn timed(limit: Duration, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("timeout");
    c.arg("--kill-after=5")
        .arg(format!("{}", limit.as_secs().max(1)))
        .arg(program)
        .stdin(Stdio::null());
    c
}

impl DevCluster {
    /// Brings up 3 etcd members and `nodes` nodes (n1, n2, …) in a new
    /// temporary directory and waits until etcd is healthy and every node
    /// has written its `server.json`. On failure the script has torn
    /// everything down again; the error carries its output (with the tail
    /// of the log of whatever failed) and the directory is kept.
    pub fn up(nodes: usize, opts: ClusterOptions) -> anyhow::Result<DevCluster> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let tag = format!(
            "{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::Builder::new()
            .prefix(&format!("joblet-cluster-{tag}-"))
            .tempdir()?
            .keep();
        let extra = dir.join("extra-config.yml");
        std::fs::write(&extra, &opts.extra_config)?;
        let mut cmd = Self::script_cmd(
            &dir,
            opts.timeout * (nodes as u32 + 4) + Duration::from_secs(30),
        );
        cmd.args(["up", "--nodes", &nodes.to_string(), "--tag", &tag])
            .arg("--gpus")
            .arg(opts.gpus.as_deref().unwrap_or(Path::new("none")))
            .args(["--lease-ttl", &opts.lease_ttl])
            .arg("--extra-config")
            .arg(&extra)
            .args(["--timeout", &opts.timeout.as_secs().max(1).to_string()]);
        // up's own directory is a new one inside ours (up wants it empty).
        let cluster_dir = dir.join("c");
        cmd.arg("--dir").arg(&cluster_dir);
        let out = cmd.output().context("running dev-cluster.sh up")?;
        if !out.status.success() {
            // The script tears down on failure; make sure of it.
            let _ = Self::script_cmd(&dir, Duration::from_secs(120))
                .arg("down")
                .arg("--dir")
                .arg(&cluster_dir)
                .output();
            bail!(
                "dev-cluster.sh up --nodes {nodes} failed (files kept in {}): {}",
                dir.display(),
                output_text(&out)
            );
        }
        let env = read_env(&cluster_dir.join("cluster.env"))?;
        Ok(DevCluster {
            dir: cluster_dir,
            tag,
            env,
            timeout: opts.timeout,
            is_down: false,
        })
    }

    fn script_cmd(dir: &Path, limit: Duration) -> Command {
        let mut c = timed(limit, "bash");
        c.arg(script())
            .env("JBC_BIN", bin_dir())
            .env("JBC_DIR", dir)
            .env("ETCDCTL_API", "3");
        c
    }

    /// Runs `dev-cluster.sh COMMAND --dir DIR ARGS…`; returns its output.
    pub fn script(&self, command: &str, args: &[&str]) -> Output {
        let limit = self.timeout + Duration::from_secs(60);
        Self::script_cmd(&self.dir, limit)
            .arg(command)
            .arg("--dir")
            .arg(&self.dir)
            .args(args)
            .env("JBC_TIMEOUT", self.timeout.as_secs().max(1).to_string())
            .output()
            .unwrap_or_else(|e| panic!("running dev-cluster.sh {command}: {e}"))
    }

    fn script_ok(&self, command: &str, args: &[&str]) -> String {
        let out = self.script(command, args);
        assert!(
            out.status.success(),
            "dev-cluster.sh {command} {args:?} failed: {}",
            output_text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The cluster's directory (`cluster.env`, `e1/etcd.log`,
    /// `n1/daemon.log`, `n1/state`, …).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tag in every namespace's and cgroup base's name
    /// (`jbc-TAG-n1`).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// A `cluster.env` value as `up` wrote it (`JBC_<KEY>`, e.g.
    /// `N1_STATE`).
    pub fn env(&self, key: &str) -> String {
        self.env
            .get(&format!("JBC_{key}"))
            .cloned()
            .unwrap_or_else(|| panic!("cluster.env has no JBC_{key}"))
    }

    fn member(&self, name: &str, field: &str) -> String {
        self.env(&format!("{}_{field}", name.to_uppercase()))
    }

    fn list(&self, key: &str) -> Vec<String> {
        self.env(key)
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// `n1`, `n2`, …
    pub fn node_names(&self) -> Vec<String> {
        self.list("NODES")
    }

    /// `e1`, `e2`, `e3`.
    pub fn etcd_members(&self) -> Vec<String> {
        self.list("ETCD_MEMBERS")
    }

    /// `http://IP:2379` of every member.
    pub fn etcd_endpoints(&self) -> Vec<String> {
        self.list("ETCD_ENDPOINTS")
    }

    /// The network namespace of a member (`e1`…, `n1`…) or `hub`.
    pub fn netns(&self, name: &str) -> String {
        if name == "hub" {
            self.env("HUB_NS")
        } else {
            self.member(name, "NS")
        }
    }

    /// A member's IP (`hub`: the bridge's, where [`DevCluster::etcdctl`] runs).
    pub fn ip(&self, name: &str) -> String {
        if name == "hub" {
            self.env("HUB_IP")
        } else {
            self.member(name, "IP")
        }
    }

    /// A node's API address (`IP:50051`) or an etcd member's client one.
    pub fn address(&self, name: &str) -> String {
        self.member(name, "ADDR")
    }

    pub fn state_dir(&self, node: &str) -> PathBuf {
        self.member(node, "STATE").into()
    }

    pub fn config_path(&self, node: &str) -> PathBuf {
        self.member(node, "CONFIG").into()
    }

    /// The node's admin client config, at its own address, without the
    /// local socket (rnx goes over the namespace's network and mutual TLS).
    pub fn rnx_config(&self, node: &str) -> PathBuf {
        self.member(node, "RNX_CONFIG").into()
    }

    /// The cgroup base of a node (`sandbox.cgroup_base`).
    pub fn cgroup_base(&self, node: &str) -> String {
        self.member(node, "CGROUP_BASE")
    }

    /// The pid of a member's process (node daemon or etcd) as the script
    /// last recorded it; `None` when it recorded none or it is gone.
    pub fn pid(&self, name: &str) -> Option<i32> {
        let env = read_env(&self.dir.join("cluster.env")).ok()?;
        let key = |f: &str| format!("JBC_{}_{f}", name.to_uppercase());
        let pid: i32 = env.get(&key("PID"))?.parse().ok()?;
        let start = env.get(&key("PID_START"))?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = stat.rsplit_once(") ")?.1;
        let fields: Vec<&str> = rest.split(' ').collect();
        (fields.first() != Some(&"Z") && fields.get(19) == Some(&start.as_str())).then_some(pid)
    }

    /// A member's log (`daemon.log` of a node, `etcd.log` of a member;
    /// every start appends to it).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.member(name, "LOG")).unwrap_or_default()
    }

    pub fn daemon_log(&self, node: &str) -> String {
        self.log(node)
    }

    /// The last `lines` lines of a member's log.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let log = self.log(name);
        let all: Vec<&str> = log.lines().collect();
        let from = all.len().saturating_sub(lines);
        let mut out = format!("--- {} ({} lines, last {}):\n", name, all.len(), lines);
        for l in &all[from..] {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// `program` in a member's (or `hub`'s) network namespace, under a
    /// time limit of the cluster's timeout.
    pub fn in_netns(&self, name: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = timed(self.timeout, "nsenter");
        c.arg(format!("--net=/run/netns/{}", self.netns(name)))
            .arg("--")
            .arg(program);
        c
    }

    // ------------------------------------------------------------ rnx --

    /// `rnx ARGS` in `node`'s namespace with its admin identity, against
    /// its own address.
    pub fn rnx(&self, node: &str, args: &[&str]) -> Output {
        self.rnx_with(node, &self.rnx_config(node), args)
    }

    fn rnx_with(&self, node: &str, config: &Path, args: &[&str]) -> Output {
        self.in_netns(node, bin_dir().join("rnx"))
            .arg("--config")
            .arg(config)
            .args(args)
            .output()
            .expect("running rnx")
    }

    /// `rnx ARGS` in `from`'s namespace with `from`'s admin identity, but
    /// against `to`'s address (`from`'s config with the address rewritten:
    /// works only if both nodes share the CA and the network connects
    /// them).
    pub fn rnx_to(&self, from: &str, to: &str, args: &[&str]) -> Output {
        let mut file = joblet_proto::ClientConfigFile::load(&self.rnx_config(from))
            .unwrap_or_else(|e| panic!("reading {from}'s rnx config: {e}"));
        for n in file.nodes.values_mut() {
            n.address = self.address(to);
            n.socket = None;
        }
        let path = self.dir.join(from).join(format!("rnx-to-{to}.yml"));
        std::fs::write(&path, file.to_yaml()).expect("writing rnx config");
        self.rnx_with(from, &path, args)
    }

    /// Runs rnx in `node`'s namespace and requires success; returns stdout.
    pub fn rnx_ok(&self, node: &str, args: &[&str]) -> String {
        let out = self.rnx(node, args);
        assert!(
            out.status.success(),
            "rnx {args:?} on {node} failed: {}\n{}",
            output_text(&out),
            self.log_tail(node, 40)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// `rnx --json ARGS` on `node`, parsed.
    pub fn rnx_json(&self, node: &str, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.rnx_ok(node, &all);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("rnx {args:?} on {node}: bad JSON ({e}): {out}"))
    }

    // --------------------------------------------------------- faults --

    /// `kill -9` a node's daemon (its shims and jobs keep running) or an
    /// etcd member.
    pub fn kill(&self, name: &str) {
        self.script_ok("kill", &[name]);
    }

    /// `kill -9` every shim of `node`.
    pub fn kill_shims(&self, node: &str) {
        self.script_ok("kill-shims", &[node]);
    }

    /// SIGSTOP a node's daemon or an etcd member.
    pub fn pause(&self, name: &str) {
        self.script_ok("pause", &[name]);
    }

    /// SIGCONT it.
    pub fn resume(&self, name: &str) {
        self.script_ok("resume", &[name]);
    }

    /// Cuts a member off the network (its veth down on the hub's side);
    /// its own address still works inside its namespace.
    pub fn partition(&self, name: &str) {
        self.script_ok("partition", &[name]);
    }

    pub fn heal(&self, name: &str) {
        self.script_ok("heal", &[name]);
    }

    /// Stops a member if it runs (SIGTERM, SIGKILL after 15 s), starts it
    /// again with its config and data, and waits until it is ready (a
    /// node: its new `server.json`; etcd: its endpoint healthy).
    pub fn restart(&self, name: &str) {
        self.script_ok("restart", &[name]);
    }

    /// `dev-cluster.sh status`.
    pub fn status(&self) -> String {
        String::from_utf8_lossy(&self.script("status", &[]).stdout).into_owned()
    }

    // ----------------------------------------------------------- etcd --

    /// `etcdctl ARGS` (API 3) in the hub's namespace against every member
    /// (the hub is never partitioned: an observer's view).
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        self.etcdctl_in("hub", args)
    }

    /// `etcdctl ARGS` in `name`'s namespace (`e1`…, `n1`…, `hub`) against
    /// every member.
    pub fn etcdctl_in(&self, name: &str, args: &[&str]) -> Output {
        self.etcdctl_cmd(name)
            .args(args)
            .output()
            .expect("running etcdctl")
    }

    fn etcdctl_cmd(&self, name: &str) -> Command {
        let mut c = self.in_netns(name, "etcdctl");
        c.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.etcd_endpoints().join(",")))
            .args(["--dial-timeout=2s", "--command-timeout=5s"]);
        c
    }

    /// etcd's current revision (a linearizable read through the hub).
    pub fn etcd_revision(&self) -> anyhow::Result<i64> {
        let out = self.etcdctl(&[
            "get",
            "",
            "--prefix",
            "--keys-only",
            "--limit=1",
            "-w",
            "json",
        ]);
        ensure!(
            out.status.success(),
            "etcdctl get failed: {}",
            output_text(&out)
        );
        let v: Value = serde_json::from_slice(&out.stdout)?;
        v["header"]["revision"]
            .as_i64()
            .with_context(|| format!("no header.revision in {v}"))
    }

    /// Every change under `prefix` (e.g. `/joblet/`) from revision 1 to the
    /// current one, in revision order (see the module's doc for how).
    pub fn etcd_history(&self, prefix: &str) -> anyhow::Result<Vec<EtcdChange>> {
        let upto = self.etcd_revision()?;
        let mut changes = Vec::new();
        if upto <= 1 {
            return Ok(changes); // revision 1 is the empty store
        }
        // Not under `timeout` (whose SIGKILL would leave etcdctl holding
        // the pipe): nsenter execs etcdctl, so killing the child kills it.
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns("hub")))
            .arg("--")
            .arg("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.etcd_endpoints().join(",")))
            .args([
                "--dial-timeout=2s",
                "watch",
                "--rev=1",
                "--prefix",
                "",
                "-w",
                "json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting etcdctl watch")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + self.timeout;
        let result = (|| -> anyhow::Result<()> {
            let mut seen = 0;
            while seen < upto {
                let left = deadline.saturating_duration_since(Instant::now());
                let line = match rx.recv_timeout(left) {
                    Ok(l) => l,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        bail!(
                            "etcdctl watch reached revision {seen} of {upto} in {:?}",
                            self.timeout
                        )
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        bail!("etcdctl watch ended at revision {seen} of {upto}")
                    }
                };
                if line.trim().is_empty() {
                    continue;
                }
                let resp: Value = serde_json::from_str(&line)
                    .with_context(|| format!("etcdctl watch printed {line:?}"))?;
                let compacted = resp["CompactRevision"].as_i64().unwrap_or(0);
                ensure!(
                    compacted == 0 && resp["Canceled"] != true,
                    "etcd's history is compacted up to revision {compacted}: {line}"
                );
                for ev in resp["Events"].as_array().into_iter().flatten() {
                    let kv = &ev["kv"];
                    let revision = kv["mod_revision"]
                        .as_i64()
                        .with_context(|| format!("event without mod_revision: {ev}"))?;
                    seen = seen.max(revision);
                    if revision > upto {
                        continue;
                    }
                    let key = base64_decode(kv["key"].as_str().unwrap_or(""))?;
                    let key = String::from_utf8_lossy(&key).into_owned();
                    if !key.starts_with(prefix) {
                        continue;
                    }
                    let value = if ev["type"].as_i64() == Some(1) || ev["type"] == "DELETE" {
                        None
                    } else {
                        Some(base64_decode(kv["value"].as_str().unwrap_or(""))?)
                    };
                    changes.push(EtcdChange {
                        revision,
                        key,
                        value,
                    });
                }
            }
            Ok(())
        })();
        let _ = child.kill();
        let out = child.wait_with_output();
        drop(rx);
        let _ = reader.join();
        if let Err(e) = result {
            let stderr = out
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            return Err(e.context(format!("etcdctl stderr: {stderr}")));
        }
        Ok(changes)
    }

    // -------------------------------------------------------- teardown --

    /// `dev-cluster.sh down`: kills what the cluster started (daemons,
    /// shims, jobs, etcd, anything in its namespaces), unmounts its nodes'
    /// mounts below its directory, removes their cgroups and its
    /// namespaces. Idempotent; the directory stays until drop.
    pub fn down(&mut self) -> anyhow::Result<()> {
        let out = Self::script_cmd(&self.dir, Duration::from_secs(120))
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .context("running dev-cluster.sh down")?;
        ensure!(
            out.status.success(),
            "dev-cluster.sh down failed: {}",
            output_text(&out)
        );
        self.is_down = true;
        Ok(())
    }

    /// What of this cluster is still on the host, one line each: its
    /// namespaces, processes naming its directory (daemons, shims, etcd),
    /// its nodes' cgroups. Empty after a clean [`DevCluster::down`].
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let prefix = format!("jbc-{}-", self.tag);
        if let Ok(entries) = std::fs::read_dir("/run/netns") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix) {
                    left.push(format!("network namespace {name}"));
                }
            }
        }
        let dir = self.dir.display().to_string();
        let me = std::process::id() as i32;
        for pid in pids() {
            if pid == me {
                continue;
            }
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
                .unwrap_or(true);
            if cmdline.contains(&dir) && !zombie {
                left.push(format!("process {pid}: {}", cmdline.trim_end()));
            }
        }
        for node in self.node_names() {
            let base = self.cgroup_base(&node);
            for m in cgroup_mounts() {
                let d = m.join(&base);
                if d.is_dir() {
                    left.push(format!("cgroup {}", d.display()));
                }
            }
        }
        left
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        if !self.is_down {
            if let Err(e) = self.down() {
                eprintln!("tearing down cluster {}: {e:#}", self.tag);
            }
        }
        // `dir` is `c` inside the directory `up` made.
        let top = self.dir.parent().unwrap_or(&self.dir).to_path_buf();
        if std::thread::panicking() || !self.is_down {
            eprintln!(
                "cluster {}: logs and state kept in {}",
                self.tag,
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&top);
        }
    }
}

/// Standard base64 (with padding, as etcdctl's JSON prints bytes).
pub fn base64_decode(s: &str) -> anyhow::Result<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        ensure!(chunk.len() > 1, "bad base64 {s:?}");
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = val(c).with_context(|| format!("bad base64 {s:?}"))?;
            n |= v << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::base64_decode;

    #[test]
    fn base64_as_etcdctl_prints_it() {
        assert_eq!(base64_decode("L2pvYmxldC9h").unwrap(), b"/joblet/a");
        assert_eq!(base64_decode("MQ==").unwrap(), b"1");
        assert_eq!(base64_decode("eAp5").unwrap(), b"x\ny");
        assert_eq!(base64_decode("eno=").unwrap(), b"zz");
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("a").is_err());
        assert!(base64_decode("a*==").is_err());
    }
}
