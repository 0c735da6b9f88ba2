//! The status pipe's line protocol, init -> caller: `H\tconfig\t<name>`
//! first (the program really is the sandbox init), `W\t<stage>\t<text>`
//! for a warning, `E\t<stage>\t<text>` for a setup error (after which the
//! init exits), and, from a warm init's pid 1, `R\tconfig\twarm` once it
//! waits for the job's config. The pipe is close-on-exec in the init, so it reaches end of
//! file when the job's `execve` succeeded (or every writer died).

use std::sync::atomic::{AtomicI32, Ordering};

use super::error::Stage;
use super::sys;

/// One parsed status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StatusLine {
    Hello {
        name: String,
    },
    Warning {
        stage: Stage,
        message: String,
    },
    Error {
        stage: Stage,
        message: String,
    },
    /// A warm init's pid 1 is ready for the job's config.
    Ready,
}

/// Formats a line; tabs and newlines in the text become spaces so a line
/// is always one record.
pub(crate) fn encode(kind: char, stage: Stage, message: &str) -> String {
    let clean: String = message
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect();
    format!("{kind}\t{stage}\t{clean}\n")
}

/// Parses one line (without its newline).
pub(crate) fn decode(line: &str) -> Option<StatusLine> {
    let mut parts = line.splitn(3, '\t');
    let kind = parts.next()?;
    let stage: Stage = parts.next()?.parse().ok()?;
    let message = parts.next()?.to_owned();
    match kind {
        "H" => Some(StatusLine::Hello { name: message }),
        "W" => Some(StatusLine::Warning { stage, message }),
        "E" => Some(StatusLine::Error { stage, message }),
        "R" => Some(StatusLine::Ready),
        _ => None,
    }
}

/// The status descriptor of this process, or -1 once it has been closed
/// (so a late report never writes into a reused descriptor number).
static STATUS: AtomicI32 = AtomicI32::new(-1);

/// Makes `fd` this process's status descriptor.
pub(crate) fn set_status_fd(fd: i32) {
    STATUS.store(fd, Ordering::SeqCst);
}

/// Closes this process's copy of the status descriptor.
pub(crate) fn close_status_fd() {
    let fd = STATUS.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        sys::close_raw(fd);
    }
}

fn send(line: &str) {
    let fd = STATUS.load(Ordering::SeqCst);
    if fd >= 0 {
        // Nobody to tell if the caller has gone away.
        let _ = sys::write_all_raw(fd, line.as_bytes());
    }
}

/// What the init says first.
pub(crate) const HELLO: &str = concat!("joblet-sandbox-init ", env!("CARGO_PKG_VERSION"));

/// Tells the caller that the sandbox init is running.
pub(crate) fn hello() {
    send(&encode('H', Stage::Config, HELLO));
}

/// Tells the caller that a warm sandbox is built and waits for its job.
pub(crate) fn ready() {
    send(&encode('R', Stage::Config, "warm"));
}

/// Reports a warning to the caller, which logs it.
pub(crate) fn warn(stage: Stage, message: &str) {
    send(&encode('W', stage, message));
}

/// Reports a setup error to the caller.
pub(crate) fn error(stage: Stage, message: &str) {
    send(&encode('E', stage, message));
}

/// A setup step's failure inside the init process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetupError {
    pub stage: Stage,
    pub message: String,
}

impl SetupError {
    pub(crate) fn new(stage: Stage, message: impl Into<String>) -> Self {
        SetupError {
            stage,
            message: message.into(),
        }
    }
}

/// Shorthand for mapping an error into a [`SetupError`] with context.
pub(crate) trait Context<T> {
    fn stage(self, stage: Stage, what: impl FnOnce() -> String) -> Result<T, SetupError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn stage(self, stage: Stage, what: impl FnOnce() -> String) -> Result<T, SetupError> {
        self.map_err(|e| SetupError::new(stage, format!("{}: {e}", what())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_stay_single_lines() {
        let line = encode('E', Stage::Rootfs, "bind /nope:\tENOENT\nsecond line");
        assert_eq!(line, "E\trootfs\tbind /nope: ENOENT second line\n");
        assert_eq!(
            decode(line.trim_end_matches('\n')),
            Some(StatusLine::Error {
                stage: Stage::Rootfs,
                message: "bind /nope: ENOENT second line".into()
            })
        );
        assert_eq!(
            decode("W\tproc\thidepid refused"),
            Some(StatusLine::Warning {
                stage: Stage::Proc,
                message: "hidepid refused".into()
            })
        );
    }

    #[test]
    fn ready_parses() {
        let line = encode('R', Stage::Config, "warm");
        assert_eq!(decode(line.trim_end()), Some(StatusLine::Ready));
    }

    #[test]
    fn hello_parses() {
        let line = encode('H', Stage::Config, HELLO);
        assert_eq!(
            decode(line.trim_end()),
            Some(StatusLine::Hello { name: HELLO.into() })
        );
    }

    #[test]
    fn every_stage_parses_back_and_junk_is_rejected() {
        for st in Stage::ALL {
            let line = encode('W', st, "x");
            assert!(decode(line.trim_end()).is_some(), "{st}");
        }
        assert_eq!(decode("X\trootfs\tm"), None);
        assert_eq!(decode("E\tnostage\tm"), None);
        assert_eq!(decode("E\trootfs"), None);
        assert_eq!(decode(""), None);
    }

    #[test]
    fn context_names_what_failed() {
        let r: Result<(), std::io::Error> = Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        let e = r
            .stage(Stage::Dev, || "binding /dev/null".into())
            .unwrap_err();
        assert_eq!(e.stage, Stage::Dev);
        assert!(
            e.message.starts_with("binding /dev/null: "),
            "{}",
            e.message
        );
    }
}
