//! The runner's early word of the job's end (`Runner::early_exit`): a
//! thread reads the job's raw wait status from the runner's descriptor and
//! hands it to the supervisor as [`Event::JobEnded`], or tells it that none
//! came ([`Event::NoEarlyWord`]).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::sync::mpsc::Sender;
use std::thread;

use super::supervise::Event;

/// Starts the thread that waits for the job's raw wait status on `fd`. End
/// of file before a whole status sends [`Event::NoEarlyWord`]: the leader's
/// exit then decides, as without an early word.
pub(super) fn watch(fd: OwnedFd, events: Sender<Event>) -> io::Result<()> {
    thread::Builder::new()
        .name("job-end".into())
        .spawn(move || {
            let mut raw = [0u8; 4];
            // The supervisor may be gone already (the leader's exit came
            // first): sends may fail.
            match File::from(fd).read_exact(&mut raw) {
                Ok(()) => drop(events.send(Event::JobEnded(i32::from_ne_bytes(raw)))),
                Err(e) => {
                    if e.kind() != io::ErrorKind::UnexpectedEof {
                        tracing::warn!(
                            "reading the job's end from the runner: {e}; waiting for its leader instead"
                        );
                    }
                    drop(events.send(Event::NoEarlyWord));
                }
            }
        })
        .map(drop)
}
