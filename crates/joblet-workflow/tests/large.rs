//! A 10,000-job workflow is read and checked whole: every job, every
//! requirement, no cycle, every job able to start; a cycle or a clash
//! added at its far end is still found. Timing is the benchmark's
//! (`benches/validate.rs`); this test prints it and asserts none.

#[path = "support/big.rs"]
mod big;

use std::time::Instant;

use joblet_workflow::{Limits, Need, Problem, Workflow};

const N: usize = 10_000;

fn limits() -> Limits {
    Limits {
        max_gpus_per_node: Some(8),
    }
}

#[test]
fn ten_thousand_jobs_are_read_and_checked() {
    let text = big::dag(N);
    let start = Instant::now();
    let wf = Workflow::parse(&text, "big.yaml", &limits()).unwrap();
    eprintln!(
        "{N} jobs, {} bytes: parsed and checked in {:?} (unoptimised build)",
        text.len(),
        start.elapsed()
    );
    assert_eq!(wf.jobs().len(), N);
    let mut requirements = 0;
    for (i, job) in wf.jobs().iter().enumerate() {
        assert_eq!(job.name, format!("job-{i}"));
        assert_eq!(job.resources.max_memory_mb, Some(512));
        for r in &job.requires {
            let j: usize = r.job["job-".len()..].parse().unwrap();
            assert!(j < i, "{} requires {}", job.name, r.job);
            requirements += 1;
        }
        if i > 0 && i % 10 == 0 {
            assert_eq!(job.requires.len(), 1);
            assert_eq!(job.requires[0].need, Need::Failed);
        }
    }
    assert!(requirements > 2 * N, "{requirements}");
}

#[test]
fn a_cycle_closed_at_the_far_end_is_found() {
    // job-0 requires the last job, which depends on job-0 through the chain.
    let text = big::dag(N).replacen(
        "  job-0:\n    command: run\n    args: [\"0\"]\n",
        &format!(
            "  job-0:\n    command: run\n    args: [\"0\"]\n    requires: [{{job-{}: ANY}}]\n",
            N - 1
        ),
        1,
    );
    let e = Workflow::parse(&text, "big.yaml", &limits()).unwrap_err();
    let Problem::Cycle { jobs } = &*e.problem else {
        panic!("{e}")
    };
    assert_eq!(jobs.first().map(String::as_str), Some("job-0"));
    assert_eq!(jobs.last().map(String::as_str), Some("job-0"));
    assert_eq!(jobs[1], format!("job-{}", N - 1));
    assert_eq!((e.line, e.column), (8, 17));
}

#[test]
fn a_clash_at_the_far_end_is_found() {
    // The last job also requires an alert COMPLETED and that alert's
    // target COMPLETED; the alert needs it FAILED.
    let alert = N - 10;
    let mut text = big::dag(N);
    let target = {
        let at = text.find(&format!("  job-{alert}:\n")).unwrap();
        let line = text[at..].lines().nth(4).unwrap().trim().to_owned();
        line.trim_start_matches("- ")
            .split(':')
            .next()
            .unwrap()
            .to_owned()
    };
    text += &format!("  extra:\n    command: run\n    requires:\n      - {target}: COMPLETED\n      - job-{alert}: COMPLETED\n");
    let e = Workflow::parse(&text, "big.yaml", &limits()).unwrap_err();
    let Problem::Unreachable { job, target: t, .. } = &*e.problem else {
        panic!("{e}")
    };
    assert_eq!(job, "extra");
    assert_eq!(t, &target);
}

/// The core runs the same 10,000 jobs to the end, every job completing:
/// the alerts (they need a FAILED job) are canceled, the jobs that follow
/// them with ANY still run.
#[test]
fn ten_thousand_jobs_run_through_the_core() {
    use joblet_core::JobId;
    use joblet_workflow::{Action, EndState, Event, Outcome, WorkflowCore, WorkflowState};

    let wf = Workflow::parse(&big::dag(N), "big.yaml", &limits()).unwrap();
    let mut core = WorkflowCore::new(&wf);
    let start = Instant::now();
    let mut todo: Vec<Action> = core.handle(Event::Started, 0);
    let (mut ids, mut canceled, mut finished) = (0u64, 0, None);
    while let Some(action) = todo.pop() {
        match action {
            Action::Submit { job, attempt } => {
                ids += 1;
                let job_id = JobId::parse(&format!("00000000-0000-0000-0000-{ids:012x}")).unwrap();
                let ended = Event::JobEnded {
                    job: job.clone(),
                    attempt,
                    job_id: job_id.clone(),
                    state: EndState::Completed,
                    at: 1,
                };
                let submitted = Event::JobSubmitted {
                    job,
                    attempt,
                    job_id,
                };
                assert_eq!(core.handle(submitted, 1), vec![]);
                todo.extend(core.handle(ended, 1));
            }
            Action::Cancel { .. } => canceled += 1,
            Action::Finished { state, outcome } => finished = Some((state, outcome)),
            Action::StopJob { .. } => panic!("nothing was stopped"),
        }
    }
    eprintln!(
        "{N} jobs run through the core in {:?} (unoptimised build)",
        start.elapsed()
    );
    let alerts = (N - 1) / 10;
    assert_eq!(canceled, alerts);
    assert_eq!(ids as usize, N - alerts);
    assert_eq!(
        finished,
        Some((
            WorkflowState::Completed,
            Outcome::Completed {
                completed: N - alerts,
                canceled: alerts,
                handled: 0
            }
        ))
    );
}
