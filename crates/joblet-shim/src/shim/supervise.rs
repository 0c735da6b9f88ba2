//! The supervisor loop: waits for the job's end (its leader's exit, or the
//! runner's earlier word, see `Runner::early_exit`) while carrying out stop,
//! kill, timeout and SIGTERM, then kills what is left of the job's process
//! group and reaps the leader (after an early word: leaves it to the
//! caller, once the job's end is recorded).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::outcome::Reason;
use super::reaper::Reaper;
use crate::reap;

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// SIGTERM to the group now, SIGKILL after the grace if still running.
    Stop(Duration),
    /// SIGKILL to the group now.
    Kill,
}

pub(crate) enum Event {
    Control(Request, Sender<Result<(), String>>),
    Signal(Signal),
    /// The leader has exited (not yet reaped).
    LeaderExited,
    /// The runner told the job's end (its raw wait status): nothing of the
    /// job runs any more, though the leader may not have exited yet.
    JobEnded(i32),
    /// The runner's descriptor for that word ended without one.
    NoEarlyWord,
    WaitFailed(io::Error),
}

/// How the job ended, and why.
pub(super) struct Ended {
    pub status: io::Result<ExitStatus>,
    pub reason: Option<Reason>,
    /// The leader, when the job's end came before its exit: still to be
    /// reaped (it may be tearing the job's namespaces down).
    pub unreaped: Option<Pid>,
}

/// How often a cluster job's shim reads the node's fencing deadline.
const FENCE_CHECK: Duration = Duration::from_millis(200);

/// How long, after the leader's exit, the runner's early word is awaited
/// when it has not come yet: the leader's exit means the runner's
/// descriptor holds the word or its end already, so this is a bound, not a
/// delay.
const EARLY_WORD_WAIT: Duration = Duration::from_secs(1);

/// What [`supervise`] enforces and reports.
pub(super) struct Rules<'a> {
    /// The job's time limit.
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL, on a timeout or the shim's SIGTERM.
    pub stop_grace: Duration,
    /// Cluster mode: the node's fencing deadline file.
    pub fence: Option<&'a std::path::Path>,
    /// Set once a stop, kill, timeout or fence has begun.
    pub stopping: &'a std::sync::atomic::AtomicBool,
}

/// Runs until the leader `pid` (which leads its own process group) has
/// exited, or the job's end is told ([`Event::JobEnded`]); after the
/// leader's exit, SIGKILLs its group and reaps it. `early_word`: a thread
/// reads the runner's early word ([`super::early::watch`]); when the
/// leader's exit comes first, that word (if any) is still what is recorded.
/// The first of stop, kill and timeout to happen is the reason recorded;
/// later ones still act.
pub(super) fn supervise(
    pid: Pid,
    events: Receiver<Event>,
    reaper: &Reaper,
    rules: Rules<'_>,
    early_word: bool,
) -> Ended {
    let Rules {
        timeout,
        stop_grace,
        fence,
        stopping,
    } = rules;
    let group = Group { pgid: pid };
    let mut reason: Option<Reason> = None;
    let timeout_at = timeout.map(|t| Instant::now() + t);
    let mut timeout_pending = timeout_at.is_some();
    let mut kill_at: Option<Instant> = None;
    // Cluster mode: the fencing deadline is looked at this often.
    let mut fence_check = fence.map(|_| Instant::now());
    let mut fenced = false;

    let ended = loop {
        if reason.is_some() {
            stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let next = [timeout_at.filter(|_| timeout_pending), kill_at, fence_check]
            .into_iter()
            .flatten()
            .min();
        let ev = match next {
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => events.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        let now = Instant::now();
        match ev {
            Err(RecvTimeoutError::Timeout) => {
                if let (Some(at), Some(path)) = (fence_check, fence) {
                    if at <= now {
                        fence_check = Some(now + FENCE_CHECK);
                        if !fenced && crate::fence::passed(path) {
                            fenced = true;
                            tracing::error!(fence = %path.display(), "the node's fencing deadline passed: killing the job");
                            reason.get_or_insert(Reason::Fenced);
                            kill_at = None;
                            group.signal(Signal::SIGKILL);
                        }
                    }
                }
                if timeout_pending && timeout_at.is_some_and(|t| t <= now) {
                    timeout_pending = false;
                    if let Some(t) = timeout {
                        tracing::info!("timeout of {t:?} reached; stopping the job");
                        reason.get_or_insert(Reason::TimedOut(t));
                    }
                    group.begin_stop(&mut kill_at, stop_grace);
                }
                if kill_at.is_some_and(|k| k <= now) {
                    kill_at = None;
                    tracing::info!("stop grace over; killing the job's process group");
                    group.signal(Signal::SIGKILL);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Impossible while the reaper holds a sender; keep the
                // record honest if it happens anyway.
                break Err(io::Error::other("the reaper thread vanished"));
            }
            Ok(Event::Control(req, reply)) => {
                match req {
                    Request::Stop(grace) => {
                        reason.get_or_insert(Reason::Stopped);
                        group.begin_stop(&mut kill_at, grace);
                    }
                    Request::Kill => {
                        reason.get_or_insert(Reason::Killed);
                        kill_at = None;
                        group.signal(Signal::SIGKILL);
                    }
                }
                let _ = reply.send(Ok(()));
            }
            Ok(Event::Signal(Signal::SIGTERM)) => {
                tracing::info!("shim got SIGTERM; stopping the job with a {stop_grace:?} grace");
                reason.get_or_insert(Reason::Stopped);
                group.begin_stop(&mut kill_at, stop_grace);
            }
            Ok(Event::Signal(sig)) => tracing::info!("shim ignores {sig}"),
            Ok(Event::LeaderExited) => {
                break Ok(early_word
                    .then(|| late_word(&events))
                    .flatten()
                    .map(Word::AfterExit))
            }
            Ok(Event::JobEnded(raw)) => break Ok(Some(Word::BeforeExit(raw))),
            // Without a word, the leader's exit decides.
            Ok(Event::NoEarlyWord) => {}
            Ok(Event::WaitFailed(e)) => break Err(e),
        }
    };
    drop(events);

    match ended {
        Err(e) => {
            tracing::error!("waiting for job leader {pid}: {e}");
            Ended {
                status: Err(e),
                reason,
                unreaped: None,
            }
        }
        Ok(word @ (None | Some(Word::AfterExit(_)))) => {
            // The leader is a zombie, so its pid (the pgid) cannot have been
            // reused: kill whatever it left behind, then reap it.
            group.signal(Signal::SIGKILL);
            let reaped = reap::reap(pid.as_raw()).map(|(_, st)| st);
            reaper.leader_reaped();
            // The runner's word, when it came, is the job's status.
            let status = match word {
                Some(Word::AfterExit(raw)) => Ok(ExitStatus::from_raw(raw)),
                _ => reaped,
            };
            Ended {
                status,
                reason,
                unreaped: None,
            }
        }
        Ok(Some(Word::BeforeExit(raw))) => {
            let status = ExitStatus::from_raw(raw);
            // Nothing of the job runs (the runner's promise); its leader is
            // finishing its own exit (a sandbox init tearing the namespaces
            // down), which no signal would hasten. The caller reaps it.
            Ended {
                status: Ok(status),
                reason,
                unreaped: Some(pid),
            }
        }
    }
}

/// The runner's word of the job's end (a raw wait status), and whether it
/// came before the leader's exit.
enum Word {
    BeforeExit(i32),
    AfterExit(i32),
}

/// After the leader's exit, the runner's word if it comes within
/// [`EARLY_WORD_WAIT`] (it is due at once: see there). Requests that come
/// meanwhile are answered as done (the job has ended).
fn late_word(events: &Receiver<Event>) -> Option<i32> {
    let deadline = Instant::now() + EARLY_WORD_WAIT;
    loop {
        match events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::JobEnded(raw)) => return Some(raw),
            Ok(Event::NoEarlyWord) | Err(_) => return None,
            Ok(Event::Control(_, reply)) => drop(reply.send(Ok(()))),
            Ok(Event::Signal(_) | Event::LeaderExited | Event::WaitFailed(_)) => {}
        }
    }
}

/// The job's process group. Only signalled while the leader is unreaped.
struct Group {
    pgid: Pid,
}

impl Group {
    fn signal(&self, sig: Signal) {
        match killpg(self.pgid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::error!("sending {sig} to process group {}: {e}", self.pgid),
        }
    }

    /// SIGTERM (plus SIGCONT, in case the job is stopped) and a SIGKILL
    /// deadline; a second stop only shortens the deadline.
    fn begin_stop(&self, kill_at: &mut Option<Instant>, grace: Duration) {
        let at = Instant::now() + grace;
        match kill_at {
            Some(k) => *k = (*k).min(at),
            None => {
                self.signal(Signal::SIGTERM);
                self.signal(Signal::SIGCONT);
                *kill_at = Some(at);
            }
        }
    }
}
