//! Executors end to end under gVisor's runsc: its differences from the
//! native sandbox (each one listed in `docs/executors.md`), CPU jobs
//! through their whole life (output, exit code, stop, a daemon restart),
//! GPU jobs refused on a runsc without nvproxy, and the nvproxy flags an
//! nvproxy-capable runsc gets, recorded by a wrapper around the real
//! binary. Needs root and Debian's runsc (`scripts/setup.sh`); without it
//! each test says so and is skipped.

mod executors_common;
mod gpu_common;
mod sandbox_common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use executors_common::*;
use gpu_common::*;
use sandbox_common::*;

#[test]
fn runsc_differs_from_native_only_as_documented() {
    if !have("runsc") {
        return;
    }
    let node = start("");
    let native = view(&probe_on(&node, "native"));
    let p = probe_on(&node, "runsc");
    let got = view(&p);
    // What holds under runsc as natively: the job's user, its hostname
    // and /work, a read-only root, only loopback; no capability bit in
    // any set gVisor reports (it has no ambient set), and the host's
    // escapes refused.
    for same in [
        "ids",
        "groups",
        "hostname_is_the_jobs",
        "cwd",
        "root_read_only",
        "net_ifaces",
    ] {
        assert_eq!(got[same], native[same], "{same} under runsc: {p}");
    }
    for cap in ["cap_eff", "cap_prm", "cap_inh", "cap_bnd", "cap_amb"] {
        assert!(p[cap].is_null() || p[cap] == 0, "{cap} under runsc: {p}");
    }
    let tries = &got["tries"];
    let refused = |r: &Value| r == "EROFS" || r == "EACCES";
    assert!(
        refused(&tries["write /usr/joblet-probe-x"]),
        "write /usr under runsc: {p}"
    );
    for (attempt, want) in [
        ("write /work/x", "ok"),
        ("mount", "EPERM"),
        ("bpf", "EPERM"),
    ] {
        assert_eq!(tries[attempt], want, "{attempt} under runsc: {p}");
    }
    // The documented differences (docs/executors.md, "What runsc
    // changes"): the job's system calls go to gVisor's kernel, which
    // shows its own /proc, /sys and /dev, runs the job as pid 1, and
    // serves user namespaces, io_uring and mknod in /tmp itself (none
    // reaches the host's kernel); the host's seccomp filter is the
    // sandbox's, not the job's.
    let differs: BTreeSet<&str> = native
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, _)| *k)
        .collect();
    let documented: BTreeSet<&str> = [
        "caps",
        "seccomp",
        "no_new_privs",
        "dev",
        "sysfs",
        "child_of_pid_1",
        "tries",
    ]
    .into();
    assert!(
        differs.is_subset(&documented),
        "undocumented differences under runsc: {:?}\n{}",
        differs.difference(&documented).collect::<Vec<_>>(),
        diff(&native, &got).join("\n")
    );
    eprintln!(
        "runsc differences (documented): {}",
        diff(&native, &got).join("; ")
    );
}

/// The job's v1 devices cgroup, where runc and crun enforce its devices
/// on this hybrid host.
#[test]
fn runsc_runs_cpu_jobs_through_their_whole_life() {
    if !have("runsc") {
        return;
    }
    let mut node = start("");
    // Output and exit code.
    let done = run_job(
        &node,
        &[
            "--executor=runsc",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 7",
        ],
    );
    assert_eq!(done.status["state"], "FAILED", "{}", done.status);
    assert_eq!(done.status["exit_code"], 7, "{}", done.status);
    assert!(done.stdout.contains("out"), "{}", done.stdout);
    assert!(
        done.stdout.contains("err") || done.stderr.contains("err"),
        "{} / {}",
        done.stdout,
        done.stderr
    );
    // Stop.
    let id = node.run(&["--executor=runsc", "--", "sleep", "600"]);
    wait_state(&node, &id, "RUNNING");
    node.rnx_ok(&["job", "stop", &id]);
    let status = node.wait_done(&id, T);
    assert_eq!(status["state"], "STOPPED", "{status}");
    // A daemon killed and started again: the job keeps running under its
    // shim and its end is recorded.
    let id = node.run(&[
        "--executor=runsc",
        "--",
        "sh",
        "-c",
        "sleep 3; echo survived",
    ]);
    wait_state(&node, &id, "RUNNING");
    node.node.kill_daemon();
    node.node.restart().unwrap();
    let status = node.wait_done(&id, Duration::from_secs(60));
    assert_eq!(
        status["state"],
        "COMPLETED",
        "{status}\n{}",
        node.daemon_log_tail(40)
    );
    let out = node.rnx_ok(&["job", "log", &id]);
    assert!(out.contains("survived"), "{out}");
}

#[test]
fn a_gpu_job_on_debians_runsc_is_refused_naming_nvproxy() {
    if !have("runsc") {
        return;
    }
    let node = start_gpu("");
    let out = node.rnx(&["job", "run", "--gpu=1", "--executor=runsc", "--", "true"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("executor") && err.contains("runsc") && err.contains("nvproxy"),
        "{err}"
    );
    // Nothing was recorded.
    assert_eq!(node.rnx_json(&["job", "list", "--json"]), json!([]));
    // whoami says why.
    let me = node.rnx_json(&["whoami", "--json"]);
    let runsc = me["executors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "runsc")
        .unwrap()
        .clone();
    assert!(
        !runsc["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("gpu")),
        "{runsc}"
    );
    assert!(
        runsc["gpu_unavailable"]
            .as_str()
            .unwrap()
            .contains("nvproxy"),
        "{runsc}"
    );
}

/// The wrapper that plays an nvproxy-capable runsc in front of the real
/// one (`joblet-oci`'s test data), copied into `dir` with its settings.
fn nvproxy_wrapper(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../joblet-oci/tests/data/runsc-nvproxy-wrapper.sh");
    let bin = dir.join("runsc-nvproxy");
    std::fs::copy(&src, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("runsc-nvproxy.env"),
        format!(
            "RUNSC_WRAPPER_LOG={}\nRUNSC_WRAPPER_DRIVERS=535.104.05,550.163.01\n",
            log.display()
        ),
    )
    .unwrap();
    bin
}

#[test]
fn an_nvproxy_capable_runsc_gets_the_gpu_flags() {
    if !have("runsc") {
        return;
    }
    let mut log = PathBuf::new();
    let node = start_gpu_with(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        |side| {
            log = side.join("runsc-calls.log");
            let bin = nvproxy_wrapper(side, &log);
            format!(
                "executors:\n  oci:\n    gvisor:\n      runtime: runsc\n      binary: \"{}\"\n",
                bin.display()
            )
        },
    );
    let me = node.rnx_json(&["whoami", "--json"]);
    let gvisor = me["executors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "gvisor")
        .unwrap_or_else(|| panic!("no gvisor executor: {me}"))
        .clone();
    assert!(
        gvisor["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("gpu")),
        "{gvisor}"
    );
    let done = run_job(
        &node,
        &[
            "--gpu=1",
            "--executor=gvisor",
            "--",
            "sh",
            "-c",
            "echo ran under gvisor",
        ],
    );
    assert_eq!(
        done.status["state"],
        "COMPLETED",
        "{}\n{}",
        done.status,
        node.daemon_log_tail(40)
    );
    assert!(done.stdout.contains("ran under gvisor"), "{}", done.stdout);
    let calls = std::fs::read_to_string(&log).unwrap();
    let create = calls
        .lines()
        .find(|l| l.contains("'run' '--detach'"))
        .unwrap_or_else(|| panic!("no run --detach call recorded:\n{calls}"));
    for flag in [
        "'--nvproxy=true'",
        "'--platform=systrap'",
        "'--network=none'",
        "'--nvproxy-allowed-driver-capabilities=",
    ] {
        assert!(create.contains(flag), "{flag} missing from {create}");
    }
    assert!(!calls.contains("allow-unsupported-driver"), "{calls}");
}
