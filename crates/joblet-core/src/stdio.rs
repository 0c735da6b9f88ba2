//! How a job's standard streams are connected: a batch job reads
//! `/dev/null` and writes its log; an interactive one (`rnx job run -i`)
//! also reads what an attached client types, and one with a terminal
//! (`-t`) runs on a pseudo-terminal the node allocates for it.

use serde::{Deserialize, Serialize};

use crate::spec::FieldError;

/// The terminal size a `-t` job starts with when the client sent none.
pub const DEFAULT_ROWS: u16 = 24;
pub const DEFAULT_COLS: u16 = 80;
/// Largest accepted terminal dimension (rows or columns).
pub const MAX_DIMENSION: u16 = 4096;

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TermSize {
    pub rows: u16,
    pub cols: u16,
}

impl TermSize {
    /// Checks a size as a client sent it (`field` names it in the error):
    /// 0 × 0 means "unknown" and gives the default 24 × 80; otherwise both
    /// must be 1 to [`MAX_DIMENSION`].
    pub fn checked(field: &str, rows: i64, cols: i64) -> Result<TermSize, FieldError> {
        if rows == 0 && cols == 0 {
            return Ok(TermSize {
                rows: DEFAULT_ROWS,
                cols: DEFAULT_COLS,
            });
        }
        let dim = |name: &str, v: i64| {
            u16::try_from(v)
                .ok()
                .filter(|v| (1..=MAX_DIMENSION).contains(v))
                .ok_or_else(|| {
                    FieldError::new(
                        format!("{field}.{name}"),
                        format!("{v} is out of range: expected 1 to {MAX_DIMENSION} (or rows and cols both 0 for 24 x 80)"),
                    )
                })
        };
        Ok(TermSize {
            rows: dim("rows", rows)?,
            cols: dim("cols", cols)?,
        })
    }
}

/// A job's standard streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stdio {
    /// Standard input is a pipe (or, with `tty`, the terminal) that an
    /// attached client writes into; otherwise `/dev/null`.
    #[serde(default)]
    pub stdin: bool,
    /// The job runs on a pseudo-terminal of this starting size: its
    /// standard input, output and error, and its controlling terminal;
    /// output is one stream (recorded as stdout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<TermSize>,
}

impl Stdio {
    /// A request's `interactive`, `tty` and `tty_size` (rows × cols, both
    /// 0 for 24 × 80), checked: a size needs a terminal.
    pub fn from_request(
        interactive: bool,
        tty: bool,
        rows: i64,
        cols: i64,
    ) -> Result<Stdio, FieldError> {
        let tty = if tty {
            Some(TermSize::checked("tty_size", rows, cols)?)
        } else if rows != 0 || cols != 0 {
            return Err(FieldError::new(
                "tty_size",
                "is set but tty is not: a terminal size needs a terminal (`rnx job run -t`)",
            ));
        } else {
            None
        };
        Ok(Stdio {
            stdin: interactive,
            tty,
        })
    }

    /// Neither input nor a terminal: the job's output only goes to its log.
    pub fn is_batch(&self) -> bool {
        !self.stdin && self.tty.is_none()
    }

    /// A client can attach to the job (`rnx job attach`).
    pub fn is_interactive(&self) -> bool {
        !self.is_batch()
    }

    /// The flags a user gave, as `rnx` prints them (`-i`, `-t`, `-it`).
    pub fn flags(&self) -> &'static str {
        match (self.stdin, self.tty.is_some()) {
            (true, true) => "-it",
            (true, false) => "-i",
            (false, true) => "-t",
            (false, false) => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_and_zero_means_default() {
        assert_eq!(
            TermSize::checked("tty_size", 0, 0).unwrap(),
            TermSize { rows: 24, cols: 80 }
        );
        assert_eq!(
            TermSize::checked("tty_size", 50, 200).unwrap(),
            TermSize {
                rows: 50,
                cols: 200
            }
        );
        let e = TermSize::checked("tty_size", 0, 80).unwrap_err();
        assert!(e.to_string().contains("tty_size.rows"), "{e}");
        let e = TermSize::checked("tty_size", 24, 70000).unwrap_err();
        assert!(e.to_string().contains("tty_size.cols"), "{e}");
        assert!(e.to_string().contains("1 to 4096"), "{e}");
    }

    #[test]
    fn a_request_gets_a_terminal_only_with_tty() {
        let it = Stdio::from_request(true, true, 0, 0).unwrap();
        assert_eq!(it.tty, Some(TermSize { rows: 24, cols: 80 }));
        assert!(it.stdin);
        assert!(Stdio::from_request(false, false, 0, 0).unwrap().is_batch());
        let e = Stdio::from_request(true, false, 24, 80).unwrap_err();
        assert!(
            e.to_string().contains("tty_size") && e.to_string().contains("needs a terminal"),
            "{e}"
        );
    }

    #[test]
    fn batch_is_the_default_and_serializes_compatibly() {
        let s = Stdio::default();
        assert!(s.is_batch());
        let tty = Stdio {
            stdin: true,
            tty: Some(TermSize { rows: 10, cols: 20 }),
        };
        assert!(tty.is_interactive());
        assert_eq!(tty.flags(), "-it");
        let json = serde_json::to_string(&tty).unwrap();
        assert_eq!(serde_json::from_str::<Stdio>(&json).unwrap(), tty);
        assert_eq!(serde_json::from_str::<Stdio>("{}").unwrap(), s);
    }
}
