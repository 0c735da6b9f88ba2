//! Interactive jobs through the shim alone (the host runner): a job on a
//! pseudo-terminal gets its input, its size and its signals from
//! `input.sock`, and its output reaches `output.log`; a `-i` job's stdin is
//! a pipe that closes when the client says so.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::*;
use joblet_core::{Stdio, TermSize};
use joblet_shim::input::{data_frames, Frame, HELLO};
use joblet_shim::{JobDir, Outcome};

/// Connects to the job's input socket once it exists and says hello.
fn attach(dir: &JobDir) -> Result<UnixStream, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match UnixStream::connect(dir.input_sock_path()) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => return Err(format!("input.sock: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    // A refusal may come (and the socket close) before the hello is read.
    let _ = s.write_all(HELLO);
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    if line == "ok\n" {
        Ok(s)
    } else {
        Err(line)
    }
}

fn tty(rows: u16, cols: u16) -> Stdio {
    Stdio {
        stdin: true,
        tty: Some(TermSize { rows, cols }),
    }
}

#[tokio::test]
async fn a_terminal_job_reads_input_follows_resizes_and_takes_ctrl_c() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut spec = sh(
        tmp.path(),
        // A prompt loop: the terminal's size, then what is typed; Ctrl-C
        // interrupts the sleep (the shell's trap says so), `exit 3` ends it.
        "trap 'echo INTERRUPTED' INT; \
         test -t 0 && test -t 1 && echo IS-A-TTY; \
         stty size; \
         while read -r line; do \
           case \"$line\" in \
             size) stty size ;; \
             nap) sleep 30 ;; \
             bye) exit 3 ;; \
             *) echo \"got:$line\" ;; \
           esac; \
         done",
    );
    spec.stdio = tty(30, 100);
    let h = start(&dir, &spec);
    let mut input = attach(&dir).unwrap();
    wait_for_output(&dir, "30 100").await;
    let out = output(&dir);
    assert!(out.contains("IS-A-TTY"), "{out:?}");

    // A second writer is refused while this one is attached.
    let second = attach(&dir).unwrap_err();
    assert!(second.contains("another client is attached"), "{second}");

    input.write_all(&data_frames(b"hello\n")).unwrap();
    wait_for_output(&dir, "got:hello").await;
    input
        .write_all(
            &Frame::Resize {
                rows: 40,
                cols: 120,
            }
            .encode(),
        )
        .unwrap();
    input.write_all(&data_frames(b"size\n")).unwrap();
    wait_for_output(&dir, "40 120").await;

    // Ctrl-C reaches the foreground process group through the terminal.
    input.write_all(&data_frames(b"nap\n")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    input.write_all(&data_frames(b"\x03")).unwrap();
    wait_for_output(&dir, "INTERRUPTED").await;
    input.write_all(&data_frames(b"bye\n")).unwrap();
    let shim = h.pid();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(exit.exit_code, Some(3), "{exit:?}");
    assert!(
        wait_gone(shim, Duration::from_secs(10)),
        "shim {shim} stayed"
    );
    assert!(
        !dir.input_sock_path().exists(),
        "the input socket goes with the job"
    );
}

#[tokio::test]
async fn an_interactive_job_without_a_terminal_gets_a_pipe_that_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut spec = sh(
        tmp.path(),
        "test -t 0 || echo NOT-A-TTY; wc -l; echo done >&2",
    );
    spec.stdio = Stdio {
        stdin: true,
        tty: None,
    };
    let h = start(&dir, &spec);
    let mut input = attach(&dir).unwrap();
    input.write_all(&data_frames(b"a\nb\nc\n")).unwrap();
    input.write_all(&Frame::CloseStdin.encode()).unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.exit_code, Some(0), "{exit:?}");
    let out = output(&dir);
    assert!(out.contains("NOT-A-TTY"), "{out:?}");
    assert!(out.contains('3'), "wc counted the lines sent: {out:?}");
    assert!(out.contains("done"), "{out:?}");
}

#[tokio::test]
async fn a_batch_job_has_no_input_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "test -t 0 || echo batch; sleep 0.2"));
    wait_for_output(&dir, "batch").await;
    assert!(!dir.input_sock_path().exists());
    let exit = finish(h).await;
    assert_eq!(exit.exit_code, Some(0));
}
