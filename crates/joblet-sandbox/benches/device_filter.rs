//! What building a job's cgroup v2 device filter costs: the kernel's
//! verification and JIT of the program (`bpf(BPF_PROG_LOAD)`), for two
//! rule sets and two shapes of program:
//!
//! - every rule a block of the program (`program::generate`, how every
//!   filter was built before device tables; bench/history/runs-17-22.md,
//!   "less kernel work per sandbox");
//! - the exact devices in a device table and only the wildcard rules as
//!   blocks (`bpf::load_with_table`: creating the table, filling it, reading
//!   it back, then loading the program), how the sandbox builds them now.
//!
//! Rule sets: a GPU-ready warm sandbox's (the minimal devices, `nvidiactl`,
//! `nvidia-uvm`) and a cold 8-GPU job's (those and eight `/dev/nvidiaN`).
//! Nothing is attached; each program is unloaded when its descriptor closes.
//!
//! `sudo cargo bench -p joblet-sandbox --bench device_filter` (loading a
//! device program needs `CAP_BPF` and `CAP_NET_ADMIN`, or root).

use criterion::Criterion;
use joblet_sandbox::devices::{bpf, program, Access, DeviceRule, DeviceRules};
use std::hint::black_box;

/// `nvidia-uvm`'s major is dynamic; any number the rules name will do.
const UVM_MAJOR: u32 = 510;

fn gpu_ready() -> DeviceRules {
    let mut rules = DeviceRules::minimal();
    rules.allow(DeviceRule::char(195, 255, Access::RW));
    rules.allow(DeviceRule::char(UVM_MAJOR, 0, Access::RW));
    rules
}

fn eight_gpus() -> DeviceRules {
    let mut rules = gpu_ready();
    for minor in 0..8 {
        rules.allow(DeviceRule::char(195, minor, Access::RW));
    }
    rules
}

fn main() {
    if let Err(e) = bpf::load(&program::generate(&DeviceRules::minimal())) {
        eprintln!("device_filter: cannot load a device program here ({e}); run it as root");
        std::process::exit(1);
    }
    let mut c = Criterion::default().configure_from_args();
    for (name, rules) in [
        ("GPU-ready sandbox", gpu_ready()),
        ("8-GPU job", eight_gpus()),
    ] {
        let blocks = program::generate(&rules);
        c.bench_function(&format!("{name}: every rule a block"), |b| {
            b.iter(|| black_box(bpf::load(black_box(&blocks)).unwrap()))
        });
        c.bench_function(&format!("{name}: exact devices in the table"), |b| {
            b.iter(|| black_box(bpf::load_with_table(black_box(&rules)).unwrap()))
        });
    }
    c.final_summary();
}
