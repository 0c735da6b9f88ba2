//! Finding a runtime's binary and asking it its version, with a time
//! limit (a binary that hangs must not hold the daemon's start-up).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a runtime may take to say its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// `name` in the directories of `PATH` (or the usual system ones when
/// `PATH` is unset), as an executable file.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The first line `binary --version` prints, or why it printed none.
pub fn version(binary: &Path) -> Result<String, String> {
    let mut child = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {} --version: {e}", binary.display()))?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} --version did not answer within {}s",
                    binary.display(),
                    VERSION_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {} --version: {e}", binary.display())),
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    if !status.success() {
        return Err(format!("{} --version failed ({status})", binary.display()));
    }
    out.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{} --version printed nothing", binary.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_first_line_and_failures_name_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let ok = script("ok", "echo 'runc version 1.1.5'; echo 'spec: 1.0.2'");
        assert_eq!(version(&ok).unwrap(), "runc version 1.1.5");
        let bad = script("bad", "exit 3");
        assert!(version(&bad).unwrap_err().contains("bad --version failed"));
        let missing = dir.path().join("missing");
        assert!(version(&missing).unwrap_err().contains("cannot run"));
    }

    #[test]
    fn sh_is_on_path() {
        assert!(on_path("sh").is_some());
        assert!(on_path("no-such-binary-joblet").is_none());
    }
}
