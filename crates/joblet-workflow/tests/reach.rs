//! The "can never start" check against brute force: for random DAGs, a
//! file is refused as unreachable exactly when some job runs under no
//! combination of end states at all, and the job it names is such a job.

#[path = "support/dag.rs"]
mod dag;

use dag::{expected, JobSpec, Spec};
use joblet_workflow::{EndState, Final, Limits, Problem, Workflow};
use proptest::prelude::*;

/// For each job: whether it runs under some combination of the jobs' end
/// states (each job that runs ends COMPLETED, FAILED or STOPPED).
fn can_run(spec: &Spec) -> Vec<bool> {
    let n = spec.jobs.len();
    let mut runs = vec![false; n];
    let ends = [EndState::Completed, EndState::Failed, EndState::Stopped];
    for combo in 0..3usize.pow(n as u32) {
        let mut c = combo;
        let fixed = Spec {
            jobs: spec
                .jobs
                .iter()
                .map(|j| {
                    let end = ends[c % 3];
                    c /= 3;
                    JobSpec {
                        requires: j.requires.clone(),
                        retries: 0,
                        outcomes: vec![end; 3],
                    }
                })
                .collect(),
        };
        for (j, f) in expected(&fixed).finals.iter().enumerate() {
            runs[j] |= *f != Final::Canceled;
        }
    }
    runs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn unreachable_jobs_are_refused_exactly(spec in dag::spec(7)) {
        let runs = can_run(&spec);
        let limits = Limits { max_gpus_per_node: None };
        match Workflow::parse(&dag::yaml(&spec), "reach.yaml", &limits) {
            Ok(_) => prop_assert!(runs.iter().all(|r| *r), "accepted, yet {:?} never run", runs),
            Err(e) => {
                let Problem::Unreachable { job, .. } = &*e.problem else {
                    return Err(TestCaseError::fail(format!("{e}")));
                };
                let j: usize = job[1..].parse().unwrap();
                prop_assert!(!runs[j], "{} refused, yet it can run: {}", job, e);
            }
        }
    }
}
