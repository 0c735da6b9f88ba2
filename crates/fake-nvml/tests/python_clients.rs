//! NVIDIA's Python binding (`nvidia-ml-py`, module `pynvml`) and `gpustat`,
//! unchanged, against the built library: they find it as
//! `libnvidia-ml.so.1` through `LD_LIBRARY_PATH` (pynvml's `CDLL` of the
//! bare soname goes through the dynamic loader's search) and read an
//! 8-GPU A100 profile with processes and load injected from a state file.
//!
//! The tools live in the virtual environment `scripts/setup.sh` creates
//! (`scripts/pytools.sh`); without it these tests fail and say so.

mod nvml_wrapper_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;

use nvml_wrapper_common::{fixture, lib_path, write_state, A100_PROFILE};

const VENV: &str = "/usr/local/lib/joblet-pytools";
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn venv_bin(name: &str) -> PathBuf {
    let bin = Path::new(VENV).join("bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: the Python client tools are not installed; run scripts/setup.sh \
         (it calls scripts/pytools.sh, which creates {VENV} with nvidia-ml-py and gpustat)",
        bin.display()
    );
    bin
}

/// A `sleep` the test owns, killed on drop; its pid stands for a GPU process
/// so that gpustat's psutil lookups find a live process.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        Self(Command::new("sleep").arg("300").spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A temp dir holding `libnvidia-ml.so.1` → the freshly built library, a
/// state file, and the environment a client needs.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(lib_path(), dir.path().join("libnvidia-ml.so.1")).unwrap();
        Self { dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state.json")
    }

    fn run(&self, program: &Path, args: &[String]) -> Output {
        let out = Command::new(program)
            .args(args)
            .env("LD_LIBRARY_PATH", self.dir.path())
            .env("MOCK_NVML_CONFIG", fixture(A100_PROFILE))
            .env("MOCK_NVML_STATE", self.state())
            // No nvidiactl there: every GPU of the profile is visible.
            .env("MOCK_NVML_DEV_DIR", self.dir.path())
            .env_remove("PYTHONPATH")
            .env("TERM", "dumb")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}\nstdout: {}\nstderr: {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn json(&self, program: &Path, args: &[String]) -> Value {
        let out = self.run(program, args);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{} printed no JSON ({e}): {}",
                program.display(),
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

/// Load on GPU 2: a compute and a graphics process, power, clocks, PCIe
/// replays, memory temperature and reserved memory.
fn inject(node: &Node, compute: &Sleeper, graphics: &Sleeper) {
    write_state(
        &node.state(),
        &format!(
            r#"{{ "gpus": {{ "2": {{
                "power_mw": 250500, "sm_clock_mhz": 1410, "mem_clock_mhz": 1215,
                "utilization_gpu_pct": 75, "utilization_memory_pct": 30,
                "pcie_replay_counter": 3, "memory_temperature_c": 61,
                "memory_reserved_bytes": {reserved}, "memory_used_bytes": {used},
                "processes": [{{"pid": {c}, "used_memory_bytes": {cmem}, "sm_util_pct": 70, "mem_util_pct": 25}}],
                "graphics_processes": [{{"pid": {g}, "used_memory_bytes": {gmem}}}] }} }} }}"#,
            reserved = GIB,
            used = 5 * GIB,
            c = compute.pid(),
            cmem = 4 * GIB,
            g = graphics.pid(),
            gmem = 256 * MIB,
        ),
    );
}

fn value<'a>(gpu: &'a Value, key: &str) -> &'a Value {
    let entry = &gpu[key];
    assert!(
        entry.get("value").is_some(),
        "{key}: expected a value, got {entry} (gpu {})",
        gpu["index"]
    );
    &entry["value"]
}

fn error<'a>(gpu: &'a Value, key: &str) -> &'a str {
    gpu[key]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{key}: expected an NVML error, got {}", gpu[key]))
}

#[test]
fn pynvml_reads_every_gpu_of_the_a100_profile() {
    let python = venv_bin("python");
    let node = Node::new();
    let (compute, graphics) = (Sleeper::start(), Sleeper::start());
    inject(&node, &compute, &graphics);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/pynvml_probe.py");
    let doc = node.json(
        &python,
        &[
            script.display().to_string(),
            compute.pid().to_string(),
            "4194304".to_string(),
        ],
    );

    assert_eq!(doc["driver"]["value"], "550.163.01");
    assert_eq!(doc["nvml"]["value"], "12.550.163.01");
    assert_eq!(doc["cuda"]["value"], 12040);
    assert_eq!(doc["count"], 8);
    let gpus = doc["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8);

    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(value(g, "index"), i);
        assert_eq!(value(g, "name"), "NVIDIA A100-SXM4-40GB");
        assert_eq!(
            value(g, "uuid"),
            format!("GPU-12345678-1234-1234-1234-12345678000{i}").as_str()
        );
        assert_eq!(value(g, "serial"), format!("132482108380{i}").as_str());
        assert_eq!(value(g, "minor_number"), i);
        assert_eq!(value(g, "board_part_number"), "692-2G506-0200-002");
        assert_eq!(value(g, "brand"), 14, "NVML_BRAND_NVIDIA");
        assert_eq!(value(g, "vbios"), "92.00.45.00.03");
        assert_eq!(value(g, "inforom_image"), "G506.0200.00.04");
        assert_eq!(value(g, "inforom_ecc"), "6.16");
        assert_eq!(error(g, "inforom_power"), "NVMLError_NotSupported");
        assert_eq!(value(g, "display_mode"), 0);
        assert_eq!(value(g, "persistence_mode"), 1);
        assert_eq!(value(g, "compute_mode"), 0);
        assert_eq!(error(g, "driver_model"), "NVMLError_NotSupported", "Linux");
        assert_eq!(value(g, "bar1")["bar1Total"], 64 * GIB);
        assert_eq!(value(g, "temperature"), 33);
        assert_eq!(error(g, "fan_speed"), "NVMLError_NotSupported", "SXM");
        assert_eq!(value(g, "num_fans"), 0);
        assert_eq!(value(g, "pstate"), 0);
        assert_eq!(value(g, "encoder")[0], 0);
        assert_eq!(value(g, "decoder")[0], 0);
        assert_eq!(value(g, "power_limit"), 400_000);
        assert_eq!(value(g, "power_default_limit"), 400_000);
        assert_eq!(value(g, "power_enforced"), 400_000);
        assert_eq!(
            value(g, "power_constraints"),
            &serde_json::json!([100_000, 400_000])
        );
        assert_eq!(value(g, "max_clock_sm"), 1410);
        assert_eq!(value(g, "max_clock_mem"), 1215);
        assert_eq!(value(g, "clock_graphics"), 210);
        assert_eq!(value(g, "clock_video"), 585);
        assert_eq!(value(g, "app_clock_graphics"), 1410);
        assert_eq!(value(g, "clock_app_default_mem"), 1215);
        assert_eq!(value(g, "pcie_gen"), 4);
        assert_eq!(value(g, "pcie_gen_max"), 4);
        assert_eq!(value(g, "pcie_width"), 16);
        assert_eq!(value(g, "pcie_width_max"), 16);
        assert_eq!(value(g, "pcie_tx"), 0);
        assert_eq!(value(g, "ecc_mode"), &serde_json::json!([1, 1]));
        assert!(value(g, "energy").as_u64().is_some());
        assert_eq!(value(g, "memory_v1")["total"], 40 * GIB);
        let fields = &g["fields"];
        assert_eq!(fields["83"]["type"], "ulonglong");
        assert_eq!(fields["142"]["value"], 0);
        assert_eq!(fields["1"]["value"], 1, "ECC current");
        assert_eq!(fields["75"]["error"], "Not Supported", "unknown field id");
        if i == 2 {
            continue;
        }
        assert_eq!(value(g, "power_usage"), 72_000);
        assert_eq!(value(g, "clock_sm"), 210);
        assert_eq!(value(g, "clock_mem"), 1215);
        assert_eq!(value(g, "pcie_replay"), 0);
        assert_eq!(
            value(g, "utilization"),
            &serde_json::json!({"gpu": 0, "memory": 0})
        );
        let m = value(g, "memory_v2");
        assert_eq!(
            (&m["reserved"], &m["used"]),
            (&611_319_808.into(), &0.into())
        );
        assert_eq!(value(g, "compute_processes"), &serde_json::json!([]));
        assert_eq!(value(g, "graphics_processes"), &serde_json::json!([]));
        assert_eq!(error(g, "process_utilization"), "NVMLError_NotFound");
        assert_eq!(fields["82"]["value"], 31, "profile's temperature_memory_c");
        assert_eq!(fields["94"]["value"], 0);
        assert_eq!(fields["186"]["value"], 72_000);
    }

    // GPU 2 carries the injected load.
    let g = &gpus[2];
    assert_eq!(value(g, "power_usage"), 250_500);
    assert_eq!(value(g, "clock_sm"), 1410);
    assert_eq!(value(g, "clock_mem"), 1215);
    assert_eq!(value(g, "pcie_replay"), 3);
    assert_eq!(
        value(g, "utilization"),
        &serde_json::json!({"gpu": 75, "memory": 30})
    );
    let m = value(g, "memory_v2");
    assert_eq!(m["total"], 40 * GIB);
    assert_eq!(m["reserved"], GIB);
    assert_eq!(m["used"], 5 * GIB);
    assert_eq!(m["free"], 34 * GIB);
    let compute_list = serde_json::json!([{
        "pid": compute.pid(), "usedGpuMemory": 4 * GIB,
        "gpuInstanceId": 0xFFFF_FFFFu32, "computeInstanceId": 0xFFFF_FFFFu32
    }]);
    assert_eq!(value(g, "compute_processes"), &compute_list);
    assert_eq!(value(g, "compute_processes_v2"), &compute_list);
    let graphics_list = value(g, "graphics_processes");
    assert_eq!(graphics_list[0]["pid"], graphics.pid());
    assert_eq!(graphics_list[0]["usedGpuMemory"], 256 * MIB);
    assert_eq!(value(g, "graphics_processes_v2"), graphics_list);
    assert_eq!(value(g, "mps_processes"), &serde_json::json!([]));
    let samples = value(g, "process_utilization").as_array().unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0]["pid"], compute.pid());
    assert_eq!(
        (&samples[0]["smUtil"], &samples[0]["memUtil"]),
        (&70.into(), &25.into())
    );
    assert!(samples[0]["timeStamp"].as_u64().unwrap() > 0);
    let fields = &g["fields"];
    assert_eq!(fields["82"]["value"], 61);
    assert_eq!(fields["94"]["value"], 3);
    assert_eq!(fields["186"]["value"], 250_500);

    let names = &doc["process_names"];
    assert_eq!(names[compute.pid().to_string()]["value"], "sleep");
    assert_eq!(names["4194304"]["error"], "NVMLError_NotFound");
}

#[test]
fn gpustat_lists_eight_gpus_and_the_injected_processes() {
    let gpustat = venv_bin("gpustat");
    let node = Node::new();
    let (compute, graphics) = (Sleeper::start(), Sleeper::start());
    inject(&node, &compute, &graphics);

    let doc = node.json(&gpustat, &["--json".to_string()]);
    assert_eq!(doc["driver_version"], "550.163.01");
    let gpus = doc["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8, "{doc}");
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(g["index"], i);
        assert_eq!(g["name"], "NVIDIA A100-SXM4-40GB");
        assert_eq!(g["temperature.gpu"], 33);
        assert_eq!(g["fan.speed"], Value::Null, "no fan on SXM");
        assert_eq!(g["enforced.power.limit"], 400);
        assert_eq!(g["memory.total"], 40960);
        assert_eq!(g["utilization.enc"], 0);
        if i != 2 {
            assert_eq!(g["power.draw"], 72);
            assert_eq!(g["utilization.gpu"], 0);
            assert_eq!(g["memory.used"], 0);
            assert_eq!(g["processes"], serde_json::json!([]));
        }
    }
    let g = &gpus[2];
    assert_eq!(g["power.draw"], 250);
    assert_eq!(g["utilization.gpu"], 75);
    assert_eq!(g["memory.used"], 5 * 1024);
    let procs = g["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "{g}");
    let by_pid = |pid: u32| {
        procs
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} not listed: {g}"))
    };
    let c = by_pid(compute.pid());
    assert_eq!(c["command"], "sleep");
    assert_eq!(c["gpu_memory_usage"], 4 * 1024);
    let gr = by_pid(graphics.pid());
    assert_eq!(gr["command"], "sleep");
    assert_eq!(gr["gpu_memory_usage"], 256);

    // The plain table: one line per GPU, the processes of GPU 2 on its line.
    let out = node.run(&gpustat, &["--no-color".to_string(), "-c".to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 8, "{text}");
    for (i, l) in lines.iter().enumerate() {
        assert!(
            l.starts_with(&format!("[{i}] NVIDIA A100-SXM4-40GB")),
            "{l}"
        );
    }
    assert!(
        lines[2].contains("75 %") && lines[2].contains("5120 / 40960 MB"),
        "{}",
        lines[2]
    );
    assert!(
        lines[2].contains("sleep(4096M)") && lines[2].contains("sleep(256M)"),
        "{}",
        lines[2]
    );
    let out = node.run(&gpustat, &[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with('['))
            .count(),
        8
    );
}
