//! One attachment to an interactive job (`rnx job run -i/-t`, `rnx job
//! attach`): AttachJob's input stream fed from this process's stdin (raw
//! when both ends are terminals, the detach keys taken out) and from
//! window-size changes, its output written to stdout/stderr as it comes.

use std::io::{Read, Write};

use joblet_proto::pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{DetachKeys, Matcher, RawMode};
use crate::client::Client;
use crate::error::Error;

/// How an attachment ended.
#[derive(Debug)]
pub enum End {
    /// The job ended (its end as the node recorded it).
    Ended(pb::JobEnded),
    /// The user typed the detach keys: the job goes on.
    Detached,
}

/// What to attach with.
pub struct Options {
    pub job_id: String,
    pub read_only: bool,
    /// Put the local terminal in raw mode (the job has a terminal and
    /// stdin is one).
    pub raw: bool,
    /// Recognised only in raw mode (a pipe's bytes are all data).
    pub detach_keys: DetachKeys,
    /// Output already recorded that is shown first (`u64::MAX`: all).
    pub replay_bytes: u64,
    /// Send this process's stdin (`-t` alone sends none, as Docker's).
    pub stdin: bool,
}

/// What the stdin thread tells the session.
enum Typed {
    Data(Vec<u8>),
    /// End of input (a pipe closed; `-i` jobs then get end of file).
    Eof,
    Detach,
}

fn size_pb() -> Option<pb::TerminalSize> {
    super::size().map(|(rows, cols)| pb::TerminalSize {
        rows: u32::from(rows),
        cols: u32::from(cols),
    })
}

/// Attaches and runs until the job ends, the user detaches, or the
/// connection fails. The terminal is restored on every one of those.
pub async fn attach(client: &mut Client, address: &str, opts: Options) -> Result<End, Error> {
    let (tx, rx) = mpsc::channel::<pb::AttachInput>(64);
    let open = pb::AttachInput {
        input: Some(pb::attach_input::Input::Open(pb::AttachOpen {
            job_id: opts.job_id.clone(),
            read_only: opts.read_only,
            size: size_pb(),
            replay_bytes: opts.replay_bytes,
        })),
    };
    // The channel is empty: this cannot wait.
    let _ = tx.send(open).await;
    let mut output = client
        .attach_job(ReceiverStream::new(rx))
        .await
        .map_err(|s| Error::from_status(address, s))?
        .into_inner();
    // Raw only once the node accepted the attachment: its refusal prints
    // on a terminal in its usual state.
    let reads = !opts.read_only && opts.stdin;
    let matcher = opts.raw.then(|| Matcher::new(&opts.detach_keys));
    let mut local = Local::start(opts.raw, reads, matcher)?;
    loop {
        tokio::select! {
            event = output.message() => {
                let event = event.map_err(|s| Error::Lost {
                    what: "attached to",
                    job: opts.job_id.clone(),
                    last: s.message().to_owned(),
                    after: format!("The job keeps running; reattach with `rnx job attach {}`", opts.job_id),
                })?;
                match event.and_then(|e| e.event) {
                    Some(pb::log_event::Event::Chunk(c)) => {
                        write_out(&c.data, c.stream == pb::LogStream::Stderr as i32)?;
                    }
                    Some(pb::log_event::Event::Ended(end)) => return Ok(End::Ended(end)),
                    Some(pb::log_event::Event::Accepted(_)) => {}
                    None => return Err(Error::BadResponse { call: "AttachJob", missing: "the job's end before the stream closed" }),
                }
            }
            t = local.typed.recv(), if local.input_open => {
                let input = match t {
                    Some(Typed::Data(d)) => pb::attach_input::Input::Data(d),
                    Some(Typed::Eof) | None => {
                        local.input_open = false;
                        pb::attach_input::Input::CloseStdin(true)
                    }
                    Some(Typed::Detach) => return Ok(End::Detached),
                };
                // The node went away: the output side reports why.
                let _ = tx.send(pb::AttachInput { input: Some(input) }).await;
            }
            _ = local.winch.recv(), if !opts.read_only => {
                if let Some(size) = size_pb() {
                    let _ = tx.send(pb::AttachInput { input: Some(pb::attach_input::Input::Resize(size)) }).await;
                }
            }
        }
    }
}

/// This process's side of a session: the terminal in raw mode (restored
/// when dropped), what is typed, and the window's size changes.
struct Local {
    _raw: Option<RawMode>,
    typed: mpsc::Receiver<Typed>,
    /// Stdin is read and has not ended.
    input_open: bool,
    winch: tokio::signal::unix::Signal,
}

impl Local {
    /// `raw`: the terminal in raw mode; `reads`: stdin goes to the node,
    /// through `matcher` (the detach keys) when given.
    fn start(raw: bool, reads: bool, matcher: Option<Matcher>) -> Result<Local, Error> {
        let raw = if raw {
            Some(RawMode::enter().map_err(Error::Output)?)
        } else {
            None
        };
        let (typed_tx, typed) = mpsc::channel::<Typed>(16);
        if reads {
            read_stdin(typed_tx, matcher);
        }
        let winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            .map_err(Error::Output)?;
        Ok(Local {
            _raw: raw,
            typed,
            input_open: reads,
            winch,
        })
    }
}

/// Writes what the node sent to stdout (or stderr) at once.
fn write_out(data: &[u8], to_stderr: bool) -> Result<(), Error> {
    let written = if to_stderr {
        let mut err = std::io::stderr().lock();
        err.write_all(data).and_then(|()| err.flush())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(data).and_then(|()| out.flush())
    };
    written.map_err(Error::Output)
}

/// Reads stdin on a thread of its own (a blocking read; the process exits
/// without waiting for it), taking the detach keys out when `matcher` is
/// given.
fn read_stdin(tx: mpsc::Sender<Typed>, mut matcher: Option<Matcher>) {
    let spawned = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.blocking_send(Typed::Eof);
                        return;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::warn!("reading stdin: {e}; no more input is sent");
                        let _ = tx.blocking_send(Typed::Eof);
                        return;
                    }
                };
                let (data, detach) = match matcher.as_mut() {
                    Some(m) => {
                        let s = m.scan(&buf[..n]);
                        (s.forward, s.detach)
                    }
                    None => (buf[..n].to_vec(), false),
                };
                if !data.is_empty() && tx.blocking_send(Typed::Data(data)).is_err() {
                    return;
                }
                if detach {
                    let _ = tx.blocking_send(Typed::Detach);
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read stdin: {e}; no input is sent");
    }
}

/// What to exec with (`rnx job exec`).
pub struct ExecOptions {
    pub start: pb::ExecStart,
    pub raw: bool,
}

/// Runs a process inside a job until it exits; its exit as the node
/// reported it. The terminal is restored on every way out.
pub async fn exec(
    client: &mut Client,
    address: &str,
    opts: ExecOptions,
) -> Result<pb::ExecExit, Error> {
    let (tx, rx) = mpsc::channel::<pb::ExecInput>(64);
    let interactive = opts.start.interactive;
    let job = opts.start.job_id.clone();
    let _ = tx
        .send(pb::ExecInput {
            input: Some(pb::exec_input::Input::Start(opts.start)),
        })
        .await;
    let mut output = client
        .exec_job(ReceiverStream::new(rx))
        .await
        .map_err(|s| Error::from_status(address, s))?
        .into_inner();
    let mut local = Local::start(opts.raw, interactive, None)?;
    loop {
        tokio::select! {
            msg = output.message() => {
                let msg = msg.map_err(|s| Error::Lost {
                    what: "running a command in",
                    job: job.clone(),
                    last: s.message().to_owned(),
                    after: "The command may still be running in the job; see `rnx job execs` for how it ended".into(),
                })?;
                match msg.and_then(|m| m.output) {
                    Some(pb::exec_output::Output::Stdout(d)) => write_out(&d, false)?,
                    Some(pb::exec_output::Output::Stderr(d)) => write_out(&d, true)?,
                    Some(pb::exec_output::Output::Exit(exit)) => return Ok(exit),
                    None => return Err(Error::BadResponse { call: "ExecJob", missing: "the process's exit before the stream closed" }),
                }
            }
            t = local.typed.recv(), if local.input_open => {
                let input = match t {
                    Some(Typed::Data(d)) => pb::exec_input::Input::Data(d),
                    Some(Typed::Eof) | None | Some(Typed::Detach) => {
                        local.input_open = false;
                        pb::exec_input::Input::CloseStdin(true)
                    }
                };
                let _ = tx.send(pb::ExecInput { input: Some(input) }).await;
            }
            _ = local.winch.recv(), if opts.raw => {
                if let Some(size) = size_pb() {
                    let _ = tx.send(pb::ExecInput { input: Some(pb::exec_input::Input::Resize(size)) }).await;
                }
            }
        }
    }
}
