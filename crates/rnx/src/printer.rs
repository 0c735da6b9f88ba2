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
use crate::node_view::{self, NodeListView, NodeView};
use crate::runtime_view::{self, InstalledView, RuntimeView};
use crate::view::{command_line, rfc3339, ExecutorView, JobView, WhoAmIView};
use crate::volume_view::{self, VolumeChange, VolumeView};

pub mod token;
mod workflow;

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

    /// `node list`: the table and who answered, or one JSON object with
    /// `cluster`, `answered_by` and `nodes`.
    pub fn node_list(&mut self, list: &NodeListView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(list),
            Format::Human => {
                node_view::write_list(&mut self.out, list)?;
                self.out.flush()
            }
        }
    }

    /// `node drain|undrain`: the node's new state, or the node as JSON.
    pub fn node_changed(&mut self, node: &NodeView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(node),
            Format::Human => {
                writeln!(self.out, "{}", node_view::change_line(node))?;
                self.out.flush()
            }
        }
    }

    /// `job execs`: the table, or a JSON array with one object per exec.
    pub fn exec_list(&mut self, execs: &[joblet_proto::pb::ExecRecord]) -> io::Result<()> {
        let views: Vec<crate::exec_view::ExecView> =
            execs.iter().map(crate::exec_view::ExecView::from).collect();
        match self.format {
            Format::Json => self.json(&views),
            Format::Human => {
                crate::exec_view::write_table(&mut self.out, &views)?;
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
                write_executors(o, &who.executors)?;
                o.flush()
            }
        }
    }
}

/// `whoami`'s executors: a table (the default marked), then a line for
/// each one the caller may not use or that cannot run GPU jobs, saying
/// why. Nothing from a node that predates executors.
fn write_executors(o: &mut dyn Write, executors: &[ExecutorView]) -> io::Result<()> {
    if executors.is_empty() {
        return Ok(());
    }
    writeln!(o, "Executors:")?;
    let rows: Vec<Vec<String>> = executors
        .iter()
        .map(|e| {
            let caps = if e.capabilities.is_empty() {
                "-".to_owned()
            } else {
                e.capabilities.join(",")
            };
            vec![
                if e.default {
                    format!("{} (default)", e.name)
                } else {
                    e.name.clone()
                },
                e.kind.clone(),
                caps,
                e.version.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    let mut table = Vec::new();
    crate::table::write(
        &mut table,
        &["NAME", "KIND", "CAPABILITIES", "VERSION"],
        &rows,
    )?;
    for line in String::from_utf8_lossy(&table).lines() {
        writeln!(o, "  {line}")?;
    }
    for e in executors {
        if !e.allowed {
            writeln!(
                o,
                "  {}: you may not use it on this node (ask its admin)",
                e.name
            )?;
        }
        if !e.capabilities.iter().any(|c| c == "gpu") {
            match &e.gpu_unavailable {
                Some(why) => writeln!(o, "  {}: no GPU jobs: {why}", e.name)?,
                None => writeln!(o, "  {}: no GPU jobs", e.name)?,
            }
        }
    }
    Ok(())
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
    write_cluster(o, job)?;
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
    if let Some(executor) = &job.executor {
        writeln!(o, "Executor: {executor}")?;
    }
    if !job.devices.is_empty() {
        writeln!(o, "Devices: {}", job.devices.join(", "))?;
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

/// Cluster mode: where the job runs or ran, which attempt, and its restart
/// policy; nothing on a node on its own.
fn write_cluster(o: &mut dyn Write, job: &JobView) -> io::Result<()> {
    let Some(attempt) = job.attempt else {
        return Ok(());
    };
    match job.nodes.as_deref().unwrap_or_default() {
        [] if matches!(job.state.as_str(), "PENDING" | "QUEUED" | "PREEMPTED") => {
            writeln!(o, "Node: - (not placed yet)")?
        }
        [] => writeln!(o, "Node: -")?,
        [one] => writeln!(o, "Node: {one}")?,
        many => writeln!(o, "Nodes: {}", many.join(", "))?,
    }
    if attempt > 1 {
        writeln!(
            o,
            "Attempt: {attempt} (placed again after its node was lost)"
        )?;
    } else {
        writeln!(o, "Attempt: {attempt}")?;
    }
    if let Some(restart) = &job.restart {
        writeln!(o, "Restart: {restart}")?;
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

/// `500` → `50%`, `125` → `12.5%`.
fn share_percent(milli: i64) -> String {
    if milli % 10 == 0 {
        format!("{}%", milli / 10)
    } else {
        format!("{}.{}%", milli / 10, milli % 10)
    }
}

/// `500` → `0.5`, `125` → `0.125`, as `--gpu` takes it.
pub(crate) fn share_decimal(milli: i64) -> String {
    let digits = format!("{milli:03}");
    format!("0.{}", digits.trim_end_matches('0'))
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
    if let Some(milli) = r.gpu_milli {
        writeln!(
            o,
            "GPU Share: {} of one GPU (--gpu={})",
            share_percent(milli),
            share_decimal(milli)
        )?;
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

/// The human `job list` table; a NODE column (cluster mode: the job's
/// nodes) when some job has cluster information, and a WORKFLOW column
/// (`1a2b3c4d/train#1`) when some job is part of a workflow.
pub fn write_list(o: &mut dyn Write, jobs: &[JobView]) -> io::Result<()> {
    let cluster = jobs.iter().any(|j| j.attempt.is_some());
    let workflows = jobs.iter().any(|j| j.workflow_id.is_some());
    let mut header = vec!["ID", "STATUS", "EXIT", "OWNER", "CREATED"];
    if cluster {
        header.push("NODE");
    }
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
            if cluster {
                row.push(j.nodes_cell());
            }
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
mod tests;
