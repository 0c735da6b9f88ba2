//! Real NVML clients inside a GPU job on a simulated node: NVIDIA's own
//! Python binding (`nvidia-ml-py`) and `gpustat`, from PyPI, unchanged, see
//! exactly the job's GPUs with their readings through the fake
//! `libnvidia-ml.so` the daemon gives the job. The tools come from the venv
//! `scripts/pytools.sh` makes on the system's Python (under `/usr`, which
//! every job sees). Needs root.

mod gpu_common;
mod sandbox_common;

use std::path::Path;

use serde_json::Value;

use gpu_common::*;
use sandbox_common::*;

const PYTOOLS: &str = "/usr/local/lib/joblet-pytools";

/// Prints one JSON line: what `pynvml` sees of every GPU it is given.
const PYNVML_SCRIPT: &str = r#"
import json, pynvml as n
n.nvmlInit()
gpus = []
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    mem = n.nvmlDeviceGetMemoryInfo(h)
    gpus.append({
        "uuid": n.nvmlDeviceGetUUID(h),
        "name": n.nvmlDeviceGetName(h),
        "memory_total": mem.total,
        "temperature": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        "power_mw": n.nvmlDeviceGetPowerUsage(h),
        "sm_clock": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
        "util": n.nvmlDeviceGetUtilizationRates(h).gpu,
        "processes": len(n.nvmlDeviceGetComputeRunningProcesses(h)),
    })
print(json.dumps({"driver": n.nvmlSystemGetDriverVersion(), "gpus": gpus}))
n.nvmlShutdown()
"#;

fn pytools() -> &'static Path {
    let venv = Path::new(PYTOOLS);
    assert!(
        venv.join("bin/gpustat").is_file() && venv.join("bin/python").is_file(),
        "{PYTOOLS} lacks gpustat or python: run scripts/setup.sh (it calls scripts/pytools.sh)"
    );
    venv
}

#[test]
fn nvidia_ml_py_and_gpustat_in_a_two_gpu_job_see_exactly_its_gpus() {
    let venv = pytools();
    let node = start_gpu("");
    let python = venv.join("bin/python");
    let gpustat = venv.join("bin/gpustat");
    let script = format!(
        "{} -c '{}' && {} --json",
        python.display(),
        PYNVML_SCRIPT.replace('\'', "\"'\"'"),
        gpustat.display()
    );
    let done = run_job(&node, &["--gpu=2", "--", "sh", "-c", &script]);
    assert_eq!(
        done.status["state"], "COMPLETED",
        "{}\n{}\n{}",
        done.status, done.stdout, done.stderr
    );
    let held: Vec<&str> = done.status["gpus"]["uuids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(held.len(), 2, "{}", done.status);

    // pynvml: its two GPUs, in CUDA order, each with its readings.
    let first = done.stdout.lines().next().unwrap_or_default();
    let nvml: Value = serde_json::from_str(first)
        .unwrap_or_else(|e| panic!("pynvml printed no JSON ({e}): {}", done.stdout));
    let gpus = nvml["gpus"].as_array().unwrap();
    let seen: Vec<&str> = gpus.iter().map(|g| g["uuid"].as_str().unwrap()).collect();
    assert_eq!(seen, held, "{nvml}");
    for g in gpus {
        assert!(g["name"].as_str().unwrap().contains("A100"), "{g}");
        assert!(g["memory_total"].as_u64().unwrap() > 0, "{g}");
        assert!(g["temperature"].as_u64().unwrap() > 0, "{g}");
        assert!(g["power_mw"].as_u64().unwrap() > 0, "{g}");
        assert!(g["sm_clock"].as_u64().unwrap() > 0, "{g}");
    }

    // gpustat --json: the same two GPUs.
    let rest: String = done.stdout.lines().skip(1).collect::<Vec<_>>().join("\n");
    let stat: Value = serde_json::from_str(&rest)
        .unwrap_or_else(|e| panic!("gpustat printed no JSON ({e}): {}", done.stdout));
    let stat_gpus = stat["gpus"].as_array().unwrap();
    let stat_uuids: Vec<&str> = stat_gpus
        .iter()
        .map(|g| g["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(stat_uuids, held, "{stat}");
    for g in stat_gpus {
        assert!(g["memory.total"].as_u64().unwrap() > 0, "{g}");
        assert!(g["temperature.gpu"].as_u64().is_some(), "{g}");
        assert!(g["power.draw"].as_u64().is_some(), "{g}");
    }
}
