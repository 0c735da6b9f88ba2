//! The Python part of a runtime: uv installs the locked wheels into the root's
//! `/usr/local/lib/python3.X/dist-packages`, for the root's Python and glibc, not the
//! host's; then the root's own interpreter compiles them to bytecode.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::BuildError;

/// The newest manylinux glibc minor uv 0.13 accepts in `--python-platform`; a newer
/// glibc runs wheels built for it.
const MAX_MANYLINUX_MINOR: u32 = 40;

/// The interpreter path a runtime's console scripts run with.
const ROOT_PYTHON: &str = "/usr/bin/python3";

/// uv's `--python-platform` for this machine's architecture and the root's glibc.
pub(crate) fn platform(arch: &str, glibc: (u32, u32)) -> Result<String, BuildError> {
    if !matches!(arch, "x86_64" | "aarch64") {
        return Err(BuildError::Architecture {
            arch: arch.to_string(),
        });
    }
    let minor = glibc.1.min(MAX_MANYLINUX_MINOR);
    Ok(format!("{arch}-manylinux_{}_{minor}", glibc.0))
}

/// What uv needs to install a runtime's Python packages.
pub(crate) struct UvInstall<'a> {
    pub uv: &'a Path,
    pub target: &'a Path,
    pub python_version: &'a str,
    pub platform: &'a str,
    pub cache: &'a Path,
    pub locks: &'a [PathBuf],
    pub find_links: Option<&'a Path>,
}

impl UvInstall<'_> {
    /// `uv pip install --target … --require-hashes --no-deps --no-build -r lock…`: exactly
    /// the locked wheels, nothing resolved or built at install time. uv still needs some
    /// Python on the host to start (any version; it is never downloaded), but installs for
    /// the given version and platform.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(self.uv);
        cmd.args(["pip", "install", "--target"])
            .arg(self.target)
            .args(["--python-version", self.python_version])
            .args(["--python-platform", self.platform])
            .args(["--require-hashes", "--no-deps", "--no-build"])
            .args(["--link-mode", "copy", "--no-progress", "--color", "never"])
            .arg("--cache-dir")
            .arg(self.cache)
            .env("UV_PYTHON_DOWNLOADS", "never");
        if let Some(dir) = self.find_links {
            cmd.arg("--no-index").arg("--find-links").arg(dir);
        }
        for lock in self.locks {
            cmd.arg("-r").arg(lock);
        }
        cmd
    }
}

/// Byte-compiles `dist` (relative to `rootfs`) with the root's own interpreter, hash-based
/// and unchecked, since the tree is read-only and its files' times are not kept. A clean
/// environment: the host's `PYTHONPATH` and friends must not leak in.
pub(crate) fn compileall_command(chroot: &Path, rootfs: &Path, dist: &Path) -> Command {
    let mut cmd = Command::new(chroot);
    cmd.arg(rootfs)
        .arg(ROOT_PYTHON)
        .args([
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
        ])
        .arg(Path::new("/").join(dist))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LC_ALL", "C.UTF-8");
    cmd
}

/// uv puts console scripts in `<target>/bin` with the host interpreter in their `#!`
/// line: move them to `/usr/local/bin` of the root and point them at its Python.
pub(crate) fn install_scripts(rootfs: &Path, target: &Path) -> Result<u64, BuildError> {
    let bin = target.join("bin");
    if !bin.is_dir() {
        return Ok(0);
    }
    let dest_dir = rootfs.join("usr/local/bin");
    fs::create_dir_all(&dest_dir).map_err(io("create", &dest_dir))?;
    let mut moved = 0;
    for entry in fs::read_dir(&bin).map_err(io("read", &bin))? {
        let entry = entry.map_err(io("read", &bin))?;
        let src = entry.path();
        let dest = dest_dir.join(entry.file_name());
        if entry.file_type().map_err(io("inspect", &src))?.is_file() {
            rewrite_shebang(&src)?;
        }
        fs::rename(&src, &dest).map_err(io("move", &src))?;
        moved += 1;
    }
    fs::remove_dir(&bin).map_err(io("remove", &bin))?;
    Ok(moved)
}

/// Replaces a `#!…python…` first line by `#!/usr/bin/python3`, keeping the rest.
fn rewrite_shebang(path: &Path) -> Result<(), BuildError> {
    let mut reader = BufReader::new(fs::File::open(path).map_err(io("open", path))?);
    let mut first = String::new();
    if reader.read_line(&mut first).is_err()
        || !first.starts_with("#!")
        || !first.contains("python")
    {
        return Ok(());
    }
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).map_err(io("read", path))?;
    let mut out = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(io("open", path))?;
    out.write_all(format!("#!{ROOT_PYTHON}\n").as_bytes())
        .and_then(|()| out.write_all(&rest))
        .map_err(io("write", path))
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BuildError {
    let path = path.to_path_buf();
    move |source| BuildError::Io { op, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_follows_the_roots_glibc() {
        assert_eq!(
            platform("x86_64", (2, 36)).unwrap(),
            "x86_64-manylinux_2_36"
        );
        assert_eq!(
            platform("aarch64", (2, 41)).unwrap(),
            "aarch64-manylinux_2_40"
        );
        assert!(platform("riscv64", (2, 36)).is_err());
    }

    #[test]
    fn uv_arguments() {
        let locks = [
            PathBuf::from("/f/requirements.lock"),
            PathBuf::from("/f/extra.lock"),
        ];
        let cmd = UvInstall {
            uv: Path::new("uv"),
            target: Path::new("/s/rootfs/usr/local/lib/python3.11/dist-packages"),
            python_version: "3.11",
            platform: "x86_64-manylinux_2_36",
            cache: Path::new("/store/cache/uv"),
            locks: &locks,
            find_links: Some(Path::new("/wheels")),
        }
        .command();
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "pip install --target /s/rootfs/usr/local/lib/python3.11/dist-packages \
             --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
             --require-hashes --no-deps --no-build --link-mode copy --no-progress \
             --color never --cache-dir /store/cache/uv --no-index --find-links /wheels \
             -r /f/requirements.lock -r /f/extra.lock"
        );
    }

    #[test]
    fn scripts_move_to_usr_local_bin_with_the_roots_python() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("usr/local/lib/python3.11/dist-packages");
        fs::create_dir_all(target.join("bin")).unwrap();
        fs::write(
            target.join("bin/tool"),
            "#!/root/.pyenv/versions/3.13.0/bin/python\nimport sys\n",
        )
        .unwrap();
        fs::write(target.join("bin/plain"), "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(install_scripts(root.path(), &target).unwrap(), 2);
        let bin = root.path().join("usr/local/bin");
        assert_eq!(
            fs::read_to_string(bin.join("tool")).unwrap(),
            "#!/usr/bin/python3\nimport sys\n"
        );
        assert_eq!(
            fs::read_to_string(bin.join("plain")).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        assert!(!target.join("bin").exists());
    }
}
