//! ExecJob and ListExecs: the wire ↔ [`crate::service::Jobs::exec`].

use std::pin::Pin;

use joblet_proto::pb;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Status, Streaming};

use super::input::Wire;
use crate::service::{ApiError, Caller, ExecEvent, ExecRequest, Jobs};

/// An exec's output on the wire.
pub type ExecStream = Pin<Box<dyn Stream<Item = Result<pb::ExecOutput, Status>> + Send>>;

/// ExecJob: the first message starts the process; later ones are its input.
pub async fn exec_job(
    jobs: &Jobs,
    who: &Caller,
    mut inputs: Streaming<pb::ExecInput>,
) -> Result<ExecStream, Status> {
    let start = match inputs.message().await? {
        Some(pb::ExecInput {
            input: Some(pb::exec_input::Input::Start(start)),
        }) => start,
        _ => {
            return Err(ApiError::InvalidField(joblet_core::FieldError::new(
                "input",
                "the first ExecInput must be `start`, naming the job and the command",
            ))
            .into())
        }
    };
    let tty = if start.tty {
        let size = start.size.unwrap_or_default();
        Some(
            joblet_core::TermSize::checked(
                "start.size",
                i64::from(size.rows),
                i64::from(size.cols),
            )
            .map_err(ApiError::from)?,
        )
    } else {
        None
    };
    let req = ExecRequest {
        command: start.command,
        args: start.args,
        env: start.env.into_iter().collect(),
        stdin: start.interactive,
        tty,
    };
    let job = start.job_id.clone();
    let session = jobs.exec(who, &start.job_id, req).await?;
    if let Some(input) = session.input {
        let read = |m: pb::ExecInput| match m.input? {
            pb::exec_input::Input::Data(d) => Some(Wire::Data(d)),
            pb::exec_input::Input::Resize(s) => Some(Wire::Resize(s)),
            pb::exec_input::Input::CloseStdin(true) => Some(Wire::CloseStdin),
            _ => None,
        };
        super::input::forward(inputs, read, input, None, job);
    }
    let out = ReceiverStream::new(session.output).map(|e| {
        Ok(pb::ExecOutput {
            output: Some(match e {
                ExecEvent::Stdout(d) => pb::exec_output::Output::Stdout(d),
                ExecEvent::Stderr(d) => pb::exec_output::Output::Stderr(d),
                ExecEvent::Exit { code, signal } => pb::exec_output::Output::Exit(pb::ExecExit {
                    exit_code: code,
                    signal: signal.unwrap_or(0),
                }),
            }),
        })
    });
    Ok(Box::pin(out))
}

/// ListExecs.
pub fn list_execs(jobs: &Jobs, who: &Caller, job: &str) -> Result<pb::ListExecsResponse, Status> {
    let execs = jobs.execs(who, job)?;
    Ok(pb::ListExecsResponse {
        execs: execs
            .into_iter()
            .map(|e| {
                let mut argv = e.argv.into_iter();
                pb::ExecRecord {
                    id: e.id,
                    job_id: e.job_id,
                    caller: e.caller,
                    command: argv.next().unwrap_or_default(),
                    args: argv.collect(),
                    tty: e.tty,
                    started_unix_ms: e.started_ms,
                    ended_unix_ms: e.ended_ms.unwrap_or(0),
                    exit_code: e.exit_code,
                    signal: e.signal.unwrap_or(0),
                }
            })
            .collect(),
    })
}
