//! Why a workflow file was refused. Every error names the file, the line
//! and the column of the key or value at fault, and the accepted form.

use joblet_core::text::clip;

use crate::need::Need;

/// A workflow file that cannot run, and where it is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {problem}")]
pub struct FormatError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub problem: Box<Problem>,
}

/// One way a requirement path leads from a job to a job it needs in a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// From the job that can never start to the job whose state is needed,
    /// both included, each requiring the next.
    pub jobs: Vec<String>,
    /// What the last requirement on the path needs.
    pub need: Need,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The YAML does not have the workflow's form: serde_norway's message,
    /// which names the key path, what is wrong and what is accepted.
    #[error("{message} (the workflow format is described in docs/workflows.md)")]
    Yaml { message: String },

    #[error("`jobs` is empty: a workflow needs at least one job, like `jobs: {{hello: {{command: echo}}}}`")]
    NoJobs,

    #[error(
        "{count} jobs are more than a workflow may have ({max}); split it into smaller workflows"
    )]
    TooManyJobs { count: usize, max: usize },

    #[error("job name {:?} is not valid: use 1 to 128 letters, digits, '.', '-' or '_', starting with a letter or a digit (like model-training)", clip(name))]
    JobName { name: String },

    #[error("job `{job}` requires `{}`, which is not a job of this workflow: `requires` names jobs defined under `jobs`, like `- data-preprocessing: COMPLETED`", clip(requires))]
    UnknownRequirement { job: String, requires: String },

    #[error("job `{job}` requires itself: a job can only require other jobs")]
    SelfRequirement { job: String },

    #[error("job `{job}` requires `{requires}` twice: name each job once, with the one state it must end in (or ANY)")]
    RepeatedRequirement { job: String, requires: String },

    #[error("jobs require each other in a cycle: {}; requirements must form a DAG (no job may wait, directly or through others, for itself)", cycle_text(jobs))]
    Cycle {
        /// The cycle from its first job in file order, each requiring the
        /// next, back to the first.
        jobs: Vec<String>,
    },

    #[error("job `{job}` can never start: it needs `{target}` to end {} ({}) and {} ({}), and a job ends in one state", first.need, route_text(first), second.need, route_text(second))]
    Unreachable {
        job: String,
        target: String,
        first: Route,
        second: Route,
    },

    #[error("job `{job}`: `{field}` is empty or holds a NUL byte: expected a file or directory path, like model.py or dataset/")]
    Upload { job: String, field: String },

    #[error(
        "`max_iobps` and `max_io_bps` are the same limit (bytes per second): give one of them"
    )]
    IoAliases,

    #[error("job `{job}`: {field}: {problem}")]
    Request {
        job: String,
        /// The key as the file names it (`resources.max_memory`,
        /// `environment["1X"]`).
        field: String,
        problem: String,
    },

    #[error("job `{job}` asks for {asked} GPUs, but no node has more than {max}: ask for at most {max} (resources.gpu_count)")]
    TooManyGpus { job: String, asked: u64, max: u32 },
}

/// How many job names a message lists before it cuts the list.
const LISTED: usize = 8;

fn names(jobs: &[String]) -> String {
    if jobs.len() <= LISTED {
        return jobs.join(" → ");
    }
    let head = jobs[..LISTED - 2].join(" → ");
    let tail = jobs[jobs.len() - 2..].join(" → ");
    format!("{head} → … ({} more) → {tail}", jobs.len() - LISTED)
}

fn cycle_text(jobs: &[String]) -> String {
    names(jobs)
}

fn route_text(route: &Route) -> String {
    format!("through {}", names(&route.jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_cycles_are_listed_cut() {
        let jobs: Vec<String> = (0..100).map(|i| format!("j{i}")).collect();
        let text = Problem::Cycle { jobs }.to_string();
        assert!(text.starts_with("jobs require each other in a cycle: j0 → j1 → j2 → j3 → j4 → j5 → … (92 more) → j98 → j99;"), "{text}");
    }
}
