//! `control.sock`: one request line per connection, `stop <grace_ms>` or
//! `kill`, answered `ok` or `err <msg>`; or `state`, answered `ok running`,
//! `ok stopping` (a stop, kill or timeout has begun) or `ok ended`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::supervise::{Event, Request};

/// How long a client may take to send its line, and the supervisor to act.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest request line accepted.
const MAX_LINE: u64 = 128;

/// Parses one request line (without its newline).
pub(super) fn parse_request(line: &str) -> Result<Request, String> {
    let mut words = line.split_ascii_whitespace();
    let req = match (words.next(), words.next()) {
        (Some("kill"), None) => Request::Kill,
        (Some("stop"), Some(ms)) => {
            let ms: u64 = ms
                .parse()
                .map_err(|_| format!("stop: grace {ms:?} is not a whole number of milliseconds"))?;
            Request::Stop(Duration::from_millis(ms))
        }
        _ => {
            return Err(format!(
                "unknown request {line:?}; expected `stop <grace_ms>`, `kill` or `state`"
            ))
        }
    };
    if words.next().is_some() {
        return Err(format!(
            "unknown request {line:?}; expected `stop <grace_ms>`, `kill` or `state`"
        ));
    }
    Ok(req)
}

/// The control thread, as the shim's main thread sees it.
pub(super) struct Control {
    /// Held while a request is acted on and answered.
    answering: Arc<Mutex<()>>,
}

impl Control {
    /// Waits until the request being answered (if any) has its reply
    /// written: the request that ended the job gets its `ok` before the
    /// shim exits and closes the connection.
    pub(super) fn quiesce(&self) {
        drop(self.answering.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Serves `listener` on its own thread. Once `finished` is set (the job has
/// exited), requests are answered `ok` without doing anything.
pub(super) fn start(
    listener: UnixListener,
    events: Sender<Event>,
    finished: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
) -> io::Result<Control> {
    let answering = Arc::new(Mutex::new(()));
    let busy = answering.clone();
    thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => {
                        if let Err(e) = serve(stream, &events, &finished, &stopping, &busy) {
                            tracing::warn!("control connection: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!("accepting on control.sock: {e}");
                        // Avoid spinning on a persistent error (EMFILE).
                        thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
    Ok(Control { answering })
}

fn serve(
    stream: UnixStream,
    events: &Sender<Event>,
    finished: &AtomicBool,
    stopping: &AtomicBool,
    answering: &Mutex<()>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_LINE)).read_line(&mut line)?;
    if line.trim_end_matches(['\n', '\r']) == "state" {
        let state = if finished.load(Ordering::SeqCst) {
            "ended"
        } else if stopping.load(Ordering::SeqCst) {
            "stopping"
        } else {
            "running"
        };
        return (&stream).write_all(format!("ok {state}\n").as_bytes());
    }
    // From the request to its reply: the shim does not exit in between.
    let _answering = answering.lock().unwrap_or_else(|p| p.into_inner());
    let reply = match parse_request(line.trim_end_matches(['\n', '\r'])) {
        Err(msg) => Err(msg),
        Ok(_) if finished.load(Ordering::SeqCst) => Ok(()),
        Ok(req) => {
            tracing::info!("control request: {req:?}");
            let (tx, rx) = mpsc::channel();
            if events.send(Event::Control(req, tx)).is_err() {
                // The supervisor is done: the job has ended.
                Ok(())
            } else {
                match rx.recv_timeout(IO_TIMEOUT) {
                    Ok(r) => r,
                    // Dropped unanswered: the job ended meanwhile.
                    Err(mpsc::RecvTimeoutError::Disconnected) => Ok(()),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        Err("the shim is busy; try again".into())
                    }
                }
            }
        }
    };
    let text = match reply {
        Ok(()) => "ok\n".to_string(),
        Err(msg) => format!("err {}\n", msg.replace('\n', " ")),
    };
    (&stream).write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests() {
        assert_eq!(parse_request("kill"), Ok(Request::Kill));
        assert_eq!(
            parse_request("stop 1500"),
            Ok(Request::Stop(Duration::from_millis(1500)))
        );
        assert!(parse_request("stop")
            .unwrap_err()
            .contains("unknown request"));
        assert!(parse_request("stop -1").unwrap_err().contains("grace"));
        assert!(parse_request("kill now").is_err());
        assert!(parse_request("").is_err());
    }
}
