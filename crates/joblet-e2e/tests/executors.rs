//! Executors end to end under runc and crun: the same isolation probe as
//! natively (the documented exceptions aside), the GPU device split on
//! simulated GPUs, CDI devices, limits and cleanup, stop, timeouts and
//! signals, a runtime that fails, and refusals before anything starts.
//! gVisor's runsc is in `executors_runsc.rs`. Needs root and Debian's runc
//! and crun (`scripts/setup.sh`); a test whose runtime is missing says so
//! and is skipped.

mod executors_common;
mod gpu_common;
mod sandbox_common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use executors_common::*;
use gpu_common::*;
use sandbox_common::*;

#[test]
fn the_isolation_probe_gives_the_same_answers_under_runc_and_crun() {
    if !(have("runc") && have("crun")) {
        return;
    }
    let node = start("");
    let native = probe_on(&node, "native");
    let want = view(&native);
    // The native answers, as `sandbox_escapes` checks them.
    assert_eq!(want["ids"], json!([65534, 65534, 65534, 65534]));
    assert_eq!(want["caps"], json!([0, 0, 0, 0, 0]));
    assert_eq!(
        (&want["no_new_privs"], &want["seccomp"]),
        (&json!(true), &json!(2))
    );
    assert_eq!(want["net_ifaces"], json!(["lo"]));
    assert_eq!(want["loopback_works"], json!(true));
    for executor in ["runc", "crun"] {
        let p = probe_on(&node, executor);
        let mut got = view(&p);
        // crun adds /dev/core, a link to /proc/kcore, which is masked
        // (docs/executors.md).
        if executor == "crun" {
            if let Some(Value::Array(dev)) = got.get_mut("dev") {
                dev.retain(|d| d != "core");
            }
        }
        let d = diff(&want, &got);
        assert!(
            d.is_empty(),
            "{executor} differs from native:\n{}\nprobe: {p}",
            d.join("\n")
        );
        // Its pid namespace is its own: a few small pids, its own pid 1.
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            pid <= 8,
            "{executor}: the job is one of its namespace's first pids: {p}"
        );
    }
}

fn devices_cgroup(node: &GpuNode, id: &str) -> PathBuf {
    let job_pid = node.state_dir().join("jobs").join(id).join("job.pid");
    let deadline = Instant::now() + T;
    loop {
        if job_pid.exists() {
            if let Some(d) = node
                .base
                .job_dirs(id)
                .into_iter()
                .find(|d| d.to_string_lossy().contains("/devices/"))
            {
                return d;
            }
        }
        assert!(Instant::now() < deadline, "no v1 devices cgroup for {id}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn gpu_jobs_under_runc_and_crun_get_exactly_their_gpu() {
    if !(have("runc") && have("crun")) {
        return;
    }
    let node = start_gpu("");
    for executor in ["runc", "crun"] {
        let exec = format!("--executor={executor}");
        let script = gated(&format!(
            "ls /dev; for n in /dev/nvidia[0-9]*; do {} --try-open $n; done",
            node.probe_bin()
        ));
        let id = node.run(&["--gpu=1", &exec, "--", "sh", "-c", &script]);
        wait_state(&node, &id, "RUNNING");
        let mine = gpus_of(&node, &id);
        assert_eq!(mine.len(), 1, "{executor}");
        let other = (mine[0] + 1) % 8;
        // A host process in the job's devices cgroup: the job's GPU is
        // allowed through to the (absent) driver, another GPU's is denied.
        let dir = devices_cgroup(&node, &id);
        let open = |n: u64| open_in_cgroup(&node, &dir, &node.dev.join(format!("nvidia{n}")));
        assert_eq!(open(mine[0]), "ENXIO", "{executor}: the job's GPU");
        assert_eq!(open(other), "EPERM", "{executor}: another GPU");
        std::fs::write(work_file(&node, &id, "gate"), "").unwrap();
        let status = node.wait_done(&id, T);
        assert_eq!(status["state"], "COMPLETED", "{executor}: {status}");
        let out = String::from_utf8_lossy(&node.rnx(&["job", "log", &id]).stdout).into_owned();
        // Inside: exactly one GPU node, and opening it reaches the
        // driver's absence (ENXIO), not a refusal.
        let gpu_nodes: Vec<&str> = out
            .lines()
            .filter(|l| {
                l.starts_with("nvidia") && l[6..].chars().all(|c| c.is_ascii_digit()) && l.len() > 6
            })
            .collect();
        assert_eq!(gpu_nodes.len(), 1, "{executor}: {out}");
        assert!(out.contains("\"result\":\"ENXIO\""), "{executor}: {out}");
        // A CPU job: no GPU node at all, no GPU environment.
        let cpu = run_job(&node, &[&exec, "--", "sh", "-c", "ls /dev; env"]);
        assert_eq!(cpu.status["state"], "COMPLETED", "{}", cpu.status);
        assert!(!cpu.stdout.contains("nvidia"), "{executor}: {}", cpu.stdout);
        assert!(
            !cpu.stdout.contains("CUDA_VISIBLE_DEVICES"),
            "{}",
            cpu.stdout
        );
    }
}

#[test]
fn executors_the_node_cannot_give_are_refused_before_anything_starts() {
    let node = start("");
    let out = node.rnx(&["job", "run", "--executor=kata", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("executor") && err.contains("kata") && err.contains("native"),
        "{err}"
    );
    let out = node.rnx(&["job", "run", "--executor=run c", "--", "true"]);
    assert!(!out.status.success());
    // CDI devices need an executor with the cdi capability.
    let out = node.rnx(&["job", "run", "--device=vendor.example/fpga=0", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cdi"), "{err}");
    assert_eq!(node.rnx_json(&["job", "list", "--json"]), json!([]));
}

/// A CDI spec of the test's own (`joblet-e2e-<pid>.example/fpga`), whose
/// one device is a `mknod`-made node with a major no driver has, removed
/// on drop.
struct FakeCdi {
    kind: String,
    spec: PathBuf,
    /// Holds the device node; removed on drop.
    _node_dir: tempfile::TempDir,
}

impl FakeCdi {
    fn new() -> FakeCdi {
        let node_dir = tempfile::Builder::new()
            .prefix("joblet-e2e-cdi-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let host = node_dir.path().join("fpga0");
        joblet_e2e::make_node(node_dir.path(), "fpga0", 240, 7);
        let vendor = format!("joblet-e2e-{}.example", std::process::id());
        let kind = format!("{vendor}/fpga");
        std::fs::create_dir_all("/var/run/cdi").unwrap();
        let spec = PathBuf::from(format!("/var/run/cdi/{vendor}.yaml"));
        std::fs::write(
            &spec,
            format!(
                "cdiVersion: 0.5.0\nkind: {kind}\ndevices:\n  - name: dev0\n    containerEdits:\n      env: [FPGA_SLOT=0]\n      deviceNodes:\n        - path: /dev/fpga0\n          hostPath: {}\n",
                host.display()
            ),
        )
        .unwrap();
        FakeCdi {
            kind,
            spec,
            _node_dir: node_dir,
        }
    }
}

impl Drop for FakeCdi {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.spec);
    }
}

#[test]
fn cdi_devices_reach_runc_and_crun_jobs_and_nothing_else() {
    if !(have("runc") && have("crun")) {
        return;
    }
    let cdi = FakeCdi::new();
    let node = start("");
    let device = format!("--device={}=dev0", cdi.kind);
    for executor in ["runc", "crun"] {
        let exec = format!("--executor={executor}");
        let script = format!(
            "echo FPGA_SLOT=$FPGA_SLOT; ls /dev; {} --try-open /dev/fpga0",
            node.probe_bin()
        );
        let done = run_job(&node, &[&exec, &device, "--", "sh", "-c", &script]);
        assert_eq!(
            done.status["state"], "COMPLETED",
            "{executor}: {}\n{}",
            done.status, done.stderr
        );
        assert!(
            done.stdout.contains("FPGA_SLOT=0"),
            "{executor}: {}",
            done.stdout
        );
        // The node is there and allowed through to its (absent) driver.
        assert!(
            done.stdout.contains("\"result\":\"ENXIO\""),
            "{executor}: {}",
            done.stdout
        );
        // Without --device: no such node.
        let plain = run_job(&node, &[&exec, "--", "sh", "-c", "ls /dev"]);
        assert!(
            !plain.stdout.contains("fpga"),
            "{executor}: {}",
            plain.stdout
        );
    }
    // An unknown device is refused before anything starts, naming it.
    let out = node.rnx(&[
        "job",
        "run",
        "--executor=runc",
        &format!("--device={}=nope", cdi.kind),
        "--",
        "true",
    ]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope") && err.contains("dev0"), "{err}");
}

const FORK_50: &str = r#"
import os, sys
kids = []
for i in range(50):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork failed:", e, file=sys.stderr)
        continue
    if pid == 0:
        import time; time.sleep(1); os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print(len(kids))
"#;

#[test]
fn limits_hold_under_runc_and_crun_and_nothing_is_left_behind() {
    if !(have("runc") && have("crun")) {
        return;
    }
    let node = start("  pids_max: 16\n");
    for executor in ["runc", "crun"] {
        let exec = format!("--executor={executor}");
        // Memory: an OOM kill, told as such.
        let done = run_job(
            &node,
            &[
                &exec,
                "--max-memory=32",
                "--",
                "/usr/bin/python3",
                "-c",
                "bytearray(200*1024*1024)",
            ],
        );
        assert_eq!(
            done.status["state"], "FAILED",
            "{executor}: {}",
            done.status
        );
        let reason = done.status["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("out of memory"),
            "{executor}: {}",
            done.status
        );
        // Pids: forks beyond the limit fail.
        let done = run_job(&node, &[&exec, "--", "/usr/bin/python3", "-c", FORK_50]);
        assert_eq!(
            done.status["state"], "COMPLETED",
            "{executor}: {}",
            done.status
        );
        let forked: usize = done.stdout.trim().parse().unwrap();
        assert!(
            (5..16).contains(&forked),
            "{executor}: 16 pids allow fewer than 16 children, got {forked}"
        );
        assert!(
            done.stderr.contains("fork failed"),
            "{executor}: {}",
            done.stderr
        );
        // After the job (the shim cleans up once the end is recorded, and
        // exits then): no container state, no job cgroup, no bundle root.
        let id = &done.id;
        // The runtime's root, executors.state_dir/NAME (the harness puts
        // it in the node's directory): there, without the container.
        let root = node
            .state_dir()
            .parent()
            .unwrap()
            .join("oci")
            .join(executor);
        assert!(
            root.is_dir(),
            "{executor}: no runtime root at {}",
            root.display()
        );
        let state = root.join(format!("joblet-{id}"));
        let bundle = node.state_dir().join("jobs").join(id).join("bundle");
        let deadline = Instant::now() + T;
        while (state.exists()
            || bundle.join("rootfs").exists()
            || !node.base.job_dirs(id).is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!state.exists(), "{executor}: the container's state is left");
        assert!(
            node.base.job_dirs(id).is_empty(),
            "{executor}: cgroups left: {:?}",
            node.base.job_dirs(id)
        );
        assert!(
            !bundle.join("rootfs").exists(),
            "{executor}: the bundle's root is left"
        );
        // The spec stays for inspection, without the environment's values.
        let spec: Value =
            serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json")).unwrap())
                .unwrap();
        let env = spec["process"]["env"].as_array().unwrap();
        assert!(
            env.iter().all(|v| v.as_str().unwrap().ends_with('=')),
            "{executor}: {env:?}"
        );
    }
}

#[test]
fn runc_and_crun_jobs_stop_time_out_and_die_like_native_ones() {
    if !(have("runc") && have("crun")) {
        return;
    }
    let node = start("");
    for executor in ["runc", "crun"] {
        let exec = format!("--executor={executor}");
        // A stop's SIGTERM reaches the job itself (joblet's pid 1 is not
        // the job), so a job without a handler ends by it, not by the
        // SIGKILL after the grace.
        let id = node.run(&[&exec, "--", "sleep", "600"]);
        wait_state(&node, &id, "RUNNING");
        node.rnx_ok(&["job", "stop", &id]);
        let status = node.wait_done(&id, T);
        assert_eq!(status["state"], "STOPPED", "{executor}: {status}");
        let reason = status["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("SIGTERM"), "{executor}: {status}");
        // A timeout.
        let done = run_job(&node, &[&exec, "--timeout=1s", "--", "sleep", "600"]);
        let reason = done.status["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("timed out"), "{executor}: {}", done.status);
        // A signal the job dies of is told as such.
        let done = run_job(&node, &[&exec, "--", "sh", "-c", "kill -9 $$"]);
        let reason = done.status["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("SIGKILL"), "{executor}: {}", done.status);
    }
}

#[test]
fn a_runtime_that_fails_fails_the_start_and_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A "runc" that knows its version and refuses every container.
    let bin = dir.path().join("broken-runc");
    std::fs::write(
        &bin,
        "#!/bin/sh\ncase \"$1\" in --version) echo 'runc version 0.0-broken'; exit 0;; esac\necho 'broken-runc: no containers today' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = start_sandbox(&format!(
        "executors:\n  detect: false\n  oci:\n    broken:\n      runtime: runc\n      binary: \"{}\"\n",
        bin.display()
    ));
    let done = run_job(&node, &["--executor=broken", "--", "true"]);
    assert_eq!(done.status["state"], "FAILED", "{}", done.status);
    let reason = done.status["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("failed to start")
            && reason.contains("executor broken")
            && reason.contains("run --detach failed"),
        "{}",
        done.status
    );
    // The runtime's own words are in the job's output.
    assert!(
        done.stderr.contains("no containers today") || done.stdout.contains("no containers today"),
        "{} / {}",
        done.stdout,
        done.stderr
    );
}
