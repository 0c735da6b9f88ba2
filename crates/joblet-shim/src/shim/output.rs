//! Capturing the job's output: one thread polls both pipes and appends each
//! chunk it reads to `output.log` as a record, numbering the bytes (seq).
//!
//! One thread, not a reader per pipe plus a writer: starting and ending a
//! thread costs the shim about 0.1 ms of CPU on this kind of machine, paid
//! by every job (bench/history/runs-14-16.md, "one output thread"), and a
//! chunk no longer crosses threads on its way to the log. A slow disk still
//! slows the job down (its pipes fill) rather than growing the shim's memory.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use joblet_core::joblog::{self, Stream};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::now_unix_ms;

/// What the capture managed to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Written {
    /// Output bytes recorded (the seq the next byte would have had).
    pub bytes: u64,
    /// The first write error, after which output was read but discarded.
    pub error: Option<String>,
    /// Output bytes read after that error and discarded.
    pub discarded: u64,
}

/// The running capture.
pub(super) struct Capture {
    /// Closed to stop the capture before both pipes reach end of file.
    stop: OwnedFd,
    /// The thread's result, sent once `output.log` is written and closed
    /// (the thread then only exits, which the job's end needs not wait for).
    done: Receiver<Written>,
}

/// Reads taken from the pipes after a stop, at most: what they hold then is
/// still recorded, but a process that writes on and on cannot keep the
/// shim waiting.
const STOP_READS: usize = 64;

/// Starts the thread reading `stdout`/`stderr` (the pipes' read ends) and
/// appending to `log` (opened with O_APPEND).
pub(super) fn start(log: File, stdout: OwnedFd, stderr: OwnedFd) -> io::Result<Capture> {
    let (stop_r, stop) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (done_tx, done) = mpsc::channel();
    thread::Builder::new()
        .name("output".into())
        .spawn(move || {
            let w = capture(log, [File::from(stdout), File::from(stderr)], stop_r);
            // The receiver may be gone if the shim is already exiting.
            let _ = done_tx.send(w);
        })?;
    Ok(Capture { stop, done })
}

impl Capture {
    /// Waits up to `drain` for both pipes to reach end-of-file and their data
    /// to be written, then stops the capture (abandoning a pipe some escaped
    /// process holds open) and reports what it wrote.
    pub(super) fn finish(self, drain: Duration) -> Written {
        let Capture { stop, done } = self;
        let written = match done.recv_timeout(drain) {
            Ok(w) => Ok(w),
            Err(RecvTimeoutError::Disconnected) => Err(()),
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(
                    "job output did not reach end-of-file within {drain:?} after the job ended \
                     (a process outside its process group holds the pipe?); closing the log"
                );
                // What the pipes hold now is written before the thread stops.
                drop(stop);
                done.recv().map_err(|_| ())
            }
        };
        written.unwrap_or_else(|()| Written {
            bytes: 0,
            error: Some("the output capture thread panicked".into()),
            discarded: 0,
        })
    }
}

/// The capture thread: until both pipes reach end of file (or, once `stop`
/// hangs up, until they hold nothing more to read), reads whichever is
/// ready and records what it read.
fn capture(log: File, mut pipes: [File; 2], stop: OwnedFd) -> Written {
    const STREAMS: [Stream; 2] = [Stream::Stdout, Stream::Stderr];
    let mut log = Log::new(log);
    let mut buf = vec![0u8; joblog::MAX_DATA];
    let mut open = [true, true];
    // Reads left after a stop; `None` until then.
    let mut after_stop: Option<usize> = None;
    while open.contains(&true) {
        let mut fds = Vec::with_capacity(3);
        let mut which = Vec::with_capacity(2);
        for (i, pipe) in pipes.iter().enumerate() {
            if open[i] {
                fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
                which.push(i);
            }
        }
        if after_stop.is_none() {
            fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
        }
        let timeout = match after_stop {
            Some(_) => PollTimeout::ZERO,
            None => PollTimeout::NONE,
        };
        match poll(&mut fds, timeout) {
            // Stopped, and nothing more is ready.
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => {
                tracing::error!("waiting for the job's output: {e}; no more output is recorded");
                break;
            }
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|fd| fd.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        if ready.len() > which.len() && ready[which.len()] {
            after_stop = Some(STOP_READS);
        }
        for (slot, &i) in which.iter().enumerate() {
            if !ready[slot] {
                continue;
            }
            match pipes[i].read(&mut buf) {
                Ok(0) => open[i] = false,
                Ok(n) => log.record(STREAMS[i], &buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::error!(
                        "reading the job's {:?}: {e}; no more output from it",
                        STREAMS[i]
                    );
                    open[i] = false;
                }
            }
            if let Some(left) = after_stop.as_mut() {
                *left = left.saturating_sub(1);
            }
        }
        if after_stop == Some(0) {
            break;
        }
    }
    // Not synced, like exit.json (see `crate::atomic`): the log survives a
    // daemon crash; a power loss may cut its end.
    log.written()
}

/// `output.log` and the seq of the next byte.
struct Log {
    file: File,
    seq: u64,
    error: Option<String>,
    discarded: u64,
    rec: Vec<u8>,
}

impl Log {
    fn new(file: File) -> Log {
        Log {
            file,
            seq: 0,
            error: None,
            discarded: 0,
            rec: Vec::with_capacity(joblog::HEADER_LEN + joblog::MAX_DATA),
        }
    }

    /// Appends `data` as one record, or discards it after a write error.
    fn record(&mut self, stream: Stream, data: &[u8]) {
        if self.error.is_some() {
            self.discarded += data.len() as u64;
            return;
        }
        self.rec.clear();
        joblog::encode(stream, self.seq, now_unix_ms(), data, &mut self.rec);
        match append(&mut self.file, &self.rec) {
            Ok(()) => self.seq += data.len() as u64,
            Err(e) => {
                tracing::error!("writing output.log: {e}; further output is discarded");
                self.error = Some(format!("writing output.log failed: {e}"));
                self.discarded += data.len() as u64;
            }
        }
    }

    fn written(self) -> Written {
        Written {
            bytes: self.seq,
            error: self.error,
            discarded: self.discarded,
        }
    }
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

    /// A full disk: the first write fails, the rest of the output is read
    /// and counted as discarded, never blocking the job.
    #[test]
    fn output_past_a_full_disk_is_counted_as_discarded() {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open("/dev/full")
            .unwrap();
        let (out_r, out_w) = nix::unistd::pipe().unwrap();
        let (err_r, err_w) = nix::unistd::pipe().unwrap();
        let cap = start(log, out_r, err_r).unwrap();
        File::from(out_w).write_all(&vec![b'x'; 300_000]).unwrap();
        drop(err_w);
        let w = cap.finish(Duration::from_secs(10));
        assert_eq!(w.bytes, 0);
        assert_eq!(w.discarded, 300_000);
        assert!(
            w.error
                .as_deref()
                .unwrap()
                .contains("No space left on device"),
            "{w:?}"
        );
    }

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
                error: None,
                discarded: 0,
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

    /// Runs `capture` of `out` and `err` on a thread, into a fresh log and
    /// with its stop already hung up; `None` if it still runs after 10 s.
    fn capture_stopped(out: OwnedFd, err: OwnedFd) -> Option<Written> {
        let tmp = tempfile::tempdir().unwrap();
        let log = File::create(tmp.path().join("output.log")).unwrap();
        let (stop_r, stop_w) = nix::unistd::pipe().unwrap();
        drop(stop_w);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || tx.send(capture(log, [File::from(out), File::from(err)], stop_r)));
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    #[test]
    fn a_stop_records_what_the_pipes_hold_then_returns() {
        let (out_r, out_w) = nix::unistd::pipe().unwrap();
        let (err_r, err_w) = nix::unistd::pipe().unwrap();
        let (mut out_w, mut err_w) = (File::from(out_w), File::from(err_w));
        // More than one read's worth, and both pipes held open.
        nix::fcntl::fcntl(&out_w, nix::fcntl::FcntlArg::F_SETPIPE_SZ(256 << 10)).unwrap();
        out_w.write_all(&vec![b'o'; 3 * joblog::MAX_DATA]).unwrap();
        err_w.write_all(b"e").unwrap();
        let w = capture_stopped(out_r, err_r).expect("a stopped capture waited on pipes held open");
        assert_eq!(w.bytes, 3 * joblog::MAX_DATA as u64 + 1);
        drop((out_w, err_w));
    }

    #[test]
    fn a_job_writing_on_and_on_cannot_hold_a_stopped_capture() {
        // /dev/zero stands for a pipe that never runs dry: there is always
        // more to read, so only the bound on reads ends the capture.
        let endless = OwnedFd::from(File::open("/dev/zero").unwrap());
        let (err_r, _err_w) = nix::unistd::pipe().unwrap();
        let w = capture_stopped(endless, err_r).expect("a stopped capture kept reading");
        assert!(
            w.bytes <= (STOP_READS * joblog::MAX_DATA) as u64,
            "{}",
            w.bytes
        );
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
