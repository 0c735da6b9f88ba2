//! The shim's reaper thread: as a child subreaper the shim inherits the
//! job's orphaned processes, and this thread reaps them, reports the
//! leader's exit without reaping it, and tells when the job's whole process
//! group is gone.

use std::io;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use nix::unistd::Pid;

use super::supervise::Event;
use crate::reap;

/// The main thread's side of the reaper thread.
pub(super) struct Reaper {
    leader: Sender<Pid>,
    leader_reaped: Sender<()>,
    group_reaped: Receiver<()>,
}

impl Reaper {
    /// Hands over the job leader; the reaper ends quietly if this is never
    /// called (the job did not start).
    pub(super) fn set_leader(&self, pid: Pid) {
        // The reaper only quits early if the shim is going down.
        let _ = self.leader.send(pid);
    }

    /// Tells the reaper the supervisor has reaped the leader.
    pub(super) fn leader_reaped(&self) {
        let _ = self.leader_reaped.send(());
    }

    /// Waits up to `limit` for every member of the job's process group to
    /// have been reaped; false on timeout (a member stuck in the kernel).
    pub(super) fn wait_group(&self, limit: Duration) -> bool {
        match self.group_reaped.recv_timeout(limit) {
            Ok(()) => true,
            Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// Starts the thread that reaps the shim's children. The shim is a child
/// subreaper, so job processes orphaned by their parents become its
/// children. The thread:
/// 1. until the leader exits, reaps any other child that exits, then sends
///    [`Event::LeaderExited`] without reaping the leader;
/// 2. once [`supervise`] has killed the group and reaped the leader, reaps
///    the group's remaining members (each is the shim's child by the time
///    its parent is reaped) and reports when none is left;
/// 3. reaps whatever else ends up as the shim's child, until exit.
pub(super) fn start_reaper(events: Sender<Event>) -> io::Result<Reaper> {
    let (leader_tx, leader_rx) = mpsc::channel::<Pid>();
    let (reaped_tx, reaped_rx) = mpsc::channel();
    let (group_tx, group_rx) = mpsc::channel();
    thread::Builder::new()
        .name("reaper".into())
        .spawn(move || {
            let Ok(leader) = leader_rx.recv() else { return };
            let leader = leader.as_raw();
            loop {
                match reap::wait_any_exited_nowait() {
                    Ok(pid) if pid == leader => break,
                    Ok(pid) => {
                        if let Err(e) = reap::reap(pid) {
                            tracing::warn!("reaping orphan {pid}: {e}");
                        }
                    }
                    Err(e) => {
                        let _ = events.send(Event::WaitFailed(e));
                        return;
                    }
                }
            }
            if events.send(Event::LeaderExited).is_err() || reaped_rx.recv().is_err() {
                return;
            }
            loop {
                match reap::reap(-leader) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ECHILD) => break,
                    Err(e) => {
                        tracing::warn!("reaping the job's process group {leader}: {e}");
                        break;
                    }
                }
            }
            let _ = group_tx.send(());
            while reap::reap(-1).is_ok() {}
        })?;
    Ok(Reaper {
        leader: leader_tx,
        leader_reaped: reaped_tx,
        group_reaped: group_rx,
    })
}
