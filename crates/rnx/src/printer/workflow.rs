//! The printer's `rnx workflow` results: [`crate::workflow_text`] for
//! people, the views as they are for `--json`.

use std::io::{self, Write};

use joblet_core::UnixMillis;

use super::{Format, Printer};
use crate::workflow_text;
use crate::workflow_view::{WorkflowDeletedView, WorkflowView};

impl<W: Write> Printer<W> {
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
}
