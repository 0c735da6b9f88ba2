//! Attaching to an interactive job (`-i`/`-t`): its output is the log
//! stream every follower gets (so watchers and the writer see the same
//! bytes, and a restarted daemon serves it from the same file); its input
//! goes to the shim's `input.sock` ([`joblet_shim::input`]), one writer at
//! a time, which the shim enforces.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joblet_core::{JobId, JobState};
use joblet_shim::input::{data_frames, Frame, HELLO};
use joblet_shim::JobDir;
use joblet_store::Store;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::logs::LogStream;
use super::{store_error, ApiError};

/// How often an attachment to a job not started yet looks again.
const START_POLL: Duration = Duration::from_millis(20);
/// How long the shim may take to answer the hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// One attachment: the job's output, and the writer's way in.
pub struct Attachment {
    pub job: JobId,
    pub output: LogStream,
    /// `None` for a watcher, or when the job had ended before it started
    /// taking input.
    pub input: Option<JobInput>,
}

/// What a client sends an interactive job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Data(Vec<u8>),
    Resize { rows: u16, cols: u16 },
    CloseStdin,
}

/// Where a client's [`Input`] goes: an attached job, or an exec's
/// process. An error means that input is gone (the job or process ended).
pub trait TakesInput: Send + 'static {
    fn send(
        &mut self,
        input: Input,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
}

/// The writer's connection to the job's shim.
pub struct JobInput {
    stream: UnixStream,
}

impl TakesInput for JobInput {
    /// Sends `input` to the job's shim.
    async fn send(&mut self, input: Input) -> std::io::Result<()> {
        let bytes = match input {
            Input::Data(d) => data_frames(&d),
            Input::Resize { rows, cols } => Frame::Resize { rows, cols }.encode(),
            Input::CloseStdin => Frame::CloseStdin.encode(),
        };
        self.stream.write_all(&bytes).await
    }
}

/// Waits until job `id` takes input (its shim's `input.sock` answers) or
/// has ended (`Ok(None)`). The shim refusing (another writer is attached)
/// is an [`ApiError::InUse`].
pub(super) async fn connect_input(
    store: Arc<Store>,
    dir: JobDir,
    id: &JobId,
) -> Result<Option<JobInput>, ApiError> {
    let path: PathBuf = dir.input_sock_path();
    loop {
        let state = store
            .progress(id)
            .map_err(store_error)?
            .map(|p| p.state)
            .ok_or_else(|| ApiError::NotFound(format!("job {id} was deleted")))?;
        if state.is_terminal() {
            return Ok(None);
        }
        if state == JobState::Running {
            if let Ok(stream) = UnixStream::connect(&path).await {
                return hello(stream, id).await.map(Some);
            }
        }
        tokio::time::sleep(START_POLL).await;
    }
}

async fn hello(mut stream: UnixStream, id: &JobId) -> Result<JobInput, ApiError> {
    // A refusal may come before the hello is read (see joblet_shim::input).
    let _ = stream.write_all(HELLO).await;
    let mut line = String::new();
    let read = tokio::time::timeout(
        HELLO_TIMEOUT,
        BufReader::new(&mut stream).read_line(&mut line),
    )
    .await;
    match read {
        Ok(Ok(_)) if line == "ok\n" => Ok(JobInput { stream }),
        Ok(Ok(_)) => match line.trim_end().strip_prefix("err ") {
            Some(why) => Err(ApiError::InUse(format!("job {id}: {why}"))),
            None => Err(ApiError::Internal(format!(
                "job {id}: the shim answered {:?} to an attach",
                line.trim_end()
            ))),
        },
        Ok(Err(e)) => Err(ApiError::Internal(format!(
            "job {id}: cannot attach to its input: {e}"
        ))),
        Err(_) => Err(ApiError::Internal(format!(
            "job {id}: its shim did not answer an attach within {HELLO_TIMEOUT:?}"
        ))),
    }
}
