//! The GPU audit log: [`AuditRecord`] ↔ `pb::AuditRecord`.
//!
//! The wire sends 0 / `""` for what is not known or not over (`end_ms`,
//! `memory_mb_per_gpu`, `peak_memory_mb`, `ended`, `reason`), and the
//! record's duration beside it; coming back, those are `None` and the
//! duration is the record's own ([`AuditRecord::duration_ms`]).

use joblet_core::record::AuditRecord;

use super::{non_empty, nonzero};
use crate::pb;

pub fn audit_record_to_pb(r: &AuditRecord) -> pb::AuditRecord {
    pb::AuditRecord {
        job_id: r.job_id.clone(),
        owner: r.owner.clone(),
        gpu_uuids: r.gpu_uuids.clone(),
        gpu_indices: r.gpu_indices.clone(),
        memory_mb_per_gpu: r.memory_mb_per_gpu.unwrap_or(0),
        sharing: r.sharing.clone(),
        start_ms: r.start_ms,
        end_ms: r.end_ms.unwrap_or(0),
        duration_ms: r.duration_ms().unwrap_or(0),
        peak_memory_mb: r.peak_memory_mb.unwrap_or(0),
        ended: r.ended.clone().unwrap_or_default(),
        reason: r.reason.clone().unwrap_or_default(),
    }
}

pub fn audit_record_from_pb(r: pb::AuditRecord) -> AuditRecord {
    AuditRecord {
        job_id: r.job_id,
        owner: r.owner,
        gpu_uuids: r.gpu_uuids,
        gpu_indices: r.gpu_indices,
        memory_mb_per_gpu: nonzero(r.memory_mb_per_gpu),
        sharing: r.sharing,
        start_ms: r.start_ms,
        end_ms: nonzero(r.end_ms),
        peak_memory_mb: nonzero(r.peak_memory_mb),
        ended: non_empty(r.ended),
        reason: non_empty(r.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_record_has_zeroes_on_the_wire() {
        let open = AuditRecord {
            job_id: "j".into(),
            owner: "bob".into(),
            gpu_uuids: vec!["GPU-a".into()],
            gpu_indices: vec![3],
            memory_mb_per_gpu: None,
            sharing: "shared".into(),
            start_ms: 100,
            end_ms: None,
            peak_memory_mb: None,
            ended: None,
            reason: None,
        };
        let w = audit_record_to_pb(&open);
        assert_eq!(
            (
                w.end_ms,
                w.duration_ms,
                w.peak_memory_mb,
                w.memory_mb_per_gpu
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(audit_record_from_pb(w), open);
        let closed = AuditRecord {
            end_ms: Some(1_100),
            ended: Some("FAILED".into()),
            ..open
        };
        assert_eq!(audit_record_to_pb(&closed).duration_ms, 1_000);
    }
}
