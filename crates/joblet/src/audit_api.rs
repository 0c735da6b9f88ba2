//! The GPU audit log and a job's GPUs on the wire: translating the store's
//! [`AuditRecord`]s into `ListAudit` answers and into the `gpus` field of a
//! job. The records themselves are written by the engine.

use joblet_core::{FieldError, JobState};
use joblet_proto::{pb, ApiError};
use joblet_store::{AuditRecord, JobRecord, Store};

use crate::store_error;

/// One audit record on the wire (0 / "" for what is not known or not over).
pub fn record_to_pb(r: &AuditRecord) -> pb::AuditRecord {
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

/// The GPUs a job holds, or held once it has ended. `None` for a CPU job
/// and for a GPU job waiting for GPUs (also one queued again after a
/// preemption, whose last record is closed).
pub fn job_gpus(store: &Store, job: &JobRecord) -> Result<Option<pb::JobGpus>, ApiError> {
    if job.spec.resources.gpu_count == 0 {
        return Ok(None);
    }
    let Some(r) = store.job_gpus(job.id.as_str()).map_err(store_error)? else {
        return Ok(None);
    };
    let waiting = matches!(job.state, JobState::Pending | JobState::Queued);
    if r.end_ms.is_some() && waiting {
        return Ok(None);
    }
    Ok(Some(pb::JobGpus {
        indices: r.gpu_indices,
        uuids: r.gpu_uuids,
        memory_mb_per_gpu: r.memory_mb_per_gpu.unwrap_or(0),
        sharing: r.sharing,
        peak_memory_mb: r.peak_memory_mb.unwrap_or(0),
    }))
}

/// `ListAudit` after the caller's role was checked.
pub fn list(store: &Store, req: &pb::ListAuditRequest) -> Result<pb::ListAuditResponse, ApiError> {
    if req.since_ms < 0 {
        return Err(FieldError::new(
            "since_ms",
            format!(
                "invalid value {}: expected 0 (all records) or a time in Unix milliseconds",
                req.since_ms
            ),
        )
        .into());
    }
    let since = (req.since_ms > 0).then_some(req.since_ms);
    let owner = Some(req.owner.trim()).filter(|o| !o.is_empty());
    let records = store.audit_query(since, owner).map_err(store_error)?;
    Ok(pb::ListAuditResponse {
        records: records.iter().map(record_to_pb).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use joblet_core::{JobId, JobRequest};
    use joblet_store::TransitionExtra;

    use super::*;

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), &dir.path().join("key")).unwrap();
        (dir, store)
    }

    fn rec(job: &str, owner: &str, start_ms: i64) -> AuditRecord {
        AuditRecord {
            job_id: job.into(),
            owner: owner.into(),
            gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
            gpu_indices: vec![0, 1],
            memory_mb_per_gpu: Some(8192),
            sharing: "exclusive".into(),
            start_ms,
            end_ms: None,
            peak_memory_mb: None,
            ended: None,
            reason: None,
        }
    }

    fn job(store: &Store, n: u32, gpus: i64) -> JobRecord {
        let id = JobId::parse(&format!("{n:08x}-0000-4000-8000-000000000000")).unwrap();
        let spec = JobRequest {
            command: "python".into(),
            gpu_count: gpus,
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0;
        store
            .create_job(&id, "alice", &spec, &BTreeMap::new(), 1)
            .unwrap()
    }

    fn to(store: &Store, j: &JobRecord, s: JobState) -> JobRecord {
        store
            .transition(&j.id, s, 2, TransitionExtra::default())
            .unwrap()
    }

    #[test]
    fn gpus_of_cpu_waiting_running_and_ended_jobs() {
        let (_d, store) = open();
        let cpu = job(&store, 1, 0);
        assert_eq!(job_gpus(&store, &cpu).unwrap(), None);

        let gpu = job(&store, 2, 2);
        let gpu = to(&store, &gpu, JobState::Queued);
        assert_eq!(job_gpus(&store, &gpu).unwrap(), None, "not placed yet");
        store
            .audit_open(&rec(gpu.id.as_str(), "alice", 10))
            .unwrap();
        store.audit_peak(gpu.id.as_str(), 4000).unwrap();
        let gpu = to(&store, &gpu, JobState::Running);
        let want = pb::JobGpus {
            indices: vec![0, 1],
            uuids: vec!["GPU-a".into(), "GPU-b".into()],
            memory_mb_per_gpu: 8192,
            sharing: "exclusive".into(),
            peak_memory_mb: 4000,
        };
        assert_eq!(job_gpus(&store, &gpu).unwrap(), Some(want.clone()));

        // Preempted and queued again: waiting, the old GPUs are not shown.
        store
            .audit_close(gpu.id.as_str(), 20, "PREEMPTED", "")
            .unwrap();
        let gpu = to(&store, &gpu, JobState::Preempted);
        assert_eq!(job_gpus(&store, &gpu).unwrap(), Some(want.clone()));
        let gpu = to(&store, &gpu, JobState::Queued);
        assert_eq!(job_gpus(&store, &gpu).unwrap(), None);
        let gpu = to(&store, &gpu, JobState::Stopped);
        assert_eq!(job_gpus(&store, &gpu).unwrap(), Some(want));
    }

    #[test]
    fn list_filters_and_translates() {
        let (_d, store) = open();
        store.audit_open(&rec("a", "alice", 100)).unwrap();
        store.audit_open(&rec("b", "bob", 200)).unwrap();
        store
            .audit_close("a", 1_100, "FAILED", "GPU memory quota exceeded")
            .unwrap();
        let all = list(&store, &pb::ListAuditRequest::default()).unwrap();
        assert_eq!(all.records.len(), 2);
        let a = &all.records[0];
        assert_eq!(
            (a.job_id.as_str(), a.end_ms, a.duration_ms, a.ended.as_str()),
            ("a", 1_100, 1_000, "FAILED")
        );
        assert_eq!(a.reason, "GPU memory quota exceeded");
        let b = &all.records[1];
        assert_eq!((b.end_ms, b.duration_ms, b.peak_memory_mb), (0, 0, 0));

        let bob = list(
            &store,
            &pb::ListAuditRequest {
                since_ms: 0,
                owner: " bob ".into(),
            },
        )
        .unwrap();
        assert_eq!(bob.records.len(), 1);
        let recent = list(
            &store,
            &pb::ListAuditRequest {
                since_ms: 2_000,
                owner: String::new(),
            },
        )
        .unwrap();
        assert_eq!(recent.records[0].job_id, "b", "only the open one");
        assert_eq!(recent.records.len(), 1);

        let e = list(
            &store,
            &pb::ListAuditRequest {
                since_ms: -1,
                owner: String::new(),
            },
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("since_ms: invalid value -1"),
            "{e}"
        );
    }
}
