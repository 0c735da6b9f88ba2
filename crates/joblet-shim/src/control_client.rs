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

async fn send(dir: &JobDir, line: &str) -> Result<(), ShimError> {
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
    match reply {
        "ok" => Ok(()),
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
