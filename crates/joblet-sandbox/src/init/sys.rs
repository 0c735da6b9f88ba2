//! The `unsafe` system calls the init needs, each behind a safe wrapper:
//! fork (also `clone3` into a cgroup), signal handlers and dispositions,
//! raw waits, descriptor plumbing across `exec`, `pidfd_open`,
//! `mount_setattr`, `open_tree`,
//! `move_mount`, `close_range` and the
//! `SIOCSIFFLAGS` ioctl that brings `lo` up.

use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Closes a raw descriptor this process owns by number; errors are moot.
pub(crate) fn close_raw(fd: RawFd) {
    // SAFETY: closing a descriptor number touches no memory; callers only
    // pass numbers they own and no longer use.
    unsafe { libc::close(fd) };
}

/// Makes descriptor `to` a copy of `from` (without close-on-exec).
pub(crate) fn dup2_raw(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: dup2 on descriptor numbers touches no memory; `to` is
    // replaced on purpose (the caller's standard input).
    check(unsafe { libc::dup2(from, to) }.into()).map(drop)
}

/// Writes all of `buf` to the raw descriptor `fd`, retrying on EINTR.
pub(crate) fn write_all_raw(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // n >= 0 and at most buf.len().
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Takes ownership of descriptor `fd` inherited from the parent and makes
/// it close-on-exec. Fails if nothing is open there.
pub(crate) fn take_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD only queries the flags of a descriptor number.
    check(unsafe { libc::fcntl(fd, libc::F_GETFD) }.into())?;
    // SAFETY: F_SETFD only sets the close-on-exec flag of that descriptor.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }.into())?;
    // SAFETY: the descriptor is open (checked above), was inherited rather
    // than opened by this process's code, and each caller takes a distinct
    // fixed number exactly once at start-up.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes each `(from, to)` descriptor appear as `to`, without
/// close-on-exec, in the program `cmd` runs, and marks every descriptor
/// above the highest `to` close-on-exec there. `from` descriptors stay
/// close-on-exec in this process.
pub(crate) fn inherit_fds<const N: usize>(cmd: &mut Command, fds: [(RawFd, RawFd); N]) {
    let hook = move || -> io::Result<()> {
        let highest = place_fds(fds)?;
        close_range_cloexec(highest + 1)
    };
    // SAFETY: the hook runs in the forked child before exec and only makes
    // the async-signal-safe calls of `place_fds` and `close_range_cloexec`;
    // it allocates nothing and takes no locks. Standard I/O is already in
    // place when hooks run.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Makes each `(from, to)` descriptor appear as `to`, without
/// close-on-exec; returns the highest `to`. Async-signal-safe (no
/// allocation, no lock).
pub(crate) fn place_fds<const N: usize>(fds: [(RawFd, RawFd); N]) -> io::Result<RawFd> {
    let highest = fds.iter().map(|&(_, to)| to).max().unwrap_or(2);
    // First move every source above all targets so that no dup2 below
    // overwrites a source that happens to sit on another's target.
    let mut moved = [(0, 0); N];
    for (slot, &(from, to)) in moved.iter_mut().zip(fds.iter()) {
        // SAFETY: F_DUPFD duplicates a descriptor number; it touches no
        // memory and is async-signal-safe, as required after fork.
        let high = unsafe { libc::fcntl(from, libc::F_DUPFD, highest + 1) };
        check(high.into())?;
        *slot = (high, to);
    }
    for (high, to) in moved {
        // SAFETY: dup2 touches no memory and is async-signal-safe; the
        // new descriptor has close-on-exec cleared.
        check(unsafe { libc::dup2(high, to) }.into())?;
    }
    Ok(highest)
}

/// Closes every descriptor from `first` up (a forked child that will not
/// exec, so close-on-exec would not). Async-signal-safe.
pub(crate) fn close_from(first: RawFd) -> io::Result<()> {
    close_range(first, 0)
}

/// Ends this process at once with `code`: no exit handlers, no flushing
/// of buffers it only has copies of (a forked child).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes no memory and does not return.
    unsafe { libc::_exit(code) }
}

/// In a child forked to become the sandbox init (instead of a fresh
/// `exec`): the process state an `exec` through [`inherit_fds`] would give
/// it, apart from the memory image. Every signal at its default action
/// but `SIGPIPE` ignored (what the Rust runtime of an exec'd init sets), no
/// signal blocked, an empty environment (`environ`; `/proc/PID/environ`
/// still shows the shim's, as readable as the shim's own) and a process
/// group of its own.
///
/// Call only in the child of [`fork_single_threaded`]: it changes
/// process-wide state (environment, dispositions) that other threads
/// would race with.
pub(crate) fn become_fresh_process() -> io::Result<()> {
    reset_signal_dispositions()?;
    // SAFETY: SIG_IGN installs no handler; `signal` takes no memory.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    )?;
    // SAFETY: this process has a single thread (the caller's contract), so
    // nothing reads the environment while it is cleared.
    if unsafe { libc::clearenv() } != 0 {
        return Err(io::Error::other("clearenv failed"));
    }
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
    Ok(())
}

/// Marks every descriptor from `first` up close-on-exec. Async-signal-safe.
pub(crate) fn close_range_cloexec(first: RawFd) -> io::Result<()> {
    close_range(first, libc::CLOSE_RANGE_CLOEXEC)
}

/// close_range(2) from `first` to the last descriptor, with `flags`.
fn close_range(first: RawFd, flags: libc::c_uint) -> io::Result<()> {
    let first =
        libc::c_uint::try_from(first).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: close_range takes descriptor numbers and flags and passes no
    // memory: with CLOSE_RANGE_CLOEXEC it only sets a flag on each, without
    // it it closes them (callers own every descriptor in the range).
    let ret = unsafe { libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, flags) };
    check(ret).map(drop)
}

/// The two sides of a fork.
pub(crate) enum Forked {
    Parent { child: i32 },
    Child,
}

/// This process's `/proc/self`, opened once: the outer process forks pid 1
/// after `pivot_root`, when no `/proc` is mounted in its root any more.
pub(crate) struct ProcSelf(OwnedFd);

impl ProcSelf {
    pub(crate) fn open() -> io::Result<ProcSelf> {
        let fd = nix::fcntl::open(
            "/proc/self",
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| io::Error::other(format!("opening /proc/self: {e}")))?;
        Ok(ProcSelf(fd))
    }

    /// Refuses unless this process has exactly one thread.
    fn single_threaded(&self) -> io::Result<()> {
        let threads = self.threads()?;
        if threads != 1 {
            return Err(io::Error::other(format!(
                "the sandbox init must be single-threaded to fork, but it has {threads} threads; call run_init before starting any thread"
            )));
        }
        Ok(())
    }

    /// The `Threads:` count of `status`.
    fn threads(&self) -> io::Result<usize> {
        let fd = nix::fcntl::openat(
            &self.0,
            "status",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| io::Error::other(format!("opening /proc/self/status: {e}")))?;
        let status = io::read_to_string(std::fs::File::from(fd))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| io::Error::other("/proc/self/status has no Threads: line"))
    }
}

/// Forks, refusing unless this process has exactly one thread: only then
/// may the child go on running arbitrary code (allocating, locking).
pub(crate) fn fork_single_threaded(me: &ProcSelf) -> io::Result<Forked> {
    me.single_threaded()?;
    // SAFETY: this process has a single thread (checked above, and only
    // this thread could have started another since), so the child inherits
    // no lock held by a thread that does not exist in it.
    let pid = unsafe { libc::fork() };
    match check(pid.into())? {
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent {
            child: child as i32,
        }),
    }
}

/// `clone3`'s flag (Linux 5.7): the child starts in the cgroup2 directory
/// `CloneArgs::cgroup` refers to.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// `prctl` option: the address the kernel clears at this thread's exit,
/// which glibc sets to its own copy of the thread id.
const PR_GET_TID_ADDRESS: libc::c_int = 40;

/// `struct clone_args` as of Linux 5.7 (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// [`fork_single_threaded`], but the child starts in the cgroup2 directory
/// `cgroup` (`clone3` with `CLONE_INTO_CGROUP`): no pid is written to a
/// `cgroup.procs` file, so the kernel takes its global threadgroup lock
/// only for reading (a writer waits for an RCU grace period). Errors are
/// `clone3`'s: `ENOSYS` (before Linux 5.3, or filtered), `E2BIG` (5.3-5.6,
/// no `CLONE_INTO_CGROUP`), a refused cgroup (`EBADF`, `EPERM`,
/// `EOPNOTSUPP`, `EBUSY`); nothing was forked.
pub(crate) fn fork_into_cgroup(me: &ProcSelf, cgroup: BorrowedFd<'_>) -> io::Result<Forked> {
    use std::os::fd::AsRawFd;
    me.single_threaded()?;
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // glibc's fork has the kernel store the child's thread id in glibc's
    // own copy (the address its threads clear at exit): do the same, so
    // the child's glibc knows its thread id as after a fork.
    let mut tid_at: *mut libc::c_int = std::ptr::null_mut();
    // SAFETY: PR_GET_TID_ADDRESS stores one pointer into `tid_at`, which
    // outlives the call.
    let got = unsafe {
        libc::prctl(
            PR_GET_TID_ADDRESS,
            &mut tid_at as *mut *mut libc::c_int as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if got == 0 && !tid_at.is_null() {
        args.flags |= (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64;
        args.child_tid = tid_at as u64;
    }
    // SAFETY: as for `fork` in `fork_single_threaded`: this process has a
    // single thread (checked above), so the child inherits no lock held by
    // a thread that does not exist in it; it runs on a copy of this
    // stack (`stack` 0), and `args` is a valid clone_args that outlives the
    // call. Unlike glibc's fork, no atfork handlers run (none is needed
    // without other threads) and the robust-futex list is not registered
    // again (nothing here uses robust mutexes).
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match check(pid)? {
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent {
            child: child as i32,
        }),
    }
}

/// Where forwarded signals go: a pid (> 0), a process group (< 0), or
/// nowhere yet (0).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::SeqCst);
    if target != 0 {
        // SAFETY: kill is async-signal-safe and passes no memory; a failure
        // (the target is gone) needs no handling here.
        unsafe { libc::kill(target, sig) };
    }
}

/// Forwards each of `signals` received by this process to `target` (a pid,
/// or a process group when negative) from now on.
pub(crate) fn install_forwarding(target: i32, signals: &[libc::c_int]) -> io::Result<()> {
    FORWARD_TO.store(target, Ordering::SeqCst);
    for &sig in signals {
        // SAFETY: sigaction is plain old data; all-zero bytes are valid.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = forward as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: `act.sa_mask` is a valid sigset to fill.
        unsafe { libc::sigfillset(&mut act.sa_mask) };
        // SAFETY: `act` is valid; the handler only reads an atomic and
        // calls kill, both async-signal-safe.
        check(unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) }.into())?;
    }
    Ok(())
}

/// The highest signal number on Linux (`_NSIG - 1`).
const SIG_MAX: libc::c_int = 64;

/// Sets every signal, real-time ones included, to its default action, so
/// the job starts with no ignored signal (Rust ignores SIGPIPE; a parent
/// may ignore others, even glibc-reserved 32 and 33) and no handler of
/// ours. Uses the raw system call, since glibc refuses its reserved signals.
pub(crate) fn reset_signal_dispositions() -> io::Result<()> {
    // A zeroed kernel `struct sigaction` (SIG_DFL, no flags, empty mask);
    // 32 bytes cover every architecture's layout.
    let dfl = [0u64; 4];
    for sig in 1..=SIG_MAX {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: `dfl` is a valid, zeroed kernel sigaction that outlives
        // the call; the old action is not asked for; the mask size is the
        // kernel's (8 bytes). SIG_DFL installs no handler.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                dfl.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                8usize,
            )
        };
        check(ret)?;
    }
    Ok(())
}

/// Puts process `pid` (its main thread; 0 = the calling thread) in the
/// normal scheduling class, `SCHED_OTHER` at nice 0: a warm sandbox was
/// built in `SCHED_IDLE`, its job runs normally. Leaving `SCHED_IDLE` needs
/// `CAP_SYS_NICE` (or a permissive RLIMIT_NICE), which the init has until it
/// drops privileges.
pub(crate) fn set_normal_priority(pid: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; the
    // kernel only reads it.
    check(unsafe { libc::sched_setscheduler(pid, libc::SCHED_OTHER, &param) }.into())?;
    let who = libc::id_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: setpriority passes no memory; `which` and `who` are plain ints.
    let ret = unsafe { libc::setpriority(libc::PRIO_PROCESS, who, 0) };
    check(ret.into()).map(drop)
}

/// Moves the calling process to `SCHED_IDLE`: for what is left of an init
/// once the job's end is told (its exit, the namespaces' teardown), which
/// should not take the CPU from the shim recording that end.
pub(crate) fn set_idle_priority() -> io::Result<()> {
    joblet_shim::set_own_policy(libc::SCHED_IDLE)
}

/// While alive, the calling thread (if in `SCHED_OTHER`) is in
/// `SCHED_BATCH`, which keeps its weight and nice value but does not
/// preempt the running task when it wakes up. The caller waits through it
/// for the job's `execve`: woken by that on the job's CPU (the kernel
/// places the wake-up there), it no longer pushes the fresh job off that
/// CPU for its bookkeeping.
pub(crate) struct NoWakeupPreemption {
    switched: bool,
}

impl NoWakeupPreemption {
    pub(crate) fn enter() -> Self {
        // SAFETY: sched_getscheduler takes no memory.
        let normal = unsafe { libc::sched_getscheduler(0) } == libc::SCHED_OTHER;
        let switched = normal && joblet_shim::set_own_policy(libc::SCHED_BATCH).is_ok();
        NoWakeupPreemption { switched }
    }
}

impl Drop for NoWakeupPreemption {
    fn drop(&mut self) {
        if self.switched {
            // Going back from SCHED_BATCH needs no privilege; should it
            // fail, the thread only stays in SCHED_BATCH.
            let _ = joblet_shim::set_own_policy(libc::SCHED_OTHER);
        }
    }
}

/// Sends `sig` to `pid` (or a group, when negative).
pub(crate) fn kill_raw(pid: i32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill passes no memory.
    check(unsafe { libc::kill(pid, sig) }.into()).map(drop)
}

/// Waits for any child to end; returns its pid and raw wait status.
/// Retries on EINTR; ECHILD when there is none.
pub(crate) fn wait_any() -> io::Result<(i32, i32)> {
    wait(-1)
}

/// Waits for `pid` to end; returns its raw wait status.
pub(crate) fn wait_pid(pid: i32) -> io::Result<i32> {
    wait(pid).map(|(_, status)| status)
}

fn wait(pid: i32) -> io::Result<(i32, i32)> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret >= 0 {
            return Ok((ret, status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A pidfd for `pid` (always close-on-exec).
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and passes no memory.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: the kernel just returned this new descriptor; nothing else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `open_tree(2)` flag: a detached copy of the mount tree, not the mount.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `move_mount(2)` flag: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `open_tree(OPEN_TREE_CLONE)`: a detached copy of the mount at `path`
/// (and of every mount below it if `recursive`), as a descriptor a process
/// of another mount namespace can attach with [`move_mount`]. Symlinks
/// are followed in the caller's root. Close-on-exec.
pub(crate) fn open_tree_clone(path: &Path, recursive: bool) -> io::Result<OwnedFd> {
    let c = c_path(path)?;
    let mut flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: `c` is a NUL-terminated path that outlives the call; the
    // other arguments are plain integers.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) })?;
    // SAFETY: the kernel just returned this new descriptor; nothing else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether this kernel has `open_tree(2)` (Linux 5.2): opens `/` as a
/// plain path descriptor, copying nothing.
pub(crate) fn has_open_tree() -> bool {
    let root = CString::from(c"/");
    // SAFETY: `root` is a NUL-terminated path that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            root.as_ptr(),
            libc::O_CLOEXEC as libc::c_uint,
        )
    };
    match check(ret) {
        Ok(fd) => {
            close_raw(fd as RawFd);
            true
        }
        Err(_) => false,
    }
}

/// `move_mount(2)`: attaches the detached tree `tree` (from
/// [`open_tree_clone`]) at `target`.
pub(crate) fn move_mount(tree: &OwnedFd, target: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = c_path(target)?;
    let empty = CString::from(c"");
    // SAFETY: both paths are NUL-terminated and outlive the call; `tree` is
    // an open descriptor.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(ret).map(drop)
}

/// Sends `bytes` on the stream socket `socket` with `fds` attached as
/// `SCM_RIGHTS` (at most [`super::hostfds::MAX_SOURCES`]; none: no control
/// message); they arrive with the first bytes.
pub(crate) fn send_with_fds(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[OwnedFd],
) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::os::fd::AsRawFd;
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let cmsg: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
    let sent = loop {
        let iov = [io::IoSlice::new(bytes)];
        match sendmsg::<()>(socket.as_raw_fd(), &iov, cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => break r?,
        }
    };
    let mut rest = &bytes[sent..];
    while !rest.is_empty() {
        match nix::unistd::write(socket, rest) {
            Ok(n) => rest = &rest[n..],
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One `recvmsg` on `socket` into `buf`, taking up to `max_fds`
/// descriptors sent along (close-on-exec). Returns the bytes read (0 at
/// the end of the stream). A cut list of descriptors is an error.
pub(crate) fn recv_with_fds(
    socket: BorrowedFd<'_>,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::AsRawFd;
    let data = (max_fds * std::mem::size_of::<RawFd>()) as libc::c_uint;
    // SAFETY: CMSG_SPACE only computes a size from its argument.
    let space = unsafe { libc::CMSG_SPACE(data) } as usize;
    let mut cmsg = vec![0u8; space];
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => break r?,
        }
    };
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(got) = c {
            // SAFETY: the kernel installed these descriptors in this process
            // for this message; nothing else owns them.
            fds.extend(
                got.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err(io::Error::other(format!(
            "more than {max_fds} descriptors came with the message"
        )));
    }
    Ok((msg.bytes, fds))
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)`: sets and clears `MOUNT_ATTR_*` flags on the mount
/// at `path` (and every mount below it if `recursive`).
pub(crate) fn mount_setattr(path: &Path, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let c = c_path(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `c` is a NUL-terminated path and `attr` a valid mount_attr
    // (version 0 layout, 32 bytes) that outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(drop)
}

/// Brings the interface `lo` of this process's network namespace up.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes integers and returns a new descriptor.
    let sock = check(
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }.into(),
    )?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&sock);
    // SAFETY: ifreq is plain old data; all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming "lo"; SIOCGIFFLAGS fills its
    // flags member.
    check(unsafe { libc::ioctl(raw, libc::SIOCGIFFLAGS, &mut req) }.into())?;
    // SAFETY: SIOCGIFFLAGS just initialised the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: `req` is a valid ifreq with the new flags.
    check(unsafe { libc::ioctl(raw, libc::SIOCSIFFLAGS, &req) }.into())?;
    Ok(())
}

/// Ends this process the way a child ended by `sig` did: default action,
/// no core file, signal unblocked, sent to itself. Exits 128+sig should
/// the signal not end it.
pub(crate) fn reraise(sig: libc::c_int) -> ! {
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: sigaction is plain old data; all-zero bytes are valid.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `dfl` installs no handler. A failure leaves the exit below.
    unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) };
    // SAFETY: sigset_t is plain old data; sigemptyset/sigaddset initialise
    // it and sigprocmask reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    // SAFETY: raise passes no memory.
    unsafe { libc::raise(sig) };
    std::process::exit(128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    #[test]
    fn inherited_descriptors_arrive_at_their_numbers_and_nothing_else_leaks() {
        let (r1, w1) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (r2, _w2) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "ls /proc/$$/fd"]);
        inherit_fds(&mut cmd, [(r1.as_raw_fd(), 3), (r2.as_raw_fd(), 4)]);
        let out = cmd.output().unwrap();
        drop(w1);
        let text = String::from_utf8(out.stdout).unwrap();
        let fds: Vec<&str> = text.lines().collect();
        assert_eq!(fds, ["0", "1", "2", "3", "4"], "{text}");
    }

    #[test]
    fn taking_a_closed_descriptor_fails() {
        // A descriptor number far above anything the test harness opens.
        assert!(take_inherited_fd(100_000).is_err());
    }

    #[test]
    fn raw_write_reaches_the_pipe() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        write_all_raw(w.as_raw_fd(), b"hello").unwrap();
        drop(w);
        let mut s = String::new();
        std::fs::File::from(r).read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
    }

    #[test]
    fn pidfd_of_self_opens() {
        pidfd_open(std::process::id() as i32).unwrap();
    }
}
