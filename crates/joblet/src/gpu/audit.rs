//! The GPU audit log as JSON lines: one line per finished allocation
//! (`<state_dir>/gpu-audit.jsonl`), appended when the store closes the
//! record, for log shippers. The store's table is the queryable copy
//! (`rnx audit`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use joblet_store::AuditRecord;

/// File name under the state directory.
pub const FILE: &str = "gpu-audit.jsonl";

/// Appends one record as a single line (one `write` of the whole line, so
/// lines never interleave).
pub fn append(path: &Path, rec: &AuditRecord) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_is_one_parseable_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let rec = AuditRecord {
            job_id: "j1".into(),
            owner: "alice".into(),
            gpu_uuids: vec!["GPU-a".into()],
            gpu_indices: vec![0],
            memory_mb_per_gpu: Some(1024),
            sharing: "exclusive".into(),
            start_ms: 1,
            end_ms: Some(5),
            peak_memory_mb: Some(12),
            ended: Some("COMPLETED".into()),
            reason: None,
        };
        append(&path, &rec).unwrap();
        append(
            &path,
            &AuditRecord {
                job_id: "j2".into(),
                ..rec.clone()
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<AuditRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], rec);
        assert_eq!(lines[1].job_id, "j2");
    }
}
