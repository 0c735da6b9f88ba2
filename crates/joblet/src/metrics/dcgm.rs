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
//!
//! A scrape builds each GPU's (and slice's) labels once ([`Table`]) and
//! every field's rows share them; the library encodes them through a
//! [`Collector`], without a per-series label copy or hash map.

use std::borrow::Cow;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
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

type Label = (&'static str, String);

/// NVML's bus id form (`00000000:07:00.0`) from the inventory's
/// normalised one (`0000:07:00.0`).
pub fn nvml_bus_id(bus: &str) -> String {
    match bus.split_once(':') {
        Some((domain, rest)) => format!("{domain:0>8}:{rest}").to_ascii_uppercase(),
        None => bus.to_ascii_uppercase(),
    }
}

/// The series rows of one GPU or MIG slice: its labels, built once per
/// scrape, and one label pair per job holding it.
#[derive(Debug)]
struct Row<'a> {
    /// What the fields read: the GPU, or a slice read as its own GPU.
    sample: Cow<'a, GpuSample>,
    labels: Vec<Label>,
    /// `hpc_job` and `owner` of each job holding it (none: one series
    /// without job labels).
    jobs: Vec<[Label; 2]>,
}

impl Row<'_> {
    fn into_owned(self) -> Row<'static> {
        Row {
            sample: Cow::Owned(self.sample.into_owned()),
            labels: self.labels,
            jobs: self.jobs,
        }
    }
}

/// Every field's values of one scrape, by row.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Row<'static>>,
    /// Per field (in [`FIELDS`] order): `(row, value)`.
    values: Vec<Vec<(usize, Value)>>,
}

impl Table {
    /// The rows and values of `snap`.
    pub fn new(snap: &Snapshot) -> Table {
        let owners: std::collections::BTreeMap<&str, &str> = snap
            .jobs
            .iter()
            .map(|j| (j.id.as_str(), j.owner.as_str()))
            .collect();
        let job_labels = |jobs: &[String]| -> Vec<[Label; 2]> {
            jobs.iter()
                .map(|job| {
                    let owner = owners.get(job.as_str()).copied().unwrap_or_default();
                    [("hpc_job", job.clone()), ("owner", owner.to_owned())]
                })
                .collect()
        };
        let mut rows: Vec<Row<'_>> = Vec::new();
        // Per field kind, the rows of each GPU: (whole GPU, its slices).
        let mut per_gpu: Vec<(usize, Vec<usize>)> = Vec::new();
        for gpu in snap.gpus.iter().filter(|g| !g.info.lost) {
            let whole = rows.len();
            rows.push(Row {
                sample: Cow::Borrowed(gpu),
                labels: labels(snap, gpu, None),
                jobs: job_labels(&gpu.jobs),
            });
            let mut slices = Vec::new();
            let mig = gpu
                .info
                .mig
                .as_ref()
                .filter(|m| m.enabled && !m.gpu_instances.is_empty());
            for gi in mig.iter().flat_map(|m| &m.gpu_instances) {
                // A slice read as its own GPU: its memory, its jobs.
                let mut as_gpu = gpu.clone();
                as_gpu.info.memory_total_bytes = gi.memory_total_bytes;
                as_gpu.info.memory_used_bytes = gi.memory_used_bytes;
                as_gpu.readings = None;
                let jobs = gi
                    .uuid
                    .as_ref()
                    .and_then(|u| gpu.mig_jobs.get(u))
                    .map(|j| job_labels(j))
                    .unwrap_or_default();
                slices.push(rows.len());
                rows.push(Row {
                    sample: Cow::Owned(as_gpu),
                    labels: labels(snap, gpu, Some((&gi.profile, gi.gpu_instance_id))),
                    jobs,
                });
            }
            per_gpu.push((whole, slices));
        }
        let values = FIELDS
            .iter()
            .map(|field| {
                let mut vals = Vec::new();
                for (whole, slices) in &per_gpu {
                    let targets = if field.per_slice && !slices.is_empty() {
                        slices.as_slice()
                    } else {
                        std::slice::from_ref(whole)
                    };
                    for &row in targets {
                        if let Some(v) = (field.read)(&rows[row].sample) {
                            vals.push((row, v));
                        }
                    }
                }
                vals
            })
            .collect();
        Table {
            rows: rows.into_iter().map(Row::into_owned).collect(),
            values,
        }
    }
}

/// The labels of a GPU (or one of its MIG slices), in dcgm-exporter's
/// order, without the job labels.
fn labels(snap: &Snapshot, gpu: &GpuSample, slice: Option<(&str, u32)>) -> Vec<Label> {
    let mut l: Vec<Label> = vec![
        ("gpu", gpu.info.index.to_string()),
        ("UUID", gpu.info.uuid.clone()),
        ("pci_bus_id", nvml_bus_id(&gpu.info.pci_bus_id)),
        ("device", format!("nvidia{}", gpu.info.index)),
        ("modelName", gpu.info.name.clone()),
    ];
    if let Some((profile, id)) = slice {
        l.push(("GPU_I_PROFILE", profile.to_owned()));
        l.push(("GPU_I_ID", id.to_string()));
    }
    if !snap.hostname.is_empty() {
        l.push(("Hostname", snap.hostname.clone()));
    }
    l.push(("DCGM_FI_DRIVER_VERSION", snap.driver_version.clone()));
    l
}

/// One field of a [`Table`], encoded by the library.
#[derive(Debug)]
struct FieldCollector {
    table: Arc<Table>,
    field: usize,
}

impl Collector for FieldCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let field = &FIELDS[self.field];
        let values = &self.table.values[self.field];
        // The library's registry ends every help text with a full stop.
        let help = format!("{}.", field.help.strip_suffix('.').unwrap_or(field.help));
        // A field with one float reading is all floats (as a float gauge).
        let floats = values.iter().any(|(_, v)| matches!(v, Value::Float(_)));
        let mut metric = encoder.encode_descriptor(field.name, &help, None, MetricType::Gauge)?;
        for &(row, v) in values {
            let r = &self.table.rows[row];
            let base = r.labels.as_slice();
            if r.jobs.is_empty() {
                gauge(metric.encode_family(&base)?, v, floats)?;
            }
            for job in &r.jobs {
                let set = (base, job.as_slice());
                gauge(metric.encode_family(&set)?, v, floats)?;
            }
        }
        Ok(())
    }
}

fn gauge(mut m: MetricEncoder<'_>, v: Value, floats: bool) -> std::fmt::Result {
    match v {
        Value::Float(f) => m.encode_gauge(&f),
        Value::Int(i) if floats => m.encode_gauge(&(i as f64)),
        Value::Int(i) => m.encode_gauge(&i),
    }
}

/// Appends the dcgm-compatible series of `snap` to `out` (Prometheus text
/// format 0.0.4).
///
/// prometheus-client appends `_total` to every counter's name (OpenMetrics
/// requires it), but dcgm-exporter names its counters without it
/// (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`), and queries written for it
/// use those names. So a counter field is encoded by the library as a
/// gauge (names, labels, escaping and values all the library's), and only
/// the word in its one `# TYPE` line is changed to `counter`, the type
/// dcgm-exporter declares. Every other line is the library's.
pub fn encode(snap: &Snapshot, out: &mut String) -> std::fmt::Result {
    let table = Arc::new(Table::new(snap));
    let mut text = String::with_capacity(64 * 1024);
    for (i, field) in FIELDS.iter().enumerate() {
        if table.values[i].is_empty() {
            continue;
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(FieldCollector {
            table: table.clone(),
            field: i,
        }));
        text.clear();
        prometheus_text::encode(&mut text, &registry)?;
        let gauge = format!("# TYPE {} gauge\n", field.name);
        match (field.kind, text.find(&gauge)) {
            (Kind::Counter, Some(at)) => {
                out.push_str(&text[..at]);
                out.push_str("# TYPE ");
                out.push_str(field.name);
                out.push_str(" counter\n");
                out.push_str(&text[at + gauge.len()..]);
            }
            _ => out.push_str(&text),
        }
    }
    Ok(())
}
