//! The Debian part of a runtime: mmdebstrap, and what the built root says about itself
//! (its dpkg status, glibc version and Python version).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::BuildError;
use crate::manifest::Base;

/// The mmdebstrap command building `base` at `rootfs`, run in a private mount namespace
/// (`unshare --mount`) so the `/proc`, `/sys` and `/dev` mounts it makes in the chroot go
/// away with it even if it is killed.
///
/// mmdebstrap's own output is kept (no `--quiet`): with `--quiet` a failing maintainer
/// script shows only as "setup failed", not its reason.
pub(crate) fn mmdebstrap_command(
    unshare: &Path,
    mmdebstrap: &Path,
    base: &Base,
    rootfs: &Path,
) -> Command {
    let mut cmd = Command::new(unshare);
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg(mmdebstrap)
        .arg("--mode=root")
        .arg(format!("--variant={}", base.variant.as_str()));
    if !base.packages.is_empty() {
        let list: Vec<&str> = base.packages.iter().map(|p| p.as_str()).collect();
        cmd.arg(format!("--include={}", list.join(",")));
    }
    cmd.arg(base.suite.as_str()).arg(rootfs);
    cmd
}

/// `name=version` of every package dpkg lists as installed in `rootfs`, sorted.
pub(crate) fn installed_packages(rootfs: &Path) -> Result<Vec<String>, BuildError> {
    let path = rootfs.join("var/lib/dpkg/status");
    let text = std::fs::read_to_string(&path).map_err(|source| BuildError::Io {
        op: "read",
        path: path.clone(),
        source,
    })?;
    let mut packages: Vec<String> = parse_status(&text)
        .into_iter()
        .map(|(name, version)| format!("{name}={version}"))
        .collect();
    packages.sort();
    Ok(packages)
}

/// `(name, version)` of the stanzas whose status is `install ok installed`.
fn parse_status(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |key: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(':')))
                .map(|v| v.trim().to_string())
        };
        if field("Status").as_deref() == Some("install ok installed") {
            if let (Some(name), Some(version)) = (field("Package"), field("Version")) {
                out.push((name, version));
            }
        }
    }
    out
}

/// glibc's `(major, minor)` from the installed `libc6` package version (`2.36-9+deb12u14`).
pub(crate) fn glibc_version(packages: &[String]) -> Option<(u32, u32)> {
    let version = packages.iter().find_map(|p| p.strip_prefix("libc6="))?;
    let upstream = version.split(['-', '+', '~']).next()?;
    let mut parts = upstream.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The Python version (`3.11`) `/usr/bin/python3` in `rootfs` links to, and the
/// `dist-packages` directory of that version under `/usr/local`, which Debian's Python
/// has on `sys.path`.
pub(crate) fn python_of(rootfs: &Path) -> Option<(String, PathBuf)> {
    let target = std::fs::read_link(rootfs.join("usr/bin/python3")).ok()?;
    let name = target.file_name()?.to_str()?;
    let version = name.strip_prefix("python")?;
    let ok = version
        .split_once('.')
        .is_some_and(|(a, b)| a == "3" && !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()));
    ok.then(|| {
        let dist = PathBuf::from(format!("usr/local/lib/python{version}/dist-packages"));
        (version.to_string(), dist)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Suite, Variant};

    #[test]
    fn mmdebstrap_arguments() {
        let base = Base {
            suite: Suite::try_from("bookworm".to_string()).unwrap(),
            variant: Variant::Essential,
            packages: vec![
                "python3-minimal".to_string().try_into().unwrap(),
                "ca-certificates".to_string().try_into().unwrap(),
            ],
        };
        let cmd = mmdebstrap_command(
            Path::new("unshare"),
            Path::new("/usr/bin/mmdebstrap"),
            &base,
            Path::new("/s/rootfs"),
        );
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--mount",
                "--propagation",
                "private",
                "--",
                "/usr/bin/mmdebstrap",
                "--mode=root",
                "--variant=essential",
                "--include=python3-minimal,ca-certificates",
                "bookworm",
                "/s/rootfs"
            ]
        );
    }

    #[test]
    fn reads_dpkg_status_and_glibc() {
        let status = "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\n\
                      Version: 2.36-9+deb12u14\nDescription: x\n continued\n\n\
                      Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n\
                      Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n";
        let mut packages: Vec<String> = parse_status(status)
            .into_iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        packages.sort();
        assert_eq!(packages, ["libc6=2.36-9+deb12u14", "python3=3.11.2-1+b1"]);
        assert_eq!(glibc_version(&packages), Some((2, 36)));
    }

    #[test]
    fn finds_python_version() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/bin")).unwrap();
        assert_eq!(python_of(dir.path()), None);
        std::os::unix::fs::symlink("python3.11", dir.path().join("usr/bin/python3")).unwrap();
        assert_eq!(
            python_of(dir.path()),
            Some((
                "3.11".to_string(),
                PathBuf::from("usr/local/lib/python3.11/dist-packages")
            ))
        );
    }
}
