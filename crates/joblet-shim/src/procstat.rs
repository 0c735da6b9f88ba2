//! A process's start time from `/proc/N/stat`: with the pid, it names one
//! process even after its pid is reused.

use std::io;
use std::path::{Path, PathBuf};

use crate::spec::PidRecord;

/// The usual procfs mount point.
pub const PROC_ROOT: &str = "/proc";

#[derive(Debug, thiserror::Error)]
pub enum ProcStatError {
    #[error("no process {pid} (checked {path})")]
    NoSuchProcess { pid: i32, path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} has no start time in field 22; is procfs mounted there?")]
    Malformed { path: PathBuf },
}

/// Field 22 (`starttime`, clock ticks since boot) of a `/proc/N/stat` line.
///
/// The command name (field 2) is in parentheses and may itself contain
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")": field 3 (state) is item 0, so field 22 is item 19.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// The start time of process `pid`, read from `proc_root` (normally
/// [`PROC_ROOT`]).
pub fn start_time(proc_root: &Path, pid: i32) -> Result<u64, ProcStatError> {
    let path = proc_root.join(pid.to_string()).join("stat");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            return Err(ProcStatError::NoSuchProcess { pid, path })
        }
        Err(source) => return Err(ProcStatError::Read { path, source }),
    };
    parse_start_time(&text).ok_or(ProcStatError::Malformed { path })
}

/// The [`PidRecord`] of a live (or not yet reaped) process.
pub fn pid_record(proc_root: &Path, pid: i32) -> Result<PidRecord, ProcStatError> {
    Ok(PidRecord {
        pid,
        start_time: start_time(proc_root, pid)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_field_22_even_with_odd_command_names() {
        let plain = "1234 (sleep) S 1 1234 1234 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 987654 5 6";
        assert_eq!(parse_start_time(plain), Some(987654));
        let odd = "77 (a) b (c d) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0";
        assert_eq!(parse_start_time(odd), Some(42));
        assert_eq!(parse_start_time("77 (x) R 1 2 3"), None);
        assert_eq!(parse_start_time("no parens at all"), None);
    }

    #[test]
    fn reads_own_start_time_and_reports_missing_processes() {
        let me = std::process::id() as i32;
        let root = Path::new(PROC_ROOT);
        let a = start_time(root, me).unwrap();
        let b = start_time(root, me).unwrap();
        assert_eq!(a, b);
        assert!(a > 0);
        // A child started later has a start time no earlier than ours.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let c = start_time(root, child.id() as i32).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(c >= a);
        // pid_max is at most 2^22, so this pid never exists.
        match start_time(root, 1 << 23) {
            Err(ProcStatError::NoSuchProcess { pid, .. }) => assert_eq!(pid, 1 << 23),
            other => panic!("{other:?}"),
        }
        let fake = tempfile::tempdir().unwrap();
        std::fs::create_dir(fake.path().join("5")).unwrap();
        std::fs::write(fake.path().join("5/stat"), "5 (x) R 1").unwrap();
        assert!(matches!(
            start_time(fake.path(), 5),
            Err(ProcStatError::Malformed { .. })
        ));
    }
}
