//! dcgm-exporter's series from a [`Snapshot`] (pure): the same names,
//! types, units and labels as NVIDIA's dcgm-exporter with its default
//! counters (`etc/default-counters.csv`), so dashboards and alerts written
//! for it (Grafana dashboard 12239) work unchanged.
//!
//! Labels, in dcgm-exporter's order: `gpu` (NVML index), `UUID`,
//! `pci_bus_id` (NVML's `00000000:07:00.0` form), `device` (`nvidia<index>`,
//! as dcgm-exporter names it), `modelName`, `GPU_I_PROFILE` and `GPU_I_ID`
//! on a MIG slice's series, `Hostname`, `DCGM_FI_DRIVER_VERSION`, then
//! `hpc_job` (the job's id) and `owner` for a GPU a job holds. A GPU held
//! by several jobs (shared mode) repeats each series once per job, as
//! dcgm-exporter's HPC job mapping does; `joblet_job_gpu_*` says what each
//! job itself uses. The `camelCase` label and counters without `_total`
//! are dcgm-exporter's and kept on purpose.
//!
//! A field NVML does not give for a GPU is omitted for that GPU, never
//! filled with 0. A GPU NVML calls lost has no series. On a MIG GPU the
//! framebuffer fields are per slice (with the MIG labels), the others per
//! GPU.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::snapshot::{GpuSample, Snapshot};

const MIB: u64 = 1024 * 1024;

/// The Prometheus type dcgm-exporter declares for a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// A value of one series: dcgm-exporter prints integers as integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
}

/// One dcgm field as exported: name, type and help as in dcgm-exporter's
/// `default-counters.csv`, and how to read it from a GPU.
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// Read per MIG slice on a MIG GPU (framebuffer fields).
    pub per_slice: bool,
    read: fn(&GpuSample) -> Option<Value>,
}

fn int<T: TryInto<i64>>(v: Option<T>) -> Option<Value> {
    v.and_then(|v| v.try_into().ok()).map(Value::Int)
}

/// The fields served, in dcgm-exporter's file order.
pub const FIELDS: &[Field] = &[
    Field {
        name: "DCGM_FI_DEV_SM_CLOCK",
        kind: Kind::Gauge,
        help: "SM clock frequency (in MHz).",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.sm_clock_mhz),
    },
    Field {
        name: "DCGM_FI_DEV_MEM_CLOCK",
        kind: Kind::Gauge,
        help: "Memory clock frequency (in MHz).",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.mem_clock_mhz),
    },
    Field {
        name: "DCGM_FI_DEV_MEMORY_TEMP",
        kind: Kind::Gauge,
        help: "Memory temperature (in C).",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.memory_temp_c),
    },
    Field {
        name: "DCGM_FI_DEV_GPU_TEMP",
        kind: Kind::Gauge,
        help: "GPU temperature (in C).",
        per_slice: false,
        read: |g| int(g.info.thermal.current_c),
    },
    Field {
        name: "DCGM_FI_DEV_POWER_USAGE",
        kind: Kind::Gauge,
        help: "Power draw (in W).",
        per_slice: false,
        read: |g| {
            let mw = g.readings.as_ref()?.power_mw?;
            Some(Value::Float(f64::from(mw) / 1000.0))
        },
    },
    Field {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        kind: Kind::Counter,
        help: "Total energy consumption since boot (in mJ).",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.energy_mj),
    },
    Field {
        name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        kind: Kind::Counter,
        help: "Total number of PCIe retries.",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.pcie_replays),
    },
    Field {
        name: "DCGM_FI_DEV_GPU_UTIL",
        kind: Kind::Gauge,
        help: "GPU utilization (in %).",
        per_slice: false,
        read: |g| int(g.info.utilization_gpu_pct),
    },
    Field {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        kind: Kind::Gauge,
        help: "Memory utilization (in %).",
        per_slice: false,
        read: |g| int(g.info.utilization_memory_pct),
    },
    Field {
        name: "DCGM_FI_DEV_XID_ERRORS",
        kind: Kind::Gauge,
        help: "Value of the last XID error encountered.",
        per_slice: false,
        read: |g| int(Some(g.last_xid.unwrap_or(0))),
    },
    Field {
        name: "DCGM_FI_DEV_FB_FREE",
        kind: Kind::Gauge,
        help: "Framebuffer memory free (in MiB).",
        per_slice: true,
        read: |g| {
            let free = g
                .readings
                .as_ref()
                .and_then(|r| r.fb_free_bytes)
                .or_else(|| {
                    let (total, used) = (g.info.memory_total_bytes?, g.info.memory_used_bytes?);
                    Some(total.saturating_sub(used))
                });
            int(free.map(|b| b / MIB))
        },
    },
    Field {
        name: "DCGM_FI_DEV_FB_USED",
        kind: Kind::Gauge,
        help: "Framebuffer memory used (in MiB).",
        per_slice: true,
        read: |g| int(g.info.memory_used_bytes.map(|b| b / MIB)),
    },
    Field {
        name: "DCGM_FI_DEV_FB_RESERVED",
        kind: Kind::Gauge,
        help: "Framebuffer memory reserved (in MiB).",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.fb_reserved_bytes.map(|b| b / MIB)),
    },
    Field {
        name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        kind: Kind::Counter,
        help: "Number of remapped rows for uncorrectable errors",
        per_slice: false,
        read: |g| {
            let r = g.readings.as_ref().and_then(|r| r.remapped_uncorrectable);
            int(r.or(g.info.ecc.remapped_rows_uncorrectable))
        },
    },
    Field {
        name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        kind: Kind::Counter,
        help: "Number of remapped rows for correctable errors",
        per_slice: false,
        read: |g| int(g.readings.as_ref()?.remapped_correctable),
    },
    Field {
        name: "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        kind: Kind::Gauge,
        help: "Whether remapping of rows has failed",
        per_slice: false,
        read: |g| {
            let f = g.readings.as_ref().and_then(|r| r.remap_failure);
            int(f.or(g.info.ecc.remapped_rows_failure).map(i64::from))
        },
    },
];

type Labels = Vec<(String, String)>;

/// NVML's bus id form (`00000000:07:00.0`) from the inventory's
/// normalised one (`0000:07:00.0`).
pub fn nvml_bus_id(bus: &str) -> String {
    match bus.split_once(':') {
        Some((domain, rest)) => format!("{domain:0>8}:{rest}").to_ascii_uppercase(),
        None => bus.to_ascii_uppercase(),
    }
}

/// The label sets of one GPU (or MIG slice) row: one per job holding it,
/// or one without job labels when none does.
fn label_sets(
    snap: &Snapshot,
    gpu: &GpuSample,
    slice: Option<(&str, u32)>,
    jobs: &[String],
) -> Vec<Labels> {
    let mut base: Labels = vec![
        ("gpu".into(), gpu.info.index.to_string()),
        ("UUID".into(), gpu.info.uuid.clone()),
        ("pci_bus_id".into(), nvml_bus_id(&gpu.info.pci_bus_id)),
        ("device".into(), format!("nvidia{}", gpu.info.index)),
        ("modelName".into(), gpu.info.name.clone()),
    ];
    if let Some((profile, id)) = slice {
        base.push(("GPU_I_PROFILE".into(), profile.to_owned()));
        base.push(("GPU_I_ID".into(), id.to_string()));
    }
    if !snap.hostname.is_empty() {
        base.push(("Hostname".into(), snap.hostname.clone()));
    }
    base.push(("DCGM_FI_DRIVER_VERSION".into(), snap.driver_version.clone()));
    if jobs.is_empty() {
        return vec![base];
    }
    let owner_of = |id: &str| {
        snap.jobs
            .iter()
            .find(|j| j.id == id)
            .map(|j| j.owner.clone())
            .unwrap_or_default()
    };
    jobs.iter()
        .map(|job| {
            let mut l = base.clone();
            l.push(("hpc_job".into(), job.clone()));
            l.push(("owner".into(), owner_of(job)));
            l
        })
        .collect()
}

/// Every (labels, value) row of `field`.
pub fn rows(snap: &Snapshot, field: &Field) -> Vec<(Labels, Value)> {
    let mut out = Vec::new();
    for gpu in snap.gpus.iter().filter(|g| !g.info.lost) {
        let slices = gpu
            .info
            .mig
            .as_ref()
            .filter(|m| m.enabled && !m.gpu_instances.is_empty());
        match slices {
            Some(mig) if field.per_slice => {
                for gi in &mig.gpu_instances {
                    // A slice read as its own GPU: its memory, its jobs.
                    let mut as_gpu = gpu.clone();
                    as_gpu.info.memory_total_bytes = gi.memory_total_bytes;
                    as_gpu.info.memory_used_bytes = gi.memory_used_bytes;
                    as_gpu.readings = None;
                    let Some(v) = (field.read)(&as_gpu) else {
                        continue;
                    };
                    let jobs = gi
                        .uuid
                        .as_ref()
                        .and_then(|u| gpu.mig_jobs.get(u))
                        .cloned()
                        .unwrap_or_default();
                    let slice = Some((gi.profile.as_str(), gi.gpu_instance_id));
                    for l in label_sets(snap, gpu, slice, &jobs) {
                        out.push((l, v));
                    }
                }
            }
            _ => {
                let Some(v) = (field.read)(gpu) else {
                    continue;
                };
                for l in label_sets(snap, gpu, None, &gpu.jobs) {
                    out.push((l, v));
                }
            }
        }
    }
    out
}

/// Appends the dcgm-compatible series of `snap` to `out` (Prometheus text
/// format 0.0.4).
///
/// prometheus-client appends `_total` to every counter's name (OpenMetrics
/// requires it), but dcgm-exporter names its counters without it
/// (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`), and queries written for it
/// use those names. So a counter field is encoded by the library as a
/// gauge family (names, labels, escaping and values all the library's),
/// and only the word in its one `# TYPE` line is changed to `counter`, the
/// type dcgm-exporter declares. Every other line is the library's.
pub fn encode(snap: &Snapshot, out: &mut String) -> std::fmt::Result {
    for field in FIELDS {
        let rows = rows(snap, field);
        if rows.is_empty() {
            continue;
        }
        let mut registry = Registry::default();
        // The library ends every help text with a full stop itself.
        let help = field.help.strip_suffix('.').unwrap_or(field.help);
        let floats = rows.iter().any(|(_, v)| matches!(v, Value::Float(_)));
        if floats {
            let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
            for (l, v) in &rows {
                family.get_or_create(l).set(match *v {
                    Value::Float(f) => f,
                    Value::Int(i) => i as f64,
                });
            }
            registry.register(field.name, help, family);
        } else {
            let family = Family::<Labels, Gauge>::default();
            for (l, v) in &rows {
                if let Value::Int(i) = *v {
                    family.get_or_create(l).set(i);
                }
            }
            registry.register(field.name, help, family);
        }
        let mut text = String::new();
        prometheus_text::encode(&mut text, &registry)?;
        if field.kind == Kind::Counter {
            let gauge = format!("# TYPE {} gauge\n", field.name);
            let counter = format!("# TYPE {} counter\n", field.name);
            debug_assert!(text.contains(&gauge), "{text}");
            text = text.replacen(&gauge, &counter, 1);
        }
        out.write_str(&text)?;
    }
    Ok(())
}
