//! Reading Alibaba's openb GPU-sharing trace (Weng et al., ATC '23): the
//! pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
//! pod_phase,creation_time,deletion_time,scheduled_time`) and the node
//! list (`sn,cpu_milli,memory_mib,gpu,model`), by column name, into pods
//! and the scheduler's nodes and requests.
//!
//! Every error names the file, the line and the column at fault.

use std::path::Path;

use joblet_sched::model::{
    GpuSpec, JobRequest, NodeCapacity, NodeSpec, Sharing, WorkloadClass, GPU_MILLI_WHOLE,
};

use crate::error::SimError;

/// One pod of the pod list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    /// Line in its file (1 = the header).
    pub line: u64,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    /// GPUs (0 = CPU-only).
    pub num_gpu: u32,
    /// Per-GPU compute share in milli (1000 = whole GPUs).
    pub gpu_milli: u32,
    /// GPU models it may run on (empty = any).
    pub gpu_spec: Vec<String>,
    /// Seconds.
    pub creation_s: u64,
    pub deletion_s: u64,
}

impl Pod {
    /// GPU demand in milli (num_gpu × gpu_milli).
    pub fn gpu_demand_milli(&self) -> u64 {
        u64::from(self.num_gpu) * u64::from(self.gpu_milli)
    }

    /// The scheduler request for this pod under job key `job`: CPU-only;
    /// a fraction of one shared GPU; or whole exclusive GPUs on one node.
    /// Every pod is of class interactive (openb does not tell training
    /// from inference, so any may share a GPU with any).
    pub fn request(&self, job: String) -> JobRequest {
        let fraction = self.num_gpu == 1 && self.gpu_milli < GPU_MILLI_WHOLE;
        JobRequest {
            job,
            owner: String::new(),
            queue: String::new(),
            gpu_count: self.num_gpu,
            gpu_memory_mb: 0,
            sharing: if fraction {
                Sharing::Shared
            } else {
                Sharing::Exclusive
            },
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Interactive,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            cpu_millis: self.cpu_milli,
            host_memory_mb: self.memory_mib,
            gpu_milli: if fraction { self.gpu_milli } else { 0 },
            checkpoint_interval_ms: None,
        }
    }
}

/// One node of the node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenbNode {
    pub sn: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u32,
    pub model: String,
}

/// GPU memory given to every simulated openb GPU (the trace has none; no
/// pod asks for GPU memory, so it limits nothing).
pub const OPENB_GPU_MEMORY_MB: u64 = 32 * 1024;

/// The scheduler's nodes: node `i` is row `i`, its GPUs on one NUMA node
/// without NVLink, its CPU and memory tracked.
pub fn node_specs(nodes: &[OpenbNode]) -> Vec<NodeSpec> {
    nodes
        .iter()
        .enumerate()
        .map(|(id, n)| NodeSpec {
            id: id as u32,
            gpus: (0..n.gpus)
                .map(|index| GpuSpec {
                    index,
                    uuid: format!("{}-gpu{index}", n.sn),
                    memory_mb: OPENB_GPU_MEMORY_MB,
                    numa: 0,
                    socket: 0,
                    nvlink_group: None,
                    compute_capability: (8, 0),
                    mig: Vec::new(),
                })
                .collect(),
            capacity: NodeCapacity {
                cpu_millis: Some(n.cpu_milli),
                memory_mb: Some(n.memory_mib),
                max_jobs: None,
            },
        })
        .collect()
}

/// A CSV file read by column name.
struct Table {
    file: String,
    header: Vec<String>,
    rows: Vec<(u64, csv::StringRecord)>,
}

impl Table {
    fn read(path: &Path) -> Result<Table, SimError> {
        let file = path.display().to_string();
        let mut r = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_path(path)
            .map_err(|e| match e.into_kind() {
                csv::ErrorKind::Io(source) => SimError::Io {
                    path: path.to_path_buf(),
                    source,
                },
                other => SimError::Csv {
                    file: file.clone(),
                    line: 1,
                    message: format!("{other:?}"),
                },
            })?;
        let header: Vec<String> = r
            .headers()
            .map_err(|e| SimError::Csv {
                file: file.clone(),
                line: 1,
                message: e.to_string(),
            })?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for rec in r.records() {
            let rec = rec.map_err(|e| SimError::Csv {
                file: file.clone(),
                line: e.position().map_or(0, |p| p.line()),
                message: e.to_string(),
            })?;
            let line = rec.position().map_or(0, |p| p.line());
            rows.push((line, rec));
        }
        Ok(Table { file, header, rows })
    }

    fn column(
        &self,
        name: &'static str,
        looked_for: &'static [&'static str],
    ) -> Result<usize, SimError> {
        self.header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| SimError::MissingColumn {
                file: self.file.clone(),
                what: name,
                looked_for,
                found: self.header.clone(),
            })
    }

    fn field<'r>(
        &self,
        line: u64,
        rec: &'r csv::StringRecord,
        col: usize,
    ) -> Result<&'r str, SimError> {
        rec.get(col).ok_or_else(|| SimError::ShortRow {
            file: self.file.clone(),
            line,
            fields: rec.len(),
            column: self.header[col].clone(),
            needed: col + 1,
        })
    }

    fn number<T: std::str::FromStr>(
        &self,
        line: u64,
        rec: &csv::StringRecord,
        col: usize,
        expected: &'static str,
    ) -> Result<T, SimError> {
        let v = self.field(line, rec, col)?;
        v.parse().map_err(|_| self.bad(line, col, v, expected))
    }

    fn bad(&self, line: u64, col: usize, value: &str, expected: &'static str) -> SimError {
        SimError::BadField {
            file: self.file.clone(),
            line,
            column: self.header[col].clone(),
            value: value.to_string(),
            expected,
        }
    }
}

const POD_COLUMNS: &[&str] = &[
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "creation_time",
    "deletion_time",
];
const NODE_COLUMNS: &[&str] = &["sn", "cpu_milli", "memory_mib", "gpu", "model"];

/// Reads the pod list. `gpu_milli` must be 1..=1000 for a pod with GPUs
/// (a pod of more than one GPU: 1000) and is ignored for CPU-only pods;
/// `gpu_spec` is a `|`-separated list of models, empty or `nan` = any.
pub fn read_pods(path: &Path) -> Result<Vec<Pod>, SimError> {
    let t = Table::read(path)?;
    let col = |name| t.column(name, POD_COLUMNS);
    let (name, cpu, mem, ngpu, milli, spec, created, deleted) = (
        col("name")?,
        col("cpu_milli")?,
        col("memory_mib")?,
        col("num_gpu")?,
        col("gpu_milli")?,
        col("gpu_spec")?,
        col("creation_time")?,
        col("deletion_time")?,
    );
    let mut pods = Vec::with_capacity(t.rows.len());
    for (line, rec) in &t.rows {
        let line = *line;
        let num_gpu: u32 = t.number(line, rec, ngpu, "a GPU count (0..=64)")?;
        if num_gpu > 64 {
            return Err(t.bad(line, ngpu, &num_gpu.to_string(), "a GPU count (0..=64)"));
        }
        let mut gpu_milli: u32 = t.number(line, rec, milli, "a GPU share in milli (0..=1000)")?;
        if num_gpu == 0 {
            gpu_milli = 0;
        } else if gpu_milli == 0 || gpu_milli > 1000 || (num_gpu > 1 && gpu_milli != 1000) {
            return Err(t.bad(
                line,
                milli,
                &gpu_milli.to_string(),
                "1..=1000 for a pod of one GPU, 1000 for a pod of more",
            ));
        }
        let spec_v = t.field(line, rec, spec)?;
        let gpu_spec = if spec_v.is_empty() || spec_v.eq_ignore_ascii_case("nan") {
            Vec::new()
        } else {
            spec_v.split('|').map(|m| m.trim().to_string()).collect()
        };
        pods.push(Pod {
            name: t.field(line, rec, name)?.to_string(),
            line,
            cpu_milli: t.number(line, rec, cpu, "CPU in millicores")?,
            memory_mib: t.number(line, rec, mem, "memory in MiB")?,
            num_gpu,
            gpu_milli,
            gpu_spec,
            creation_s: t.number(line, rec, created, "a time in seconds")?,
            deletion_s: t.number(line, rec, deleted, "a time in seconds")?,
        });
    }
    if pods.is_empty() {
        return Err(SimError::EmptyTrace { file: t.file });
    }
    Ok(pods)
}

/// Reads the node list.
pub fn read_nodes(path: &Path) -> Result<Vec<OpenbNode>, SimError> {
    let t = Table::read(path)?;
    let col = |name| t.column(name, NODE_COLUMNS);
    let (sn, cpu, mem, gpu, model) = (
        col("sn")?,
        col("cpu_milli")?,
        col("memory_mib")?,
        col("gpu")?,
        col("model")?,
    );
    let mut nodes = Vec::with_capacity(t.rows.len());
    for (line, rec) in &t.rows {
        let line = *line;
        let gpus: u32 = t.number(line, rec, gpu, "a GPU count (0..=64)")?;
        if gpus > 64 {
            return Err(t.bad(line, gpu, &gpus.to_string(), "a GPU count (0..=64)"));
        }
        nodes.push(OpenbNode {
            sn: t.field(line, rec, sn)?.to_string(),
            cpu_milli: t.number(line, rec, cpu, "CPU in millicores")?,
            memory_mib: t.number(line, rec, mem, "memory in MiB")?,
            gpus,
            model: t.field(line, rec, model)?.to_string(),
        });
    }
    if nodes.is_empty() {
        return Err(SimError::EmptyTrace { file: t.file });
    }
    Ok(nodes)
}

/// Pods constrained to GPU models: the scheduler has no GPU model to
/// match, so a trace with any is refused rather than run unconstrained.
pub fn check_no_gpu_spec(pods: &[Pod], file: &Path) -> Result<(), SimError> {
    match pods.iter().find(|p| !p.gpu_spec.is_empty()) {
        Some(p) => Err(SimError::GpuSpecUnsupported {
            file: file.display().to_string(),
            line: p.line,
            value: p.gpu_spec.join("|"),
        }),
        None => Ok(()),
    }
}
