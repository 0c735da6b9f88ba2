//! What `rnx audit` shows: the GPU audit log as a serde view (`--json`, one
//! object per record, field names as the node's `AuditRecord`, times as
//! RFC 3339 beside their `*_ms`) and as a table for people.

use std::io::{self, Write};
use std::time::Duration;

use joblet_core::parse::format_duration;
use joblet_core::record::AuditRecord;
use joblet_core::UnixMillis;
use joblet_proto::{audit_record_from_pb, pb};
use serde::Serialize;

use crate::view::{rfc3339, rfc3339_millis};

/// One GPU allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditView {
    pub job_id: String,
    pub owner: String,
    pub gpu_uuids: Vec<String>,
    pub gpu_indices: Vec<u32>,
    /// MB reserved per GPU; `null` = the whole GPU.
    pub memory_mb_per_gpu: Option<u64>,
    pub sharing: String,
    pub start: String,
    pub start_ms: UnixMillis,
    /// `null` while the job still holds its GPUs.
    pub end: Option<String>,
    pub end_ms: Option<UnixMillis>,
    pub duration_ms: Option<i64>,
    /// `null` = not known.
    pub peak_memory_mb: Option<u64>,
    /// The job's final state (`COMPLETED`, `FAILED`, ...); `null` while open.
    pub ended: Option<String>,
    pub reason: Option<String>,
}

impl From<&pb::AuditRecord> for AuditView {
    fn from(r: &pb::AuditRecord) -> Self {
        AuditView::from(audit_record_from_pb(r.clone()))
    }
}

impl From<AuditRecord> for AuditView {
    /// Times before the epoch read as "not over" (the wire's 0 = none).
    fn from(r: AuditRecord) -> Self {
        let end_ms = r.end_ms.filter(|&e| e > 0);
        AuditView {
            duration_ms: end_ms.and(r.duration_ms()),
            start: rfc3339_millis(r.start_ms),
            start_ms: r.start_ms,
            end: end_ms.map(rfc3339_millis),
            end_ms,
            job_id: r.job_id,
            owner: r.owner,
            gpu_uuids: r.gpu_uuids,
            gpu_indices: r.gpu_indices,
            memory_mb_per_gpu: r.memory_mb_per_gpu,
            sharing: r.sharing,
            peak_memory_mb: r.peak_memory_mb,
            ended: r.ended,
            reason: r.reason,
        }
    }
}

const HEAD: [&str; 8] = [
    "JOB", "OWNER", "GPUS", "START", "END", "DURATION", "PEAK MEM", "ENDED",
];

fn cells(r: &AuditView) -> [String; 8] {
    let dash = || "-".to_owned();
    [
        r.job_id.chars().take(8).collect(),
        r.owner.clone(),
        if r.gpu_indices.is_empty() {
            dash()
        } else {
            r.gpu_indices
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        },
        rfc3339(r.start_ms),
        r.end_ms.map_or_else(dash, rfc3339),
        r.duration_ms.map_or_else(dash, |ms| {
            format_duration(Duration::from_millis(ms.max(0) as u64))
        }),
        r.peak_memory_mb.map_or_else(dash, |mb| format!("{mb} MB")),
        r.ended.clone().unwrap_or_else(dash),
    ]
}

/// The human `rnx audit` table: one line per record, oldest first.
pub fn write_table(o: &mut dyn Write, records: &[AuditView]) -> io::Result<()> {
    let rows: Vec<[String; 8]> = records.iter().map(cells).collect();
    let mut width = HEAD.map(|h| h.chars().count());
    for row in &rows {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cells: [&str; 8]| -> io::Result<()> {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            if i + 1 < cells.len() {
                s.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        writeln!(o, "{}", s.trim_end())
    };
    line(HEAD)?;
    for r in &rows {
        line(std::array::from_fn(|i| r[i].as_str()))?;
    }
    Ok(())
}
