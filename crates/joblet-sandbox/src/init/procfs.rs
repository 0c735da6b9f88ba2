//! The job's `/proc`: a fresh procfs of the new pid namespace, with
//! `hidepid=invisible` where the kernel accepts it (other users'
//! processes, pid 1 included, are not even listed), and runc's read-only
//! and masked paths so that a root job cannot reach kernel knobs through it.

use std::fs;
use std::path::Path;

use nix::errno::Errno;
use nix::mount::MsFlags;

use super::error::Stage;
use super::report::{self, Context, SetupError};
use super::rootfs::{bind_readonly, mkdir_p, mnt, remount_bind, tmpfs};

/// procfs options, most wanted first (`invisible` is Linux 5.8+, `2` the
/// older spelling).
const HIDEPID: [&str; 2] = ["hidepid=invisible", "hidepid=2"];

/// Bound read-only over themselves.
const READ_ONLY: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Hidden: an empty read-only tmpfs over directories, `/dev/null` (bound
/// read-only) over files.
const MASKED: [&str; 9] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
];

/// Mounts `/proc`; needs `/dev/null` in place.
pub(crate) fn build() -> Result<(), SetupError> {
    let proc = Path::new("/proc");
    mkdir_p(proc).stage(Stage::Proc, || "creating /proc".into())?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let source = Some(Path::new("proc"));
    let mut mounted = false;
    for opts in HIDEPID {
        match mnt(source, proc, Some("proc"), flags, Some(opts)) {
            Ok(()) => {
                mounted = true;
                break;
            }
            Err(Errno::EINVAL) => continue,
            Err(e) => {
                return Err(SetupError::new(
                    Stage::Proc,
                    format!("mounting proc ({opts}): {e}"),
                ))
            }
        }
    }
    if !mounted {
        report::warn(
            Stage::Proc,
            "procfs refused hidepid=invisible and hidepid=2; /proc lists every process of the job's pid namespace",
        );
        mnt(source, proc, Some("proc"), flags, None)
            .stage(Stage::Proc, || "mounting proc".into())?;
    }
    for p in READ_ONLY.map(Path::new) {
        if fs::symlink_metadata(p).is_ok() {
            bind_readonly(p, p, Stage::Proc)?;
        }
    }
    for p in MASKED.map(Path::new) {
        let Ok(meta) = fs::symlink_metadata(p) else {
            continue;
        };
        if meta.is_dir() {
            tmpfs(
                p,
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                "size=4k,mode=0555",
            )
        } else {
            // Then read-only whatever `/dev` is at this point (a cold
            // sandbox's is read-only already, a warm one's not yet), so
            // every sandbox's masks look the same; `/dev/null` still opens.
            mnt(
                Some(Path::new("/dev/null")),
                p,
                None,
                MsFlags::MS_BIND,
                None,
            )
            .and_then(|()| {
                remount_bind(
                    p,
                    MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                )
            })
        }
        .stage(Stage::Proc, || format!("masking {}", p.display()))?;
    }
    Ok(())
}
