//! Signals sent to the shim itself (SIGTERM, SIGINT, SIGHUP): caught by
//! signal-hook's self-pipe handler and forwarded by one thread as events, so
//! none can kill the shim silently.
//!
//! Handlers rather than a blocked mask plus sigwait(2): the standard library
//! lets spawned processes inherit the signal mask, and a job must not start
//! with SIGTERM blocked. Caught signals revert to their defaults on exec.

use std::io;
use std::sync::mpsc::Sender;
use std::thread;

use nix::sys::signal::Signal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::supervise::Event;

/// Installs the handlers now; signals arriving before [`start`] are kept.
pub(super) fn install() -> io::Result<Signals> {
    Signals::new([SIGTERM, SIGINT, SIGHUP])
}

/// Forwards each caught signal to the supervisor as an event.
pub(super) fn start(mut signals: Signals, events: Sender<Event>) -> io::Result<()> {
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for raw in signals.forever() {
                let Ok(sig) = Signal::try_from(raw) else {
                    continue;
                };
                if events.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}
