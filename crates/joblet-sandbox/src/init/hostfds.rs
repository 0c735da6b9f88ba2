//! The host file systems a job's own part of the tree is built from: the
//! work directory, the config's binds, device nodes and `/dev/shm`
//! directory.
//!
//! A cold init builds that part with the host root parked at
//! [`super::rootfs::OLD_ROOT`] and detaches the host root afterwards. That
//! detach waits for an RCU grace period (~0.5 ms on a small VM), and the
//! host root stays reachable until it is over, so a warm sandbox detaches
//! it before its job comes, and its pid 1 gets each source of the job's
//! part from the shim instead: a detached copy of the mount
//! (`open_tree(OPEN_TREE_CLONE)`, made in the host's mount namespace, where
//! paths and symlinks resolve as the host sees them), attached in the job's
//! tree with `move_mount` ([`Host::Handed`]); the work directory of a sized
//! `/work`, only read, as a plain path descriptor. They travel as
//! `SCM_RIGHTS` with the job's framed config on the release socket (one
//! message: one wake-up of pid 1), in the order [`wanted`] gives, which
//! both sides compute from that config.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;

use super::config::InitConfig;
use super::rootfs::host;
use super::{frame, sys};

/// How one source is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A detached copy of the mount, with the mounts below it if
    /// `recursive`, to attach in the job's tree.
    Tree { recursive: bool },
    /// A path descriptor of a directory, to read from.
    Dir,
}

/// The most descriptors one `SCM_RIGHTS` message carries (the kernel's
/// `SCM_MAX_FD`).
pub(crate) const MAX_SOURCES: usize = 253;

/// The host sources of `job`'s own part of the tree, in the order they
/// travel: the work directory, each of `binds`, `extra_devices`,
/// `device_binds`, then `dev_shm`. Each with what an error calls it: the
/// config field and the path (for a bind, where the job sees it too).
pub(crate) fn wanted(job: &InitConfig) -> Vec<(String, &Path, Kind)> {
    let mut v = Vec::new();
    let work = if job.work_size_mb == 0 {
        Kind::Tree { recursive: true }
    } else {
        Kind::Dir
    };
    let named = |field: String, path: &Path| format!("{field} ({})", path.display());
    v.push((
        named("work_dir".into(), &job.work_dir),
        job.work_dir.as_path(),
        work,
    ));
    for (i, b) in job.binds.iter().enumerate() {
        v.push((
            format!(
                "binds[{i}] ({}, at {} in the job)",
                b.source.display(),
                b.target.display()
            ),
            b.source.as_path(),
            Kind::Tree { recursive: true },
        ));
    }
    for (i, p) in job.extra_devices.iter().enumerate() {
        v.push((
            named(format!("extra_devices[{i}]"), p),
            p.as_path(),
            Kind::Tree { recursive: false },
        ));
    }
    for (i, b) in job.device_binds.iter().enumerate() {
        v.push((
            format!(
                "device_binds[{i}] ({}, at {} in the job)",
                b.source.display(),
                b.target.display()
            ),
            b.source.as_path(),
            Kind::Tree { recursive: false },
        ));
    }
    if let Some(dir) = &job.dev_shm {
        v.push((
            named("dev_shm".into(), dir),
            dir.as_path(),
            Kind::Tree { recursive: false },
        ));
    }
    v
}

/// Opens `job`'s sources as the host sees them (run by the shim, in the
/// host's mount namespace). The error names the config field.
pub(crate) fn open_all(job: &InitConfig) -> io::Result<Vec<OwnedFd>> {
    let wanted = wanted(job);
    if wanted.len() > MAX_SOURCES {
        return Err(io::Error::other(format!(
            "the job's sandbox needs {} host sources (work directory, binds, devices), more than the {MAX_SOURCES} a warm sandbox takes",
            wanted.len()
        )));
    }
    wanted
        .into_iter()
        .map(|(what, path, kind)| {
            let opened = match kind {
                Kind::Tree { recursive } => sys::open_tree_clone(path, recursive),
                Kind::Dir => open(
                    path,
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io::Error::from),
            };
            opened.map_err(|e| {
                let why = unopenable(&e);
                io::Error::new(e.kind(), format!("{what}: {why}"))
            })
        })
        .collect()
}

/// Why a host source could not be opened, as the start's error says it
/// (a warm start's here, a cold one's in `binds`).
pub(crate) fn unopenable(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => "the source does not exist on the host".to_owned(),
        _ => format!("cannot open the source on the host: {e}"),
    }
}

/// Where pid 1 finds the host sources of its job's own part of the tree.
pub(crate) enum Host {
    /// Under the parked host root (a cold init).
    Parked,
    /// Handed over by the shim, in [`wanted`]'s order (a warm init; the
    /// host root is gone).
    Handed(Handed),
}

/// The descriptors a warm pid 1 got, by config field.
pub(crate) struct Handed {
    work: OwnedFd,
    binds: Vec<OwnedFd>,
    extra_devices: Vec<OwnedFd>,
    device_binds: Vec<OwnedFd>,
    dev_shm: Option<OwnedFd>,
}

/// Reads the framed config (see `frame`) and the descriptors sent with
/// it; `Ok(None)` at the end of the stream before a config.
pub(crate) fn read_job(socket: &mut File) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut len = [0u8; 8];
    let (mut got, fds) = sys::recv_with_fds(socket.as_fd(), &mut len, MAX_SOURCES)?;
    if got == 0 {
        return Ok(None);
    }
    while got < len.len() {
        match socket.read(&mut len[got..])? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    let json = frame::read_body(socket, u64::from_le_bytes(len))?;
    Ok(Some((json, fds)))
}

impl Handed {
    /// Sorts the descriptors that came with `job`'s config by field.
    pub(crate) fn new(fds: Vec<OwnedFd>, job: &InitConfig) -> io::Result<Handed> {
        let n = wanted(job).len();
        if fds.len() != n {
            return Err(io::Error::other(format!(
                "the job's config needs {n} host sources but {} descriptors came with it",
                fds.len()
            )));
        }
        let mut fds = fds.into_iter();
        let mut take = |count: usize| -> Vec<OwnedFd> { fds.by_ref().take(count).collect() };
        let work = take(1)
            .pop()
            .ok_or_else(|| io::Error::other("no work directory"))?;
        Ok(Handed {
            work,
            binds: take(job.binds.len()),
            extra_devices: take(job.extra_devices.len()),
            device_binds: take(job.device_binds.len()),
            dev_shm: if job.dev_shm.is_some() {
                take(1).pop()
            } else {
                None
            },
        })
    }
}

/// One host source as pid 1 uses it.
pub(crate) enum Source<'a> {
    /// A path to bind from or read (under the parked root, or a
    /// descriptor's `/proc/self/fd` link).
    Path(PathBuf),
    /// A detached copy to attach.
    Tree(&'a OwnedFd),
}

impl Source<'_> {
    /// A path for reading and stat (a tree's `/proc/self/fd` link).
    pub(crate) fn path(&self) -> PathBuf {
        match self {
            Source::Path(p) => p.clone(),
            Source::Tree(fd) => fd_path(fd),
        }
    }
}

/// `/proc/self/fd/N` for `fd`: the magic link leads to exactly that file.
pub(crate) fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

impl Host {
    fn pick<'a>(
        &'a self,
        path: &Path,
        handed: impl Fn(&'a Handed) -> Option<&'a OwnedFd>,
    ) -> io::Result<Source<'a>> {
        match self {
            Host::Parked => Ok(Source::Path(host(path))),
            Host::Handed(h) => handed(h).map(Source::Tree).ok_or_else(|| {
                io::Error::other(format!(
                    "no descriptor was handed over for {}",
                    path.display()
                ))
            }),
        }
    }

    /// The work directory: its tree (a bound `/work`) or a path to read
    /// from (a sized one).
    pub(crate) fn work(&self, dir: &Path) -> io::Result<Source<'_>> {
        self.pick(dir, |h| Some(&h.work))
    }

    /// The source of `device_binds[i]`.
    pub(crate) fn device_bind(&self, i: usize, path: &Path) -> io::Result<Source<'_>> {
        self.pick(path, |h| h.device_binds.get(i))
    }

    /// The source of `extra_devices[i]`.
    pub(crate) fn extra_device(&self, i: usize, path: &Path) -> io::Result<Source<'_>> {
        self.pick(path, |h| h.extra_devices.get(i))
    }

    /// The source of `binds[i]` on a warm init (a cold one opens it under
    /// the parked root itself, see `binds`); `None` on a cold one.
    pub(crate) fn bind(&self, i: usize) -> Option<io::Result<&OwnedFd>> {
        match self {
            Host::Parked => None,
            Host::Handed(h) => Some(h.binds.get(i).ok_or_else(|| {
                io::Error::other(format!("no descriptor was handed over for binds[{i}]"))
            })),
        }
    }

    /// The `dev_shm` directory.
    pub(crate) fn dev_shm(&self, dir: &Path) -> io::Result<Source<'_>> {
        self.pick(dir, |h| h.dev_shm.as_ref())
    }
}
