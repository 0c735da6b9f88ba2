//! Cluster mode's fencing deadline, shared by the daemon and the shims of
//! cluster jobs through one small file: the daemon writes the moment (on
//! `CLOCK_BOOTTIME`, in milliseconds, which counts suspended time too)
//! after which the node's etcd lease may have expired elsewhere; a shim
//! kills its job once that moment passes. The daemon moves it forward with
//! every answered keep-alive; when the daemon dies it stops moving, so a
//! job whose shim outlives the daemon still dies before its next attempt
//! can start on another node. A missing or unreadable file counts as
//! passed: fail closed.

use std::io;
use std::path::Path;

use nix::time::{clock_gettime, ClockId};

/// Now on the clock the deadline is written in.
pub fn now_ms() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_BOOTTIME).expect("CLOCK_BOOTTIME is always readable");
    u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000
        + u64::try_from(t.tv_nsec()).unwrap_or(0) / 1_000_000
}

/// Publishes `deadline` (atomically: readers see the old one or the new).
pub fn write(path: &Path, deadline: u64) -> io::Result<()> {
    crate::atomic::write_atomic(path, format!("{deadline}\n").as_bytes())
}

/// The deadline published at `path`; `None` when there is none readable.
pub fn read(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether the deadline at `path` has passed (or cannot be read).
pub fn passed(path: &Path) -> bool {
    read(path).is_none_or(|d| now_ms() >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_in_the_future_holds_and_a_missing_one_has_passed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("fence");
        assert!(passed(&f), "no file: fail closed");
        write(&f, now_ms() + 60_000).unwrap();
        assert!(!passed(&f));
        write(&f, now_ms().saturating_sub(1)).unwrap();
        assert!(passed(&f));
        std::fs::write(&f, "garbage").unwrap();
        assert!(passed(&f));
    }
}
