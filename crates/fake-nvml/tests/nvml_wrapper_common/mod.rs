//! Shared by the tests that drive the built `libnvidia_ml.so` through
//! nvml-wrapper: the library's path, the fixtures, initialising the fake
//! with an environment, the state file, raw calls nvml-wrapper lacks.
//!
//! NVML state is process-global and the environment is read at init, so
//! every test holds [`lock`] while it sets the environment and uses the
//! library (each test file is its own process).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::os::raw::c_uint;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

pub static LOCK: Mutex<()> = Mutex::new(());

pub fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cdylib cargo built for this test run. `cargo test` rebuilds
/// `target/<profile>/deps/libnvidia_ml.so` (this binary's directory) but only
/// `cargo build` refreshes the uplifted `target/<profile>/libnvidia_ml.so`, so
/// the copy in `deps/` is the one that matches the sources.
pub fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = deps.join("libnvidia_ml.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

pub const A100_PROFILE: &str = "nvml-profiles/mock-nvml-config-a100.yaml";
pub const H100_PROFILE: &str = "nvml-profiles/mock-nvml-config-h100.yaml";
pub const A100_XML: &str = "nvidia-smi-xml/a100-sxm4-v12.xml";
pub const A5000_XML: &str = "nvidia-smi-xml/dual_a5000-v13.xml";
pub const RTX3090_XML: &str = "nvidia-smi-xml/rtx-3090-v12.xml";
pub const T4_XML: &str = "nvidia-smi-xml/tesla-t4.xml";
pub const MIB: u64 = 1 << 20;

pub fn set_env(name: &str, value: Option<&Path>) {
    match value {
        Some(v) => std::env::set_var(name, v),
        None => std::env::remove_var(name),
    }
}

/// Initialise the fake from `config`, with an optional state file and device dir.
pub fn open(
    config: Option<&Path>,
    state: Option<&Path>,
    dev_dir: Option<&Path>,
) -> Result<Nvml, NvmlError> {
    set_env("MOCK_NVML_CONFIG", config);
    set_env("MOCK_NVML_STATE", state);
    // A directory without nvidiactl: every GPU is visible.
    let empty = std::env::temp_dir();
    set_env("MOCK_NVML_DEV_DIR", Some(dev_dir.unwrap_or(&empty)));
    let lib = lib_path();
    Nvml::builder().lib_path(OsStr::new(&lib)).init()
}

/// Replace the state file atomically.
pub fn write_state(path: &Path, json: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub struct Gpu {
    pub name: &'static str,
    pub uuid: String,
    pub minor: u32,
    pub bus_id: String,
    pub total: u64,
    pub used: u64,
    pub cc: Option<(i32, i32)>,
    pub numa: Option<u32>,
    pub temp: u32,
    pub slowdown: u32,
    pub shutdown: u32,
    pub gpu_max: u32,
    pub ecc: Option<bool>,
    pub processes: Vec<(u32, u64)>,
    pub mig: Option<bool>,
    pub nvlinks: u32,
}

pub struct System {
    pub driver: &'static str,
    pub nvml: &'static str,
    pub cuda: i32,
}

pub fn remapped_rows(nvml: &Nvml, d: &Device) -> Result<[c_uint; 4], NvmlError> {
    let mut v = [0 as c_uint; 4];
    let [a, b, c, e] = &mut v;
    // SAFETY: the handle comes from this Nvml; the four pointers are live locals.
    let rc = unsafe { nvml.lib().nvmlDeviceGetRemappedRows(d.handle(), a, b, c, e) };
    nvml_wrapper::error::nvml_try(rc).map(|_| v)
}

pub fn instance_ids(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let (mut gi, mut ci) = (0, 0);
    // SAFETY: handle from this Nvml; out pointers are live locals.
    nvml_wrapper::error::nvml_try(unsafe {
        nvml.lib().nvmlDeviceGetGpuInstanceId(d.handle(), &mut gi)
    })?;
    // SAFETY: as above.
    nvml_wrapper::error::nvml_try(unsafe {
        nvml.lib()
            .nvmlDeviceGetComputeInstanceId(d.handle(), &mut ci)
    })?;
    Ok((gi, ci))
}
