//! The programs a filesystem volume needs (`mkfs.ext4`, `losetup`), by path so tests can
//! put a failing one in their place, and how they are run.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use crate::error::{Step, VolumeError};

/// Where programs are looked for after `PATH`: a daemon started with a short `PATH` still
/// finds them.
const SYSTEM_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// At most this much of a program's standard error goes into an error.
const STDERR_LIMIT: usize = 2000;

/// The programs a filesystem volume is made and mounted with. Mounting and unmounting are
/// system calls ([`crate::Mounter`]), so that a busy volume is told by its `EBUSY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    /// `mkfs.ext4` (e2fsprogs): run as `mkfs.ext4 -q -F -m 0 -E
    /// root_owner=UID:GID,nodiscard IMAGE`.
    pub mkfs_ext4: PathBuf,
    /// `losetup` (util-linux, with `--nooverlap`: 2.29 or later): run as `losetup --find
    /// --show --nooverlap IMAGE` and `losetup --detach DEVICE`.
    pub losetup: PathBuf,
}

impl Tools {
    /// Each program from `PATH`, then `/usr/sbin`, `/sbin`, `/usr/bin`, `/bin`. One found
    /// nowhere keeps its bare name, so the step that needs it fails saying it could not be
    /// run.
    pub fn find() -> Tools {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs: Vec<PathBuf> = std::env::split_paths(&path)
            .chain(SYSTEM_DIRS.iter().map(PathBuf::from))
            .collect();
        Tools {
            mkfs_ext4: find_in(&dirs, "mkfs.ext4"),
            losetup: find_in(&dirs, "losetup"),
        }
    }
}

impl Default for Tools {
    fn default() -> Tools {
        Tools::find()
    }
}

/// The first executable file `program` in `dirs`, or `program` itself.
fn find_in(dirs: &[PathBuf], program: &str) -> PathBuf {
    dirs.iter()
        .map(|d| d.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

/// The arguments of `mkfs.ext4` for an image owned by `uid:gid`: quiet, no questions (`-F`:
/// the image is a regular file), no blocks reserved for root (`-m 0`: the volume is all
/// the user's), the root directory owned by the volume's owner, and no discard: mke2fs
/// would otherwise punch holes in the image file and hand back the space `fallocate`
/// reserved.
pub(crate) fn mkfs_args(image: &Path, uid: u32, gid: u32) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["-q", "-F", "-m", "0", "-E"]
        .into_iter()
        .map(OsString::from)
        .collect();
    args.push(format!("root_owner={uid}:{gid},nodiscard").into());
    args.push(image.as_os_str().to_owned());
    args
}

impl Tools {
    /// Makes the ext4 filesystem of volume `name` in `image`.
    pub(crate) fn make_filesystem(
        &self,
        name: &str,
        image: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<(), VolumeError> {
        run(
            name,
            Step::MakeFilesystem,
            &self.mkfs_ext4,
            &mkfs_args(image, uid, gid),
        )
        .map(drop)
    }

    /// Attaches `image` to a free loop device, or to the one it is attached to already
    /// (`--nooverlap`: two loop devices on one image would be two ext4 mounts of the same
    /// blocks, which corrupts them). Returns the device.
    pub(crate) fn attach_loop(&self, name: &str, image: &Path) -> Result<PathBuf, VolumeError> {
        let args = [
            OsStr::new("--find"),
            OsStr::new("--show"),
            OsStr::new("--nooverlap"),
            image.as_os_str(),
        ];
        let out = run(name, Step::AttachLoop, &self.losetup, &args)?;
        let device = out.trim();
        if !device.starts_with("/dev/loop") || device.contains(char::is_whitespace) {
            return Err(VolumeError::ToolFailed {
                name: name.to_owned(),
                step: Step::AttachLoop,
                program: self.losetup.clone(),
                outcome: "succeeded but did not print a loop device".into(),
                stderr: format!("standard output: {:?}", clip(device)),
            });
        }
        Ok(PathBuf::from(device))
    }

    /// `losetup --detach DEVICE`: detaches an unmounted device; on a mounted one it sets
    /// its autoclear flag, so the kernel detaches it once it is unmounted.
    pub(crate) fn detach_loop(
        &self,
        name: &str,
        step: Step,
        device: &Path,
    ) -> Result<(), VolumeError> {
        let args = [OsStr::new("--detach"), device.as_os_str()];
        run(name, step, &self.losetup, &args).map(drop)
    }
}

/// Runs `program args` in the C locale without standard input; its standard output if it
/// exits 0.
fn run<S: AsRef<OsStr>>(
    name: &str,
    step: Step,
    program: &Path,
    args: &[S],
) -> Result<String, VolumeError> {
    tracing::debug!(volume = name, %step, program = %program.display(), args = ?args.iter().map(AsRef::as_ref).collect::<Vec<_>>(), "running");
    let out = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| VolumeError::ToolSpawn {
            name: name.to_owned(),
            step,
            program: program.to_owned(),
            source,
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = match stderr.trim() {
        "" => "(it wrote nothing to standard error)".to_owned(),
        s => clip(s),
    };
    Err(VolumeError::ToolFailed {
        name: name.to_owned(),
        step,
        program: program.to_owned(),
        outcome: outcome(out.status),
        stderr,
    })
}

fn outcome(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => format!("ended with {status}"),
    }
}

fn clip(s: &str) -> String {
    if s.len() <= STDERR_LIMIT {
        return s.to_owned();
    }
    let mut end = STDERR_LIMIT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mkfs_gets_quiet_forced_unreserved_owned_and_nodiscard() {
        let args = mkfs_args(Path::new("/v/x/volume.img"), 1000, 1001);
        assert_eq!(
            args,
            [
                "-q",
                "-F",
                "-m",
                "0",
                "-E",
                "root_owner=1000:1001,nodiscard",
                "/v/x/volume.img"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn programs_are_found_in_the_given_dirs_or_keep_their_bare_name() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("mkfs.ext4");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let not_exe = dir.path().join("losetup");
        std::fs::write(&not_exe, "").unwrap();
        let dirs = [PathBuf::from("/nonexistent"), dir.path().to_owned()];
        assert_eq!(find_in(&dirs, "mkfs.ext4"), exe);
        assert_eq!(find_in(&dirs, "losetup"), PathBuf::from("losetup"));
    }

    #[test]
    fn a_failing_program_is_reported_with_its_step_status_and_stderr() {
        let err = run(
            "v",
            Step::AttachLoop,
            Path::new("/bin/sh"),
            &[
                "-c",
                "echo 'losetup: cannot find an unused loop device' >&2; exit 1",
            ],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume v: could not attach the image to a loop device (losetup): /bin/sh \
             exited with status 1: losetup: cannot find an unused loop device"
        );
        let err = run("v", Step::MakeFilesystem, Path::new("/bin/false"), &["x"]).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("/bin/false exited with status 1: (it wrote nothing to standard error)"),
            "{err}"
        );
        let err = run(
            "v",
            Step::MakeFilesystem,
            Path::new("/nonexistent/mkfs"),
            &["x"],
        )
        .unwrap_err();
        assert!(matches!(err, VolumeError::ToolSpawn { .. }), "{err}");
        assert!(
            err.to_string().contains("could not run /nonexistent/mkfs"),
            "{err}"
        );
    }

    #[test]
    fn attach_loop_refuses_output_that_is_not_a_loop_device() {
        let tools = Tools {
            mkfs_ext4: "/bin/true".into(),
            losetup: "/bin/echo".into(),
        };
        let err = tools.attach_loop("v", Path::new("/v/img")).unwrap_err();
        assert!(
            err.to_string()
                .contains("succeeded but did not print a loop device"),
            "{err}"
        );
    }

    #[test]
    fn long_stderr_is_cut_on_a_char_boundary() {
        let s = "é".repeat(STDERR_LIMIT);
        let c = clip(&s);
        assert!(c.len() <= STDERR_LIMIT + 3 && c.ends_with("..."));
    }
}
