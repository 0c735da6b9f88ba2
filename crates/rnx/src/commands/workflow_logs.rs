//! `rnx workflow logs ID [JOB]`: the output so far of each job's latest
//! attempt, one job after the other, through the job log stream `rnx job
//! log` uses; with `--json`, as JSON lines naming the job.

use std::io::{self, Write};

use serde_json::json;

use super::workflow::get;
use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::follow::{self, GrpcLogs};
use crate::printer::Format;
use crate::view::state_name;
use crate::workflow_text::short;
use crate::workflow_view::{WorkflowJobView, WorkflowView};

pub(super) async fn print(mut ctx: Ctx, id: &str, only: Option<&str>) -> Result<u8, Error> {
    let w = get(&mut ctx, id)
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?;
    let view = WorkflowView::from(&w);
    let workflow = view.id.clone().unwrap_or_else(|| id.to_owned());
    let jobs: Vec<&WorkflowJobView> = match only {
        Some(name) => {
            let Some(j) = view.job(name) else {
                return Err(Error::UnknownWorkflowJob {
                    workflow,
                    job: name.to_owned(),
                    names: view.jobs.iter().map(|j| j.name.clone()).collect(),
                });
            };
            if j.job_id.is_none() {
                return Err(Error::WorkflowJobNotStarted {
                    workflow,
                    job: j.name.clone(),
                    state: j.state.clone(),
                    reason: j.reason.clone(),
                });
            }
            vec![j]
        }
        None => view.jobs.iter().filter(|j| j.job_id.is_some()).collect(),
    };
    if jobs.is_empty() {
        // Best effort: there is nothing else to say.
        let _ = writeln!(
            io::stderr(),
            "rnx: no job of workflow {workflow} has been submitted yet ({})",
            view.state
        );
    }
    for (i, j) in jobs.iter().enumerate() {
        let job_id = j.job_id.clone().unwrap_or_default();
        let mut source = GrpcLogs {
            client: ctx.client.clone(),
            job_id: job_id.clone(),
            follow: false,
            first: None,
        };
        let copied = match ctx.format {
            Format::Human => {
                let mut out = io::stdout().lock();
                if i > 0 {
                    writeln!(out).map_err(Error::Output)?;
                }
                writeln!(
                    out,
                    "==> {} (job {}, attempt {}) <==",
                    j.name,
                    short(&job_id),
                    j.attempt.max(1)
                )
                .map_err(Error::Output)?;
                out.flush().map_err(Error::Output)?;
                drop(out);
                follow::copy_logs(
                    &mut source,
                    &job_id,
                    None,
                    &mut io::stdout(),
                    &mut io::stderr(),
                )
                .await
            }
            Format::Json => {
                let mut out = JsonLines::new(j, &job_id, "stdout");
                let mut err = JsonLines::new(j, &job_id, "stderr");
                let copied =
                    follow::copy_logs(&mut source, &job_id, None, &mut out, &mut err).await;
                out.finish().map_err(Error::Output)?;
                err.finish().map_err(Error::Output)?;
                if let Ok(follow::Outcome {
                    ended: Some(ended), ..
                }) = &copied
                {
                    let mut line = out.base();
                    line["event"] = json!("ended");
                    line["state"] = json!(state_name(ended.state));
                    line["exit_code"] = json!(ended.exit_code);
                    line["reason"] = json!(ended.reason);
                    emit(&line).map_err(Error::Output)?;
                }
                copied
            }
        };
        copied.map_err(|e| Error::from_follow(&ctx.node.address, e))?;
    }
    Ok(exit::SUCCESS)
}

/// Writes one JSON object as a line on stdout.
fn emit(value: &serde_json::Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, value).map_err(io::Error::from)?;
    writeln!(out)?;
    out.flush()
}

/// A sink for one stream of one job's output that writes each piece as a
/// JSON line `{"job", "job_id", "attempt", "event": "output", "stream",
/// "data"}`. A UTF-8 character cut between two pieces is held back until
/// it is whole; bytes that are not UTF-8 become U+FFFD.
struct JsonLines {
    job: String,
    job_id: String,
    attempt: u32,
    stream: &'static str,
    pending: Vec<u8>,
}

impl JsonLines {
    fn new(j: &WorkflowJobView, job_id: &str, stream: &'static str) -> Self {
        JsonLines {
            job: j.name.clone(),
            job_id: job_id.to_owned(),
            attempt: j.attempt,
            stream,
            pending: Vec::new(),
        }
    }

    fn base(&self) -> serde_json::Value {
        json!({"job": self.job, "job_id": self.job_id, "attempt": self.attempt})
    }

    fn emit_text(&self, bytes: &[u8]) -> io::Result<()> {
        let mut line = self.base();
        line["event"] = json!("output");
        line["stream"] = json!(self.stream);
        line["data"] = json!(String::from_utf8_lossy(bytes));
        emit(&line)
    }

    /// Writes what is still held back.
    fn finish(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rest = std::mem::take(&mut self.pending);
        self.emit_text(&rest)
    }
}

impl Write for JsonLines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let whole = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // Only an incomplete last character is held back.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        if whole > 0 {
            let text: Vec<u8> = self.pending.drain(..whole).collect();
            self.emit_text(&text)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
