//! The core, event by event: what each event does to a run and which
//! actions it asks for.

use joblet_core::JobId;
use joblet_workflow::{
    Action, CancelReason, EndState, Event, Found, FoundState, JobPhase, Limits, Outcome,
    RestoreError, Snapshot, Workflow, WorkflowCore, WorkflowState,
};

const SEED: &str = include_str!("fixtures/ml-training-pipeline.yaml");

fn workflow(text: &str) -> Workflow {
    Workflow::parse(
        text,
        "wf.yaml",
        &Limits {
            max_gpus_per_node: None,
        },
    )
    .unwrap()
}

fn id(n: u64) -> JobId {
    JobId::parse(&format!("00000000-0000-0000-0000-{n:012x}")).unwrap()
}

fn submit(job: &str, attempt: u32) -> Action {
    Action::Submit {
        job: job.into(),
        attempt,
    }
}

fn submitted(job: &str, attempt: u32, n: u64) -> Event {
    Event::JobSubmitted {
        job: job.into(),
        attempt,
        job_id: id(n),
    }
}

fn ended(job: &str, attempt: u32, n: u64, state: EndState, at: i64) -> Event {
    Event::JobEnded {
        job: job.into(),
        attempt,
        job_id: id(n),
        state,
        at,
    }
}

/// Submits `job` as `n` and ends it `state` at `at`.
fn run(core: &mut WorkflowCore, job: &str, n: u64, state: EndState, at: i64) -> Vec<Action> {
    let attempt = match core.job(job) {
        Some(JobPhase::Submitting { attempt }) => *attempt,
        other => panic!("{job} is {other:?}, not SUBMITTING"),
    };
    assert_eq!(core.handle(submitted(job, attempt, n), at), vec![]);
    core.handle(ended(job, attempt, n, state, at), at)
}

#[test]
fn started_submits_every_job_without_requirements_together() {
    let wf = workflow(
        "jobs:\n  a: {command: x}\n  b: {command: x, requires: [{a: COMPLETED}]}\n  c: {command: x}\n",
    );
    let mut core = WorkflowCore::new(&wf);
    assert_eq!(core.state(), WorkflowState::Pending);
    assert_eq!(
        core.handle(Event::Started, 0),
        vec![submit("a", 1), submit("c", 1)]
    );
    assert_eq!(core.state(), WorkflowState::Running);
    assert_eq!(core.job("b"), Some(&JobPhase::Waiting));
    // A second start changes nothing.
    assert_eq!(core.handle(Event::Started, 1), vec![]);
}

#[test]
fn seed_001_runs_job_after_job_to_completed() {
    let mut core = WorkflowCore::new(&workflow(SEED));
    assert_eq!(
        core.handle(Event::Started, 0),
        vec![submit("data-preprocessing", 1)]
    );
    assert_eq!(
        run(&mut core, "data-preprocessing", 1, EndState::Completed, 10),
        vec![submit("model-training", 1)]
    );
    assert_eq!(
        run(&mut core, "model-training", 2, EndState::Completed, 20),
        vec![submit("model-evaluation", 1)]
    );
    let last = run(&mut core, "model-evaluation", 3, EndState::Completed, 30);
    let outcome = Outcome::Completed {
        completed: 3,
        canceled: 0,
        handled: 0,
    };
    assert_eq!(
        last,
        vec![Action::Finished {
            state: WorkflowState::Completed,
            outcome: outcome.clone()
        }]
    );
    assert_eq!(core.outcome(), Some(&outcome));
    assert_eq!(outcome.to_string(), "every job finished: 3 COMPLETED");
}

#[test]
fn job_submitted_and_running_record_the_attempt_once() {
    let mut core = WorkflowCore::new(&workflow(SEED));
    let _ = core.handle(Event::Started, 0);
    assert_eq!(
        core.handle(submitted("data-preprocessing", 1, 7), 1),
        vec![]
    );
    assert_eq!(
        core.job("data-preprocessing"),
        Some(&JobPhase::Submitted {
            attempt: 1,
            job_id: id(7)
        })
    );
    // A repeat, another attempt, an unknown job: nothing changes.
    let before = core.clone();
    assert_eq!(
        core.handle(submitted("data-preprocessing", 1, 8), 2),
        vec![]
    );
    assert_eq!(
        core.handle(submitted("data-preprocessing", 2, 8), 2),
        vec![]
    );
    assert_eq!(core.handle(submitted("nope", 1, 8), 2), vec![]);
    assert_eq!(core, before);
    let running = Event::JobRunning {
        job: "data-preprocessing".into(),
        attempt: 1,
        job_id: id(7),
    };
    assert_eq!(core.handle(running, 3), vec![]);
    assert_eq!(core.job("data-preprocessing").unwrap().name(), "RUNNING");
    // An end reported for another job id is not this attempt's.
    assert_eq!(
        core.handle(ended("data-preprocessing", 1, 8, EndState::Completed, 4), 4),
        vec![]
    );
    assert_eq!(core.job("data-preprocessing").unwrap().name(), "RUNNING");
}

#[test]
fn a_failure_cancels_the_dependents_transitively_with_the_reason() {
    let mut core = WorkflowCore::new(&workflow(SEED));
    let _ = core.handle(Event::Started, 0);
    let actions = run(&mut core, "data-preprocessing", 1, EndState::Failed, 10);
    let direct = CancelReason::Unmet {
        requires: "data-preprocessing".into(),
        need: joblet_workflow::Need::Completed,
        ended: EndState::Failed,
    };
    let transitive = CancelReason::Upstream {
        requires: "model-training".into(),
        need: joblet_workflow::Need::Completed,
        origin: "data-preprocessing".into(),
        ended: EndState::Failed,
    };
    assert_eq!(
        direct.to_string(),
        "data-preprocessing ended FAILED, needed COMPLETED"
    );
    assert_eq!(
        transitive.to_string(),
        "model-training was canceled, needed COMPLETED (because data-preprocessing ended FAILED)"
    );
    let outcome = Outcome::Failed {
        job: "data-preprocessing".into(),
        state: EndState::Failed,
        unhandled: 1,
    };
    assert_eq!(
        actions,
        vec![
            Action::Cancel {
                job: "model-training".into(),
                reason: direct
            },
            Action::Cancel {
                job: "model-evaluation".into(),
                reason: transitive
            },
            Action::Finished {
                state: WorkflowState::Failed,
                outcome: outcome.clone()
            },
        ]
    );
    assert_eq!(
        outcome.to_string(),
        "data-preprocessing ended FAILED and no job that accepts FAILED ran"
    );
}

const BRANCHES: &str = "\
jobs:
  train: {command: x}
  publish:
    command: x
    requires: [{train: COMPLETED}]
  alert:
    command: x
    requires: [{train: FAILED}]
  cleanup:
    command: x
    requires: [{publish: ANY}, {alert: ANY}]
";

#[test]
fn a_failure_a_job_accepts_and_runs_leaves_the_workflow_completed() {
    let mut core = WorkflowCore::new(&workflow(BRANCHES));
    let _ = core.handle(Event::Started, 0);
    let a = run(&mut core, "train", 1, EndState::Failed, 1);
    assert_eq!(a.len(), 2);
    assert!(matches!(&a[0], Action::Cancel { job, .. } if job == "publish"));
    assert_eq!(a[1], submit("alert", 1));
    // publish is CANCELED, which ANY accepts: cleanup waits for alert only.
    assert_eq!(core.job("cleanup"), Some(&JobPhase::Waiting));
    assert_eq!(
        run(&mut core, "alert", 2, EndState::Completed, 2),
        vec![submit("cleanup", 1)]
    );
    let last = run(&mut core, "cleanup", 3, EndState::Completed, 3);
    let outcome = Outcome::Completed {
        completed: 2,
        canceled: 1,
        handled: 1,
    };
    assert_eq!(
        last,
        vec![Action::Finished {
            state: WorkflowState::Completed,
            outcome: outcome.clone()
        }]
    );
    assert_eq!(
        outcome.to_string(),
        "every job finished: 2 COMPLETED, 1 FAILED or STOPPED and handled by a job that required it, 1 CANCELED as their requirements could not hold"
    );
}

#[test]
fn an_accepting_job_that_never_ran_does_not_handle_a_failure() {
    // alert needs train FAILED and gate COMPLETED; gate fails too.
    let wf = workflow(
        "jobs:\n  train: {command: x}\n  gate: {command: x}\n  alert:\n    command: x\n    requires: [{train: FAILED}, {gate: COMPLETED}]\n",
    );
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    assert_eq!(run(&mut core, "train", 1, EndState::Failed, 1), vec![]);
    let last = run(&mut core, "gate", 2, EndState::Failed, 2);
    assert_eq!(
        last.last(),
        Some(&Action::Finished {
            state: WorkflowState::Failed,
            outcome: Outcome::Failed {
                job: "train".into(),
                state: EndState::Failed,
                unhandled: 2
            }
        })
    );
}

#[test]
fn a_stopped_job_nothing_accepts_fails_the_workflow() {
    let mut core = WorkflowCore::new(&workflow("jobs:\n  a: {command: x}\n"));
    let _ = core.handle(Event::Started, 0);
    let last = run(&mut core, "a", 1, EndState::Stopped, 1);
    assert!(matches!(
        &last[..],
        [Action::Finished {
            state: WorkflowState::Failed,
            outcome: Outcome::Failed {
                state: EndState::Stopped,
                ..
            }
        }]
    ));
}

#[test]
fn retries_wait_a_backoff_that_doubles_then_the_job_fails() {
    let wf = workflow("jobs:\n  a:\n    command: x\n    retries: 2\n    retry_backoff: 1s\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    assert_eq!(run(&mut core, "a", 1, EndState::Failed, 100), vec![]);
    assert_eq!(
        core.job("a"),
        Some(&JobPhase::RetryWait {
            attempt: 1,
            job_id: id(1),
            until: 1100
        })
    );
    assert_eq!(core.next_tick(), Some(1100));
    assert_eq!(core.handle(Event::Tick, 1099), vec![]);
    assert_eq!(core.handle(Event::Tick, 1100), vec![submit("a", 2)]);
    assert_eq!(core.next_tick(), None);
    assert_eq!(run(&mut core, "a", 2, EndState::Failed, 5000), vec![]);
    assert_eq!(core.next_tick(), Some(7000));
    assert_eq!(core.handle(Event::Tick, 8000), vec![submit("a", 3)]);
    let last = run(&mut core, "a", 3, EndState::Failed, 9000);
    assert!(matches!(
        &last[..],
        [Action::Finished {
            state: WorkflowState::Failed,
            ..
        }]
    ));
    assert_eq!(
        core.job("a"),
        Some(&JobPhase::Ended {
            attempt: 3,
            job_id: id(3),
            state: EndState::Failed,
            at: 9000
        })
    );
}

#[test]
fn a_retry_already_due_is_submitted_at_once_and_only_failures_are_retried() {
    let wf = workflow("jobs:\n  a: {command: x, retries: 1}\n  b: {command: x, retries: 3}\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = core.handle(submitted("a", 1, 1), 0);
    // Ended long before the core heard of it: the backoff has passed.
    assert_eq!(
        core.handle(ended("a", 1, 1, EndState::Failed, 0), 60_000),
        vec![submit("a", 2)]
    );
    // STOPPED is not retried.
    assert_eq!(run(&mut core, "b", 2, EndState::Stopped, 1).len(), 0);
    assert_eq!(core.job("b").unwrap().name(), "STOPPED");
}

#[test]
fn stop_stops_what_runs_and_cancels_the_rest() {
    let wf = workflow(
        "jobs:\n  a: {command: x}\n  b: {command: x}\n  r: {command: x, retries: 1}\n  c: {command: x, requires: [{a: ANY}]}\n",
    );
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = core.handle(submitted("a", 1, 1), 0);
    assert_eq!(run(&mut core, "r", 3, EndState::Failed, 0), vec![]);
    // b is still SUBMITTING (no id yet), r waits for a retry.
    let actions = core.handle(Event::Stop, 10);
    assert_eq!(
        actions,
        vec![
            Action::StopJob {
                job: "a".into(),
                job_id: id(1)
            },
            Action::Cancel {
                job: "r".into(),
                reason: CancelReason::Stopped
            },
            Action::Cancel {
                job: "c".into(),
                reason: CancelReason::Stopped
            },
        ]
    );
    assert!(core.is_stopping());
    assert_eq!(core.handle(Event::Stop, 11), vec![]);
    assert_eq!(core.handle(Event::Tick, 1_000_000), vec![]);
    // b's id arrives: it is stopped at once.
    assert_eq!(
        core.handle(submitted("b", 1, 2), 12),
        vec![Action::StopJob {
            job: "b".into(),
            job_id: id(2)
        }]
    );
    assert_eq!(
        core.handle(ended("a", 1, 1, EndState::Stopped, 13), 13),
        vec![]
    );
    // A job that completes meanwhile is recorded; nothing new starts.
    assert_eq!(
        core.handle(ended("b", 1, 2, EndState::Completed, 14), 14),
        vec![Action::Finished {
            state: WorkflowState::Stopped,
            outcome: Outcome::Stopped
        }]
    );
    assert_eq!(core.state(), WorkflowState::Stopped);
    assert_eq!(core.handle(Event::Stop, 15), vec![]);
}

#[test]
fn stop_before_start_cancels_every_job() {
    let mut core = WorkflowCore::new(&workflow(SEED));
    let actions = core.handle(Event::Stop, 0);
    assert_eq!(actions.len(), 4);
    assert!(actions[..3].iter().all(|a| matches!(
        a,
        Action::Cancel {
            reason: CancelReason::NeverStarted,
            ..
        }
    )));
    assert_eq!(
        actions[3],
        Action::Finished {
            state: WorkflowState::Canceled,
            outcome: Outcome::Canceled
        }
    );
    assert_eq!(core.handle(Event::Started, 1), vec![]);
    assert_eq!(core.state(), WorkflowState::Canceled);
}

#[test]
fn the_snapshot_is_plain_json_and_restores_the_same_core() {
    let mut core = WorkflowCore::new(&workflow(BRANCHES));
    let _ = core.handle(Event::Started, 0);
    let _ = run(&mut core, "train", 1, EndState::Failed, 5);
    let _ = core.handle(submitted("alert", 1, 2), 6);
    let json = serde_json::to_string_pretty(&core.snapshot()).unwrap();
    insta::assert_snapshot!(json);
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    let restored = WorkflowCore::restore(&workflow(BRANCHES), back).unwrap();
    assert_eq!(restored, core);
}

#[test]
fn a_snapshot_of_another_workflow_is_refused() {
    let core = WorkflowCore::new(&workflow(BRANCHES));
    let other = workflow(SEED);
    assert_eq!(
        WorkflowCore::restore(&other, core.snapshot()),
        Err(RestoreError::UnknownJob {
            job: "train".into()
        })
    );
    let mut snap = core.snapshot();
    snap.jobs.pop();
    assert_eq!(
        WorkflowCore::restore(&workflow(BRANCHES), snap),
        Err(RestoreError::MissingJob {
            job: "cleanup".into()
        })
    );
    let mut snap = core.snapshot();
    snap.jobs[1] = snap.jobs[0].clone();
    assert_eq!(
        WorkflowCore::restore(&workflow(BRANCHES), snap),
        Err(RestoreError::RepeatedJob {
            job: "train".into()
        })
    );
    let mut snap = core.snapshot();
    snap.state = WorkflowState::Completed;
    assert!(matches!(
        WorkflowCore::restore(&workflow(BRANCHES), snap),
        Err(RestoreError::Inconsistent { .. })
    ));
}

fn found(job: &str, attempt: u32, n: u64, state: FoundState) -> Found {
    Found {
        job: job.into(),
        attempt,
        job_id: id(n),
        state,
    }
}

fn restart(core: &WorkflowCore, wf: &Workflow) -> WorkflowCore {
    let json = serde_json::to_string(&core.snapshot()).unwrap();
    WorkflowCore::restore(wf, serde_json::from_str(&json).unwrap()).unwrap()
}

#[test]
fn restored_adopts_what_the_store_created_and_resubmits_only_what_it_did_not() {
    let wf = workflow("jobs:\n  a: {command: x}\n  b: {command: x}\n  c: {command: x}\n  d: {command: x, requires: [{a: COMPLETED}]}\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = core.handle(submitted("c", 1, 3), 0);
    // The daemon dies: it had created a (not reported), never created b;
    // c ended meanwhile.
    let mut core = restart(&core, &wf);
    let actions = core.handle(
        Event::Restored {
            found: vec![
                found(
                    "a",
                    1,
                    1,
                    FoundState::Ended {
                        state: EndState::Completed,
                        at: 5,
                    },
                ),
                found(
                    "c",
                    1,
                    3,
                    FoundState::Ended {
                        state: EndState::Completed,
                        at: 6,
                    },
                ),
            ],
        },
        10,
    );
    assert_eq!(actions, vec![submit("b", 1), submit("d", 1)]);
    assert_eq!(core.job("a").unwrap().name(), "COMPLETED");
    assert_eq!(core.job("c").unwrap().name(), "COMPLETED");
    // A second restart with the same records asks for nothing new.
    let mut again = restart(&core, &wf);
    let actions = again.handle(
        Event::Restored {
            found: vec![
                found(
                    "a",
                    1,
                    1,
                    FoundState::Ended {
                        state: EndState::Completed,
                        at: 5,
                    },
                ),
                found("b", 1, 2, FoundState::Running),
                found("d", 1, 4, FoundState::Queued),
            ],
        },
        11,
    );
    assert_eq!(actions, vec![]);
    assert_eq!(again.job("b").unwrap().name(), "RUNNING");
    assert_eq!(again.job("d").unwrap().name(), "SUBMITTED");
}

#[test]
fn restored_ends_a_job_the_store_lost_as_failed() {
    let wf = workflow("jobs:\n  a: {command: x}\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = core.handle(submitted("a", 1, 1), 0);
    let mut core = restart(&core, &wf);
    let actions = core.handle(Event::Restored { found: vec![] }, 10);
    assert!(matches!(
        &actions[..],
        [Action::Finished {
            state: WorkflowState::Failed,
            ..
        }]
    ));
}

#[test]
fn restored_while_stopping_stops_again_and_cancels_what_was_never_created() {
    let wf = workflow("jobs:\n  a: {command: x}\n  b: {command: x}\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = core.handle(submitted("a", 1, 1), 0);
    let _ = core.handle(Event::Stop, 1);
    let mut core = restart(&core, &wf);
    let actions = core.handle(
        Event::Restored {
            found: vec![found("a", 1, 1, FoundState::Running)],
        },
        2,
    );
    assert_eq!(
        actions,
        vec![
            Action::Cancel {
                job: "b".into(),
                reason: CancelReason::Stopped
            },
            Action::StopJob {
                job: "a".into(),
                job_id: id(1)
            },
        ]
    );
}

#[test]
fn restored_submits_a_retry_that_came_due_while_the_daemon_was_down() {
    let wf = workflow("jobs:\n  a: {command: x, retries: 1, retry_backoff: 10s}\n");
    let mut core = WorkflowCore::new(&wf);
    let _ = core.handle(Event::Started, 0);
    let _ = run(&mut core, "a", 1, EndState::Failed, 0);
    let mut core = restart(&core, &wf);
    assert_eq!(
        core.handle(Event::Restored { found: vec![] }, 20_000),
        vec![submit("a", 2)]
    );
}
