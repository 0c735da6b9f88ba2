//! How long discovery takes for an 8-GPU node via NVML (target < 10 ms):
//! the fake `libnvidia-ml.so` serving the DGX A100 profile, empty temp
//! `/proc` and `/sys` (a simulated node), hwloc off. Needs the fake built
//! for the same profile: `cargo build --release -p fake-nvml` before
//! `cargo bench -p joblet-gpu --bench discover`.

use criterion::Criterion;
use joblet_gpu::discover::{discover, DiscoveryOptions};
use joblet_gpu::nvml::NvmlInventory;
use joblet_gpu::GpuInventory;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `target/<profile>/libnvidia_ml.so` next to this bench's `deps/` dir.
fn fake_library() -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("bench lives in target/<profile>/deps");
    let lib = dir.join("libnvidia_ml.so");
    assert!(
        lib.is_file(),
        "{} is missing: run `cargo build --release -p fake-nvml` first",
        lib.display()
    );
    lib
}

fn median_of(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let root = tempfile::tempdir().expect("temp dir");
    let dev = root.path().join("dev");
    std::fs::create_dir_all(&dev).expect("dev dir");
    let profile = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/nvml-profiles/mock-nvml-config-a100.yaml");
    // Set before any thread exists and before NVML is loaded.
    std::env::set_var("MOCK_NVML_CONFIG", &profile);
    std::env::set_var("MOCK_NVML_DEV_DIR", &dev);
    std::env::remove_var("MOCK_NVML_STATE");

    let opts = DiscoveryOptions {
        nvml_library: Some(fake_library()),
        use_nvml: true,
        use_procfs: true,
        proc_root: root.path().join("proc"),
        sys_root: root.path().join("sys"),
        cuda_paths: Vec::new(),
        hwloc: false,
        hwloc_xml: None,
    };
    let first = discover(&opts).expect("discover");
    assert_eq!(first.gpus.len(), 8, "the A100 profile has 8 GPUs");
    let nvml = NvmlInventory::open(opts.nvml_library.as_deref()).expect("fake NVML");

    let mut c = Criterion::default().configure_from_args();
    c.bench_function("discover (open NVML + 8 GPUs + merge)", |b| {
        b.iter(|| black_box(discover(black_box(&opts)).expect("discover")))
    });
    c.bench_function("NvmlInventory::discover (8 GPUs, NVML open)", |b| {
        b.iter(|| black_box(nvml.discover().expect("discover")))
    });
    c.final_summary();

    // Criterion reports means; the target is about a median.
    let full: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            black_box(discover(&opts).expect("discover"));
            t.elapsed()
        })
        .collect();
    let poll: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            black_box(nvml.discover().expect("discover"));
            t.elapsed()
        })
        .collect();
    println!(
        "median over 200 runs: discover() {:?}, NvmlInventory::discover() {:?} (8 GPUs, fake NVML, A100 profile)",
        median_of(full),
        median_of(poll)
    );
}
