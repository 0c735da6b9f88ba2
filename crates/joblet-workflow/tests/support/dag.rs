//! Random workflows for the property tests: DAGs acyclic by construction
//! (a job requires only jobs before it), scripted outcomes, and the
//! reference evaluator the core is checked against.

use std::fmt::Write;

use joblet_workflow::{EndState, Final, Need};
use proptest::prelude::*;

#[derive(Debug, Clone)]
pub struct Spec {
    pub jobs: Vec<JobSpec>,
}

#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Earlier jobs only, each once.
    pub requires: Vec<(usize, Need)>,
    pub retries: u8,
    /// What attempt 1, 2, 3 end in when they run to their end.
    pub outcomes: Vec<EndState>,
}

/// Retries wait 50 ms, doubling.
pub const BACKOFF_MS: i64 = 50;

pub fn need() -> impl Strategy<Value = Need> {
    prop_oneof![
        5 => Just(Need::Completed),
        2 => Just(Need::Failed),
        1 => Just(Need::Stopped),
        3 => Just(Need::Any),
    ]
}

pub fn end_state() -> impl Strategy<Value = EndState> {
    prop_oneof![
        5 => Just(EndState::Completed),
        4 => Just(EndState::Failed),
        1 => Just(EndState::Stopped),
    ]
}

pub fn spec(max_jobs: usize) -> impl Strategy<Value = Spec> {
    (1..=max_jobs)
        .prop_flat_map(|n| {
            (0..n)
                .map(|j| {
                    (
                        proptest::collection::vec((0..j.max(1), need()), 0..=j.min(3)),
                        0..=2u8,
                        proptest::collection::vec(end_state(), 3),
                    )
                })
                .collect::<Vec<_>>()
        })
        .prop_map(|jobs| Spec {
            jobs: jobs
                .into_iter()
                .map(|(reqs, retries, outcomes)| {
                    let mut requires: Vec<(usize, Need)> = Vec::new();
                    for (x, need) in reqs {
                        if requires.iter().all(|&(y, _)| y != x) {
                            requires.push((x, need));
                        }
                    }
                    JobSpec {
                        requires,
                        retries,
                        outcomes,
                    }
                })
                .collect(),
        })
}

pub fn name(j: usize) -> String {
    format!("j{j}")
}

pub fn yaml(spec: &Spec) -> String {
    let mut text = format!("retry_backoff: {BACKOFF_MS}ms\njobs:\n");
    for (j, job) in spec.jobs.iter().enumerate() {
        let _ = write!(
            text,
            "  {}:\n    command: run\n    retries: {}\n",
            name(j),
            job.retries
        );
        if !job.requires.is_empty() {
            text.push_str("    requires:\n");
            for (x, need) in &job.requires {
                let _ = writeln!(text, "      - {}: {}", name(*x), need.as_str());
            }
        }
    }
    text
}

/// Whether a job that finished `fin` satisfies `need` (written out here,
/// apart from the crate's own).
pub fn accepts(need: Need, fin: Final) -> bool {
    matches!(
        (need, fin),
        (Need::Any, _)
            | (Need::Completed, Final::Ended(EndState::Completed))
            | (Need::Failed, Final::Ended(EndState::Failed))
            | (Need::Stopped, Final::Ended(EndState::Stopped))
    )
}

/// What a run must come to, whatever the order things happen in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub finals: Vec<Final>,
    /// How many attempts each job runs.
    pub attempts: Vec<u32>,
    /// `None`: COMPLETED; else FAILED, and the first job whose FAILED or
    /// STOPPED end no job that ran accepted.
    pub unhandled: Option<usize>,
}

/// The reference evaluator: jobs in file order (requirements come
/// first); a job runs if each requirement accepts its job's final state,
/// else it is CANCELED; a job that runs ends in its first outcome that is
/// not FAILED, or FAILED once its retries are spent.
pub fn expected(spec: &Spec) -> Expected {
    let mut finals: Vec<Final> = Vec::new();
    let mut attempts = Vec::new();
    for job in &spec.jobs {
        let runs = job
            .requires
            .iter()
            .all(|&(x, need)| accepts(need, finals[x]));
        if !runs {
            finals.push(Final::Canceled);
            attempts.push(0);
            continue;
        }
        let allowed = usize::from(job.retries) + 1;
        let tried = &job.outcomes[..allowed];
        let n = tried
            .iter()
            .position(|o| *o != EndState::Failed)
            .map_or(allowed, |k| k + 1);
        finals.push(Final::Ended(tried[n - 1]));
        attempts.push(n as u32);
    }
    let unhandled = (0..spec.jobs.len()).find(|&x| {
        matches!(
            finals[x],
            Final::Ended(EndState::Failed | EndState::Stopped)
        ) && !spec.jobs.iter().enumerate().any(|(y, job)| {
            matches!(finals[y], Final::Ended(_))
                && job
                    .requires
                    .iter()
                    .any(|&(r, need)| r == x && accepts(need, finals[x]))
        })
    });
    Expected {
        finals,
        attempts,
        unhandled,
    }
}
