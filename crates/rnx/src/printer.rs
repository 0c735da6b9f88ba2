//! The one printer: every result rnx shows goes through it, as text for
//! people or as JSON (`--json`) for scripts. It writes plain text with no
//! colours or terminal tricks, so its output is the same in a pipe.

use std::io::{self, Write};
use std::time::Duration;

use joblet_core::parse::{format_duration, format_duration_ms};
use joblet_core::UnixMillis;
use serde::Serialize;

use crate::audit_view::{self, AuditView};
use crate::gpu_view::{self, GpuHealthView, GpuNodeView, GpuView};
use crate::runtime_view::{self, InstalledView, RuntimeView};
use crate::view::{command_line, rfc3339, JobView, WhoAmIView};
use crate::volume_view::{self, VolumeChange, VolumeView};
use crate::workflow_text;
use crate::workflow_view::{WorkflowDeletedView, WorkflowView};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
}

pub struct Printer<W: Write> {
    format: Format,
    out: W,
}

#[derive(Serialize)]
struct Deleted<'a> {
    id: &'a str,
    deleted: bool,
}

impl<W: Write> Printer<W> {
    pub fn new(format: Format, out: W) -> Self {
        Printer { format, out }
    }

    fn json<T: Serialize + ?Sized>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, value).map_err(io::Error::from)?;
        writeln!(self.out)?;
        self.out.flush()
    }

    /// `job run` without `--follow`: just the id (so `ID=$(rnx job run …)`
    /// works), or the job as JSON.
    pub fn job_started(&mut self, job: &JobView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(job),
            Format::Human => {
                writeln!(self.out, "{}", job.id)?;
                self.out.flush()
            }
        }
    }

    /// `job status`; `now` is used for "running for" durations.
    pub fn job_status(&mut self, job: &JobView, detail: bool, now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(job),
            Format::Human => {
                write_status(&mut self.out, job, detail, now)?;
                self.out.flush()
            }
        }
    }

    pub fn job_list(&mut self, jobs: &[JobView]) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(jobs),
            Format::Human => {
                write_list(&mut self.out, jobs)?;
                self.out.flush()
            }
        }
    }

    /// `job stop` / `job kill`: what was done, and the state the node reported.
    pub fn job_signalled(&mut self, job: &JobView, what: &str) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(job),
            Format::Human => {
                writeln!(self.out, "job {}: {what} (state: {})", job.id, job.state)?;
                self.out.flush()
            }
        }
    }

    pub fn job_deleted(&mut self, id: &str) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(&Deleted { id, deleted: true }),
            Format::Human => {
                writeln!(self.out, "job {id} deleted")?;
                self.out.flush()
            }
        }
    }

    /// `gpu status`.
    pub fn gpu_status(&mut self, node: &GpuNodeView, all: bool) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(node),
            Format::Human => {
                gpu_view::write_status(&mut self.out, node, all)?;
                self.out.flush()
            }
        }
    }

    /// One `gpu watch` frame: the table, or one JSON object per line.
    /// `clear`: home the cursor and clear the screen first, like watch(1)
    /// (only asked for when stdout is a terminal).
    pub fn gpu_watch_frame(
        &mut self,
        node: &GpuNodeView,
        all: bool,
        clear: bool,
    ) -> io::Result<()> {
        match self.format {
            Format::Json => {
                serde_json::to_writer(&mut self.out, node).map_err(io::Error::from)?;
                writeln!(self.out)?;
                self.out.flush()
            }
            Format::Human => {
                if clear {
                    write!(self.out, "\x1b[H\x1b[2J")?;
                }
                gpu_view::write_status(&mut self.out, node, all)?;
                writeln!(self.out)?;
                self.out.flush()
            }
        }
    }

    /// `gpu health`.
    pub fn gpu_health(&mut self, health: &GpuHealthView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(health),
            Format::Human => {
                gpu_view::write_health(&mut self.out, health)?;
                self.out.flush()
            }
        }
    }

    /// `gpu drain|offline|online`: the GPU's new state.
    pub fn gpu_changed(&mut self, gpu: &GpuView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(gpu),
            Format::Human => {
                writeln!(
                    self.out,
                    "GPU {} ({}) is now {}: {}",
                    gpu.index, gpu.uuid, gpu.state, gpu.state_cause
                )?;
                self.out.flush()
            }
        }
    }

    /// `audit`: the table, or a JSON array with one object per record.
    pub fn audit(&mut self, records: &[AuditView]) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(records),
            Format::Human => {
                audit_view::write_table(&mut self.out, records)?;
                self.out.flush()
            }
        }
    }

    /// `runtime list`; `now` for the INSTALLED ages.
    pub fn runtime_list(&mut self, runtimes: &[RuntimeView], now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(runtimes),
            Format::Human => {
                runtime_view::write_list(&mut self.out, runtimes, now)?;
                self.out.flush()
            }
        }
    }

    /// `runtime info`.
    pub fn runtime_info(&mut self, runtime: &RuntimeView, now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(runtime),
            Format::Human => {
                runtime_view::write_info(&mut self.out, runtime, now)?;
                self.out.flush()
            }
        }
    }

    /// `runtime install|build`: the one-line summary.
    pub fn runtime_installed(&mut self, installed: &InstalledView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(installed),
            Format::Human => {
                writeln!(self.out, "{}", runtime_view::installed_line(installed))?;
                self.out.flush()
            }
        }
    }

    /// `runtime remove`: the runtime as it was.
    pub fn runtime_removed(&mut self, runtime: &RuntimeView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(runtime),
            Format::Human => {
                writeln!(self.out, "removed runtime {}", runtime.reference)?;
                self.out.flush()
            }
        }
    }

    pub fn volume_list(&mut self, volumes: &[VolumeView]) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(volumes),
            Format::Human => {
                volume_view::write_list(&mut self.out, volumes)?;
                self.out.flush()
            }
        }
    }

    pub fn volume_inspect(&mut self, volume: &VolumeView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(volume),
            Format::Human => {
                volume_view::write_inspect(&mut self.out, volume)?;
                self.out.flush()
            }
        }
    }

    /// `volume create|remove|share|unshare`: what was done, or the volume
    /// as the node answered it.
    pub fn volume_changed(&mut self, volume: &VolumeView, change: VolumeChange) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(volume),
            Format::Human => {
                writeln!(self.out, "{}", volume_view::change_line(volume, change))?;
                self.out.flush()
            }
        }
    }

    /// `workflow run`: the DAG view and where to look next.
    pub fn workflow_started(&mut self, w: &WorkflowView, now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(w),
            Format::Human => {
                workflow_text::write_status(&mut self.out, w, false, now)?;
                if let Some(id) = &w.id {
                    writeln!(self.out)?;
                    writeln!(self.out, "{}", workflow_text::next_steps(id))?;
                }
                self.out.flush()
            }
        }
    }

    /// `workflow run --follow` before its first change: the DAG view (with
    /// `--json`, nothing: the one JSON document comes at the end).
    pub fn workflow_following(&mut self, w: &WorkflowView, now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => Ok(()),
            Format::Human => {
                workflow_text::write_status(&mut self.out, w, false, now)?;
                writeln!(self.out)?;
                writeln!(
                    self.out,
                    "Following until it ends (Ctrl-C stops following; the workflow keeps running):"
                )?;
                self.out.flush()
            }
        }
    }

    /// `workflow status`, and the last view of `workflow run --follow`.
    pub fn workflow_status(
        &mut self,
        w: &WorkflowView,
        detail: bool,
        now: UnixMillis,
    ) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(w),
            Format::Human => {
                workflow_text::write_status(&mut self.out, w, detail, now)?;
                self.out.flush()
            }
        }
    }

    /// The end of `workflow run --follow`: the workflow as it ended.
    pub fn workflow_followed(&mut self, w: &WorkflowView, now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(w),
            Format::Human => {
                writeln!(self.out)?;
                workflow_text::write_status(&mut self.out, w, false, now)?;
                self.out.flush()
            }
        }
    }

    /// One job change of `workflow run --follow`. With `--json` it goes to
    /// stderr, so stdout holds only the final JSON document.
    pub fn workflow_change(&mut self, line: &str) -> io::Result<()> {
        match self.format {
            Format::Json => {
                let mut err = io::stderr().lock();
                writeln!(err, "{line}")?;
                err.flush()
            }
            Format::Human => {
                writeln!(self.out, "{line}")?;
                self.out.flush()
            }
        }
    }

    pub fn workflow_list(&mut self, ws: &[WorkflowView], now: UnixMillis) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(ws),
            Format::Human => {
                workflow_text::write_list(&mut self.out, ws, now)?;
                self.out.flush()
            }
        }
    }

    /// `workflow validate`: the node's answer as JSON, or the checked file
    /// `local` by level (`file` as the user named it).
    pub fn workflow_validated(
        &mut self,
        answer: &WorkflowView,
        file: &str,
        local: &joblet_workflow::Workflow,
    ) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(answer),
            Format::Human => {
                workflow_text::write_validated(&mut self.out, file, local)?;
                self.out.flush()
            }
        }
    }

    /// `workflow stop`: what was done and the state the node reported.
    pub fn workflow_stopped(&mut self, w: &WorkflowView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(w),
            Format::Human => {
                let id = w.id.as_deref().unwrap_or("-");
                if w.ended() {
                    writeln!(self.out, "workflow {id}: {}", w.state)?;
                } else {
                    writeln!(
                        self.out,
                        "workflow {id}: stop requested: running jobs are stopped, waiting ones canceled (state: {}, {}/{} jobs done)",
                        w.state,
                        w.jobs_done(),
                        w.jobs.len()
                    )?;
                }
                self.out.flush()
            }
        }
    }

    pub fn workflow_deleted(&mut self, d: &WorkflowDeletedView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(d),
            Format::Human => {
                let jobs = if d.jobs_deleted == 1 { "job" } else { "jobs" };
                writeln!(
                    self.out,
                    "workflow {} deleted, with {} {jobs}",
                    d.id, d.jobs_deleted
                )?;
                self.out.flush()
            }
        }
    }

    pub fn whoami(&mut self, who: &WhoAmIView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(who),
            Format::Human => {
                let o = &mut self.out;
                writeln!(o, "Name: {}", who.name)?;
                writeln!(o, "Role: {}", who.role)?;
                writeln!(o, "Node: {} ({})", who.node, who.address)?;
                writeln!(o, "Node Version: {}", who.node_version)?;
                writeln!(o, "Enforces: {}", who.supported.join(", "))?;
                if let Some(d) = &who.state_disk {
                    writeln!(
                        o,
                        "State Disk: {} free of {} ({})",
                        human_bytes(d.free_bytes),
                        human_bytes(d.total_bytes),
                        d.path
                    )?;
                }
                o.flush()
            }
        }
    }
}

fn span(from: UnixMillis, to: UnixMillis) -> String {
    format_duration(Duration::from_millis(to.saturating_sub(from).max(0) as u64))
}

/// The human `job status` text.
pub fn write_status(
    o: &mut dyn Write,
    job: &JobView,
    detail: bool,
    now: UnixMillis,
) -> io::Result<()> {
    writeln!(o, "UUID: {}", job.id)?;
    writeln!(o, "Status: {}", job.state)?;
    writeln!(o, "Command: {}", command_line(&job.command, &job.args))?;
    writeln!(o, "Owner: {}", job.owner)?;
    if let Some(wf) = &job.workflow_id {
        let mut line = format!("Workflow: {wf}");
        match (&job.workflow_job, job.workflow_attempt) {
            (Some(name), Some(a)) => line.push_str(&format!(" (job {name}, attempt {a})")),
            (Some(name), None) => line.push_str(&format!(" (job {name})")),
            _ => {}
        }
        writeln!(o, "{line}")?;
    }
    if let Some(created) = job.created_unix_ms {
        writeln!(o, "Created: {}", rfc3339(created))?;
    }
    if let Some(started) = job.started_unix_ms {
        match (job.ended_unix_ms, job.state.as_str()) {
            (None, "RUNNING") => writeln!(
                o,
                "Started: {} (running for {})",
                rfc3339(started),
                span(started, now)
            )?,
            _ => writeln!(o, "Started: {}", rfc3339(started))?,
        }
    }
    if let Some(ended) = job.ended_unix_ms {
        match job.started_unix_ms {
            Some(started) => writeln!(
                o,
                "Ended: {} (ran {})",
                rfc3339(ended),
                span(started, ended)
            )?,
            None => writeln!(o, "Ended: {}", rfc3339(ended))?,
        }
    }
    if let Some(code) = job.exit_code {
        writeln!(o, "Exit Code: {code}")?;
    }
    if let Some(reason) = &job.reason {
        writeln!(o, "Reason: {reason}")?;
    }
    if let Some(runtime) = &job.runtime {
        match &job.runtime_digest {
            Some(d) => writeln!(o, "Runtime: {runtime} ({})", d.get(..19).unwrap_or(d))?,
            None => writeln!(o, "Runtime: {runtime}")?,
        }
    }
    if !job.volumes.is_empty() {
        let at: Vec<String> = job
            .volumes
            .iter()
            .map(|v| match v.strip_suffix(":ro") {
                Some(name) => format!("{name} at /volumes/{name} (read-only)"),
                None => format!("{v} at /volumes/{v}"),
            })
            .collect();
        writeln!(o, "Volumes: {}", at.join(", "))?;
    }
    if job.network == "host" {
        writeln!(o, "Network: host")?;
    }
    if let Some(t) = job.timeout_ms {
        writeln!(
            o,
            "Timeout: {}",
            format_duration_ms(Duration::from_millis(t as u64))
        )?;
    }
    let r = &job.resources;
    if let Some(cpu) = r.max_cpu_percent {
        writeln!(o, "Max CPU: {cpu}%")?;
    }
    if let Some(cores) = &r.cpu_cores {
        writeln!(o, "CPU Cores: {cores}")?;
    }
    if let Some(mem) = r.max_memory_mb {
        writeln!(o, "Max Memory: {mem} MB")?;
    }
    if let Some(io) = r.max_iobps {
        writeln!(o, "Max IO: {io} bytes/s")?;
    }
    write_gpus(o, job)?;
    if !job.env.is_empty() {
        writeln!(o, "Environment:")?;
        for (k, v) in &job.env {
            writeln!(o, "  {k}={v}")?;
        }
    }
    if !job.secret_env.is_empty() {
        writeln!(o, "Secret Environment:")?;
        for k in job.secret_env.keys() {
            writeln!(o, "  {k}=***")?;
        }
    }
    writeln!(o, "Output: {} bytes", job.log_bytes)?;
    if detail {
        writeln!(o, "Transitions:")?;
        let from_w = job
            .transitions
            .iter()
            .map(|t| t.from.as_deref().unwrap_or("-").len())
            .max()
            .unwrap_or(0);
        let to_w = job
            .transitions
            .iter()
            .map(|t| t.to.len())
            .max()
            .unwrap_or(0);
        for t in &job.transitions {
            let line = format!(
                "  {}  {:<from_w$} -> {:<to_w$}  {}",
                rfc3339(t.at_unix_ms),
                t.from.as_deref().unwrap_or("-"),
                t.to,
                t.reason.as_deref().unwrap_or("")
            );
            writeln!(o, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

/// `512 B`, `3.4 MiB`, `1.2 GiB`, `2.0 TiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

fn gpus_word(n: usize) -> &'static str {
    if n == 1 {
        "GPU"
    } else {
        "GPUs"
    }
}

/// The GPU lines of `job status`, seed 001's first:
/// `GPUs: [0, 1] (2 GPUs allocated)`, `GPU Memory: 8192 MB required per GPU`.
fn write_gpus(o: &mut dyn Write, job: &JobView) -> io::Result<()> {
    let r = &job.resources;
    if r.gpu_count > 0 {
        let count = usize::try_from(r.gpu_count).unwrap_or(usize::MAX);
        match &job.gpus {
            Some(g) => {
                let indices: Vec<String> = g.indices.iter().map(u32::to_string).collect();
                let n = g.indices.len().max(g.uuids.len());
                // MIG: the indices are the slices' parent GPUs.
                let word = match (g.sharing.as_str(), n) {
                    ("mig", 1) => "MIG slice",
                    ("mig", _) => "MIG slices",
                    _ => gpus_word(n),
                };
                writeln!(o, "GPUs: [{}] ({n} {word} allocated)", indices.join(", "),)?;
            }
            None if matches!(job.state.as_str(), "PENDING" | "QUEUED" | "PREEMPTED") => {
                writeln!(o, "GPUs: waiting for {count} {}", gpus_word(count))?
            }
            None => writeln!(o, "GPUs: {count} requested, none allocated")?,
        }
    }
    if let Some(gmem) = r.gpu_memory_mb {
        writeln!(o, "GPU Memory: {gmem} MB required per GPU")?;
    }
    if let Some(g) = &job.gpus {
        if !g.uuids.is_empty() {
            writeln!(o, "GPU UUIDs: {}", g.uuids.join(", "))?;
        }
        if !g.sharing.is_empty() && g.sharing != "exclusive" {
            writeln!(o, "GPU Sharing: {}", g.sharing)?;
        }
        if let Some(peak) = g.peak_memory_mb {
            writeln!(o, "GPU Peak Memory: {peak} MB")?;
        }
    }
    if let Some(t) = r.gpu_time_seconds {
        writeln!(
            o,
            "GPU Time Limit: {}",
            format_duration(Duration::from_secs(t as u64))
        )?;
    }
    if let Some(mig) = &job.mig_profile {
        writeln!(o, "MIG Profile: {mig}")?;
    }
    if job.gpu_profiling {
        writeln!(o, "GPU Profiling: enabled")?;
    }
    if let Some(cuda) = &job.cuda_version {
        writeln!(o, "CUDA: {cuda}")?;
    }
    Ok(())
}

/// The human `job list` table; a WORKFLOW column (`1a2b3c4d/train#1`)
/// when some job is part of a workflow.
pub fn write_list(o: &mut dyn Write, jobs: &[JobView]) -> io::Result<()> {
    let workflows = jobs.iter().any(|j| j.workflow_id.is_some());
    let mut header = vec!["ID", "STATUS", "EXIT", "OWNER", "CREATED"];
    if workflows {
        header.push("WORKFLOW");
    }
    header.push("COMMAND");
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let mut row = vec![
                j.id.chars().take(8).collect(),
                j.state.clone(),
                j.exit_code
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                j.owner.clone(),
                j.created_unix_ms.map_or_else(|| "-".to_owned(), rfc3339),
            ];
            if workflows {
                row.push(j.workflow_ref().unwrap_or_else(|| "-".to_owned()));
            }
            row.push(command_line(&j.command, &j.args));
            row
        })
        .collect();
    crate::table::write(o, &header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_proto::pb;

    const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z

    fn transition(from: pb::JobState, to: pb::JobState, at: i64, reason: &str) -> pb::Transition {
        pb::Transition {
            from: from as i32,
            to: to as i32,
            at_unix_ms: at,
            reason: reason.into(),
        }
    }

    /// A finished GPU job with every field set.
    fn sample_job() -> pb::Job {
        use pb::JobState::*;
        pb::Job {
            id: "abc123de-f456-7890-1234-567890abcdef".into(),
            command: "python".into(),
            args: vec![
                "train.py".into(),
                "--epochs".into(),
                "3".into(),
                "--note=two words".into(),
            ],
            state: Completed as i32,
            owner: "admin".into(),
            resources: Some(pb::Resources {
                max_cpu: 200,
                cpu_cores: "0-3".into(),
                max_memory_mb: 1024,
                max_iobps: 10_485_760,
                gpu_count: 2,
                gpu_memory_mb: 8192,
                gpu_time_seconds: Some(7200),
            }),
            gpus: Some(pb::JobGpus {
                indices: vec![0, 1],
                uuids: vec![
                    "GPU-1a2b3c4d-0000-1111-2222-333344445555".into(),
                    "GPU-5e6f7a8b-0000-1111-2222-333344445555".into(),
                ],
                memory_mb_per_gpu: 8192,
                sharing: "exclusive".into(),
                peak_memory_mb: 5500,
            }),
            cuda_version: "12.2".into(),
            mig_profile: String::new(),
            gpu_profiling: true,
            env: [("MODE".to_owned(), "fast".to_owned())].into(),
            secret_env: [("API_TOKEN".to_owned(), "***".to_owned())].into(),
            exit_code: Some(0),
            reason: "exited with code 0".into(),
            created_unix_ms: T0,
            started_unix_ms: T0 + 1_500,
            ended_unix_ms: T0 + 1_500 + 330_000,
            timeout_seconds: 3600,
            timeout_ms: 3_600_000,
            workflow_id: String::new(),
            workflow_job: String::new(),
            workflow_attempt: 0,
            runtime: "python-3.11-ml@1.0".into(),
            network: "none".into(),
            transitions: vec![
                transition(Unspecified, Pending, T0, "submitted"),
                transition(Pending, Queued, T0 + 10, ""),
                transition(Queued, Running, T0 + 1_500, "started with pid 4242"),
                transition(Running, Completed, T0 + 331_500, "exited with code 0"),
            ],
            log_bytes: 1234,
            volumes: vec!["data-lake".into(), "images:ro".into()],
            runtime_digest: "sha256:0123456789abcdef0123456789abcdef".into(),
        }
    }

    fn minimal_running_job() -> pb::Job {
        pb::Job {
            id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
            command: "sleep".into(),
            args: vec!["600".into()],
            state: pb::JobState::Running as i32,
            owner: "alice".into(),
            created_unix_ms: T0 + 60_000,
            started_unix_ms: T0 + 61_000,
            ..Default::default()
        }
    }

    fn human(f: impl FnOnce(&mut Printer<&mut Vec<u8>>) -> io::Result<()>) -> String {
        let mut buf = Vec::new();
        f(&mut Printer::new(Format::Human, &mut buf)).unwrap();
        String::from_utf8(buf).unwrap()
    }

    fn json(f: impl FnOnce(&mut Printer<&mut Vec<u8>>) -> io::Result<()>) -> serde_json::Value {
        let mut buf = Vec::new();
        f(&mut Printer::new(Format::Json, &mut buf)).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }

    #[test]
    fn status_human() {
        let job = JobView::from(&sample_job());
        insta::assert_snapshot!(human(|p| p.job_status(&job, false, T0 + 999_000)));
    }

    #[test]
    fn status_human_detail() {
        let job = JobView::from(&sample_job());
        insta::assert_snapshot!(human(|p| p.job_status(&job, true, T0 + 999_000)));
    }

    #[test]
    fn status_shows_a_sub_second_timeout_to_the_millisecond() {
        let job = JobView::from(&pb::Job {
            timeout_ms: 1900,
            timeout_seconds: 2,
            ..minimal_running_job()
        });
        let text = human(|p| p.job_status(&job, false, T0 + 62_000));
        assert!(text.contains("Timeout: 1s 900ms\n"), "{text}");
    }

    #[test]
    fn status_human_running_minimal() {
        let job = JobView::from(&minimal_running_job());
        insta::assert_snapshot!(human(|p| p.job_status(&job, false, T0 + 61_000 + 125_000)));
    }

    #[test]
    fn list_human() {
        let jobs = [
            JobView::from(&minimal_running_job()),
            JobView::from(&sample_job()),
        ];
        insta::assert_snapshot!(human(|p| p.job_list(&jobs)));
        assert_eq!(
            human(|p| p.job_list(&[])),
            "ID  STATUS  EXIT  OWNER  CREATED  COMMAND\n"
        );
    }

    #[test]
    fn workflow_jobs_name_their_workflow() {
        let mut in_wf = minimal_running_job();
        in_wf.workflow_id = "1a2b3c4d-0000-4000-8000-00000000abcd".into();
        in_wf.workflow_job = "model-training".into();
        in_wf.workflow_attempt = 2;
        let jobs = [JobView::from(&in_wf), JobView::from(&sample_job())];
        let list = human(|p| p.job_list(&jobs));
        let lines: Vec<&str> = list.lines().collect();
        assert!(
            lines[0].contains("  CREATED               WORKFLOW                   COMMAND"),
            "{list}"
        );
        assert!(
            lines[1].ends_with("1a2b3c4d/model-training#2  sleep 600"),
            "{list}"
        );
        assert!(
            lines[2].contains("  -                          python"),
            "{list}"
        );

        let status = human(|p| p.job_status(&jobs[0], false, T0 + 62_000));
        assert!(
            status.contains("Owner: alice\nWorkflow: 1a2b3c4d-0000-4000-8000-00000000abcd (job model-training, attempt 2)\n"),
            "{status}"
        );
        let v = json(|p| p.job_status(&jobs[0], false, 0));
        assert_eq!(v["workflow_id"], "1a2b3c4d-0000-4000-8000-00000000abcd");
        assert_eq!(v["workflow_job"], "model-training");
        assert_eq!(v["workflow_attempt"], 2);
        let alone = json(|p| p.job_status(&jobs[1], false, 0));
        assert_eq!(alone["workflow_id"], serde_json::Value::Null);
        assert_eq!(alone["workflow_attempt"], serde_json::Value::Null);
        assert!(!human(|p| p.job_status(&jobs[1], false, 0)).contains("Workflow"));
    }

    #[test]
    fn status_json() {
        let job = JobView::from(&sample_job());
        let mut buf = Vec::new();
        Printer::new(Format::Json, &mut buf)
            .job_status(&job, false, 0)
            .unwrap();
        insta::assert_snapshot!(String::from_utf8(buf).unwrap());
    }

    #[test]
    fn list_json_is_an_array_of_the_same_view() {
        let job = JobView::from(&sample_job());
        let one = json(|p| p.job_status(&job, false, 0));
        let list = json(|p| p.job_list(std::slice::from_ref(&job)));
        assert_eq!(list, serde_json::Value::Array(vec![one]));
    }

    #[test]
    fn run_prints_only_the_id() {
        let job = JobView::from(&sample_job());
        assert_eq!(human(|p| p.job_started(&job)), format!("{}\n", job.id));
        assert_eq!(json(|p| p.job_started(&job))["id"], job.id.as_str());
    }

    #[test]
    fn actions_and_whoami() {
        let job = JobView::from(&minimal_running_job());
        assert_eq!(
            human(|p| p.job_signalled(&job, "SIGKILL sent")),
            "job 0f0e0d0c-0000-4000-8000-000000000001: SIGKILL sent (state: RUNNING)\n"
        );
        assert_eq!(human(|p| p.job_deleted("abc")), "job abc deleted\n");
        assert_eq!(
            json(|p| p.job_deleted("abc")),
            serde_json::json!({"id": "abc", "deleted": true})
        );
        let who = WhoAmIView {
            name: "admin".into(),
            role: "admin".into(),
            node: "default".into(),
            address: "127.0.0.1:50051".into(),
            node_version: "0.1.0".into(),
            supported: vec!["env".into(), "secret_env".into(), "timeout".into()],
            state_disk: Some(crate::view::StateDiskView {
                path: "/var/lib/joblet".into(),
                free_bytes: 41 << 30,
                total_bytes: 252 << 30,
            }),
        };
        insta::assert_snapshot!(human(|p| p.whoami(&who)));
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }

    /// Seed 001's lines, for a placed and for a waiting GPU job.
    #[test]
    fn gpu_lines_of_job_status() {
        let placed = human(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
        assert!(
            placed.contains(
                "GPUs: [0, 1] (2 GPUs allocated)\nGPU Memory: 8192 MB required per GPU\n"
            ),
            "{placed}"
        );
        assert!(placed.contains("GPU UUIDs: GPU-1a2b3c4d-0000-1111-2222-333344445555, GPU-5e6f7a8b-0000-1111-2222-333344445555\n"), "{placed}");
        assert!(placed.contains("GPU Peak Memory: 5500 MB\n"), "{placed}");

        let mut waiting = sample_job();
        waiting.state = pb::JobState::Queued as i32;
        waiting.gpus = None;
        waiting.resources = Some(pb::Resources {
            gpu_count: 2,
            ..Default::default()
        });
        let text = human(|p| p.job_status(&JobView::from(&waiting), false, T0));
        assert!(text.contains("GPUs: waiting for 2 GPUs\n"), "{text}");
        assert!(!text.contains("GPU Memory"), "not asked for: {text}");
        assert!(!text.contains("GPU UUIDs"), "{text}");
        let v = json(|p| p.job_status(&JobView::from(&waiting), false, T0));
        assert_eq!(v["gpus"], serde_json::Value::Null);
        assert_eq!(v["resources"]["gpu_count"], 2);

        let mut one = sample_job();
        one.gpus = Some(pb::JobGpus {
            indices: vec![3],
            uuids: vec!["GPU-x".into()],
            sharing: "shared".into(),
            ..Default::default()
        });
        let text = human(|p| p.job_status(&JobView::from(&one), false, T0));
        assert!(text.contains("GPUs: [3] (1 GPU allocated)\n"), "{text}");
        assert!(text.contains("GPU Sharing: shared\n"), "{text}");
        assert!(!text.contains("GPU Peak Memory"), "{text}");

        let mut mig = sample_job();
        mig.gpus = Some(pb::JobGpus {
            indices: vec![1, 1],
            uuids: vec!["MIG-a".into(), "MIG-b".into()],
            sharing: "mig".into(),
            ..Default::default()
        });
        mig.mig_profile = "1g.10gb".into();
        mig.gpu_profiling = false;
        let text = human(|p| p.job_status(&JobView::from(&mig), false, T0));
        assert!(
            text.contains("GPUs: [1, 1] (2 MIG slices allocated)\n"),
            "{text}"
        );
        assert!(text.contains("GPU UUIDs: MIG-a, MIG-b\n"), "{text}");
        assert!(text.contains("MIG Profile: 1g.10gb\n"), "{text}");
        assert!(!text.contains("GPU Profiling"), "{text}");
        let v = json(|p| p.job_status(&JobView::from(&mig), false, T0));
        assert_eq!(v["mig_profile"], "1g.10gb");
        assert_eq!(v["gpu_profiling"], false);

        let cpu = human(|p| p.job_status(&JobView::from(&minimal_running_job()), false, T0));
        assert!(!cpu.contains("GPU"), "{cpu}");
    }

    #[test]
    fn gpu_fields_in_json() {
        let v = json(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
        assert_eq!(v["gpus"]["indices"], serde_json::json!([0, 1]));
        assert_eq!(
            v["gpus"]["uuids"][1],
            "GPU-5e6f7a8b-0000-1111-2222-333344445555"
        );
        assert_eq!(v["gpus"]["memory_mb_per_gpu"], 8192);
        assert_eq!(v["gpus"]["peak_memory_mb"], 5500);
        assert_eq!(v["resources"]["gpu_time_seconds"], 7200);
        assert_eq!(v["cuda_version"], "12.2");
        assert_eq!(v["mig_profile"], serde_json::Value::Null);
        assert_eq!(v["gpu_profiling"], true);
        let text = human(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
        assert!(text.contains("GPU Profiling: enabled\n"), "{text}");
        assert!(!text.contains("MIG Profile"), "{text}");
    }

    fn audit_records() -> Vec<AuditView> {
        [
            pb::AuditRecord {
                job_id: "abc123de-f456-7890-1234-567890abcdef".into(),
                owner: "alice".into(),
                gpu_uuids: vec!["GPU-aaaa".into(), "GPU-bbbb".into()],
                gpu_indices: vec![0, 1],
                memory_mb_per_gpu: 8192,
                sharing: "exclusive".into(),
                start_ms: T0,
                end_ms: T0 + 5_430_000,
                duration_ms: 5_430_000,
                peak_memory_mb: 7900,
                ended: "FAILED".into(),
                reason: "GPU memory quota exceeded: used 9000 MB of 8192 MB on GPU-aaaa".into(),
            },
            pb::AuditRecord {
                job_id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
                owner: "bob".into(),
                gpu_uuids: vec!["GPU-cccc".into()],
                gpu_indices: vec![2],
                sharing: "shared".into(),
                start_ms: T0 + 60_000,
                ..Default::default()
            },
        ]
        .iter()
        .map(AuditView::from)
        .collect()
    }

    #[test]
    fn audit_table() {
        insta::assert_snapshot!(human(|p| p.audit(&audit_records())));
        assert_eq!(
            human(|p| p.audit(&[])),
            "JOB  OWNER  GPUS  START  END  DURATION  PEAK MEM  ENDED\n"
        );
    }

    #[test]
    fn audit_json() {
        let v = json(|p| p.audit(&audit_records()));
        insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
        let open = &v[1];
        assert_eq!(open["end"], serde_json::Value::Null);
        assert_eq!(open["end_ms"], serde_json::Value::Null);
        assert_eq!(open["duration_ms"], serde_json::Value::Null);
        assert_eq!(open["memory_mb_per_gpu"], serde_json::Value::Null);
        assert_eq!(v[0]["start"], "2025-01-02T03:04:05.000Z");
        assert_eq!(v[0]["duration_ms"], 5_430_000);
    }
}
