//! From text to a checked [`Workflow`]: serde reads the form, then the
//! checks that span keys and jobs run in file order, job by job, then over
//! the whole graph. The first problem found is the error.

use std::collections::HashMap;

use joblet_core::FieldError;

use super::dag;
use super::error::{FormatError, Problem, Route};
use super::locate::{locate, Step};
use super::raw::{RawJob, RawResources, RawWorkflow};
use super::request::file_field;
use super::{Job, JobResources, Limits, Requirement, Workflow, DEFAULT_RETRY_BACKOFF, MAX_JOBS};
use crate::graph::Graph;

/// The longest job name.
pub const MAX_JOB_NAME: usize = 128;

/// 1 to [`MAX_JOB_NAME`] letters, digits, `.`, `-` or `_`, starting with a
/// letter or a digit.
pub(crate) fn is_job_name(s: &str) -> bool {
    s.len() <= MAX_JOB_NAME
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Builds errors at places in one file.
struct Places<'t> {
    text: &'t str,
    file: &'t str,
}

impl Places<'_> {
    /// `problem` at the node `path` leads to; at the start of the file if
    /// there is no such node (which a file serde has read always has).
    fn at(&self, path: &[Step], problem: Problem) -> FormatError {
        let (line, column) = locate(self.text, path).unwrap_or((1, 1));
        FormatError {
            file: self.file.to_owned(),
            line,
            column,
            problem: Box::new(problem),
        }
    }

    /// serde_norway's error, its location moved in front as
    /// `file:line:column:`.
    fn yaml(&self, e: serde_norway::Error) -> FormatError {
        let location = e.location().map(|l| (l.line(), l.column()));
        let mut message = e.to_string();
        if let Some((line, column)) = location {
            let suffix = format!(" at line {line} column {column}");
            if let Some(stripped) = message.strip_suffix(&suffix) {
                message = stripped.to_owned();
            }
        }
        let (line, column) = location.unwrap_or((1, 1));
        FormatError {
            file: self.file.to_owned(),
            line,
            column,
            problem: Box::new(Problem::Yaml { message }),
        }
    }
}

fn key(k: &str) -> Step {
    Step::Key(k.to_owned())
}

fn job_path(job: &str, rest: impl IntoIterator<Item = Step>) -> Vec<Step> {
    let mut path = vec![key("jobs"), key(job)];
    path.extend(rest);
    path
}

fn requirement_path(job: &str, index: usize) -> Vec<Step> {
    job_path(job, [key("requires"), Step::Index(index), Step::FirstKey])
}

pub(super) fn workflow(text: &str, file: &str, limits: &Limits) -> Result<Workflow, FormatError> {
    let places = Places { text, file };
    let raw: RawWorkflow = serde_norway::from_str(text).map_err(|e| places.yaml(e))?;
    let defaults = raw.resources.unwrap_or_default();
    if defaults.max_iobps.is_some() && defaults.max_io_bps.is_some() {
        return Err(places.at(&[key("resources"), key("max_io_bps")], Problem::IoAliases));
    }
    let (raw_jobs, index) = (raw.jobs.entries, raw.jobs.index);
    if raw_jobs.is_empty() {
        return Err(places.at(&[key("jobs")], Problem::NoJobs));
    }
    if raw_jobs.len() > MAX_JOBS {
        return Err(places.at(
            &[key("jobs")],
            Problem::TooManyJobs {
                count: raw_jobs.len(),
                max: MAX_JOBS,
            },
        ));
    }
    let workflow_retries = raw.retries.map_or(0, |r| r.0);
    let workflow_backoff = raw.retry_backoff.map_or(DEFAULT_RETRY_BACKOFF, |b| b.0);

    // required_by[x]: the last job found to require x (repeats are refused).
    let mut required_by = vec![usize::MAX; raw_jobs.len()];
    let mut jobs = Vec::with_capacity(raw_jobs.len());
    let mut requires = Vec::with_capacity(raw_jobs.len());
    for (name, raw_job) in raw_jobs {
        let own = raw_job.resources.as_ref();
        if !is_job_name(&name) {
            return Err(places.at(&job_path(&name, []), Problem::JobName { name }));
        }
        requires.push(requirements(
            &places,
            &name,
            &raw_job,
            &index,
            &mut required_by,
        )?);
        if own.is_some_and(|r| r.max_iobps.is_some() && r.max_io_bps.is_some()) {
            return Err(places.at(
                &job_path(&name, [key("resources"), key("max_io_bps")]),
                Problem::IoAliases,
            ));
        }
        let resources = merge(own, &defaults);
        let job = Job {
            requires: raw_job
                .requires
                .into_iter()
                .map(|r| Requirement {
                    job: r.job,
                    need: r.need,
                })
                .collect(),
            command: raw_job.command,
            args: raw_job.args,
            runtime: raw_job.runtime,
            resources,
            uploads: raw_job.uploads,
            volumes: raw_job.volumes,
            network: raw_job.network,
            environment: raw_job.environment.entries,
            secret_environment: raw_job.secret_environment.entries,
            timeout: raw_job.timeout.map(|t| t.0),
            retries: raw_job.retries.map_or(workflow_retries, |r| r.0),
            retry_backoff: raw_job.retry_backoff.map_or(workflow_backoff, |b| b.0),
            executor: raw_job.executor,
            devices: raw_job.devices,
            name,
        };
        check_job(&places, &job, own, &defaults, limits)?;
        jobs.push(job);
    }

    let graph = Graph::new(requires);
    let order = match graph.order() {
        Ok(order) => order,
        Err(left) => {
            let ring = dag::cycle(&graph, &left);
            let names: Vec<String> = ring.iter().map(|&j| jobs[j].name.clone()).collect();
            let at = entry_index(&jobs[ring[0]], &names[1]);
            return Err(places.at(
                &requirement_path(&names[0], at),
                Problem::Cycle { jobs: names },
            ));
        }
    };
    if let Some(c) = dag::unreachable(&graph, &order) {
        let job = &jobs[c.job];
        let route = |(path, need): &(Vec<usize>, _)| Route {
            jobs: path.iter().map(|&j| jobs[j].name.clone()).collect(),
            need: *need,
        };
        let (first, second) = (route(&c.first), route(&c.second));
        let at = entry_index(job, &second.jobs[1]);
        return Err(places.at(
            &requirement_path(&job.name, at),
            Problem::Unreachable {
                job: job.name.clone(),
                target: jobs[c.target].name.clone(),
                first,
                second,
            },
        ));
    }
    Ok(Workflow {
        file: file.to_owned(),
        name: raw.name,
        description: raw.description,
        jobs,
        index,
        graph,
    })
}

/// Where `job`'s `requires` names `other`.
fn entry_index(job: &Job, other: &str) -> usize {
    job.requires
        .iter()
        .position(|r| r.job == other)
        .unwrap_or(0)
}

/// The job's requirements by index: each names another job of the
/// workflow, once.
fn requirements(
    places: &Places<'_>,
    name: &str,
    raw: &RawJob,
    index: &HashMap<String, usize>,
    required_by: &mut [usize],
) -> Result<Vec<(usize, crate::need::Need)>, FormatError> {
    let me = index.get(name).copied().unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(raw.requires.len());
    for (k, r) in raw.requires.iter().enumerate() {
        let at = || requirement_path(name, k);
        if r.job == name {
            return Err(places.at(
                &at(),
                Problem::SelfRequirement {
                    job: name.to_owned(),
                },
            ));
        }
        let Some(&x) = index.get(&r.job) else {
            return Err(places.at(
                &at(),
                Problem::UnknownRequirement {
                    job: name.to_owned(),
                    requires: r.job.clone(),
                },
            ));
        };
        if std::mem::replace(&mut required_by[x], me) == me {
            return Err(places.at(
                &at(),
                Problem::RepeatedRequirement {
                    job: name.to_owned(),
                    requires: r.job.clone(),
                },
            ));
        }
        out.push((x, r.need));
    }
    Ok(out)
}

/// The job's resources over the workflow's defaults, field by field.
fn merge(own: Option<&RawResources>, defaults: &RawResources) -> JobResources {
    let none = RawResources::default();
    let own = own.unwrap_or(&none);
    let iobps = |r: &RawResources| r.max_iobps.or(r.max_io_bps).map(|v| v.0);
    JobResources {
        max_cpu: own.max_cpu.or(defaults.max_cpu).map(|v| v.0),
        max_memory_mb: own.max_memory.or(defaults.max_memory).map(|v| v.0),
        max_iobps: iobps(own).or_else(|| iobps(defaults)),
        cpu_cores: own.cpu_cores.clone().or_else(|| defaults.cpu_cores.clone()),
        gpu_count: own.gpu_count.or(defaults.gpu_count).map(|v| v.count),
        gpu_milli: own
            .gpu_count
            .or(defaults.gpu_count)
            .map(|v| v.milli)
            .filter(|m| *m > 0),
        gpu_memory_mb: own.gpu_memory_mb.or(defaults.gpu_memory_mb).map(|v| v.0),
    }
}

/// Whether a resources section sets the key the file names `name`.
fn sets(r: &RawResources, name: &str) -> bool {
    match name {
        "max_cpu" => r.max_cpu.is_some(),
        "max_memory" => r.max_memory.is_some(),
        "max_iobps" => r.max_iobps.is_some(),
        "max_io_bps" => r.max_io_bps.is_some(),
        "cpu_cores" => r.cpu_cores.is_some(),
        "gpu_count" => r.gpu_count.is_some(),
        "gpu_memory_mb" => r.gpu_memory_mb.is_some(),
        _ => false,
    }
}

/// The path to a resources key the job asked for: in its own section, or
/// in the workflow's defaults it inherited it from. `max_iobps` is
/// whichever of its two names was given.
fn resource_path(
    job: &str,
    own: Option<&RawResources>,
    defaults: &RawResources,
    name: &str,
) -> (Vec<Step>, bool) {
    let spelled = |r: &RawResources| match name {
        "max_iobps" if r.max_io_bps.is_some() => "max_io_bps",
        other => other,
    };
    match own {
        Some(r) if sets(r, spelled(r)) => {
            (job_path(job, [key("resources"), key(spelled(r))]), false)
        }
        _ => (vec![key("resources"), key(spelled(defaults))], true),
    }
}

/// `problem` with job `job`'s request field `field` (as
/// [`joblet_core::JobRequest::validate`] names fields), at the key of the
/// file that set it: the job's own, or the workflow's default.
fn request_error(
    places: &Places<'_>,
    job: &Job,
    own: Option<&RawResources>,
    defaults: &RawResources,
    field: &str,
    problem: String,
) -> FormatError {
    let (mut shown, rest) = file_field(job, field);
    let path = match rest.as_slice() {
        [Step::Key(section), Step::Key(name)] if section == "resources" => {
            let (path, inherited) = resource_path(&job.name, own, defaults, name);
            if let Some(Step::Key(spelled)) = path.last() {
                shown = format!("resources.{spelled}");
            }
            if inherited {
                shown.push_str(" (the workflow's default)");
            }
            path
        }
        _ => job_path(&job.name, rest),
    };
    places.at(
        &path,
        Problem::Request {
            job: job.name.clone(),
            field: shown,
            problem,
        },
    )
}

/// A node's refusal of job `job`'s request field `field` with `problem`,
/// placed in `text` (the file `workflow` was read from) as a check of the
/// file's own would be.
pub(super) fn refusal(
    workflow: &Workflow,
    text: &str,
    job: &Job,
    field: &str,
    problem: String,
) -> FormatError {
    let places = Places {
        text,
        file: &workflow.file,
    };
    let raw: Option<RawWorkflow> = serde_norway::from_str(text).ok();
    let none = RawResources::default();
    let defaults = raw
        .as_ref()
        .and_then(|r| r.resources.as_ref())
        .unwrap_or(&none);
    let own = raw.as_ref().and_then(|r| {
        r.jobs
            .entries
            .iter()
            .find(|(name, _)| *name == job.name)
            .and_then(|(_, j)| j.resources.as_ref())
    });
    request_error(&places, job, own, defaults, field, problem)
}

/// One job's uploads, its request under `rnx job run`'s rules, and its
/// GPUs against the nodes'.
fn check_job(
    places: &Places<'_>,
    job: &Job,
    own: Option<&RawResources>,
    defaults: &RawResources,
    limits: &Limits,
) -> Result<(), FormatError> {
    for (i, u) in job.uploads.iter().enumerate() {
        if u.is_empty() || u.contains('\0') {
            return Err(places.at(
                &job_path(&job.name, [key("uploads"), Step::Index(i)]),
                Problem::Upload {
                    job: job.name.clone(),
                    field: format!("uploads[{i}]"),
                },
            ));
        }
    }
    if let Err(FieldError { field, problem }) = job.request().validate() {
        return Err(request_error(places, job, own, defaults, &field, problem));
    }
    if let (Some(asked), Some(max)) = (job.resources.gpu_count, limits.max_gpus_per_node) {
        if asked > u64::from(max) {
            let (path, _) = resource_path(&job.name, own, defaults, "gpu_count");
            return Err(places.at(
                &path,
                Problem::TooManyGpus {
                    job: job.name.clone(),
                    asked,
                    max,
                },
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names() {
        for ok in [
            "a",
            "model-training",
            "step_2",
            "v1.0",
            "9lives",
            &"x".repeat(128),
        ] {
            assert!(is_job_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "_a",
            "a b",
            "a/b",
            "a:b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!is_job_name(bad), "{bad}");
        }
    }
}
