//! Finding a runtime's binary and asking it its version, with a time
//! limit (a binary that hangs must not hold the daemon's start-up).

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The first line `binary --version` prints, or why it printed none
/// (`joblet_oci::runtime::version`, under [`VERSION_TIMEOUT`]).
pub fn version(binary: &Path) -> Result<String, String> {
    match joblet_oci::runtime::version(binary, VERSION_TIMEOUT) {
        Ok(Some(line)) => Ok(line),
        Ok(None) => Err(format!("{} --version printed nothing", binary.display())),
        Err(e) => Err(e.to_string()),
    }
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
        let e = version(&bad).unwrap_err();
        assert!(
            e.contains("bad --version`") && e.contains("failed (exit status: 3)"),
            "{e}"
        );
        let missing = dir.path().join("missing");
        assert!(version(&missing).unwrap_err().contains("cannot run"));
    }

    #[test]
    fn sh_is_on_path() {
        assert!(on_path("sh").is_some());
        assert!(on_path("no-such-binary-joblet").is_none());
    }
}
