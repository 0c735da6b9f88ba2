//! How the init enters its job's cgroups when it is released: from the
//! descriptors its caller sends with the release byte
//! (`JobCgroup::entry`), it moves itself into every v1 cgroup by writing
//! `0` to each `tasks` file, and forks pid 1 straight into the cgroup2
//! directory (`clone3` with `CLONE_INTO_CGROUP`). Neither writes a pid to a
//! `cgroup.procs` file, which write-locks the kernel's global
//! `cgroup_threadgroup_rwsem` and, unless cgroup2 is mounted with
//! `favordynmods`, waits for an RCU grace period first: 5-15 ms a job on
//! this project's machines (bench/history/runs-17-22.md, "where
//! back-to-back starts still wait"). A single-threaded
//! process moving itself through `tasks` needs no such lock.
//!
//! The outer process stays in its caller's cgroup2 directory (where it
//! uses no controller on a hybrid host; on a pure cgroup2 host its few
//! pages are charged to the shim, not the job); pid 1 and everything of
//! the job are in the job's. Pid 1 unshares the cgroup namespace once it
//! is in place ([`enter_namespace`]).

use std::os::fd::{AsFd, OwnedFd};

use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{fstat, SFlag};
use nix::sys::statfs::{fstatfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};

use super::error::Stage;
use super::report::{self, Context, SetupError};
use super::sys::{self, Forked, ProcSelf};

/// The most descriptors a release may bring: a `tasks` file per v1
/// hierarchy (the kernel has 14 controllers) and a cgroup2 directory.
pub(crate) const MAX_FDS: usize = 32;

/// The job's cgroups as the init received them.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// v1 `tasks` files, open for writing.
    tasks: Vec<OwnedFd>,
    /// The cgroup2 directory.
    unified: Option<OwnedFd>,
}

impl Entry {
    /// Sorts `fds` by what they are, refusing anything that is neither a
    /// file of a cgroup v1 filesystem nor a directory of a cgroup2 one (or
    /// a second such directory). None at all: an init released without
    /// cgroups (its caller's tests), which then stays where it is.
    pub(crate) fn from_fds(fds: Vec<OwnedFd>) -> Result<Entry, SetupError> {
        let mut entry = Entry::default();
        for (i, fd) in fds.into_iter().enumerate() {
            let fs = fstatfs(&fd)
                .stage(Stage::Cgroup, || {
                    format!("fstatfs of cgroup descriptor {i}")
                })?
                .filesystem_type();
            let mode = fstat(fd.as_fd())
                .stage(Stage::Cgroup, || format!("fstat of cgroup descriptor {i}"))?
                .st_mode;
            let kind = SFlag::from_bits_truncate(mode) & SFlag::S_IFMT;
            if fs == CGROUP_SUPER_MAGIC && kind == SFlag::S_IFREG {
                entry.tasks.push(fd);
            } else if fs == CGROUP2_SUPER_MAGIC && kind == SFlag::S_IFDIR && entry.unified.is_none()
            {
                entry.unified = Some(fd);
            } else {
                return Err(SetupError::new(
                    Stage::Cgroup,
                    format!("cgroup descriptor {i} is neither a cgroup v1 `tasks` file nor the one cgroup2 directory (filesystem {:#x}, mode {mode:#o}); the job was not started", fs.0),
                ));
            }
        }
        Ok(entry)
    }

    /// Moves this process into every v1 cgroup: `0` to each `tasks` file
    /// moves the calling thread, which is the whole process while it has
    /// one thread. Call [`Entry::fork_pid1`] next: it refuses to fork
    /// unless this process has one thread, so a thread left outside could
    /// never see anything of the job run.
    pub(crate) fn enter_v1(&self) -> Result<(), SetupError> {
        for (i, tasks) in self.tasks.iter().enumerate() {
            let n = nix::unistd::write(tasks, b"0").stage(Stage::Cgroup, || {
                format!("writing 0 to the job's v1 `tasks` file {i} (moving the sandbox init into its cgroup)")
            })?;
            if n != 1 {
                return Err(SetupError::new(
                    Stage::Cgroup,
                    format!("short write to the job's v1 `tasks` file {i}"),
                ));
            }
        }
        Ok(())
    }

    /// Forks pid 1: into the cgroup2 directory when there is one. Where
    /// `clone3` into it fails (before Linux 5.7, or `clone3` filtered by a
    /// container runtime's seccomp profile) this process moves into the
    /// directory the old way (`0` to its `cgroup.procs`, which fails
    /// closed like the clone would have) and forks; an unexpected error
    /// is also told as a warning, since every job then pays for that way.
    pub(crate) fn fork_pid1(self, me: &ProcSelf) -> Result<Forked, SetupError> {
        let Some(unified) = self.unified else {
            return sys::fork_single_threaded(me).stage(Stage::Fork, || "forking pid 1".into());
        };
        match sys::fork_into_cgroup(me, unified.as_fd()) {
            Ok(forked) => Ok(forked),
            Err(e) => {
                if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::E2BIG)) {
                    report::warn(
                        Stage::Cgroup,
                        &format!("clone3 into the job's cgroup2 directory failed ({e}); moving the sandbox init there through cgroup.procs instead, which is slower"),
                    );
                }
                let procs = nix::fcntl::openat(
                    &unified,
                    "cgroup.procs",
                    nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .stage(Stage::Cgroup, || {
                    format!("opening the job's cgroup2 `cgroup.procs` (clone3 into it: {e})")
                })?;
                nix::unistd::write(&procs, b"0").stage(Stage::Cgroup, || {
                    "writing 0 to the job's cgroup2 `cgroup.procs`".into()
                })?;
                sys::fork_single_threaded(me).stage(Stage::Fork, || "forking pid 1".into())
            }
        }
    }
}

/// Pid 1, once in all the job's cgroups: a cgroup namespace whose root is
/// the job's own cgroup (`/proc/self/cgroup` reads `0::/` in the job).
pub(crate) fn enter_namespace() -> Result<(), SetupError> {
    unshare(CloneFlags::CLONE_NEWCGROUP).stage(Stage::Unshare, || "unshare(CLONE_NEWCGROUP)".into())
}
