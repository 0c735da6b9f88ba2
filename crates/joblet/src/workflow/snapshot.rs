//! A run's [`Snapshot`] as the store keeps it: the run's part (state,
//! stopping, outcome) as one JSON text, and each job's phase as a JSON text
//! of its own, so a step rewrites only the jobs it changed.

use joblet_workflow::{JobPhase, JobRecord, Snapshot, WorkflowCore};

/// Why a stored snapshot does not read back.
#[derive(Debug, thiserror::Error)]
#[error("its stored snapshot does not read: {0}")]
pub struct SnapshotError(#[from] serde_json::Error);

/// The run's part of `core`'s snapshot, as stored.
pub fn head(core: &WorkflowCore) -> Result<String, SnapshotError> {
    Ok(serde_json::to_string(&Snapshot {
        state: core.state(),
        stopping: core.is_stopping(),
        outcome: core.outcome().cloned(),
        jobs: Vec::new(),
    })?)
}

/// One job's phase, as stored.
pub fn phase(phase: &JobPhase) -> Result<String, SnapshotError> {
    Ok(serde_json::to_string(phase)?)
}

/// Every job's phase of `core`, in file order, as stored.
pub fn phases(core: &WorkflowCore) -> Result<Vec<(String, String)>, SnapshotError> {
    core.jobs()
        .map(|(job, p)| Ok((job.to_owned(), phase(p)?)))
        .collect()
}

/// The snapshot from its stored parts.
pub fn join(head: &str, phases: &[(String, String)]) -> Result<Snapshot, SnapshotError> {
    let mut snapshot: Snapshot = serde_json::from_str(head)?;
    snapshot.jobs = phases
        .iter()
        .map(|(job, p)| {
            Ok(JobRecord {
                job: job.clone(),
                phase: serde_json::from_str(p)?,
            })
        })
        .collect::<Result<_, SnapshotError>>()?;
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use joblet_workflow::{Event, Limits, Workflow};

    use super::*;

    #[test]
    fn a_snapshot_split_for_the_store_joins_back_whole() {
        let wf = Workflow::parse(
            "jobs:\n  a: {command: x}\n  b: {command: x, requires: [{a: COMPLETED}]}\n",
            "wf.yaml",
            &Limits {
                max_gpus_per_node: None,
            },
        )
        .unwrap();
        let mut core = WorkflowCore::new(&wf);
        let _ = core.handle(Event::Started, 10);
        let joined = join(&head(&core).unwrap(), &phases(&core).unwrap()).unwrap();
        assert_eq!(joined, core.snapshot());
        let again = WorkflowCore::restore(&wf, joined).unwrap();
        assert_eq!(again, core);
    }
}
