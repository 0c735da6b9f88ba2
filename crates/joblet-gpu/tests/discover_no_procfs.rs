//! A simulated node (`use_procfs: false`) never merges a real driver's
//! GPUs into the simulated ones. Its own process: NVML state is global.

mod discover_common;
mod nvml_common;

use discover_common::{options, write_proc, ProcGpu};
use joblet_gpu::discover::discover;
use joblet_gpu::model::Backend;
use nvml_common::{fake_library, fixture, use_fixture};

#[test]
fn a_simulated_node_never_mixes_in_the_real_drivers_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = (dir.path().join("proc"), dir.path().join("sys"));
    // A "real" driver on the host with one GPU the profile does not have.
    write_proc(
        &proc_root,
        "535.00",
        &[ProcGpu {
            bus: "0000:3b:00.0",
            model: "Tesla T4",
            uuid: "GPU-real-0000",
            minor: 0,
        }],
    );
    use_fixture(&fixture("nvml-profiles/mock-nvml-config-a100.yaml"), None);
    let mut opts = options(Some(fake_library()), &proc_root, &sys_root);
    opts.use_procfs = false;
    let inv = discover(&opts).expect("discover");
    assert_eq!(inv.backends, [Backend::Nvml]);
    assert_eq!(inv.gpus.len(), 8);
    assert!(inv.gpus.iter().all(|g| g.name == "NVIDIA A100-SXM4-40GB"));
    // The same roots with procfs on would mix the T4 in (the control).
    opts.use_procfs = true;
    let mixed = discover(&opts).expect("discover");
    assert_eq!(mixed.gpus.len(), 9);
}
