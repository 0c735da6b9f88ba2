//! The job's `/dev`: a small tmpfs holding the host's minimal nodes
//! ([`NODES`]) and the configured extra devices, the usual symlinks, a
//! private devpts instance and `/dev/shm` (a private tmpfs, or the host
//! directory [`InitConfig::dev_shm`] bound read-write); then the tmpfs
//! itself is remounted read-only.
//!
//! Each node is made with `mknod` as a copy of the host's (type, device
//! number, permission bits, owner), as crun and runc do as root: no mount
//! to make, remount and tear down again when the sandbox goes (two mount
//! calls and a mount's teardown per node). Where the kernel refuses
//! `mknod` (`EPERM`: a device cgroup without `m`, which is the case for a
//! warm sandbox's pid 1 adding its job's devices from inside the job's
//! cgroups, or a daemon confined by its own), the host node is bound
//! instead (nosuid, noexec).

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::mount::MsFlags;
use nix::sys::stat::{mknod, Mode, SFlag};

use super::config::InitConfig;
use super::error::Stage;
use super::hostfds::{Host, Source};
use super::report::{self, Context, SetupError};
use super::rootfs::{attach, host, mkdir_p, mnt, remount_bind, tmpfs, touch, touch_file};

/// Host device nodes every job gets.
pub(crate) const NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Symlinks every job gets, name -> target.
const LINKS: [(&str, &str); 5] = [
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// The devpts options: a new instance (never the host's ptys); gid 5 is
/// the conventional `tty` group.
const DEVPTS_OPTS: &str = "newinstance,ptmxmode=0666,mode=0620,gid=5";
const DEVPTS_OPTS_NO_GID: &str = "newinstance,ptmxmode=0666,mode=0620";

/// The part of `/dev` every job gets (see [`finish`] for the rest): the
/// tmpfs, [`NODES`], the symlinks, devpts and the `/dev/shm` mount point.
/// It stays writable until [`finish`].
pub(crate) fn build_base() -> Result<(), SetupError> {
    let dev = Path::new("/dev");
    mkdir_p(dev).stage(Stage::Dev, || "creating /dev".into())?;
    tmpfs(
        dev,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "size=1m,mode=0755",
    )
    .stage(Stage::Dev, || "mounting the /dev tmpfs".into())?;
    for name in NODES {
        let path = dev.join(name);
        let source = Source::Path(host(&path));
        let meta = fs::metadata(source.path()).stage(Stage::Dev, || {
            format!("{}: cannot stat it on the host", path.display())
        })?;
        if !meta.file_type().is_char_device() {
            return Err(SetupError::new(
                Stage::Dev,
                format!(
                    "{} is not a character device on the host; the job's /dev copies it",
                    path.display()
                ),
            ));
        }
        make_node(&source, &meta, &path)?;
    }
    for (name, target) in LINKS {
        std::os::unix::fs::symlink(target, dev.join(name))
            .stage(Stage::Dev, || format!("creating /dev/{name} -> {target}"))?;
    }
    devpts()?;
    mkdir_p(Path::new("/dev/shm")).stage(Stage::Dev, || "creating /dev/shm".into())
}

/// The job's own part of `/dev`: its extra devices and device binds,
/// `/dev/shm`, then the tmpfs remounted read-only.
/// `shm_mounted`: a private `/dev/shm` is mounted already (a warm
/// sandbox's, see [`premount_shm`]).
pub(crate) fn finish(
    config: &InitConfig,
    host: &Host,
    shm_mounted: bool,
) -> Result<(), SetupError> {
    bind_devices(config, host)?;
    match (&config.dev_shm, shm_mounted) {
        (None, true) => {}
        (Some(_), true) => {
            nix::mount::umount2("/dev/shm", nix::mount::MntFlags::empty())
                .stage(Stage::Dev, || {
                    "unmounting the warm sandbox's /dev/shm for the job's directory".into()
                })?;
            shm(config, host)?;
        }
        (_, false) => shm(config, host)?,
    }
    remount_bind(
        Path::new("/dev"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )
    .stage(Stage::Dev, || "remounting /dev read-only".into())
}

/// Binds `config`'s extra devices and device binds into `/dev`, each
/// checked to be a device node on the host.
pub(crate) fn bind_devices(config: &InitConfig, host: &Host) -> Result<(), SetupError> {
    let extra = config
        .extra_devices
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_path(), p.as_path(), host.extra_device(i, p)));
    let binds = config.device_binds.iter().enumerate().map(|(i, b)| {
        (
            b.source.as_path(),
            b.target.as_path(),
            host.device_bind(i, &b.source),
        )
    });
    for (source, target, node) in extra.chain(binds) {
        let node = node.stage(Stage::Dev, || format!("extra device {}", source.display()))?;
        let meta = fs::metadata(node.path()).stage(Stage::Dev, || {
            format!(
                "extra device {}: cannot stat it on the host",
                source.display()
            )
        })?;
        let ft = meta.file_type();
        if !ft.is_char_device() && !ft.is_block_device() {
            return Err(SetupError::new(
                Stage::Dev,
                format!(
                    "extra device {} is not a device node on the host",
                    source.display()
                ),
            ));
        }
        make_node(&node, &meta, target)?;
    }
    Ok(())
}

/// Puts a copy of the host device node `source` (whose metadata is `meta`)
/// at `path` in the job: `mknod` of the same type and device number, then
/// its permission bits (the umask may have taken some off) and, when not
/// root's, its owner. Bound instead where `mknod` is refused (see the
/// module doc).
fn make_node(source: &Source<'_>, meta: &fs::Metadata, path: &Path) -> Result<(), SetupError> {
    // Most nodes go straight into /dev, which exists.
    if let Some(parent) = path.parent().filter(|p| *p != Path::new("/dev")) {
        mkdir_p(parent).stage(Stage::Dev, || format!("creating {}", parent.display()))?;
    }
    let kind = if meta.file_type().is_block_device() {
        SFlag::S_IFBLK
    } else {
        SFlag::S_IFCHR
    };
    let perm = meta.mode() & 0o777;
    match mknod(path, kind, Mode::from_bits_truncate(perm), meta.rdev()) {
        Ok(()) => {}
        Err(Errno::EPERM) => return bind_node_from(source, path),
        // Named twice (say, as an extra device and a device bind): the
        // node made first stands if it is the same device.
        Err(Errno::EEXIST)
            if fs::symlink_metadata(path).is_ok_and(|m| {
                m.rdev() == meta.rdev()
                    && m.file_type().is_block_device() == meta.file_type().is_block_device()
            }) =>
        {
            return Ok(())
        }
        Err(e) => {
            return Err(SetupError::new(
                Stage::Dev,
                format!("making device node {}: {e}", path.display()),
            ))
        }
    }
    fs::set_permissions(path, fs::Permissions::from_mode(perm)).stage(Stage::Dev, || {
        format!("setting the mode of {}", path.display())
    })?;
    if meta.uid() != 0 || meta.gid() != 0 {
        std::os::unix::fs::chown(path, Some(meta.uid()), Some(meta.gid()))
            .stage(Stage::Dev, || {
                format!("setting the owner of {}", path.display())
            })?;
    }
    Ok(())
}

/// Binds the host node `source` onto an empty file at `path` in the job
/// (nosuid, noexec).
fn bind_node_from(source: &Source<'_>, path: &Path) -> Result<(), SetupError> {
    // Most nodes go straight into /dev, which exists.
    let made = if path.parent() == Some(Path::new("/dev")) {
        touch_file(path)
    } else {
        touch(path)
    };
    made.stage(Stage::Dev, || {
        format!("creating mount point {}", path.display())
    })?;
    attach(source, path, false).stage(Stage::Dev, || {
        format!("binding host {} into the job", path.display())
    })?;
    remount_bind(path, MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC).stage(Stage::Dev, || {
        format!("remounting {} nosuid,noexec", path.display())
    })
}

/// A warm sandbox's private `/dev/shm`, before its job comes; kept for a
/// job without `dev_shm` ([`finish`]).
pub(crate) fn premount_shm(config: &InitConfig) -> Result<(), SetupError> {
    if config.dev_shm.is_some() {
        return Ok(());
    }
    shm(config, &Host::Parked)
}

/// `/dev/shm`: the host directory `config.dev_shm` bound read-write, or
/// else a private tmpfs of `tmp_size_mb`; nosuid, nodev, noexec either way.
fn shm(config: &InitConfig, host: &Host) -> Result<(), SetupError> {
    let shm = Path::new("/dev/shm");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let Some(dir) = &config.dev_shm else {
        return tmpfs(
            shm,
            flags,
            &format!("size={}m,mode=1777", config.tmp_size_mb),
        )
        .stage(Stage::Dev, || "mounting the /dev/shm tmpfs".into());
    };
    let what = || format!("dev_shm {}", dir.display());
    let tree = host.dev_shm(dir).stage(Stage::Dev, what)?;
    let source = tree.path();
    let meta = fs::metadata(&source).stage(Stage::Dev, || {
        format!("{}: cannot stat it on the host", what())
    })?;
    if !meta.is_dir() {
        return Err(SetupError::new(
            Stage::Dev,
            format!(
                "{} is not a directory on the host; give the directory to bind at /dev/shm",
                what()
            ),
        ));
    }
    // Not recursive: only the directory's own file system, never what may
    // be mounted below it.
    attach(&tree, shm, false)
        .stage(Stage::Dev, || format!("{}: binding it on /dev/shm", what()))?;
    remount_bind(shm, flags).stage(Stage::Dev, || {
        format!("{}: remounting /dev/shm nosuid,nodev,noexec", what())
    })
}

fn devpts() -> Result<(), SetupError> {
    let pts = Path::new("/dev/pts");
    mkdir_p(pts).stage(Stage::Dev, || "creating /dev/pts".into())?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    let source = Some(Path::new("devpts"));
    match mnt(source, pts, Some("devpts"), flags, Some(DEVPTS_OPTS)) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            report::warn(
                Stage::Dev,
                &format!("devpts refused {DEVPTS_OPTS:?}; mounted without gid=5"),
            );
            mnt(source, pts, Some("devpts"), flags, Some(DEVPTS_OPTS_NO_GID))
                .stage(Stage::Dev, || {
                    format!("mounting devpts ({DEVPTS_OPTS_NO_GID})")
                })
        }
        Err(e) => Err(SetupError::new(
            Stage::Dev,
            format!("mounting devpts ({DEVPTS_OPTS}): {e}"),
        )),
    }
}
