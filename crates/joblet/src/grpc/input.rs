//! The input half of AttachJob and ExecJob: the wire's data, resizes and
//! end of input, checked and handed to the service's [`TakesInput`].

use joblet_proto::pb;
use tonic::Streaming;

use crate::service::{Input, TakesInput};

/// One input message as both calls carry it.
pub(super) enum Wire {
    Data(Vec<u8>),
    Resize(pb::TerminalSize),
    CloseStdin,
}

/// Forwards `inputs` (after `first`, if any) to `sink` on a task of its
/// own, until either ends. `read` takes a message apart; messages it
/// cannot (a second `open`, an unset oneof) and resizes out of range are
/// skipped.
pub(super) fn forward<M, S>(
    mut inputs: Streaming<M>,
    read: fn(M) -> Option<Wire>,
    mut sink: S,
    first: Option<Input>,
    job: String,
) where
    M: Send + 'static,
    S: TakesInput,
{
    tokio::spawn(async move {
        if let Some(input) = first {
            let _ = sink.send(input).await;
        }
        while let Ok(Some(m)) = inputs.message().await {
            let input = match read(m) {
                Some(Wire::Data(d)) => Input::Data(d),
                Some(Wire::Resize(s)) => match term_size("resize", s) {
                    Ok((rows, cols)) => Input::Resize { rows, cols },
                    Err(e) => {
                        tracing::info!(%job, "input: {}", e.message());
                        continue;
                    }
                },
                Some(Wire::CloseStdin) => Input::CloseStdin,
                None => continue,
            };
            if let Err(e) = sink.send(input).await {
                tracing::debug!(%job, "the job's input is gone: {e}");
                break;
            }
        }
    });
}

/// A terminal size from the wire, checked (1 to 4096 each).
pub(super) fn term_size(field: &str, s: pb::TerminalSize) -> Result<(u16, u16), tonic::Status> {
    let t = joblet_core::TermSize::checked(field, i64::from(s.rows), i64::from(s.cols))
        .map_err(crate::service::ApiError::from)?;
    Ok((t.rows, t.cols))
}
