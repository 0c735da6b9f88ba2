//! The shared-memory tmpfs of one GPU's MPS control daemon.
//!
//! MPS clients and the MPS server exchange POSIX shared memory in
//! `/dev/shm`, so a client must see the server's `/dev/shm`. Each GPU gets
//! a tmpfs at `<gpu.mps_dir>/<GPU UUID>/shm` ([`mount`]), mounted before
//! its control daemon starts and unmounted when it quits ([`unmount`]);
//! the control daemon runs in a private mount namespace where that tmpfs
//! is bound on `/dev/shm` ([`bind_on_dev_shm`]; the MPS server it forks
//! inherits the namespace), and each MPS job gets it bound at its own
//! `/dev/shm` by the sandbox (`InitConfig::dev_shm`). This is what
//! NVIDIA's Kubernetes device plugin does with its `<mps root>/shm`.
//!
//! A tmpfs outlives a daemon that stops while MPS jobs still run (they keep
//! running, and so does their control daemon); the next daemon finds them
//! ([`mounted`]), takes over those its reattached jobs use and stops the
//! rest. A GPU's tmpfs is also detached before it is mounted again.

use std::ffi::{CString, NulError};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::mount::{MntFlags, MsFlags};

/// How many stacked mounts [`unmount`] takes off one directory at most.
const MAX_STACKED: usize = 16;

/// Whether `path` is the root of a mount: another file system than its
/// parent's (every tmpfs has a device number of its own).
pub fn is_mount_point(path: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return true;
    };
    match (std::fs::metadata(path), std::fs::metadata(parent)) {
        (Ok(p), Ok(parent)) => p.dev() != parent.dev(),
        _ => false,
    }
}

/// Mounts a fresh tmpfs of `size_mb` MiB at `shm` (created if missing,
/// anything mounted there before detached first).
///
/// Its root is mode 1777, like any `/dev/shm`: the segments are created
/// by the MPS clients (the jobs, all running as `jobs.user`) and by the
/// MPS server, which the root control daemon starts under its clients'
/// UID; the sticky bit keeps one user from removing or renaming another's
/// files. Host users reach it no more than they reach the host's own
/// `/dev/shm` (also 1777, and what MPS uses outside containers); the size
/// bounds what anyone can put there. nosuid, nodev, noexec.
pub fn mount(shm: &Path, size_mb: u64) -> io::Result<()> {
    std::fs::create_dir_all(shm)?;
    unmount(shm)?;
    std::fs::set_permissions(shm, std::fs::Permissions::from_mode(0o755))?;
    nix::mount::mount(
        Some("tmpfs"),
        shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(format!("size={size_mb}m,mode=1777").as_str()),
    )?;
    Ok(())
}

/// Detaches every mount stacked on `shm` (none is fine); returns how many.
/// Lazily (`MNT_DETACH`): a job still holding it keeps its own bind.
pub fn unmount(shm: &Path) -> io::Result<usize> {
    let mut n = 0;
    while n < MAX_STACKED && is_mount_point(shm) {
        nix::mount::umount2(shm, MntFlags::MNT_DETACH)?;
        n += 1;
    }
    Ok(n)
}

/// The GPU directories under `root` (`<root>/<GPU UUID>`) whose `shm` is a
/// mount point: tmpfs an earlier daemon left for jobs that outlived it.
pub fn mounted(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .flatten()
        .filter(|e| is_mount_point(&e.path().join("shm")))
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    found.sort();
    found
}

/// Makes `cmd` run in a private mount namespace (`/` made rslave, so
/// nothing mounted there reaches the host) where `shm` is bound on
/// `/dev/shm`. Needs root and a `/dev/shm` on the host.
pub fn bind_on_dev_shm(cmd: &mut Command, shm: &Path) -> Result<(), NulError> {
    // Everything the child needs is allocated here, before the fork.
    let source = CString::new(shm.as_os_str().as_bytes())?;
    let enter = move || -> io::Result<()> {
        // SAFETY: unshare takes no pointers; it only changes this (forked,
        // single-threaded) child's own mount namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both strings are NUL-terminated literals; the other
        // pointers may be null for a propagation change.
        let slave = unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            )
        };
        if slave != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `source` is a CString owned by this closure (made before
        // the fork) and the target a literal; fstype and data may be null
        // for a bind.
        let bind = unsafe {
            libc::mount(
                source.as_ptr(),
                c"/dev/shm".as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        if bind != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: `enter` runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: it makes three raw system calls on
    // memory allocated before the fork and reads errno (an `io::Error` from
    // an OS error does not allocate); it takes no locks.
    unsafe { cmd.pre_exec(enter) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mounts `n` tmpfs instances on top of each other at `dir`.
    fn stack(dir: &Path, n: usize) {
        std::fs::create_dir_all(dir).unwrap();
        for _ in 0..n {
            nix::mount::mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                MsFlags::empty(),
                Some("size=1m"),
            )
            .unwrap();
        }
    }

    /// This process's mountinfo lines for `/dev/shm`.
    fn dev_shm_mounts() -> Vec<String> {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(4) == Some("/dev/shm"))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn mount_gives_a_fresh_sticky_tmpfs_and_unmount_takes_every_layer_off() {
        let tmp = tempfile::tempdir().unwrap();
        let shm = tmp.path().join("GPU-a").join("shm");
        stack(&shm, 2);
        std::fs::write(shm.join("old"), "").unwrap();
        mount(&shm, 8).unwrap();
        assert!(is_mount_point(&shm));
        assert!(
            !shm.join("old").exists(),
            "the stale mounts were not detached"
        );
        let meta = std::fs::metadata(&shm).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o1777);
        let st = nix::sys::statvfs::statvfs(&shm).unwrap();
        assert_eq!(st.blocks() * st.fragment_size(), 8 << 20);
        use nix::sys::statvfs::FsFlags;
        for flag in [FsFlags::ST_NOSUID, FsFlags::ST_NODEV, FsFlags::ST_NOEXEC] {
            assert!(st.flags().contains(flag), "{flag:?} missing");
        }
        assert_eq!(unmount(&shm).unwrap(), 1);
        assert!(!is_mount_point(&shm));
        assert_eq!(unmount(&shm).unwrap(), 0);
    }

    #[test]
    fn mounts_left_under_the_root_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        stack(&tmp.path().join("GPU-a/shm"), 2);
        stack(&tmp.path().join("GPU-b/shm"), 1);
        std::fs::create_dir_all(tmp.path().join("GPU-c/shm")).unwrap();
        // Only `<root>/*/shm` counts.
        stack(&tmp.path().join("GPU-d/log"), 1);
        assert_eq!(mounted(tmp.path()), ["GPU-a", "GPU-b"]);
        for dir in ["GPU-a/shm", "GPU-b/shm", "GPU-d/log"] {
            unmount(&tmp.path().join(dir)).unwrap();
        }
        assert!(mounted(tmp.path()).is_empty());
        assert!(mounted(&tmp.path().join("missing")).is_empty());
    }

    #[test]
    fn a_command_sees_the_dir_as_its_dev_shm_and_the_host_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let shm = tmp.path().join("shm");
        std::fs::create_dir(&shm).unwrap();
        let name = format!(
            "joblet-shm-test-{}",
            tmp.path().file_name().unwrap().to_str().unwrap()
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &format!("echo inside > /dev/shm/{name}")]);
        bind_on_dev_shm(&mut cmd, &shm).unwrap();
        let before = dev_shm_mounts();
        let status = cmd.status().unwrap();
        let on_host = Path::new("/dev/shm").join(&name);
        let leaked = on_host.exists();
        let _ = std::fs::remove_file(&on_host);
        assert!(status.success());
        assert!(!leaked, "the command wrote the host's /dev/shm");
        assert_eq!(
            std::fs::read_to_string(shm.join(&name)).unwrap(),
            "inside\n"
        );
        // The bind stayed in the command's namespace.
        assert_eq!(dev_shm_mounts(), before);
    }
}
