//! What `rnx job execs` shows: the commands run inside a job (`--json`: one
//! object per exec, times as RFC 3339 beside their `*_ms`) and a table.

use std::io::{self, Write};

use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::view::rfc3339_millis;

/// One exec into a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecView {
    pub id: i64,
    pub job_id: String,
    /// Who ran it.
    pub caller: String,
    pub command: Vec<String>,
    pub tty: bool,
    pub started: String,
    pub started_ms: UnixMillis,
    /// `null` while it runs (or if the node stopped before it ended).
    pub ended: Option<String>,
    pub ended_ms: Option<UnixMillis>,
    pub exit_code: Option<i32>,
    /// The signal that ended it; `null` when none did.
    pub signal: Option<i32>,
}

impl From<&pb::ExecRecord> for ExecView {
    fn from(r: &pb::ExecRecord) -> Self {
        let ended_ms = (r.ended_unix_ms > 0).then_some(r.ended_unix_ms);
        let mut command = vec![r.command.clone()];
        command.extend(r.args.iter().cloned());
        ExecView {
            id: r.id,
            job_id: r.job_id.clone(),
            caller: r.caller.clone(),
            command,
            tty: r.tty,
            started: rfc3339_millis(r.started_unix_ms),
            started_ms: r.started_unix_ms,
            ended: ended_ms.map(rfc3339_millis),
            ended_ms,
            exit_code: r.exit_code,
            signal: (r.signal > 0).then_some(r.signal),
        }
    }
}

/// The table: one line per exec, oldest first.
pub fn write_table(out: &mut impl Write, execs: &[ExecView]) -> io::Result<()> {
    if execs.is_empty() {
        return writeln!(out, "no commands were run in this job with `rnx job exec`");
    }
    writeln!(
        out,
        "{:<24}  {:<12}  {:<8}  COMMAND",
        "STARTED", "WHO", "EXIT"
    )?;
    for e in execs {
        let exit = match (e.exit_code, e.signal, e.ended_ms) {
            (Some(c), _, _) => c.to_string(),
            (None, Some(s), _) => format!("signal {s}"),
            (None, None, None) => "running".into(),
            (None, None, Some(_)) => "?".into(),
        };
        writeln!(
            out,
            "{:<24}  {:<12}  {:<8}  {}",
            e.started,
            e.caller,
            exit,
            e.command.join(" ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_who_ran_what_and_how_it_ended() {
        let rec = pb::ExecRecord {
            id: 1,
            job_id: "j".into(),
            caller: "alice".into(),
            command: "nvidia-smi".into(),
            args: vec!["-L".into()],
            tty: false,
            started_unix_ms: 1_700_000_000_000,
            ended_unix_ms: 1_700_000_001_000,
            exit_code: Some(0),
            signal: 0,
        };
        let running = pb::ExecRecord {
            ended_unix_ms: 0,
            exit_code: None,
            command: "bash".into(),
            args: vec![],
            ..rec.clone()
        };
        let views: Vec<ExecView> = [rec, running].iter().map(ExecView::from).collect();
        let mut out = Vec::new();
        write_table(&mut out, &views).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("alice") && text.contains("nvidia-smi -L"),
            "{text}"
        );
        assert!(text.lines().nth(2).unwrap().contains("running"), "{text}");
        assert_eq!(views[1].ended, None);
    }
}
