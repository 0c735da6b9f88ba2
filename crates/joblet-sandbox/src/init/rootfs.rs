//! The job's root filesystem, built inside the new mount namespace (by the
//! outer process before release, [`prepare`]; `/proc`, binds and the final
//! steps by pid 1, [`build_proc`] and [`finish`]): `/` made rslave, a small tmpfs pivoted to as the new root
//! with the host root parked at [`OLD_ROOT`] while the tree is built from
//! it, read-only host binds (symlinks such as merged-/usr's `/bin -> usr/bin`
//! recreated as symlinks), `/work`, `/tmp`, `/dev` and `/proc`, then the
//! config's binds and masks ([`super::binds`]); then the host root is detached and `/` remounted read-only. `/sys` is not
//! mounted: the job sees no sysfs at all.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::unistd::{chdir, pivot_root};

use super::config::InitConfig;
use super::error::Stage;
use super::hostfds::{Host, Source};
use super::report::{self, Context, SetupError};
use super::{binds, devfs, procfs, sys, work};

/// Where the host's root lives while the tree is being built.
pub(crate) const OLD_ROOT: &str = "/.oldroot";

/// The host directory the new root tmpfs is first mounted on (in the new
/// mount namespace only; the host's own `/tmp` is untouched).
const STAGING: &str = "/tmp";

/// Options of the root tmpfs: it only holds mount points and symlinks.
const ROOT_OPTS: &str = "size=1m,mode=0755";

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `path` (absolute, on the host) as seen while building.
pub(crate) fn host(path: &Path) -> PathBuf {
    Path::new(OLD_ROOT).join(path.strip_prefix("/").unwrap_or(path))
}

/// `mount(2)` with paths and optional strings.
pub(crate) fn mnt(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> nix::Result<()> {
    mount(source, target, fstype, flags, data)
}

/// A tmpfs at `target`.
pub(crate) fn tmpfs(target: &Path, flags: MsFlags, opts: &str) -> nix::Result<()> {
    mnt(
        Some(Path::new("tmpfs")),
        target,
        Some("tmpfs"),
        flags,
        Some(opts),
    )
}

/// Creates `dir` and its parents (mode 0755).
pub(crate) fn mkdir_p(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
}

/// Creates an empty file at `path` to bind a non-directory onto.
pub(crate) fn touch(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        mkdir_p(parent)?;
    }
    touch_file(path)
}

/// [`touch`] in a directory that exists.
pub(crate) fn touch_file(path: &Path) -> io::Result<()> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map(drop)
}

static WARNED_NO_SETATTR: AtomicBool = AtomicBool::new(false);

/// Sets mount flags on the bind mount at `target` and every mount below
/// it, with `mount_setattr(AT_RECURSIVE)`. Without that system call (kernels
/// before 5.12) the bind is redone non-recursively, so no submount can stay
/// writable, and remounted.
fn set_flags(
    target: &Path,
    source: &Path,
    attrs: u64,
    remount: MsFlags,
    stage: Stage,
) -> Result<(), SetupError> {
    match sys::mount_setattr(target, attrs, 0, true) {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        Err(e) => {
            return Err(SetupError::new(
                stage,
                format!(
                    "mount_setattr({}, {attrs:#x}, recursive): {e}",
                    target.display()
                ),
            ))
        }
    }
    if !WARNED_NO_SETATTR.swap(true, Ordering::SeqCst) {
        report::warn(
            stage,
            "kernel lacks mount_setattr: binds are not recursive, submounts of bound host paths are not visible",
        );
    }
    umount2(target, MntFlags::MNT_DETACH).stage(stage, || {
        format!("unmounting {} to rebind it", target.display())
    })?;
    mnt(Some(source), target, None, MsFlags::MS_BIND, None).stage(stage, || {
        format!("binding {} on {}", source.display(), target.display())
    })?;
    remount_bind(target, remount).stage(stage, || {
        format!("remounting {} with {remount:?}", target.display())
    })
}

/// Mounts `source` on `target`: binds a path (with the mounts below it if
/// `recursive`), or attaches a detached tree as it was copied.
pub(crate) fn attach(source: &Source<'_>, target: &Path, recursive: bool) -> io::Result<()> {
    match source {
        Source::Path(path) => {
            let mut flags = MsFlags::MS_BIND;
            if recursive {
                flags |= MsFlags::MS_REC;
            }
            mnt(Some(path), target, None, flags, None).map_err(io::Error::from)
        }
        Source::Tree(tree) => sys::move_mount(tree, target),
    }
}

/// Binds `source` (recursively) on `target` read-only, nosuid, nodev.
pub(crate) fn bind_readonly(source: &Path, target: &Path, stage: Stage) -> Result<(), SetupError> {
    bind_recursive(source, target, false, stage)
}

/// Binds `source` (recursively) on `target`, nosuid, nodev, and read-only
/// unless `writable` (a volume).
pub(crate) fn bind_recursive(
    source: &Path,
    target: &Path,
    writable: bool,
    stage: Stage,
) -> Result<(), SetupError> {
    mnt(
        Some(source),
        target,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
    )
    .stage(stage, || {
        format!("binding {} on {}", source.display(), target.display())
    })?;
    set_bind_flags(target, source, writable, stage)
}

/// [`set_no_suid_dev`] for a `writable` bind, else [`set_read_only`].
pub(crate) fn set_bind_flags(
    target: &Path,
    source: &Path,
    writable: bool,
    stage: Stage,
) -> Result<(), SetupError> {
    if writable {
        set_no_suid_dev(target, source, stage)
    } else {
        set_read_only(target, source, stage)
    }
}

/// Makes the bind of `source` at `target` (and the mounts below it)
/// nosuid, nodev, leaving it writable.
pub(crate) fn set_no_suid_dev(
    target: &Path,
    source: &Path,
    stage: Stage,
) -> Result<(), SetupError> {
    set_flags(
        target,
        source,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        stage,
    )
}

/// Sets the flags of the bind mount at `path` itself (`MS_REMOUNT |
/// MS_BIND | flags`; not the mounts below it).
pub(crate) fn remount_bind(path: &Path, flags: MsFlags) -> nix::Result<()> {
    mnt(
        None,
        path,
        None,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags,
        None,
    )
}

/// Makes the bind of `source` at `target` (and the mounts below it)
/// read-only, nosuid, nodev.
pub(crate) fn set_read_only(target: &Path, source: &Path, stage: Stage) -> Result<(), SetupError> {
    set_flags(
        target,
        source,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        stage,
    )
}

/// Builds the part of the tree that every job of the node shares and that
/// needs no process of the new pid namespace: `/` rslave, the root tmpfs
/// with the host root parked, the read-only binds, `/tmp` and the base of
/// `/dev`. Run by the outer process before it is released, while the
/// caller sets up the job's cgroup; [`prepare_job`] follows (at once, or
/// when a warm sandbox gets its job), then [`build_proc`] and [`finish`]
/// in pid 1.
pub(crate) fn prepare_base(config: &InitConfig) -> Result<(), SetupError> {
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None,
    )
    .stage(Stage::Rootfs, || "making / rslave".into())?;
    enter_staging_root()?;
    for path in ordered(&config.ro_mounts) {
        ro_mount(path, config.root.as_deref())?;
    }
    let tmp = Path::new("/tmp");
    mkdir_p(tmp).stage(Stage::Rootfs, || "creating /tmp".into())?;
    tmpfs(
        tmp,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        &format!("size={}m,mode=1777", config.tmp_size_mb),
    )
    .stage(Stage::Rootfs, || {
        format!("mounting a {} MiB tmpfs on /tmp", config.tmp_size_mb)
    })?;
    devfs::build_base()
}

/// The job's own part of the tree before pid 1's: `/work`, and its devices
/// and `/dev/shm` (after which `/dev` is read-only). `warm`: the config of
/// the warm sandbox this job came to, whose sized `/work` is mounted
/// already ([`premount_job_part`]) and kept if it is the job's size and
/// owner, as is its private `/dev/shm` unless the job binds a directory there.
pub(crate) fn prepare_job(
    config: &InitConfig,
    warm: Option<&InitConfig>,
    host: &Host,
) -> Result<(), SetupError> {
    match warm.filter(|w| w.work_size_mb > 0) {
        Some(w) if work::same_tmpfs(w, config) => {}
        Some(_) => {
            umount2(work::WORK, MntFlags::empty()).stage(Stage::Rootfs, || {
                "unmounting the warm sandbox's /work for the job's own".into()
            })?;
            work::mount(config, host)?;
        }
        None => work::mount(config, host)?,
    }
    let shm_mounted = warm.is_some_and(|w| w.dev_shm.is_none());
    devfs::finish(config, host, shm_mounted)
}

/// What of a warm sandbox's job part is mounted before its job comes: a
/// sized `/work` (a bound one needs the job's directory and waits for it),
/// the device binds every job it serves starts with (a GPU-ready one's
/// control nodes: [`InitConfig::job_part`]) and a private `/dev/shm` tmpfs
/// (its size is the sandbox's `/tmp` size, which the job shares:
/// [`InitConfig::warm_mismatch`]).
pub(crate) fn premount_job_part(config: &InitConfig) -> Result<(), SetupError> {
    if config.work_size_mb > 0 {
        work::mount(config, &Host::Parked)?;
    }
    devfs::bind_devices(config, &Host::Parked)?;
    devfs::premount_shm(config)
}

/// Pid 1's first part of the tree: `/proc` (a procfs shows the pid
/// namespace of the process that mounts it).
pub(crate) fn build_proc() -> Result<(), SetupError> {
    procfs::build()
}

/// Pid 1's part for the job: the config's binds and masks, which may
/// overlay files under `/dev` and `/proc`, then a sized `/work` filled (in
/// the job's cgroups, which its pages are charged to). `premasked`: the
/// masks a warm sandbox applied ahead (`masks` of its placeholder, mounted
/// at `paths`); kept when the job's are the same and it has no binds (a
/// CPU job), else taken back first so the job's binds and masks go on in
/// the usual order.
pub(crate) fn build_job(
    config: &InitConfig,
    premasked: Option<Premasked<'_>>,
    host: &Host,
) -> Result<(), SetupError> {
    match premasked {
        Some(p) if p.masks == config.masks.as_slice() && config.binds.is_empty() => {}
        Some(p) => {
            binds::remove_masks(&p.paths)?;
            binds::apply(config, host)?;
        }
        None => binds::apply(config, host)?,
    }
    work::fill(config, host)
}

/// Masks a warm sandbox applied before its job came.
pub(crate) struct Premasked<'a> {
    /// The placeholder's `masks`.
    pub masks: &'a [PathBuf],
    /// Where mounts were made for them.
    pub paths: Vec<PathBuf>,
}

/// Mounts the new root tmpfs and pivots into it, parking the host root at
/// [`OLD_ROOT`].
fn enter_staging_root() -> Result<(), SetupError> {
    let staging = Path::new(STAGING);
    tmpfs(staging, MsFlags::MS_NOSUID | MsFlags::MS_NODEV, ROOT_OPTS)
        .stage(Stage::Rootfs, || {
            format!("mounting the root tmpfs on {STAGING}")
        })?;
    let old = staging.join(OLD_ROOT.trim_start_matches('/'));
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&old)
        .stage(Stage::Rootfs, || format!("creating {}", old.display()))?;
    chdir(staging).stage(Stage::Rootfs, || format!("chdir {STAGING}"))?;
    pivot_root(".", OLD_ROOT.trim_start_matches('/')).stage(Stage::Rootfs, || {
        format!("pivot_root({STAGING}, {OLD_ROOT})")
    })?;
    chdir("/").stage(Stage::Rootfs, || "chdir / after pivot_root".into())
}

/// The read-only mounts without duplicates, parents before children.
fn ordered(paths: &[PathBuf]) -> Vec<&Path> {
    let mut v: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    v.sort_by(|a, b| {
        a.components()
            .count()
            .cmp(&b.components().count())
            .then(a.cmp(b))
    });
    v.dedup();
    v
}

/// One entry of `ro_mounts`, taken from the host's root or from `root` (a
/// runtime's tree): a symlink there is recreated as the same symlink;
/// anything else is bound read-only, nosuid, nodev at the same path.
fn ro_mount(path: &Path, root: Option<&Path>) -> Result<(), SetupError> {
    let source = match root {
        Some(root) => host(&root.join(path.strip_prefix("/").unwrap_or(path))),
        None => host(path),
    };
    let meta = fs::symlink_metadata(&source).stage(Stage::Rootfs, || match root {
        Some(root) => format!(
            "read-only mount {}: cannot stat it in the runtime's tree {}",
            path.display(),
            root.display()
        ),
        None => format!(
            "read-only mount {}: cannot stat it on the host",
            path.display()
        ),
    })?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(&source).stage(Stage::Rootfs, || {
            format!("reading the host symlink {}", path.display())
        })?;
        if fs::symlink_metadata(path).is_ok() {
            return Ok(());
        }
        if let Some(parent) = path.parent() {
            mkdir_p(parent).stage(Stage::Rootfs, || format!("creating {}", parent.display()))?;
        }
        return std::os::unix::fs::symlink(&target, path).stage(Stage::Rootfs, || {
            format!(
                "creating symlink {} -> {}",
                path.display(),
                target.display()
            )
        });
    }
    if meta.is_dir() {
        mkdir_p(path)
    } else {
        touch(path)
    }
    .stage(Stage::Rootfs, || {
        format!("creating mount point {}", path.display())
    })?;
    bind_readonly(&source, path, Stage::Rootfs)
}

/// The host work directory `dir`, read-write (nosuid, nodev) at `/work`.
pub(crate) fn bind_work(dir: &Path, tree: Source<'_>) -> Result<(), SetupError> {
    let source = tree.path();
    let meta = fs::metadata(&source).stage(Stage::Rootfs, || {
        format!("work directory {}", dir.display())
    })?;
    if !meta.is_dir() {
        return Err(SetupError::new(
            Stage::Rootfs,
            format!("work directory {} is not a directory", dir.display()),
        ));
    }
    let target = Path::new("/work");
    mkdir_p(target).stage(Stage::Rootfs, || "creating /work".into())?;
    attach(&tree, target, true).stage(Stage::Rootfs, || {
        format!("binding {} on /work", dir.display())
    })?;
    set_no_suid_dev(target, &source, Stage::Rootfs)
}

/// Detaches the host root and makes `/` read-only.
pub(crate) fn finish() -> Result<(), SetupError> {
    detach_host_root()?;
    root_read_only()
}

/// Detaches the host root. The unmount waits for an RCU grace period
/// (~0.5 ms), and the host root stays reachable until it returns: a warm
/// pid 1 does this before its job comes (see [`super::hostfds`]).
pub(crate) fn detach_host_root() -> Result<(), SetupError> {
    umount2(OLD_ROOT, MntFlags::MNT_DETACH).stage(Stage::Rootfs, || {
        format!("detaching the host root at {OLD_ROOT}")
    })?;
    fs::remove_dir(OLD_ROOT).stage(Stage::Rootfs, || format!("removing {OLD_ROOT}"))
}

/// Makes `/` read-only (the host root is detached already).
pub(crate) fn root_read_only() -> Result<(), SetupError> {
    remount_bind(
        Path::new("/"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
    )
    .stage(Stage::Rootfs, || "remounting / read-only".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_live_under_the_parked_root() {
        assert_eq!(host(Path::new("/usr")), Path::new("/.oldroot/usr"));
        assert_eq!(
            host(Path::new("/dev/nvidia0")),
            Path::new("/.oldroot/dev/nvidia0")
        );
    }

    #[test]
    fn mounts_are_ordered_parents_first_without_duplicates() {
        let paths: Vec<PathBuf> = [
            "/usr/local",
            "/usr",
            "/bin",
            "/usr",
            "/etc/ssl/certs",
            "/etc",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let got: Vec<&str> = ordered(&paths)
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect();
        assert_eq!(
            got,
            ["/bin", "/etc", "/usr", "/usr/local", "/etc/ssl/certs"]
        );
    }
}
