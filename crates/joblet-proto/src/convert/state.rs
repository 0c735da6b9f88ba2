//! Job states and a job's state history.

use joblet_core::record::TransitionRecord;
use joblet_core::{FieldError, JobState};

use crate::pb;

pub fn state_to_pb(s: JobState) -> pb::JobState {
    match s {
        JobState::Pending => pb::JobState::Pending,
        JobState::Queued => pb::JobState::Queued,
        JobState::Running => pb::JobState::Running,
        JobState::Completed => pb::JobState::Completed,
        JobState::Failed => pb::JobState::Failed,
        JobState::Stopped => pb::JobState::Stopped,
        JobState::Preempted => pb::JobState::Preempted,
    }
}

/// `None` for `JOB_STATE_UNSPECIFIED` or a number this build does not know.
pub fn state_from_pb(v: i32) -> Option<JobState> {
    Some(match pb::JobState::try_from(v).ok()? {
        pb::JobState::Unspecified => return None,
        pb::JobState::Pending => JobState::Pending,
        pb::JobState::Queued => JobState::Queued,
        pb::JobState::Running => JobState::Running,
        pb::JobState::Completed => JobState::Completed,
        pb::JobState::Failed => JobState::Failed,
        pb::JobState::Stopped => JobState::Stopped,
        pb::JobState::Preempted => JobState::Preempted,
    })
}

/// The state in wire field `field`, which must name one.
pub fn required_state_from_pb(field: &str, v: i32) -> Result<JobState, FieldError> {
    state_from_pb(v).ok_or_else(|| {
        FieldError::new(
            field,
            format!("unknown job state number {v}; expected 1 (PENDING) to 7 (PREEMPTED)"),
        )
    })
}

/// A `ListJobs` state filter (`ListJobsRequest.states`).
pub fn states_from_pb(states: &[i32]) -> Result<Vec<JobState>, FieldError> {
    states
        .iter()
        .map(|&s| required_state_from_pb("states", s))
        .collect()
}

/// The wire form of a state filter.
pub fn states_to_pb(states: &[JobState]) -> Vec<i32> {
    states.iter().map(|&s| state_to_pb(s) as i32).collect()
}

/// One row of a job's history (`from` = `JOB_STATE_UNSPECIFIED` for its
/// first state).
pub fn transition_to_pb(t: &TransitionRecord) -> pb::Transition {
    pb::Transition {
        from: t.from.map(|s| state_to_pb(s) as i32).unwrap_or(0),
        to: state_to_pb(t.to) as i32,
        at_unix_ms: t.at_ms,
        reason: t.reason.clone(),
    }
}

/// `field` names the transition in error messages (`transitions[2]`).
pub fn transition_from_pb(field: &str, t: pb::Transition) -> Result<TransitionRecord, FieldError> {
    let from = match t.from {
        0 => None,
        v => Some(required_state_from_pb(&format!("{field}.from"), v)?),
    };
    Ok(TransitionRecord {
        from,
        to: required_state_from_pb(&format!("{field}.to"), t.to)?,
        at_ms: t.at_unix_ms,
        reason: t.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for s in JobState::ALL {
            assert_eq!(state_from_pb(state_to_pb(s) as i32), Some(s));
        }
        assert_eq!(state_from_pb(0), None);
        assert_eq!(state_from_pb(99), None);
    }

    #[test]
    fn a_state_filter_names_the_unknown_number() {
        assert_eq!(
            states_from_pb(&states_to_pb(&JobState::ALL)).unwrap(),
            JobState::ALL
        );
        let e = states_from_pb(&[3, 99]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "states: unknown job state number 99; expected 1 (PENDING) to 7 (PREEMPTED)"
        );
        assert_eq!(states_from_pb(&[0]).unwrap_err().field, "states");
    }

    #[test]
    fn a_bad_transition_names_its_field() {
        let e = transition_from_pb(
            "transitions[1]",
            pb::Transition {
                from: 1,
                to: 42,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.field, "transitions[1].to");
        let e = transition_from_pb(
            "transitions[0]",
            pb::Transition {
                from: -1,
                to: 1,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.field, "transitions[0].from");
    }
}
