//! Shared by the GPU end-to-end tests: a node whose GPUs are simulated by
//! the fake NVML library, with `mknod`-made device nodes in a directory of
//! its own (`gpu.dev_dir`), an injection file (`gpu.simulate_state`), and
//! helpers to wait for states and read GPUs, audit records and device
//! access from a job's cgroups. Each test binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use joblet_e2e::{Node, SimulatedGpus};
use serde_json::{json, Value};

use crate::sandbox_common::*;

// Moved to the harness (`SimulatedGpus` makes the device dir); kept here
// for the tests that make more nodes. Not every test binary uses them.
#[allow(unused_imports)]
pub use joblet_e2e::{make_node, UVM_MAJOR};

/// The MIG capability nodes' major: no driver owns it.
pub const CAPS_MAJOR: u64 = 4001;

/// A node with simulated GPUs whose device nodes live in `<side>/dev`.
/// Fields drop in order: the node before the side dir.
pub struct GpuNode {
    pub node: SandboxNode,
    /// The test's own directory (device nodes, state file, fake procfs,
    /// fake programs), removed with the node.
    pub side: PathBuf,
    pub dev: PathBuf,
    pub state: PathBuf,
    _sim: SimulatedGpus,
}

impl std::ops::Deref for GpuNode {
    type Target = SandboxNode;
    fn deref(&self) -> &SandboxNode {
        &self.node
    }
}

/// A node serving the 8-GPU A100 profile; `gpu_keys` lands in `gpu:`.
pub fn start_gpu(gpu_keys: &str) -> GpuNode {
    let keys = gpu_keys.to_string();
    start_gpu_with(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        move |_| keys,
    )
}

/// A node serving `profile`. `extra` gets the side dir (with `dev/` made)
/// before the daemon starts, may put files there, and returns more `gpu:`
/// keys (two-space indented lines).
pub fn start_gpu_with(profile: &Path, extra: impl FnOnce(&Path) -> String) -> GpuNode {
    start_gpu_mounting(profile, extra, &[])
}

/// As [`start_gpu_with`], with `more_mounts` added to
/// `filesystem.allowed_mounts`.
pub fn start_gpu_mounting(
    profile: &Path,
    extra: impl FnOnce(&Path) -> String,
    more_mounts: &[&Path],
) -> GpuNode {
    // The device dir and state file are made before the daemon starts, in
    // a temp dir of their own (removed with the node).
    let sim = SimulatedGpus::new(profile);
    let more = extra(&sim.side);
    let node = start_mounting(&sim.config(&more), 64, more_mounts);
    // The nvml-list helper goes where jobs find the probe.
    std::fs::copy(
        joblet_e2e::bin_dir().join("nvml-list"),
        node.probe.0.path().join("nvml-list"),
    )
    .unwrap();
    GpuNode {
        node,
        side: sim.side.clone(),
        dev: sim.dev.clone(),
        state: sim.state.clone(),
        _sim: sim,
    }
}

pub fn inject(path: &Path, state: Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&state).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub fn wait_for(node: &Node, what: &str, mut pred: impl FnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + T;
    loop {
        if let Some(v) = pred() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            node.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn wait_state(node: &Node, id: &str, state: &str) -> Value {
    wait_for(node, &format!("job {id} {state}"), || {
        let st = node.status(id);
        (st["state"] == state).then_some(st)
    })
}

/// The host pid of a running job's process (its `job.pid` record).
pub fn job_pid(node: &Node, id: &str) -> i32 {
    let path = node.state_dir().join("jobs").join(id).join("job.pid");
    let v = wait_for(node, "job.pid", || {
        joblet_e2e::read_pid_file(&path).map(|p| json!(p))
    });
    v.as_i64().unwrap() as i32
}

/// The GPU indices a job holds, from `rnx gpu status`.
pub fn gpus_of(node: &Node, id: &str) -> Vec<u64> {
    let s = node.rnx_json(&["gpu", "status"]);
    s["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| {
            g["jobs"].as_array().is_some_and(|j| {
                j.iter().any(|x| {
                    x.as_str()
                        .is_some_and(|x| id.starts_with(x) || x.starts_with(id))
                })
            })
        })
        .map(|g| g["index"].as_u64().unwrap())
        .collect()
}

pub fn gpu_state(node: &Node, index: u64) -> Value {
    node.rnx_json(&["gpu", "status", "--all"])["gpus"][index as usize].clone()
}

pub fn audit(node: &Node) -> Vec<Value> {
    let v = node.rnx_json(&["audit"]);
    v.as_array()
        .cloned()
        .unwrap_or_else(|| panic!("rnx audit --json is not an array: {v}"))
}

pub fn audit_of(node: &Node, id: &str) -> Value {
    wait_for(node, &format!("a closed audit record for {id}"), || {
        audit(node)
            .into_iter()
            .find(|r| r["job_id"] == id && r["ended"].as_str().is_some_and(|e| !e.is_empty()))
    })
}

/// The job's v1 devices cgroup and its cgroup2 dir (the eBPF filter).
pub fn job_cgroups(node: &GpuNode, id: &str) -> [(&'static str, PathBuf); 2] {
    // RUNNING is recorded before the sandbox is finished (a warm one has
    // its cgroups, with a CPU job's device filter, even before): the job's
    // own filter is in place once its shim has written job.pid.
    let job_pid = node.state_dir().join("jobs").join(id).join("job.pid");
    wait_for(node, "the job's process", || {
        job_pid.exists().then_some(json!(true))
    });
    let dirs = wait_for(node, "job cgroups", || {
        let d = node.base.job_dirs(id);
        (!d.is_empty()).then(|| json!(d))
    });
    let dirs: Vec<PathBuf> = serde_json::from_value(dirs).unwrap();
    ["v1", "v2"].map(|kind| {
        let marker = if kind == "v1" {
            "/devices/"
        } else {
            "/unified/"
        };
        let dir = dirs
            .iter()
            .find(|d| d.to_string_lossy().contains(marker))
            .unwrap_or_else(|| panic!("no {kind} job cgroup among {dirs:?}"));
        (kind, dir.clone())
    })
}

/// What opening `path` read-write gives a host process joined to only the
/// cgroup `dir` (`ENXIO`: allowed through to the absent driver; `EPERM`:
/// denied by the device filter).
pub fn open_in_cgroup(node: &GpuNode, dir: &Path, path: &Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec {} --try-open '{}'",
            dir.display(),
            node.probe_bin(),
            path.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    tried(&report, "open")
}

/// The host path of a file in a job's work dir (a gate the test writes).
pub fn work_file(node: &Node, id: &str, name: &str) -> PathBuf {
    node.state_dir()
        .join("jobs")
        .join(id)
        .join("work")
        .join(name)
}

/// A job that waits for `gate` in its work dir, then runs `then`.
pub fn gated(then: &str) -> String {
    format!("while [ ! -e gate ]; do sleep 0.05; done; {then}")
}
