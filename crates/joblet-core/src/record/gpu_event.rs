//! One line of a GPU's health history.

use crate::gpu::GpuState;
use crate::UnixMillis;

/// One line of a GPU's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuEventRecord {
    pub uuid: String,
    pub index: u32,
    pub at_ms: UnixMillis,
    /// `transition`, `paused`, `resumed`, `noted` or `end_jobs`.
    pub kind: String,
    pub from: Option<GpuState>,
    pub to: Option<GpuState>,
    pub message: String,
}
