//! Shared by the executor end-to-end tests: whether a runtime is
//! installed, the isolation probe run under an executor, and the view of
//! its report every executor should agree on.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};

use crate::sandbox_common::*;

/// Whether `runtime` is installed; prints why a test skips when not.
pub fn have(runtime: &str) -> bool {
    let found = ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"]
        .iter()
        .any(|d| Path::new(d).join(runtime).exists());
    if !found {
        eprintln!("SKIP: {runtime} is not installed (scripts/setup.sh installs it)");
    }
    found
}

/// The probe's attempts every executor is asked to make.
pub const TRIES: &[&str] = &[
    "--try-write",
    "/usr/joblet-probe-x",
    "--try-write",
    "/work/x",
    "--try-read",
    "/sys/kernel/notes",
    "--try-mount",
    "--try-bpf",
    "--try-setns",
    "--try-unshare-user",
    "--try-clone-newuser",
    "--try-io-uring",
    "--try-perf",
    "--try-vsock",
    "--try-mknod",
    "/tmp/joblet-probe-node",
];

/// Runs the probe under `executor` (with `TRIES`); its report.
pub fn probe_on(node: &SandboxNode, executor: &str) -> Value {
    let bin = node.probe_bin();
    let exec = format!("--executor={executor}");
    let mut args = vec![exec.as_str(), "--", bin.as_str()];
    args.extend_from_slice(TRIES);
    let done = run_job(node, &args);
    assert_eq!(
        done.status["state"],
        "COMPLETED",
        "probe under {executor}: {}\nstderr: {}\n{}",
        done.status,
        done.stderr,
        node.daemon_log_tail(40)
    );
    assert_eq!(done.status["executor"], executor, "{}", done.status);
    serde_json::from_str(done.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "probe output under {executor} is not JSON ({e}): {}",
            done.stdout
        )
    })
}

/// What the probe found that every executor should agree on.
pub fn view(p: &Value) -> BTreeMap<&'static str, Value> {
    let mounts = p["mounts"].as_array().cloned().unwrap_or_default();
    let root_ro = mounts
        .iter()
        .filter(|m| m["mount_point"] == "/")
        .all(|m| m["ro"] == true);
    let sysfs = mounts.iter().any(|m| {
        m["fstype"] == "sysfs"
            || m["mount_point"]
                .as_str()
                .is_some_and(|p| p.starts_with("/sys"))
    });
    let dev: BTreeSet<String> = p["dev"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let tries: BTreeMap<String, Value> = p["tries"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    let key = format!(
                        "{} {}",
                        t["op"].as_str().unwrap_or(""),
                        t["target"].as_str().unwrap_or("")
                    );
                    (key.trim().to_string(), t["result"].clone())
                })
                .collect()
        })
        .unwrap_or_default();
    BTreeMap::from([
        ("ids", json!([p["uid"], p["euid"], p["gid"], p["egid"]])),
        ("groups", p["groups"].clone()),
        (
            "caps",
            json!([
                p["cap_eff"],
                p["cap_prm"],
                p["cap_inh"],
                p["cap_amb"],
                p["cap_bnd"]
            ]),
        ),
        ("no_new_privs", p["no_new_privs"].clone()),
        ("seccomp", p["seccomp"].clone()),
        (
            "hostname_is_the_jobs",
            json!(p["hostname"]
                .as_str()
                .is_some_and(|h| h.starts_with("job-"))),
        ),
        ("cwd", p["cwd"].clone()),
        ("dev", json!(dev)),
        ("sysfs", json!(sysfs)),
        ("root_read_only", json!(root_ro)),
        ("net_ifaces", p["net_ifaces"].clone()),
        ("loopback_works", p["loopback_works"].clone()),
        ("child_of_pid_1", json!(p["ppid"] == 1)),
        ("tries", json!(tries)),
    ])
}

/// The differences between two views, key by key.
pub fn diff(a: &BTreeMap<&'static str, Value>, b: &BTreeMap<&'static str, Value>) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v} vs {}", b.get(k).cloned().unwrap_or(Value::Null)))
        .collect()
}
