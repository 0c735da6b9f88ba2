//! Starting the sandbox init by `fork` alone ([`fork_ahead`]), for a
//! caller that is still single-threaded and will need an init later: a
//! warm shim, before its helper threads start. The child becomes the
//! process [`super::spawn`] would have exec'd (same descriptors, signal
//! state, empty environment, own process group) and runs
//! [`super::run_init`] without the `exec`, the dynamic loader and the
//! relocation faults of a fresh image; it then waits for its config, which
//! [`ForkedInit::start`] sends once the caller knows it.

use std::io::Write;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use nix::fcntl::OFlag;

use super::config::InitConfig;
use super::error::InitError;
use super::outer::{run_init, EXIT_NOT_SPAWNED, EXIT_SETUP_FAILED};
use super::spawn::{encode_config, Channels, PendingInit};
use super::sys::{self, Forked};

/// An init forked ahead, waiting for its config on its stdin. Dropping it
/// kills and reaps the process.
#[derive(Debug)]
pub struct ForkedInit {
    pending: PendingInit,
    stdin: OwnedFd,
}

/// Forks the sandbox init now, with `stdout`/`stderr` as the job's output.
/// Refused (an error, nothing started) unless this process has a single
/// thread: the child goes on running this process's code, allocating and
/// taking locks, which is only sound when no other thread could have held
/// one at the fork.
pub fn fork_ahead(stdout: BorrowedFd<'_>, stderr: BorrowedFd<'_>) -> Result<ForkedInit, InitError> {
    let fork_err = |source| InitError::Spawn {
        program: forked_program(),
        source,
    };
    let (stdin_r, stdin_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| InitError::Pipe(e.into()))?;
    let (ours, theirs) = Channels::new()?;
    let me = sys::ProcSelf::open().map_err(fork_err)?;
    match sys::fork_single_threaded(&me).map_err(fork_err)? {
        Forked::Child => {
            let [go, status, end, teardown] = theirs.targets();
            become_init([
                (stdin_r.as_raw_fd(), 0),
                (stdout.as_raw_fd(), 1),
                (stderr.as_raw_fd(), 2),
                go,
                status,
                end,
                teardown,
            ])
        }
        Forked::Parent { child } => {
            drop(theirs);
            drop(stdin_r);
            Ok(ForkedInit {
                pending: PendingInit::new(child, forked_program(), ours),
                stdin: stdin_w,
            })
        }
    }
}

/// What error messages name as the forked init's program.
fn forked_program() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
}

/// The child's side: the state an exec'd init starts in, then the init.
fn become_init(fds: [(i32, i32); 7]) -> ! {
    let ready = sys::become_fresh_process()
        .and_then(|()| sys::place_fds(fds))
        .and_then(|highest| sys::close_from(highest + 1));
    if ready.is_err() {
        // Without its status pipe in place there is nobody to tell: the
        // caller sees the process end without the init's greeting.
        sys::exit_now(EXIT_NOT_SPAWNED);
    }
    // `run_init` never returns; a panic must not unwind into the caller's
    // code, which this process only has a copy of.
    let _ = std::panic::catch_unwind(|| run_init());
    sys::exit_now(EXIT_SETUP_FAILED)
}

impl ForkedInit {
    /// Sends `config` (it must pass [`InitConfig::validate`]): the init
    /// builds the sandbox and blocks like one from [`super::spawn`].
    pub fn start(self, config: &InitConfig) -> Result<PendingInit, InitError> {
        let ForkedInit { mut pending, stdin } = self;
        let json = encode_config(config)?;
        pending.set_config(config);
        let pid = pending.pid();
        std::fs::File::from(stdin)
            .write_all(&json)
            .map_err(|source| InitError::SendConfig { pid, source })?;
        Ok(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_process_with_threads_is_refused() {
        // The test harness runs this on a thread of its own; one more
        // thread that waits makes sure there are several.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let waiter = std::thread::spawn(move || rx.recv());
        let out = tempfile::tempfile().unwrap();
        let err = fork_ahead(out.as_fd(), out.as_fd()).unwrap_err();
        drop(tx);
        waiter.join().unwrap().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("single-threaded"), "{text}");
        assert!(text.contains("threads"), "{text}");
    }
}
