//! The local side of an interactive job: the terminal in raw mode while
//! attached (restored on every way out), its size, the detach keys, and
//! the session that carries input to the job and its output back
//! ([`session`]).

mod detach;
pub mod session;

use std::io::IsTerminal;
use std::os::fd::AsFd;

use nix::sys::termios::{self, SetArg, Termios};

pub use detach::{DetachKeys, Matcher, Scanned};

/// This terminal's size (rows, cols), when stdin or stdout is one.
pub fn size() -> Option<(u16, u16)> {
    let of = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::termios::tcgetwinsize(fd)
            .ok()
            .filter(|w| w.ws_row > 0 && w.ws_col > 0)
            .map(|w| (w.ws_row, w.ws_col))
    };
    of(std::io::stdin().as_fd()).or_else(|| of(std::io::stdout().as_fd()))
}

/// Whether stdin is a terminal (raw mode and the detach keys apply).
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// The terminal in raw mode (every key goes to the job as typed, no local
/// echo, no local signals) until dropped, which restores the settings it
/// found.
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Puts stdin's terminal in raw mode.
    pub fn enter() -> std::io::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // TCSADRAIN: output already written is shown in raw mode's terms.
        if let Err(e) = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, &self.saved)
        {
            eprintln!("rnx: cannot restore the terminal's settings ({e}); run `stty sane`");
        }
    }
}
