//! Workflows as text for people: the DAG view of `rnx workflow status` (and
//! `run`), the `list` table, the checked file `validate` shows, and the
//! one-line job changes `run --follow` prints.
//!
//! The DAG is drawn by depth: a job's depth is one more than the deepest
//! job it requires, and each job is shown in file order under an `└─`
//! indented by its depth, so what a job waits on is above it and to its
//! left. Plain text, narrow, no colours.

use std::io::{self, Write};
use std::time::Duration;

use joblet_core::parse::{format_duration, format_duration_ms};
use joblet_core::UnixMillis;
use joblet_workflow::{JobResources, Workflow};

use crate::table;
use crate::view::{command_line, rfc3339};
use crate::workflow_view::{is_final, WorkflowJobView, WorkflowView};

/// The first 8 characters of an id, as tables show ids.
pub fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// `HH:MM:SS` (UTC), for `run --follow`'s lines.
pub fn clock(ms: UnixMillis) -> String {
    let t = rfc3339(ms);
    t.get(11..19).unwrap_or(&t).to_owned()
}

/// How long from `from` to `to`: to the millisecond under a minute (jobs
/// of a pipeline often take less than a second), to the second above.
fn span(from: UnixMillis, to: UnixMillis) -> String {
    let d = Duration::from_millis(to.saturating_sub(from).max(0) as u64);
    if d < Duration::from_secs(60) {
        format_duration_ms(d)
    } else {
        format_duration(d)
    }
}

/// Each job's depth: 0 without requirements, else one more than the
/// deepest job it requires. `requires[i]` holds the indices job `i`
/// requires; names that are not jobs are left out by the caller. A cycle
/// (which a checked file never has) stops deepening after `n` rounds.
pub fn depths(requires: &[Vec<usize>]) -> Vec<usize> {
    let n = requires.len();
    let mut depth = vec![0usize; n];
    for _ in 0..n {
        let mut changed = false;
        for (i, reqs) in requires.iter().enumerate() {
            let d = reqs.iter().map(|&r| depth[r] + 1).max().unwrap_or(0);
            if d > depth[i] {
                depth[i] = d;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// The indices each job requires, by name.
fn requirement_indices<'a>(
    names: &[&str],
    requires: impl Iterator<Item = Vec<&'a str>>,
) -> Vec<Vec<usize>> {
    let index: std::collections::HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    requires
        .map(|reqs| reqs.iter().filter_map(|r| index.get(r).copied()).collect())
        .collect()
}

/// The deepest indent drawn; deeper jobs are drawn at it, naming what
/// they require, so a long chain stays narrow.
const MAX_DRAWN_DEPTH: usize = 8;

/// Each job's name under the edge that shows its depth. A job's edge leads
/// up to the nearest line above it that is less deep; unless that line is
/// one level up and the one job it requires (and the depth is drawn, at
/// most [`MAX_DRAWN_DEPTH`]), the jobs it requires follow its name:
/// `└─ report (after evaluate, alert)`.
fn tree_names(names: &[&str], requires: &[Vec<usize>], depth: &[usize]) -> Vec<String> {
    (0..names.len())
        .map(|i| {
            let d = depth[i];
            if d == 0 {
                return names[i].to_owned();
            }
            // The line its edge leads up to.
            let above = (0..i).rev().find(|&k| depth[k] < d);
            let drawn = d.min(MAX_DRAWN_DEPTH);
            let mut cell = format!("{}└─ {}", "   ".repeat(drawn - 1), names[i]);
            if d > MAX_DRAWN_DEPTH || above.is_none_or(|k| depth[k] + 1 != d || requires[i] != [k])
            {
                let after: Vec<&str> = requires[i].iter().map(|&r| names[r]).collect();
                cell.push_str(&format!(" (after {})", after.join(", ")));
            }
            cell
        })
        .collect()
}

fn gpus_cell(j: &WorkflowJobView) -> String {
    let n = if j.gpu_indices.is_empty() {
        j.gpu_count as usize
    } else {
        j.gpu_indices.len()
    };
    if n == 0 {
        return "-".to_owned();
    }
    let word = if n == 1 { "GPU" } else { "GPUs" };
    if j.gpu_indices.is_empty() {
        format!("{n} {word}")
    } else {
        let list: Vec<String> = j.gpu_indices.iter().map(u32::to_string).collect();
        format!("{n} {word} [{}]", list.join(","))
    }
}

fn time_cell(j: &WorkflowJobView, now: UnixMillis) -> String {
    match (j.started_unix_ms, j.ended_unix_ms) {
        (Some(s), Some(e)) => span(s, e),
        (Some(s), None) => span(s, now),
        _ => "-".to_owned(),
    }
}

/// What a job waits on or why it ended as it did; empty when nothing needs
/// saying.
fn note(j: &WorkflowJobView, w: &WorkflowView) -> String {
    match j.state.as_str() {
        "WAITING" => {
            let waits: Vec<String> = j
                .requires
                .iter()
                .filter(|r| !r.holds)
                .map(|r| match w.job(&r.job) {
                    Some(other) => format!("{} ({}, now {})", r.job, r.state, other.state),
                    None => format!("{} ({})", r.job, r.state),
                })
                .collect();
            if waits.is_empty() {
                String::new()
            } else {
                format!("waits on: {}", waits.join(", "))
            }
        }
        "RETRY_WAIT" => {
            let next = j.attempt + 1;
            let at = j
                .retry_at_unix_ms
                .map(|t| format!(" at {}", clock(t)))
                .unwrap_or_default();
            match &j.reason {
                Some(r) => format!("attempt {next}{at}; attempt {} {r}", j.attempt),
                None => format!("attempt {next}{at}"),
            }
        }
        "FAILED" | "CANCELED" | "STOPPED" => j.reason.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

/// `2/3`: the attempt of how many it may have; `-` before the first and
/// for a job without retries.
fn attempt_cell(j: &WorkflowJobView) -> String {
    if j.attempt == 0 || j.max_attempts <= 1 {
        "-".to_owned()
    } else {
        format!("{}/{}", j.attempt, j.max_attempts.max(j.attempt))
    }
}

/// The workflow's state, with `stopping` when a stop is under way.
fn state_text(w: &WorkflowView) -> String {
    if w.stopping && !w.ended() {
        format!("{} (stopping)", w.state)
    } else {
        w.state.clone()
    }
}

/// The human `rnx workflow status` view: a header, then one line per job
/// in file order, drawn by depth; `detail` adds each job's command, jobs
/// and exit code. `now` is used for the durations of what still runs.
pub fn write_status(
    o: &mut dyn Write,
    w: &WorkflowView,
    detail: bool,
    now: UnixMillis,
) -> io::Result<()> {
    writeln!(o, "ID: {}", w.id.as_deref().unwrap_or("-"))?;
    if let Some(name) = &w.name {
        writeln!(o, "Name: {name}")?;
    }
    if let Some(d) = &w.description {
        writeln!(o, "Description: {d}")?;
    }
    writeln!(o, "File: {}", w.file)?;
    writeln!(o, "State: {}", state_text(w))?;
    writeln!(o, "Owner: {}", w.owner)?;
    if let Some(created) = w.created_unix_ms {
        writeln!(o, "Created: {}", rfc3339(created))?;
        match w.ended_unix_ms {
            Some(ended) => writeln!(
                o,
                "Duration: {} (ended {})",
                span(created, ended),
                rfc3339(ended)
            )?,
            None => writeln!(o, "Duration: {} so far", span(created, now))?,
        }
    }
    if let Some(outcome) = &w.outcome {
        writeln!(o, "Outcome: {outcome}")?;
    }
    if let Some(v) = &w.shared_volume {
        writeln!(
            o,
            "Shared Volume: {v} (read-write in every job at $JOBLET_WORKFLOW_SHARED)"
        )?;
    }
    writeln!(o, "Jobs: {}/{} done", w.jobs_done(), w.jobs.len())?;
    writeln!(o)?;
    write_jobs(o, w, now)?;
    if detail {
        for j in &w.jobs {
            writeln!(o)?;
            write_job_detail(o, j)?;
        }
    }
    Ok(())
}

/// The job lines of the DAG view, as a table.
fn write_jobs(o: &mut dyn Write, w: &WorkflowView, now: UnixMillis) -> io::Result<()> {
    let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
    let requires = requirement_indices(
        &names,
        w.jobs
            .iter()
            .map(|j| j.requires.iter().map(|r| r.job.as_str()).collect()),
    );
    let depth = depths(&requires);
    let tree = tree_names(&names, &requires, &depth);
    let retries = w.jobs.iter().any(|j| j.max_attempts > 1);
    let mut header = vec!["JOB", "STATE"];
    if retries {
        header.push("ATTEMPT");
    }
    header.extend(["TIME", "GPUS", "NOTE"]);
    let rows: Vec<Vec<String>> = w
        .jobs
        .iter()
        .zip(tree)
        .map(|(j, name)| {
            let mut row = vec![name, j.state.clone()];
            if retries {
                row.push(attempt_cell(j));
            }
            row.extend([time_cell(j, now), gpus_cell(j), note(j, w)]);
            row
        })
        .collect();
    table::write(o, &header, &rows)
}

fn write_job_detail(o: &mut dyn Write, j: &WorkflowJobView) -> io::Result<()> {
    writeln!(o, "{}:", j.name)?;
    writeln!(o, "  Command: {}", command_line(&j.command, &j.args))?;
    if let Some(r) = &j.runtime {
        writeln!(o, "  Runtime: {r}")?;
    }
    if !j.requires.is_empty() {
        let reqs: Vec<String> = j
            .requires
            .iter()
            .map(|r| {
                let holds = if r.holds {
                    "holds"
                } else {
                    "does not hold yet"
                };
                format!("{} {} ({holds})", r.job, r.state)
            })
            .collect();
        writeln!(o, "  Requires: {}", reqs.join(", "))?;
    }
    if j.attempt_job_ids.is_empty() {
        writeln!(o, "  Jobs: none yet")?;
    } else {
        writeln!(o, "  Jobs:")?;
        for (i, id) in j.attempt_job_ids.iter().enumerate() {
            writeln!(o, "    attempt {}: {id}", i + 1)?;
        }
    }
    if j.max_attempts > 1 {
        writeln!(o, "  Attempts: {} of at most {}", j.attempt, j.max_attempts)?;
    }
    if let Some(s) = j.started_unix_ms {
        writeln!(o, "  Started: {}", rfc3339(s))?;
    }
    if let Some(e) = j.ended_unix_ms {
        writeln!(o, "  Ended: {}", rfc3339(e))?;
    }
    if let Some(code) = j.exit_code {
        writeln!(o, "  Exit Code: {code}")?;
    }
    if let Some(at) = j.retry_at_unix_ms {
        writeln!(o, "  Retry At: {}", rfc3339(at))?;
    }
    if let Some(reason) = &j.reason {
        writeln!(o, "  Reason: {reason}")?;
    }
    Ok(())
}

/// The line after `run` that says where to look next.
pub fn next_steps(id: &str) -> String {
    format!(
        "Watch it with `rnx workflow status {id}`; read its output with `rnx workflow logs {id}`."
    )
}

/// The human `rnx workflow list` table; `now` for the durations of runs
/// that have not ended.
pub fn write_list(
    o: &mut dyn Write,
    workflows: &[WorkflowView],
    now: UnixMillis,
) -> io::Result<()> {
    let rows: Vec<Vec<String>> = workflows
        .iter()
        .map(|w| {
            vec![
                short(w.id.as_deref().unwrap_or("-")).to_owned(),
                w.name.clone().unwrap_or_else(|| w.file.clone()),
                if w.stopping && !w.ended() {
                    "STOPPING".to_owned()
                } else {
                    w.state.clone()
                },
                format!("{}/{} done", w.jobs_done(), w.jobs.len()),
                w.created_unix_ms.map_or_else(|| "-".to_owned(), rfc3339),
                match (w.created_unix_ms, w.ended_unix_ms) {
                    (Some(c), Some(e)) => span(c, e),
                    (Some(c), None) => span(c, now),
                    _ => "-".to_owned(),
                },
            ]
        })
        .collect();
    table::write(
        o,
        &["ID", "NAME", "STATE", "JOBS", "CREATED", "DURATION"],
        &rows,
    )
}

/// What a job's line in `run --follow` keys on: a change in any of these
/// is printed.
pub fn change_key(j: &WorkflowJobView) -> (String, u32, Option<String>) {
    (j.state.clone(), j.attempt, j.job_id.clone())
}

/// `12:00:01 data-preprocessing RUNNING (job 1a2b3c4d)`: a job's new
/// state, at its own time where the node gives one (`now` otherwise), with
/// its job, attempt and why it ended or waits.
pub fn change_line(j: &WorkflowJobView, now: UnixMillis) -> String {
    let at = match j.state.as_str() {
        "RUNNING" => j.started_unix_ms,
        s if is_final(s) => j.ended_unix_ms,
        _ => None,
    }
    .unwrap_or(now);
    let mut line = format!("{} {} {}", clock(at), j.name, j.state);
    let mut about: Vec<String> = Vec::new();
    if let Some(id) = &j.job_id {
        about.push(format!("job {}", short(id)));
    }
    if j.max_attempts > 1 && j.attempt > 0 {
        about.push(format!("attempt {}", attempt_cell(j)));
    }
    if !about.is_empty() {
        line.push_str(&format!(" ({})", about.join(", ")));
    }
    let why = match j.state.as_str() {
        "RETRY_WAIT" => j
            .retry_at_unix_ms
            .map(|t| format!("next attempt at {}", clock(t))),
        "FAILED" | "CANCELED" | "STOPPED" => j.reason.clone(),
        "COMPLETED" => j.exit_code.map(|c| format!("exit code {c}")),
        _ => None,
    };
    if let Some(why) = why {
        line.push_str(": ");
        line.push_str(&why);
    }
    line
}

/// The human `rnx workflow validate` report of a checked file: its jobs by
/// level (jobs of one level may run side by side), each with what it
/// requires and what it asks for.
pub fn write_validated(o: &mut dyn Write, file: &str, wf: &Workflow) -> io::Result<()> {
    let jobs = wf.jobs();
    let plural = if jobs.len() == 1 { "job" } else { "jobs" };
    writeln!(o, "{file} is valid: {} {plural}", jobs.len())?;
    if let Some(name) = wf.name() {
        writeln!(o, "Name: {name}")?;
    }
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let requires = requirement_indices(
        &names,
        jobs.iter()
            .map(|j| j.requires.iter().map(|r| r.job.as_str()).collect()),
    );
    let depth = depths(&requires);
    let levels = depth.iter().max().map_or(0, |d| d + 1);
    writeln!(
        o,
        "Each job starts once its requirements hold; jobs of one level can run side by side."
    )?;
    for level in 0..levels {
        writeln!(o)?;
        if level == 0 {
            writeln!(o, "Level 1 (start at once):")?;
        } else {
            writeln!(o, "Level {}:", level + 1)?;
        }
        for (j, _) in jobs.iter().zip(&depth).filter(|(_, &d)| d == level) {
            writeln!(o, "  {}: {}", j.name, command_line(&j.command, &j.args))?;
            if !j.requires.is_empty() {
                let reqs: Vec<String> = j
                    .requires
                    .iter()
                    .map(|r| format!("{} {}", r.job, r.need.as_str()))
                    .collect();
                writeln!(o, "    requires: {}", reqs.join(", "))?;
            }
            if let Some(r) = &j.runtime {
                writeln!(o, "    runtime: {r}")?;
            }
            let res = resources_text(&j.resources);
            if !res.is_empty() {
                writeln!(o, "    resources: {res}")?;
            }
            if !j.uploads.is_empty() {
                writeln!(o, "    uploads: {}", j.uploads.join(", "))?;
            }
            if !j.volumes.is_empty() {
                writeln!(o, "    volumes: {}", j.volumes.join(", "))?;
            }
            if let Some(n) = &j.network {
                writeln!(o, "    network: {n}")?;
            }
            if let Some(e) = &j.executor {
                writeln!(o, "    executor: {e}")?;
            }
            if !j.devices.is_empty() {
                writeln!(o, "    devices: {}", j.devices.join(", "))?;
            }
            if let Some(t) = j.timeout {
                writeln!(
                    o,
                    "    timeout: {}",
                    joblet_core::parse::format_duration_ms(t)
                )?;
            }
            if j.retries > 0 {
                writeln!(
                    o,
                    "    retries: {} (first after {}, doubling)",
                    j.retries,
                    joblet_core::parse::format_duration_ms(j.retry_backoff)
                )?;
            }
        }
    }
    Ok(())
}

/// `max_cpu 200%, max_memory 4096 MB, 2 GPUs (8192 MB each)`; empty when
/// nothing is asked for.
pub fn resources_text(r: &JobResources) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(c) = r.max_cpu {
        parts.push(format!("max_cpu {c}%"));
    }
    if let Some(c) = &r.cpu_cores {
        parts.push(format!("cpu_cores {c}"));
    }
    if let Some(m) = r.max_memory_mb {
        parts.push(format!("max_memory {m} MB"));
    }
    if let Some(io) = r.max_iobps {
        parts.push(format!("max_iobps {io} bytes/s"));
    }
    match (r.gpu_count, r.gpu_memory_mb) {
        (_, m) if r.gpu_milli.is_some_and(|s| s > 0) => parts.push(format!(
            "{} of a GPU{}",
            crate::printer::share_decimal(
                i64::try_from(r.gpu_milli.unwrap_or(0)).unwrap_or(i64::MAX)
            ),
            m.map(|m| format!(" ({m} MB)")).unwrap_or_default()
        )),
        (Some(n), Some(m)) if n > 0 => parts.push(format!(
            "{n} {} ({m} MB each)",
            if n == 1 { "GPU" } else { "GPUs" }
        )),
        (Some(n), _) if n > 0 => parts.push(format!("{n} {}", if n == 1 { "GPU" } else { "GPUs" })),
        _ => {}
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
