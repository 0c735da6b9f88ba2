//! Runs a runtime with one mount out of its sight: in a private mount
//! namespace of its own, without the cgroup2 mount of a hybrid host, which
//! crun refuses (it supports either all-v1 or all-v2). The host's mounts
//! are untouched; the runtime then places the job on the v1 hierarchies
//! alone, which hold every controller on a hybrid host.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Makes `cmd` run in a new mount namespace (private propagation) with
/// `mount` detached.
pub(super) fn without_mount(cmd: &mut Command, mount: &Path) -> io::Result<()> {
    let target = CString::new(mount.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mount path holds a NUL"))?;
    let root = CString::new("/").expect("no NUL");
    // SAFETY: the closure runs in the forked child before `exec`; it only
    // makes the raw syscalls unshare(2), mount(2) and umount2(2), which
    // are async-signal-safe, on C strings allocated before the fork, and
    // reads errno. It allocates and locks nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::umount2(target.as_ptr(), libc::MNT_DETACH) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}
