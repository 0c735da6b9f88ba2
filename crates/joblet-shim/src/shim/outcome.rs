//! Turning how the leader ended, and why, into the recorded [`ShimExit`]
//! fields.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use crate::spec::Outcome;

/// Why the shim ended the job, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Stopped,
    Killed,
    TimedOut(Duration),
    /// Cluster mode: the node's fencing deadline passed (cut off from etcd).
    Fenced,
}

/// `(outcome, exit_code, signal, message)` for a reaped leader.
pub(crate) fn classify(
    status: ExitStatus,
    reason: Option<Reason>,
) -> (Outcome, Option<i32>, Option<i32>, String) {
    let (code, signal, how) = match (status.code(), status.signal()) {
        (Some(c), _) => (c, None, format!("exited with code {c}")),
        (None, Some(s)) => {
            let core = if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            };
            (
                128 + s,
                Some(s),
                format!("killed by signal {s} ({}){core}", signal_name(s)),
            )
        }
        // Neither: a stop/continue status, which a reaped process never has.
        (None, None) => (
            -1,
            None,
            format!("ended with wait status {:#x}", status.into_raw()),
        ),
    };
    let (outcome, message) = match reason {
        None if signal.is_some() => (Outcome::Signaled, how),
        None => (Outcome::Exited, how),
        Some(Reason::Stopped) => (Outcome::Stopped, format!("stopped by request; {how}")),
        Some(Reason::Killed) => (Outcome::Killed, format!("killed by request; {how}")),
        Some(Reason::Fenced) => (
            Outcome::Killed,
            format!("killed: this node was cut off from the cluster past its fencing deadline, so the job may be placed again elsewhere; {how}"),
        ),
        Some(Reason::TimedOut(t)) => (
            Outcome::TimedOut,
            format!("timed out after {}; {how}", human(t)),
        ),
    };
    (outcome, Some(code), signal, message)
}

fn signal_name(sig: i32) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(s) => s.as_str().to_string(),
        Err(_) if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) => {
            format!("SIGRTMIN+{}", sig - libc::SIGRTMIN())
        }
        Err(_) => "unknown".to_string(),
    }
}

/// "30s", "1500ms".
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(c: i32) -> ExitStatus {
        ExitStatus::from_raw(c << 8)
    }
    fn signaled(s: i32) -> ExitStatus {
        ExitStatus::from_raw(s)
    }

    #[test]
    fn plain_exits_and_signals() {
        assert_eq!(
            classify(exited(3), None),
            (Outcome::Exited, Some(3), None, "exited with code 3".into())
        );
        assert_eq!(
            classify(signaled(9), None),
            (
                Outcome::Signaled,
                Some(137),
                Some(9),
                "killed by signal 9 (SIGKILL)".into()
            )
        );
        let rt = libc::SIGRTMIN() + 2;
        let (_, _, _, m) = classify(signaled(rt), None);
        assert!(m.ends_with("(SIGRTMIN+2)"), "{m}");
    }

    #[test]
    fn reasons_override_the_outcome_but_keep_the_status() {
        assert_eq!(
            classify(exited(0), Some(Reason::Stopped)),
            (
                Outcome::Stopped,
                Some(0),
                None,
                "stopped by request; exited with code 0".into()
            )
        );
        let (o, c, s, m) = classify(
            signaled(15),
            Some(Reason::TimedOut(Duration::from_secs(30))),
        );
        assert_eq!((o, c, s), (Outcome::TimedOut, Some(143), Some(15)));
        assert_eq!(m, "timed out after 30s; killed by signal 15 (SIGTERM)");
        let (o, _, _, m) = classify(signaled(9), Some(Reason::Killed));
        assert_eq!(o, Outcome::Killed);
        assert!(m.starts_with("killed by request"), "{m}");
        assert_eq!(human(Duration::from_millis(1500)), "1500ms");
    }
}
