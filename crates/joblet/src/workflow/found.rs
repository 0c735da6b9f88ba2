//! What the store records of a run's jobs, in the decision core's terms:
//! the latest attempt of each job ([`found`]), and a job's end
//! ([`end_state`]).

use std::collections::HashMap;

use joblet_core::record::JobRecord;
use joblet_core::JobState;
use joblet_workflow::{EndState, Found, FoundState};

/// The end state of a job that ended; `None` while it has not.
pub fn end_state(state: JobState) -> Option<EndState> {
    match state {
        JobState::Completed => Some(EndState::Completed),
        JobState::Failed => Some(EndState::Failed),
        JobState::Stopped => Some(EndState::Stopped),
        JobState::Pending | JobState::Queued | JobState::Running | JobState::Preempted => None,
    }
}

/// The latest attempt of each job among `jobs` (the run's records, any
/// order), as [`joblet_workflow::Event::Restored`] takes them.
pub fn found(jobs: &[JobRecord]) -> Vec<Found> {
    let mut latest: HashMap<&str, &JobRecord> = HashMap::new();
    for rec in jobs {
        let Some(wf) = &rec.spec.workflow else {
            continue;
        };
        let newer = latest.get(wf.job.as_str()).is_none_or(|seen| {
            let seen_attempt = seen.spec.workflow.as_ref().map_or(0, |w| w.attempt);
            (wf.attempt, rec.seq) > (seen_attempt, seen.seq)
        });
        if newer {
            latest.insert(&wf.job, rec);
        }
    }
    let mut out: Vec<Found> = latest
        .into_values()
        .filter_map(|rec| {
            let wf = rec.spec.workflow.as_ref()?;
            let state = match end_state(rec.state) {
                Some(state) => FoundState::Ended {
                    state,
                    at: rec.ended_ms.unwrap_or(rec.created_ms),
                },
                None if rec.state == JobState::Running => FoundState::Running,
                None => FoundState::Queued,
            };
            Some(Found {
                job: wf.job.clone(),
                attempt: wf.attempt,
                job_id: rec.id.clone(),
                state,
            })
        })
        .collect();
    out.sort_by(|a, b| a.job.cmp(&b.job));
    out
}

#[cfg(test)]
mod tests {
    use joblet_core::{JobId, JobRequest, WorkflowJobRef};

    use super::*;

    fn rec(n: u8, job: &str, attempt: u32, state: JobState) -> JobRecord {
        let (mut spec, _) = JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap();
        spec.workflow = Some(WorkflowJobRef {
            id: "w".into(),
            job: job.into(),
            attempt,
            shared: None,
        });
        JobRecord {
            id: JobId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02}")).unwrap(),
            seq: i64::from(n),
            owner: "u".into(),
            spec,
            state,
            reason: String::new(),
            exit_code: None,
            created_ms: 10,
            started_ms: None,
            ended_ms: end_state(state).map(|_| 20 + i64::from(n)),
            shim_pid: None,
        }
    }

    #[test]
    fn the_latest_attempt_of_each_job_is_found() {
        let jobs = [
            rec(1, "a", 1, JobState::Failed),
            rec(3, "a", 2, JobState::Running),
            rec(2, "b", 1, JobState::Completed),
            rec(4, "c", 1, JobState::Queued),
        ];
        let f = found(&jobs);
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].job.as_str(), f[0].attempt), ("a", 2));
        assert_eq!(f[0].state, FoundState::Running);
        assert_eq!(
            f[1].state,
            FoundState::Ended {
                state: EndState::Completed,
                at: 22
            }
        );
        assert_eq!(f[2].state, FoundState::Queued);
    }
}
