//! What rnx shows about GPUs: serde views built from the wire types (the
//! `--json` contract), and their text forms (tables for `gpu status` /
//! `gpu watch`, a report for `gpu health`).

use std::io::{self, Write};

use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::view::rfc3339;

const MIB: u64 = 1024 * 1024;

/// The node's GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuNodeView {
    /// Cluster mode: the node these GPUs are on (`--on`, or the node
    /// asked); `null` on a node on its own.
    pub node: Option<String>,
    /// `nvml`, `nvml+procfs` or `procfs`.
    pub backend: String,
    /// True when the GPUs are simulated (fake NVML), not real hardware.
    pub simulated: bool,
    pub simulated_from: Option<String>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub cuda_toolkits: Vec<CudaToolkitView>,
    pub warnings: Vec<String>,
    pub sampled_at: Option<String>,
    pub sampled_at_unix_ms: UnixMillis,
    pub gpus: Vec<GpuView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CudaToolkitView {
    pub path: String,
    pub version: String,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuView {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub minor: u32,
    pub pci_bus_id: String,
    pub memory_total_mb: Option<u64>,
    pub memory_used_mb: Option<u64>,
    pub utilization_pct: Option<u32>,
    pub temperature_c: Option<u32>,
    pub slowdown_c: Option<u32>,
    /// AVAILABLE, ALLOCATED, IN_USE, DEGRADED, RESETTING, OFFLINE or DRAINING.
    pub state: String,
    pub state_cause: String,
    pub state_since: Option<String>,
    /// Why new placements are paused (temperature); `null` when they are not.
    pub placement_paused: Option<String>,
    pub jobs: Vec<String>,
    pub numa_node: Option<u32>,
    pub local_cpus: Option<String>,
    pub compute_capability: Option<String>,
    pub mig_enabled: bool,
    pub mig_instances: Vec<MigView>,
    pub ecc: EccView,
    pub processes: Vec<ProcessView>,
    pub nvlink_peers: Vec<String>,
    pub lost: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigView {
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub profile: String,
    pub uuid: Option<String>,
    pub memory_total_mb: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EccView {
    pub enabled: Option<bool>,
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
    pub retired_pages: Option<u64>,
    pub retired_pages_pending: Option<bool>,
    pub remapped_rows_uncorrectable: Option<u64>,
    pub remapped_rows_pending: Option<bool>,
    pub remapped_rows_failure: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessView {
    pub pid: u32,
    pub used_memory_mb: Option<u64>,
}

/// One GPU with its history (`gpu health`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuHealthView {
    pub gpu: GpuView,
    pub history: Vec<GpuEventView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuEventView {
    pub at: Option<String>,
    pub at_unix_ms: UnixMillis,
    pub kind: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub message: String,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl GpuView {
    pub fn from_pb(g: pb::Gpu) -> GpuView {
        let ecc = g.ecc.unwrap_or_default();
        GpuView {
            index: g.index,
            uuid: g.uuid,
            name: g.name,
            minor: g.minor,
            pci_bus_id: g.pci_bus_id,
            memory_total_mb: g.memory_total_bytes.map(|b| b / MIB),
            memory_used_mb: g.memory_used_bytes.map(|b| b / MIB),
            utilization_pct: g.utilization_pct,
            temperature_c: g.temperature_c,
            slowdown_c: g.slowdown_c,
            state: if g.state.is_empty() {
                "UNKNOWN".into()
            } else {
                g.state
            },
            state_cause: g.state_cause,
            state_since: (g.state_since_unix_ms > 0).then(|| rfc3339(g.state_since_unix_ms)),
            placement_paused: non_empty(g.placement_paused),
            jobs: g.jobs,
            numa_node: g.numa_node,
            local_cpus: non_empty(g.local_cpus),
            compute_capability: non_empty(g.compute_capability),
            mig_enabled: g.mig_enabled,
            mig_instances: g
                .mig_instances
                .into_iter()
                .map(|m| MigView {
                    gpu_instance_id: m.gpu_instance_id,
                    compute_instance_id: m.compute_instance_id,
                    profile: m.profile,
                    uuid: non_empty(m.uuid),
                    memory_total_mb: m.memory_total_bytes.map(|b| b / MIB),
                })
                .collect(),
            ecc: EccView {
                enabled: ecc.enabled,
                volatile_corrected: ecc.volatile_corrected,
                volatile_uncorrected: ecc.volatile_uncorrected,
                aggregate_corrected: ecc.aggregate_corrected,
                aggregate_uncorrected: ecc.aggregate_uncorrected,
                retired_pages: ecc.retired_pages,
                retired_pages_pending: ecc.retired_pages_pending,
                remapped_rows_uncorrectable: ecc.remapped_rows_uncorrectable,
                remapped_rows_pending: ecc.remapped_rows_pending,
                remapped_rows_failure: ecc.remapped_rows_failure,
            },
            processes: g
                .processes
                .into_iter()
                .map(|p| ProcessView {
                    pid: p.pid,
                    used_memory_mb: p.used_memory_bytes.map(|b| b / MIB),
                })
                .collect(),
            nvlink_peers: g.nvlink_peers,
            lost: g.lost,
        }
    }
}

impl GpuNodeView {
    pub fn from_pb(r: pb::GpuStatusResponse) -> GpuNodeView {
        GpuNodeView {
            node: non_empty(r.node),
            backend: r.backend,
            simulated: r.simulated,
            simulated_from: non_empty(r.simulated_from),
            driver_version: non_empty(r.driver_version),
            cuda_driver_version: non_empty(r.cuda_driver_version),
            cuda_toolkits: r
                .cuda_toolkits
                .into_iter()
                .map(|t| CudaToolkitView {
                    path: t.path,
                    version: t.version,
                })
                .collect(),
            warnings: r.warnings,
            sampled_at: (r.sampled_at_unix_ms > 0).then(|| rfc3339(r.sampled_at_unix_ms)),
            sampled_at_unix_ms: r.sampled_at_unix_ms,
            gpus: r.gpus.into_iter().map(GpuView::from_pb).collect(),
        }
    }
}

impl GpuHealthView {
    pub fn from_pb(h: pb::GpuHealth) -> GpuHealthView {
        GpuHealthView {
            gpu: GpuView::from_pb(h.gpu.unwrap_or_default()),
            history: h
                .history
                .into_iter()
                .map(|e| GpuEventView {
                    at: (e.at_unix_ms > 0).then(|| rfc3339(e.at_unix_ms)),
                    at_unix_ms: e.at_unix_ms,
                    kind: e.kind,
                    from: non_empty(e.from_state),
                    to: non_empty(e.to_state),
                    message: e.message,
                })
                .collect(),
        }
    }
}

fn dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn memory(g: &GpuView) -> String {
    match (g.memory_used_mb, g.memory_total_mb) {
        (Some(u), Some(t)) => format!("{u} / {t} MiB"),
        (None, Some(t)) => format!("? / {t} MiB"),
        _ => "-".into(),
    }
}

fn state(g: &GpuView) -> String {
    match &g.placement_paused {
        Some(_) => format!("{} (paused: hot)", g.state),
        None => g.state.clone(),
    }
}

/// The header lines: the node (cluster mode), simulated or not, driver,
/// CUDA.
fn write_header(o: &mut dyn Write, n: &GpuNodeView) -> io::Result<()> {
    if let Some(node) = &n.node {
        writeln!(o, "Node: {node}")?;
    }
    if n.simulated {
        writeln!(
            o,
            "SIMULATED GPUs (fake NVML serving {}): not real hardware",
            n.simulated_from.as_deref().unwrap_or("a profile")
        )?;
    }
    writeln!(
        o,
        "Driver {} · CUDA {} · via {}{}",
        n.driver_version.as_deref().unwrap_or("-"),
        n.cuda_driver_version.as_deref().unwrap_or("-"),
        if n.backend.is_empty() {
            "-"
        } else {
            &n.backend
        },
        n.sampled_at
            .as_ref()
            .map(|t| format!(" · sampled {t}"))
            .unwrap_or_default()
    )
}

/// `gpu status` (and each `gpu watch` frame).
pub fn write_status(o: &mut dyn Write, n: &GpuNodeView, all: bool) -> io::Result<()> {
    write_header(o, n)?;
    if n.gpus.is_empty() {
        writeln!(o, "no GPUs on this node")?;
    } else {
        let rows: Vec<[String; 7]> = n
            .gpus
            .iter()
            .map(|g| {
                [
                    g.index.to_string(),
                    g.name.clone(),
                    memory(g),
                    g.utilization_pct
                        .map(|u| format!("{u} %"))
                        .unwrap_or_else(|| "-".into()),
                    g.temperature_c
                        .map(|t| format!("{t} °C"))
                        .unwrap_or_else(|| "-".into()),
                    state(g),
                    if g.jobs.is_empty() {
                        "-".into()
                    } else {
                        g.jobs.join(",")
                    },
                ]
            })
            .collect();
        let head = [
            "IDX",
            "NAME",
            "MEMORY USED/TOTAL",
            "UTIL",
            "TEMP",
            "STATE",
            "JOBS",
        ];
        let mut width = head.map(|h| h.chars().count());
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| -> String {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
                }
            }
            s
        };
        writeln!(o, "{}", line(head.to_vec()))?;
        for (r, g) in rows.iter().zip(&n.gpus) {
            writeln!(o, "{}", line(r.iter().map(String::as_str).collect()))?;
            if all {
                write_details(o, g)?;
            }
        }
    }
    for t in &n.cuda_toolkits {
        if all {
            writeln!(o, "CUDA toolkit {} at {}", t.version, t.path)?;
        }
    }
    for w in &n.warnings {
        writeln!(o, "warning: {w}")?;
    }
    Ok(())
}

fn write_details(o: &mut dyn Write, g: &GpuView) -> io::Result<()> {
    writeln!(
        o,
        "     uuid {} · bus {} · /dev/nvidia{} · compute {} · NUMA {}{}",
        g.uuid,
        g.pci_bus_id,
        g.minor,
        g.compute_capability.as_deref().unwrap_or("-"),
        dash(g.numa_node),
        g.local_cpus
            .as_ref()
            .map(|c| format!(" (cpus {c})"))
            .unwrap_or_default()
    )?;
    if !g.state_cause.is_empty() {
        writeln!(o, "     state: {} ({})", g.state, g.state_cause)?;
    }
    if let Some(p) = &g.placement_paused {
        writeln!(o, "     {p}")?;
    }
    writeln!(
        o,
        "     ECC {} · volatile corrected {} uncorrected {} · retired pages {} · remapped rows {}",
        match g.ecc.enabled {
            Some(true) => "on",
            Some(false) => "off",
            None => "-",
        },
        dash(g.ecc.volatile_corrected),
        dash(g.ecc.volatile_uncorrected),
        dash(g.ecc.retired_pages),
        dash(g.ecc.remapped_rows_uncorrectable)
    )?;
    if g.mig_enabled || !g.mig_instances.is_empty() {
        writeln!(
            o,
            "     MIG {}",
            if g.mig_enabled { "enabled" } else { "disabled" }
        )?;
        for m in &g.mig_instances {
            writeln!(
                o,
                "       {} GI {} CI {} · {} MiB · {}",
                m.profile,
                m.gpu_instance_id,
                m.compute_instance_id,
                dash(m.memory_total_mb),
                m.uuid.as_deref().unwrap_or("-")
            )?;
        }
    }
    for p in &g.processes {
        writeln!(
            o,
            "     process {} using {} MiB",
            p.pid,
            dash(p.used_memory_mb)
        )?;
    }
    if g.lost {
        writeln!(o, "     LOST: the driver cannot reach this GPU")?;
    }
    Ok(())
}

/// `gpu health`.
pub fn write_health(o: &mut dyn Write, h: &GpuHealthView) -> io::Result<()> {
    let g = &h.gpu;
    writeln!(o, "GPU {}: {} ({})", g.index, g.name, g.uuid)?;
    writeln!(
        o,
        "State: {}{}{}",
        g.state,
        if g.state_cause.is_empty() {
            String::new()
        } else {
            format!(" ({})", g.state_cause)
        },
        g.state_since
            .as_ref()
            .map(|t| format!(" since {t}"))
            .unwrap_or_default()
    )?;
    writeln!(
        o,
        "New jobs: {}",
        match (&g.placement_paused, g.state.as_str()) {
            (Some(p), _) => p.clone(),
            (None, "AVAILABLE" | "ALLOCATED" | "IN_USE") => "accepted".into(),
            (None, _) => format!("not accepted while {}", g.state),
        }
    )?;
    writeln!(
        o,
        "Temperature: {} °C (slowdown at {} °C)",
        dash(g.temperature_c),
        dash(g.slowdown_c)
    )?;
    writeln!(
        o,
        "ECC: {} · volatile corrected {} / uncorrected {} · aggregate corrected {} / uncorrected {}",
        match g.ecc.enabled {
            Some(true) => "enabled",
            Some(false) => "disabled",
            None => "not supported",
        },
        dash(g.ecc.volatile_corrected),
        dash(g.ecc.volatile_uncorrected),
        dash(g.ecc.aggregate_corrected),
        dash(g.ecc.aggregate_uncorrected)
    )?;
    writeln!(
        o,
        "Retired pages: {}{} · remapped rows: {}{}{}",
        dash(g.ecc.retired_pages),
        if g.ecc.retired_pages_pending == Some(true) {
            " (pending: reset needed)"
        } else {
            ""
        },
        dash(g.ecc.remapped_rows_uncorrectable),
        if g.ecc.remapped_rows_pending == Some(true) {
            " (pending: reset needed)"
        } else {
            ""
        },
        if g.ecc.remapped_rows_failure == Some(true) {
            " (FAILED: replace the GPU)"
        } else {
            ""
        },
    )?;
    if g.lost {
        writeln!(o, "LOST: the driver cannot reach this GPU")?;
    }
    writeln!(o, "History (oldest first):")?;
    if h.history.is_empty() {
        writeln!(o, "  (none)")?;
    }
    for e in &h.history {
        let change = match (&e.from, &e.to) {
            (Some(f), Some(t)) => format!("{f} -> {t}: "),
            _ => String::new(),
        };
        writeln!(
            o,
            "  {}  {:<10} {change}{}",
            e.at.as_deref().unwrap_or("-"),
            e.kind,
            e.message
        )?;
    }
    Ok(())
}
