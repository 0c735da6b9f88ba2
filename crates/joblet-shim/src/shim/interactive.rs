//! An interactive job's streams (`ShimSpec::stdio` not batch): a
//! pseudo-terminal for `-t` (the job's stdin, stdout and stderr; a relay
//! thread copies what the job writes on it into the stdout pipe the output
//! capture records, so the log and its followers see it like any output),
//! or a stdin pipe for `-i` alone; and `input.sock`, where the daemon
//! writes what an attached client types (see [`crate::input`]).
//!
//! Batch jobs never come here: nothing of this costs their start.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use joblet_core::Stdio;
use nix::fcntl::OFlag;

use crate::input::{Frame, HELLO};
use crate::jobdir::JobDir;
use crate::runner::JobIo;

/// How long a client may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Where attached input goes.
enum Sink {
    /// The terminal's master side: input, resizes.
    Tty(File),
    /// The write end of the job's stdin pipe, until a client closes it.
    Pipe(Option<File>),
}

/// Sets up the job's streams from the shim's output pipes' write ends
/// (`out_w`, `err_w`) and serves `input.sock`. Returns what the runner
/// gives the job.
pub(super) fn start(
    dir: &JobDir,
    stdio: &Stdio,
    out_w: OwnedFd,
    err_w: OwnedFd,
) -> io::Result<JobIo> {
    let (io, sink) = match stdio.tty {
        Some(size) => {
            let pty = crate::pty::open(size)?;
            let master = File::from(pty.master);
            let reader = master.try_clone()?;
            // One stream: stderr's pipe reaches end of file at once.
            drop(err_w);
            relay(reader, File::from(out_w))?;
            let io = JobIo {
                stdin: pty.slave.try_clone()?,
                stdout: pty.slave.try_clone()?,
                stderr: pty.slave,
                tty: true,
            };
            (io, Sink::Tty(master))
        }
        None => {
            let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
            let io = JobIo {
                stdin: r,
                stdout: out_w,
                stderr: err_w,
                tty: false,
            };
            (io, Sink::Pipe(Some(File::from(w))))
        }
    };
    let listener = bind(&dir.input_sock_path())?;
    serve(listener, sink)?;
    Ok(io)
}

fn bind(path: &std::path::Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Copies what the job writes on its terminal into the stdout pipe until
/// every process holding the terminal has closed it (the master then reads
/// `EIO`), then closes the pipe: the capture reaches end of file.
fn relay(mut master: File, mut out: File) -> io::Result<()> {
    thread::Builder::new()
        .name("tty-relay".into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match master.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if let Err(e) = out.write_all(&buf[..n]) {
                            tracing::warn!("the job's terminal output cannot be recorded: {e}");
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // EIO: no process has the terminal open any more.
                    Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
                    Err(e) => {
                        tracing::warn!("reading the job's terminal: {e}");
                        break;
                    }
                }
            }
        })?;
    Ok(())
}

/// Accepts input connections on their own thread, one writer at a time.
fn serve(listener: UnixListener, sink: Sink) -> io::Result<()> {
    let sink = Arc::new(Mutex::new(sink));
    let busy = Arc::new(AtomicBool::new(false));
    thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let stream = match conn {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("accepting on input.sock: {e}");
                        thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                };
                if busy.swap(true, Ordering::SeqCst) {
                    let _ = refuse(stream, "another client is attached to this job's input; detach it first, or attach read-only");
                    continue;
                }
                let (sink, busy) = (sink.clone(), busy.clone());
                let spawned = thread::Builder::new()
                    .name("input-conn".into())
                    .spawn(move || {
                        if let Err(e) = client(stream, &sink) {
                            tracing::info!("input connection ended: {e}");
                        }
                        busy.store(false, Ordering::SeqCst);
                    });
                if let Err(e) = spawned {
                    tracing::warn!("cannot serve an input connection: {e}");
                }
            }
        })?;
    Ok(())
}

fn refuse(mut stream: UnixStream, why: &str) -> io::Result<()> {
    stream.set_write_timeout(Some(HELLO_TIMEOUT))?;
    stream.write_all(format!("err {why}\n").as_bytes())
}

/// One attached writer: its hello, then frames until it goes.
fn client(stream: UnixStream, sink: &Mutex<Sink>) -> Result<(), crate::input::FrameError> {
    stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut hello = Vec::new();
    reader.by_ref().take(64).read_until(b'\n', &mut hello)?;
    if hello != HELLO {
        refuse(stream, "expected the line `attach`")?;
        return Ok(());
    }
    (&stream).write_all(b"ok\n")?;
    stream.set_read_timeout(None)?;
    while let Some(frame) = Frame::read(&mut reader)? {
        let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
        match (&mut *sink, frame) {
            (Sink::Tty(master), Frame::Data(d)) => master.write_all(&d)?,
            (Sink::Pipe(Some(w)), Frame::Data(d)) => {
                if let Err(e) = w.write_all(&d) {
                    // EPIPE: the job closed its stdin; later input has nowhere to go.
                    tracing::info!("the job's stdin is closed ({e}); input dropped");
                    *sink = Sink::Pipe(None);
                }
            }
            (Sink::Pipe(None), Frame::Data(_)) => {}
            (Sink::Tty(master), Frame::Resize { rows, cols }) => {
                if let Err(e) = crate::pty::resize(&*master, rows, cols) {
                    tracing::warn!("resizing the job's terminal to {rows}x{cols}: {e}");
                }
            }
            (Sink::Pipe(_), Frame::Resize { .. }) => {}
            (Sink::Pipe(w), Frame::CloseStdin) => *w = None,
            (Sink::Tty(_), Frame::CloseStdin) => {}
        }
    }
    Ok(())
}
