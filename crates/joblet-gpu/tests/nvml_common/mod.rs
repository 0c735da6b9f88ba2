//! Shared by the NVML test files: where the fake `libnvidia-ml.so` and the
//! fixtures are, and how to point the fake at a fixture. Each test file is
//! its own process (NVML state is process-global) and sets the fake's
//! environment once, before the first `nvmlInit`.

#![allow(dead_code)]

use joblet_gpu::nvml::NvmlInventory;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const MIB: u64 = 1 << 20;

/// `target/debug/libnvidia_ml.so`, next to this test's `deps/` dir.
pub fn fake_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let lib = profile_dir.join("libnvidia_ml.so");
    assert!(
        lib.is_file(),
        "{} is missing: run `cargo build -p fake-nvml` first",
        lib.display()
    );
    lib
}

/// A file under the repository's `fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    assert!(path.is_file(), "fixture {} missing", path.display());
    path
}

static ENV: OnceLock<(PathBuf, Option<PathBuf>)> = OnceLock::new();

/// Point the fake at `config` (and the injection `state` file) for this
/// whole process. Called again with other paths, it panics: NVML state is
/// global, so one test process serves one fixture.
pub fn use_fixture(config: &Path, state: Option<&Path>) {
    let want = (config.to_path_buf(), state.map(Path::to_path_buf));
    let got = ENV.get_or_init(|| {
        // Set once, before any thread of this process calls into NVML.
        std::env::set_var("MOCK_NVML_CONFIG", &want.0);
        // A device dir without `nvidiactl`: the fake enumerates every GPU
        // of the fixture whatever this host's /dev holds.
        let dev = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-nvml-empty-dev");
        std::fs::create_dir_all(&dev).expect("empty device dir");
        std::env::set_var("MOCK_NVML_DEV_DIR", &dev);
        match &want.1 {
            Some(state) => std::env::set_var("MOCK_NVML_STATE", state),
            None => std::env::remove_var("MOCK_NVML_STATE"),
        }
        want.clone()
    });
    assert_eq!(*got, want, "one fixture per test process");
}

/// Open the fake NVML serving `config`.
pub fn open(config: &Path, state: Option<&Path>) -> NvmlInventory {
    use_fixture(config, state);
    NvmlInventory::open(Some(&fake_library())).expect("fake NVML opens")
}

/// `MiB` from an `nvidia-smi` capture, in bytes.
pub fn mib(n: u64) -> Option<u64> {
    Some(n * MIB)
}

/// Write the fake's injection state atomically (temp file + rename), as
/// the fake asks.
pub fn write_state(path: &Path, state: &serde_json::Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state).expect("json")).expect("write state");
    std::fs::rename(&tmp, path).expect("rename state");
}
