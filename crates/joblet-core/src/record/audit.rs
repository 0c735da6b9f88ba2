//! The GPU audit log's record: one per GPU allocation.

use serde::{Deserialize, Serialize};

use crate::UnixMillis;

/// One GPU allocation: who, which job, which GPUs, how much memory, when
/// it started and ended, the peak GPU memory seen, how the job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub job_id: String,
    pub owner: String,
    pub gpu_uuids: Vec<String>,
    /// Host GPU indices, in the order of `gpu_uuids`.
    pub gpu_indices: Vec<u32>,
    /// Memory reserved per GPU in MiB; `None` = the whole GPU.
    pub memory_mb_per_gpu: Option<u64>,
    /// `exclusive`, `shared`, `mps` or `mig`.
    pub sharing: String,
    pub start_ms: UnixMillis,
    /// `None` while the job holds its GPUs.
    pub end_ms: Option<UnixMillis>,
    /// Highest GPU memory the job was seen using, in MiB (all its GPUs).
    pub peak_memory_mb: Option<u64>,
    /// The job's final state name (`COMPLETED`, `FAILED`, ...); `None` while open.
    pub ended: Option<String>,
    /// Why it ended, when there is something to say.
    pub reason: Option<String>,
}

impl AuditRecord {
    /// How long the job held its GPUs; `None` while it still does. Never
    /// negative (a clock that stepped back counts as 0).
    pub fn duration_ms(&self) -> Option<i64> {
        self.end_ms
            .map(|end| end.saturating_sub(self.start_ms).max(0))
    }
}
