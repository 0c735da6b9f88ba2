//! Asking a shim to stop or kill its job, over `control.sock`.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::error::ShimError;
use crate::jobdir::JobDir;

/// The shim answers at once; this only guards against a wedged one.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// SIGTERM to the job's process group now, SIGKILL after `grace` if it is
/// still running. Returns once the shim has acted, not when the job ended.
pub async fn request_stop(dir: &JobDir, grace: Duration) -> Result<(), ShimError> {
    send(dir, &format!("stop {}\n", grace.as_millis())).await
}

/// SIGKILL to the job's process group now.
pub async fn request_kill(dir: &JobDir) -> Result<(), ShimError> {
    send(dir, "kill\n").await
}

/// What the shim says of its job: `running`, `stopping` (a stop, kill or
/// timeout has begun) or `ended`.
pub async fn request_state(dir: &JobDir) -> Result<String, ShimError> {
    let answer = exchange(dir, "state\n").await?;
    Ok(answer.unwrap_or_default())
}

async fn send(dir: &JobDir, line: &str) -> Result<(), ShimError> {
    match exchange(dir, line).await? {
        None => Ok(()),
        Some(more) => Err(ShimError::BadReply {
            path: dir.control_sock_path(),
            reply: format!("ok {more}"),
        }),
    }
}

/// One request; `ok` is `None`, `ok WORDS` is `Some(WORDS)`.
async fn exchange(dir: &JobDir, line: &str) -> Result<Option<String>, ShimError> {
    let path = dir.control_sock_path();
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            ShimError::NotRunning { path: path.clone() }
        }
        _ => ShimError::Control {
            path: path.clone(),
            source,
        },
    };
    let exchange = async {
        let mut stream = UnixStream::connect(&path).await?;
        stream.write_all(line.as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await?;
        Ok::<_, io::Error>(reply)
    };
    let reply = tokio::time::timeout(REPLY_TIMEOUT, exchange)
        .await
        .map_err(|_| ShimError::ControlTimeout {
            path: path.clone(),
            secs: REPLY_TIMEOUT.as_secs(),
        })?
        .map_err(io_err)?;
    let reply = reply.trim_end_matches('\n');
    if let Some(words) = reply.strip_prefix("ok ") {
        return Ok(Some(words.to_string()));
    }
    match reply {
        "ok" => Ok(None),
        // Closed without answering: the shim was exiting.
        "" => Err(ShimError::NotRunning { path }),
        _ => match reply.strip_prefix("err ") {
            Some(message) => Err(ShimError::Refused {
                path,
                message: message.to_string(),
            }),
            None => Err(ShimError::BadReply {
                path,
                reply: reply.to_string(),
            }),
        },
    }
}
