//! The simulator's errors: each names the file, line, column, spec or
//! policy at fault and what would have been accepted.

use std::path::PathBuf;

/// Why a simulation could not run (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot read trace {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}: not a readable CSV row: {message}")]
    Csv {
        file: String,
        line: u64,
        message: String,
    },
    #[error("{file}: the header has no {what} column; looked for one of {}; the header has {}", looked_for.join(", "), found.join(", "))]
    MissingColumn {
        file: String,
        what: &'static str,
        looked_for: &'static [&'static str],
        found: Vec<String>,
    },
    #[error("{file}:{line}: column `{column}`: `{value}` is not {expected}")]
    BadField {
        file: String,
        line: u64,
        column: String,
        value: String,
        expected: &'static str,
    },
    #[error("{file}:{line}: the row has {fields} fields but column `{column}` is field {needed}")]
    ShortRow {
        file: String,
        line: u64,
        fields: usize,
        column: String,
        needed: usize,
    },
    #[error("{file}: filter `{filter}` needs an owner/queue column (one of user, cluster, vc, queue); the header has {}", found.join(", "))]
    NoOwnerColumn {
        file: String,
        filter: String,
        found: Vec<String>,
    },
    #[error("{file}: no job has owner/queue `{filter}`; the trace has {}", known.join(", "))]
    FilterMatchesNothing {
        file: String,
        filter: String,
        /// The trace's owner/queue values, most jobs first (at most 20).
        known: Vec<String>,
    },
    #[error("{file}: the trace has no jobs")]
    EmptyTrace { file: String },
    #[error("cluster spec `{spec}`: {reason}; expected NODESxGPUS, e.g. 64x8")]
    BadCluster { spec: String, reason: String },
    #[error("unknown policy `{name}`; accepted: fifo, backfill, las, gittins, default")]
    BadPolicy { name: String },
    #[error("policy `{name}` is listed twice")]
    DuplicatePolicy { name: String },
    #[error("no policy to simulate; accepted: fifo, backfill, las, gittins, default")]
    NoPolicies,
    #[error(
        "duration `{value}`: {reason}; expected a number with a unit, e.g. 30m, 90s, 2h or 500ms"
    )]
    BadDuration { value: String, reason: &'static str },
    #[error("--gpu-memory-gb must be at least 1")]
    BadGpuMemory,
    #[error("policy {policy}: the scheduler broke an invariant at t={at_ms} ms: {detail}")]
    SchedulerBroke {
        policy: &'static str,
        at_ms: u64,
        detail: String,
    },
    #[error("unknown strategy `{name}`; accepted: fgd, best-fit, pack, spread, topology")]
    BadStrategy { name: String },
    #[error("strategy `{name}` is listed twice")]
    DuplicateStrategy { name: String },
    #[error("no strategy to simulate; accepted: fgd, best-fit, pack, spread, topology")]
    NoStrategies,
    #[error("{file}:{line}: column `gpu_spec`: `{value}` constrains the GPU model, which the scheduler does not model; use a pod list without gpu_spec (e.g. openb_pod_list_default.csv)")]
    GpuSpecUnsupported {
        file: String,
        line: u64,
        value: String,
    },
    #[error(
        "nothing to inflate: the cluster has no GPUs, the pod list no pods, or the step is 0%"
    )]
    NothingToInflate,
    #[error("cannot draw plot {}: {message}", path.display())]
    Draw { path: PathBuf, message: String },
    #[error("cannot write plot {}: {source}", path.display())]
    Plot {
        path: PathBuf,
        source: std::io::Error,
    },
}
