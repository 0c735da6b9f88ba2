//! Lists the GPUs NVML shows to the calling process as one JSON object
//! (`{"count": N, "gpus": [{"index", "uuid", "minor"}]}`), or
//! `{"error": "..."}` with exit code 1. GPU job tests run it inside jobs to
//! see what a job's NVML sees (the simulated driver library the daemon
//! mounts).

use nvml_wrapper::Nvml;
use serde_json::json;

fn main() {
    let lib = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "libnvidia-ml.so.1".into());
    let report = match list(&lib) {
        Ok(v) => v,
        Err(e) => {
            println!("{}", json!({ "error": e.to_string() }));
            std::process::exit(1);
        }
    };
    println!("{report}");
}

fn list(lib: &str) -> Result<serde_json::Value, nvml_wrapper::error::NvmlError> {
    let nvml = Nvml::builder().lib_path(std::ffi::OsStr::new(lib)).init()?;
    let count = nvml.device_count()?;
    let mut gpus = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i)?;
        gpus.push(json!({
            "index": d.index()?,
            "uuid": d.uuid()?,
            "minor": d.minor_number()?,
        }));
    }
    Ok(json!({ "count": count, "gpus": gpus }))
}
