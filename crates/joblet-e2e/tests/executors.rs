//! Executors end to end: the same isolation probe under the native
//! sandbox, runc and crun (same answers, the documented exceptions
//! aside), and under gVisor's runsc (its differences, each one listed in
//! `docs/executors.md`); the GPU device split under runc and crun on
//! simulated GPUs; runsc running CPU jobs through their whole life (logs,
//! exit code, stop, a daemon restart) and refusing GPU jobs it cannot give
//! their GPU; the nvproxy flags an nvproxy-capable runsc gets, recorded by
//! a wrapper around the real binary; and refusals before anything starts.
//! Needs root and Debian's runc, crun and runsc (`scripts/setup.sh`); a
//! test whose runtime is missing says so and is skipped.

mod gpu_common;
mod sandbox_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use gpu_common::*;
use sandbox_common::*;

/// Whether `runtime` is installed; prints why a test skips when not.
fn have(runtime: &str) -> bool {
    let found = ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"]
        .iter()
        .any(|d| Path::new(d).join(runtime).exists());
    if !found {
        eprintln!("SKIP: {runtime} is not installed (scripts/setup.sh installs it)");
    }
    found
}

/// The probe's attempts every executor is asked to make.
const TRIES: &[&str] = &[
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
fn probe_on(node: &SandboxNode, executor: &str) -> Value {
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
fn view(p: &Value) -> BTreeMap<&'static str, Value> {
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
fn diff(a: &BTreeMap<&'static str, Value>, b: &BTreeMap<&'static str, Value>) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v} vs {}", b.get(k).cloned().unwrap_or(Value::Null)))
        .collect()
}

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
        let state = Path::new("/run/joblet/oci")
            .join(executor)
            .join(format!("joblet-{id}"));
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
