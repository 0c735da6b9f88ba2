//! Pseudo-terminals for interactive jobs (the shim's) and execs (the
//! daemon's): opened at a size and close-on-exec (so no other process the
//! opener starts holds an end, and the master reads EIO once the command's
//! ends are closed), and resized.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use joblet_core::TermSize;
use nix::fcntl::{fcntl, FcntlArg, FdFlag};

/// Both ends of a new pseudo-terminal.
#[derive(Debug)]
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Opens a pseudo-terminal of `size`, both ends close-on-exec.
pub fn open(size: TermSize) -> io::Result<Pty> {
    let winsize = nix::pty::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&winsize, None).map_err(io::Error::from)?;
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
    }
    Ok(Pty {
        master: pty.master,
        slave: pty.slave,
    })
}

/// Sets the terminal's size through its master (its foreground process
/// group gets SIGWINCH).
pub fn resize(master: impl AsFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master.as_fd(), size).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_at_a_size_close_on_exec_and_resizes() {
        let pty = open(TermSize {
            rows: 30,
            cols: 100,
        })
        .unwrap();
        for fd in [&pty.master, &pty.slave] {
            let flags = fcntl(fd, FcntlArg::F_GETFD).unwrap();
            assert!(FdFlag::from_bits_truncate(flags).contains(FdFlag::FD_CLOEXEC));
        }
        let got = rustix::termios::tcgetwinsize(&pty.slave).unwrap();
        assert_eq!((got.ws_row, got.ws_col), (30, 100));
        resize(&pty.master, 40, 120).unwrap();
        let got = rustix::termios::tcgetwinsize(&pty.slave).unwrap();
        assert_eq!((got.ws_row, got.ws_col), (40, 120));
    }
}
