//! `joblet discover`: one-shot discovery with the daemon's config and
//! backends, printed for people or as JSON (like `slurmd -G` or
//! `nvidia-smi -L`, with the facts the scheduler uses).

use std::fmt::Write as _;

use joblet_gpu::{GpuInfo, NodeInventory};
use serde::Serialize;

use super::discover_once;
use crate::config::Config;

/// Discovers the GPUs once and prints them, as JSON with `json`.
pub fn run(cfg: &Config, json: bool) -> anyhow::Result<()> {
    let found = discover_once(cfg)?;
    let report = DiscoverReport {
        gpu_enabled: cfg.gpu.enabled,
        simulated: found.sim.is_some(),
        simulated_from: found.sim.as_ref().map(|s| s.from.display().to_string()),
        elapsed_us: found.elapsed.as_micros() as u64,
        inventory: &found.inventory,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// What `joblet discover --json` prints.
#[derive(Debug, Serialize)]
pub struct DiscoverReport<'a> {
    pub gpu_enabled: bool,
    pub simulated: bool,
    pub simulated_from: Option<String>,
    /// Discovery time in microseconds.
    pub elapsed_us: u64,
    #[serde(flatten)]
    pub inventory: &'a NodeInventory,
}

fn mib(b: Option<u64>) -> String {
    b.map(|b| format!("{} MiB", b / (1024 * 1024)))
        .unwrap_or_else(|| "?".into())
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn gpu_lines(out: &mut String, g: &GpuInfo) {
    let _ = writeln!(out, "GPU {}  {}  {}", g.index, g.name, g.uuid);
    let _ = writeln!(
        out,
        "    minor {} (/dev/nvidia{}) · bus {} · memory {} ({} used) · compute {} · NUMA {}{}",
        g.minor,
        g.minor,
        g.pci_bus_id,
        mib(g.memory_total_bytes),
        mib(g.memory_used_bytes),
        opt(g.compute_capability),
        opt(g.numa_node),
        g.local_cpus
            .as_ref()
            .map(|c| format!(" (cpus {c})"))
            .unwrap_or_default(),
    );
    let ecc = match g.ecc.enabled {
        Some(true) => format!(
            "on (volatile corrected {}, uncorrected {})",
            opt(g.ecc.volatile_corrected),
            opt(g.ecc.volatile_uncorrected)
        ),
        Some(false) => "off".into(),
        None => "-".into(),
    };
    let _ = writeln!(
        out,
        "    temperature {} °C (slowdown {}, shutdown {}) · utilization {} % · ECC {}{}",
        opt(g.thermal.current_c),
        opt(g.thermal.slowdown_c),
        opt(g.thermal.shutdown_c),
        opt(g.utilization_gpu_pct),
        ecc,
        if g.lost { " · LOST" } else { "" },
    );
    if !g.nvlink_peers.is_empty() {
        let _ = writeln!(out, "    NVLink peers: {}", g.nvlink_peers.join(", "));
    }
    if let Some(m) = &g.mig {
        let _ = writeln!(
            out,
            "    MIG {}{}",
            if m.enabled { "enabled" } else { "disabled" },
            if m.pending != m.enabled {
                " (changes on next reset)"
            } else {
                ""
            }
        );
        for i in &m.gpu_instances {
            let _ = writeln!(
                out,
                "      {:<8} GI {} CI {} · {} · {}",
                i.profile,
                i.gpu_instance_id,
                i.compute_instance_id,
                mib(i.memory_total_bytes),
                i.uuid.as_deref().unwrap_or("-")
            );
        }
    }
    for p in &g.processes {
        let _ = writeln!(
            out,
            "    process {} using {}",
            p.pid,
            mib(p.used_memory_bytes)
        );
    }
}

/// The human form.
pub fn render(r: &DiscoverReport<'_>) -> String {
    let inv = r.inventory;
    let mut out = String::new();
    if r.simulated {
        let _ = writeln!(
            out,
            "SIMULATED GPUs (fake NVML serving {}): not real hardware",
            r.simulated_from.as_deref().unwrap_or("?")
        );
    }
    if !r.gpu_enabled {
        let _ = writeln!(
            out,
            "note: gpu.enabled is false in this config: the daemon would not use these GPUs"
        );
    }
    let backends: Vec<String> = inv
        .backends
        .iter()
        .map(|b| format!("{b:?}").to_lowercase())
        .collect();
    let _ = writeln!(
        out,
        "Driver {} · CUDA (driver max) {} · NVML {} · backends {} · {} GPU(s) in {:.1} ms",
        opt(inv.driver_version.as_deref()),
        opt(inv.cuda_driver_version),
        opt(inv.nvml_version.as_deref()),
        if backends.is_empty() {
            "none".into()
        } else {
            backends.join("+")
        },
        inv.gpus.len(),
        r.elapsed_us as f64 / 1000.0
    );
    let m = &inv.device_majors;
    let _ = writeln!(
        out,
        "Device majors: nvidia {} · nvidia-uvm {} · nvidia-caps {}",
        opt(m.nvidia),
        opt(m.nvidia_uvm),
        opt(m.nvidia_caps)
    );
    if inv.cuda_toolkits.is_empty() {
        let _ = writeln!(out, "CUDA toolkits: none found (gpu.cuda_paths)");
    } else {
        let _ = writeln!(out, "CUDA toolkits:");
        for t in &inv.cuda_toolkits {
            let _ = writeln!(out, "    {} {} ({})", t.version, t.path, t.source);
        }
    }
    if let Some(t) = &inv.topology {
        let _ = writeln!(
            out,
            "Topology ({}): {} package(s), {} NUMA node(s)",
            t.source,
            t.packages.len(),
            t.numa_nodes.len()
        );
        for n in &t.numa_nodes {
            let _ = writeln!(
                out,
                "    NUMA {}: cpus {} · memory {}",
                n.os_index,
                n.cpus,
                mib(n.memory_bytes)
            );
        }
    }
    for g in &inv.gpus {
        gpu_lines(&mut out, g);
    }
    for w in &inv.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}
