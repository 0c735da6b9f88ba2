//! Capturing the job's output: one reader thread per pipe, one writer thread
//! that owns `output.log` and the seq counter.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::Duration;

use joblet_core::joblog::{self, Stream};

use super::now_unix_ms;

enum Msg {
    Chunk(Stream, Vec<u8>, i64),
    Eof,
    /// Stop now, even if a pipe has not reached end-of-file.
    Finish,
}

/// What the writer managed to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Written {
    /// Output bytes recorded (the seq the next byte would have had).
    pub bytes: u64,
    /// The first write error, after which output was read but discarded.
    pub error: Option<String>,
}

/// The running capture.
pub(super) struct Capture {
    tx: SyncSender<Msg>,
    /// The writer's result, sent once `output.log` is written and closed
    /// (its thread then only exits, which the job's end needs not wait for).
    done: Receiver<Written>,
}

/// Chunks in flight between readers and the writer; bounded so that a slow
/// disk slows the job down instead of growing the shim's memory.
const QUEUE: usize = 32;

/// Starts the reader threads on `stdout`/`stderr` (the pipes' read ends) and
/// the writer thread appending to `log` (opened with O_APPEND).
pub(super) fn start(log: File, stdout: OwnedFd, stderr: OwnedFd) -> io::Result<Capture> {
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let (done_tx, done) = mpsc::channel();
    thread::Builder::new()
        .name("output-writer".into())
        .spawn(move || {
            let w = write_loop(log, rx);
            // The receiver may be gone if the shim is already exiting.
            let _ = done_tx.send(w);
        })?;
    for (stream, fd, name) in [
        (Stream::Stdout, stdout, "stdout-reader"),
        (Stream::Stderr, stderr, "stderr-reader"),
    ] {
        let tx = tx.clone();
        thread::Builder::new()
            .name(name.into())
            .spawn(move || read_loop(stream, File::from(fd), tx))?;
    }
    Ok(Capture { tx, done })
}

impl Capture {
    /// Waits up to `drain` for both pipes to reach end-of-file and their data
    /// to be written, then stops the writer (abandoning readers still blocked
    /// on a pipe some escaped process holds open) and reports what it wrote.
    pub(super) fn finish(self, drain: Duration) -> Written {
        let written = match self.done.recv_timeout(drain) {
            Ok(w) => Ok(w),
            Err(RecvTimeoutError::Disconnected) => Err(()),
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(
                    "job output did not reach end-of-file within {drain:?} after the job ended \
                     (a process outside its process group holds the pipe?); closing the log"
                );
                // Queued chunks are written before the writer sees Finish.
                let _ = self.tx.send(Msg::Finish);
                self.done.recv().map_err(|_| ())
            }
        };
        written.unwrap_or_else(|()| Written {
            bytes: 0,
            error: Some("the output writer thread panicked".into()),
        })
    }
}

fn read_loop(stream: Stream, mut pipe: File, tx: SyncSender<Msg>) {
    let mut buf = vec![0u8; joblog::MAX_DATA];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if tx
                    .send(Msg::Chunk(stream, buf[..n].to_vec(), now_unix_ms()))
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!("reading the job's {stream:?}: {e}; no more output from it");
                break;
            }
        }
    }
    let _ = tx.send(Msg::Eof);
}

fn write_loop(mut log: File, rx: Receiver<Msg>) -> Written {
    let mut seq = 0u64;
    let mut error: Option<String> = None;
    let mut eofs = 0;
    let mut rec = Vec::with_capacity(joblog::HEADER_LEN + joblog::MAX_DATA);
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Chunk(stream, data, unix_ms) => {
                if error.is_some() {
                    continue;
                }
                rec.clear();
                joblog::encode(stream, seq, unix_ms, &data, &mut rec);
                match append(&mut log, &rec) {
                    Ok(()) => seq += data.len() as u64,
                    Err(e) => {
                        tracing::error!("writing output.log: {e}; further output is discarded");
                        error = Some(format!("writing output.log failed: {e}"));
                    }
                }
            }
            Msg::Eof => {
                eofs += 1;
                if eofs == 2 {
                    break;
                }
            }
            Msg::Finish => break,
        }
    }
    // Not synced, like exit.json (see `crate::atomic`): the log survives a
    // daemon crash; a power loss may cut its end.
    Written { bytes: seq, error }
}

/// One write(2) per record, so a reader sees whole records or an incomplete
/// tail; a short write (disk full) is completed or reported.
fn append(log: &mut File, rec: &[u8]) -> io::Result<()> {
    let n = loop {
        match log.write(rec) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    if n < rec.len() {
        log.write_all(&rec[n..])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn records_are_contiguous_and_eof_ends_the_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        let (out_r, out_w) = nix::unistd::pipe().unwrap();
        let (err_r, err_w) = nix::unistd::pipe().unwrap();
        let cap = start(log, out_r, err_r).unwrap();
        let mut out_w = File::from(out_w);
        let big = vec![b'x'; 200_000];
        out_w.write_all(&big).unwrap();
        drop(out_w);
        File::from(err_w).write_all(b"oops").unwrap();
        let w = cap.finish(Duration::from_secs(10));
        assert_eq!(
            w,
            Written {
                bytes: 200_004,
                error: None
            }
        );

        let buf = std::fs::read(&path).unwrap();
        let mut off = 0;
        let mut next = 0u64;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while off < buf.len() {
            let (rec, n) = joblog::decode(&buf[off..], off as u64).unwrap().unwrap();
            assert_eq!(rec.seq, next);
            next += rec.data.len() as u64;
            match rec.stream {
                Stream::Stdout => out.extend(rec.data),
                Stream::Stderr => err.extend(rec.data),
            }
            off += n;
        }
        assert_eq!(out, big);
        assert_eq!(err, b"oops");
    }

    #[test]
    fn finish_gives_up_on_a_pipe_held_open() {
        let tmp = tempfile::tempdir().unwrap();
        let log = File::create(tmp.path().join("output.log")).unwrap();
        let (out_r, out_w) = nix::unistd::pipe().unwrap();
        let (err_r, err_w) = nix::unistd::pipe().unwrap();
        drop(err_w);
        let cap = start(log, out_r, err_r).unwrap();
        let mut out_w = File::from(out_w);
        out_w.write_all(b"hi").unwrap();
        // out_w stays open, like a pipe inherited by an escaped process.
        let t = std::time::Instant::now();
        let w = cap.finish(Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(w.bytes, 2);
        drop(out_w);
    }
}
