//! GPU inventory and health through the daemon, on simulated GPUs (the
//! project's fake NVML serving NVIDIA's A100 mock profile), with faults
//! injected through the fake's state file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use joblet_e2e::{fixture, joblet_bin, CgroupBase, Node, NodeOptions};
use serde_json::{json, Value};

/// A node simulating the 8-GPU A100 profile; the returned path is its
/// injection file (in the node's temp dir, removed with it).
fn simulated_node() -> (Node, PathBuf) {
    let node = Node::start_with(NodeOptions {
        extra_config: format!(
            "gpu:\n  enabled: true\n  health_interval: 200ms\n  hwloc: false\n  simulate: \"{}\"\n  simulate_state: \"{{node_dir}}/nvml-state.json\"\n",
            fixture("nvml-profiles/mock-nvml-config-a100.yaml").display(),
        ),
        ..NodeOptions::default()
    })
    .unwrap();
    let state = node.dir.path().join("nvml-state.json");
    (node, state)
}

/// Writes the fake NVML's state file atomically.
fn inject(path: &Path, state: Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&state).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn gpu(node: &Node, index: usize) -> Value {
    node.rnx_json(&["gpu", "status"])["gpus"][index].clone()
}

/// Polls `gpu status` until `pred` holds for GPU `index`.
fn wait_gpu(node: &Node, index: usize, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let g = gpu(node, index);
        if pred(&g) {
            return g;
        }
        assert!(
            Instant::now() < deadline,
            "GPU {index} never became {what}: {g}\ndaemon log:\n{}",
            node.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn status_lists_the_simulated_profile() {
    let (node, _) = simulated_node();
    let s = node.rnx_json(&["gpu", "status"]);
    assert_eq!(s["simulated"], true, "{s}");
    assert_eq!(s["driver_version"], "550.163.01");
    let gpus = s["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8);
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(g["index"], i);
        assert_eq!(g["name"], "NVIDIA A100-SXM4-40GB");
        assert_eq!(g["minor"], i);
        assert_eq!(
            g["uuid"],
            format!("GPU-12345678-1234-1234-1234-12345678000{i}")
        );
        assert_eq!(g["memory_total_mb"], 40960);
        assert_eq!(g["state"], "AVAILABLE");
    }
    assert_eq!(gpus[4]["pci_bus_id"], "0000:87:00.0");
    let table = node.rnx_ok(&["gpu", "status"]);
    assert!(table.starts_with("SIMULATED GPUs"), "{table}");
    assert!(
        table.contains("IDX") && table.contains("AVAILABLE"),
        "{table}"
    );
}

#[test]
fn xid_79_degrades_the_gpu_and_xid_13_does_not() {
    let (node, state) = simulated_node();
    inject(
        &state,
        json!({"events": [{"gpu": 1, "type": "xid", "data": 13}, {"gpu": 3, "type": "xid", "data": 79}]}),
    );
    let g3 = wait_gpu(&node, 3, "DEGRADED", |g| g["state"] == "DEGRADED");
    assert!(
        g3["state_cause"]
            .as_str()
            .unwrap()
            .contains("XID 79 (GPU has fallen off the bus)"),
        "{g3}"
    );
    let g1 = gpu(&node, 1);
    assert_eq!(
        g1["state"], "AVAILABLE",
        "an application XID leaves the GPU in service: {g1}"
    );
    let h1 = node.rnx_json(&["gpu", "health", "--gpu-id", "1"]);
    let notes: Vec<&str> = h1["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|m| m.contains("XID 13") && m.contains("application error")),
        "{h1}"
    );
    for i in [0, 2, 4, 5, 6, 7] {
        assert_eq!(gpu(&node, i)["state"], "AVAILABLE");
    }
    // The degraded state and its cause survive a daemon restart.
    let mut node = node;
    node.stop_daemon();
    node.restart().unwrap();
    let g3 = gpu(&node, 3);
    assert_eq!(g3["state"], "DEGRADED", "{g3}");
    let health = node.rnx_ok(&[
        "gpu",
        "health",
        "--gpu-id",
        "GPU-12345678-1234-1234-1234-123456780003",
    ]);
    assert!(health.contains("AVAILABLE -> DEGRADED: XID 79"), "{health}");
}

#[test]
fn heat_pauses_placements_until_the_gpu_cools() {
    let (node, state) = simulated_node();
    inject(&state, json!({"gpus": {"2": {"temperature_c": 99}}}));
    let hot = wait_gpu(&node, 2, "paused", |g| !g["placement_paused"].is_null());
    assert!(
        hot["placement_paused"].as_str().unwrap().contains("99 °C"),
        "{hot}"
    );
    assert_eq!(hot["state"], "AVAILABLE", "a pause is not a state change");
    assert!(node
        .rnx_ok(&["gpu", "status"])
        .contains("AVAILABLE (paused: hot)"));
    inject(&state, json!({"gpus": {"2": {"temperature_c": 40}}}));
    wait_gpu(&node, 2, "resumed", |g| g["placement_paused"].is_null());
}

#[test]
fn ecc_errors_and_a_lost_gpu_degrade_it() {
    let (node, state) = simulated_node();
    inject(
        &state,
        json!({"gpus": {"5": {"ecc": {"volatile_uncorrected": 2}}, "6": {"lost": true}},
               "events": [{"gpu": 7, "type": "double_bit_ecc"}]}),
    );
    let g5 = wait_gpu(&node, 5, "DEGRADED", |g| g["state"] == "DEGRADED");
    assert!(
        g5["state_cause"]
            .as_str()
            .unwrap()
            .contains("uncorrectable ECC errors: 2"),
        "{g5}"
    );
    let g6 = wait_gpu(&node, 6, "DEGRADED", |g| g["state"] == "DEGRADED");
    assert!(g6["state_cause"].as_str().unwrap().contains("lost"), "{g6}");
    let g7 = wait_gpu(&node, 7, "DEGRADED", |g| g["state"] == "DEGRADED");
    assert!(
        g7["state_cause"]
            .as_str()
            .unwrap()
            .contains("double-bit ECC"),
        "{g7}"
    );
}

#[test]
fn drain_offline_online_round_trip_and_viewers_may_only_look() {
    let (mut node, _) = simulated_node();
    bad_gpu_ids_are_explained(&node);
    let drained = node.rnx_json(&["gpu", "drain", "--gpu-id", "0"]);
    assert_eq!(drained["state"], "DRAINING");
    assert!(drained["state_cause"]
        .as_str()
        .unwrap()
        .starts_with("drained by "));
    let again = node.rnx(&["gpu", "drain", "--gpu-id", "0"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already DRAINING"));
    assert_eq!(
        node.rnx_json(&["gpu", "offline", "--gpu-id", "0"])["state"],
        "OFFLINE"
    );
    // Offline survives a restart.
    node.stop_daemon();
    node.restart().unwrap();
    assert_eq!(gpu(&node, 0)["state"], "OFFLINE");
    let online = node.rnx_ok(&["gpu", "online", "--gpu-id", "0"]);
    assert!(online.contains("is now AVAILABLE"), "{online}");
    let h = node.rnx_json(&["gpu", "health", "--gpu-id", "0"]);
    let moves: Vec<String> = h["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| {
            format!(
                "{}->{}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            "AVAILABLE->DRAINING",
            "DRAINING->OFFLINE",
            "OFFLINE->AVAILABLE"
        ]
    );

    // A viewer sees GPUs but may not change them.
    let viewer_dir = node.dir.path().join("viewer");
    let issued = Command::new(joblet_bin())
        .args([
            "cert", "issue", "--name", "val", "--role", "viewer", "--out",
        ])
        .arg(&viewer_dir)
        .arg("--config")
        .arg(node.config_path())
        .output()
        .unwrap();
    assert!(issued.status.success(), "{issued:?}");
    let viewer = |args: &[&str]| {
        Command::new(joblet_e2e::rnx_bin())
            .arg("--config")
            .arg(viewer_dir.join("rnx-config.yml"))
            .args(args)
            .output()
            .unwrap()
    };
    assert!(viewer(&["gpu", "status"]).status.success());
    let refused = viewer(&["gpu", "offline", "--gpu-id", "1", "--force"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("viewer") && err.contains("change GPU states"),
        "{err}"
    );
    assert_eq!(gpu(&node, 1)["state"], "AVAILABLE");
}

/// Ambiguous, unknown and malformed `--gpu-id`s.
fn bad_gpu_ids_are_explained(node: &Node) {
    let out = node.rnx(&["gpu", "drain", "--gpu-id", "GPU-12345678"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("matches 8 GPUs"), "{err}");
    let out = node.rnx(&["gpu", "health", "--gpu-id", "9"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no GPU with index 9"));
    let out = node.rnx(&["gpu", "health", "--gpu-id", "../x"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a malformed id is a usage error"
    );
}

#[test]
fn watch_prints_frames_as_json_lines() {
    let (node, _) = simulated_node();
    let out = node.rnx_ok(&[
        "--json",
        "gpu",
        "watch",
        "--interval",
        "100ms",
        "--count",
        "3",
    ]);
    let frames: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 3);
    assert!(frames
        .iter()
        .all(|f| f["gpus"].as_array().unwrap().len() == 8));
}

#[test]
fn gpu_calls_on_a_cpu_only_node_say_how_to_turn_gpus_on() {
    let node = Node::start().unwrap();
    let out = node.rnx(&["gpu", "status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gpu.enabled: false"), "{err}");
}

fn joblet(args: &[&str], config: &Path) -> std::process::Output {
    Command::new(joblet_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn a_required_gpu_that_is_missing_stops_the_daemon_and_doctor_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("joblet-config.yml");
    // A cgroup base of its own (the daemon locks and cleans its base before
    // it looks for GPUs), removed with its lock file when the test ends.
    // `gpu:` comes last: a key appended below lands in it.
    let cgroups = CgroupBase::new();
    let base = format!(
        "server:\n  address: \"127.0.0.1:0\"\n  state_dir: \"{}\"\nrest:\n  address: \"127.0.0.1:0\"\nmetrics:\n  address: \"127.0.0.1:0\"\nsandbox:\n  cgroup_base: {}\ngpu:\n  enabled: true\n  hwloc: false\n  nvml_library: /nonexistent/libnvidia-ml.so.1\n",
        dir.path().join("state").display(),
        cgroups.0
    );
    std::fs::write(&cfg, &base).unwrap();
    let server = joblet(&["server"], &cfg);
    assert!(!server.status.success());
    let err = String::from_utf8_lossy(&server.stderr);
    assert!(
        err.contains("no usable GPU") && err.contains("gpu.required: false"),
        "{err}"
    );
    let doctor = joblet(&["doctor"], &cfg);
    assert_eq!(doctor.status.code(), Some(1));
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("[FAIL] nvml") && text.contains("/nonexistent/libnvidia-ml.so.1"),
        "{text}"
    );

    std::fs::write(&cfg, format!("{base}  required: false\n")).unwrap();
    let doctor = joblet(&["doctor", "--json"], &cfg);
    assert_eq!(doctor.status.code(), Some(0));
    let d: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(d["healthy"], true);
    assert!(d["verdict"].as_str().unwrap().contains("CPU-only"), "{d}");
}

#[test]
fn discover_reads_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("joblet-config.yml");
    for (file, count, name) in [
        (
            "nvml-profiles/mock-nvml-config-a100.yaml",
            8,
            "NVIDIA A100-SXM4-40GB",
        ),
        (
            "nvml-profiles/mock-nvml-config-h100.yaml",
            8,
            "NVIDIA H100 80GB HBM3",
        ),
        ("nvidia-smi-xml/tesla-t4.xml", 1, "Tesla T4"),
        ("nvidia-smi-xml/dual_a5000-v13.xml", 2, "NVIDIA RTX A5000"),
    ] {
        std::fs::write(
            &cfg,
            format!(
                "gpu:\n  hwloc: false\n  simulate: \"{}\"\n",
                fixture(file).display()
            ),
        )
        .unwrap();
        let out = joblet(&["discover", "--json"], &cfg);
        assert!(out.status.success(), "{file}: {out:?}");
        let d: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["simulated"], true);
        assert_eq!(d["gpus"].as_array().unwrap().len(), count, "{file}: {d}");
        assert_eq!(d["gpus"][0]["name"], name, "{file}");
        let text = String::from_utf8_lossy(&joblet(&["discover"], &cfg).stdout).into_owned();
        assert!(text.starts_with("SIMULATED GPUs"), "{text}");
        assert!(text.contains("note: gpu.enabled is false"), "{text}");
    }
}
