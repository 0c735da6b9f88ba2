//! Creating a shim's process with `posix_spawn(3)`. glibc makes the child
//! with `clone(CLONE_VM | CLONE_VFORK)`: the daemon's address space is not
//! copied. A `fork` of the daemon (what `std::process::Command` does once
//! a `pre_exec` hook is set) copied its page tables, ~0.4 ms of kernel
//! time per shim, and then made each page the daemon wrote next fault
//! once; the child only ever ran a few system calls before `execve`.
//!
//! Why not `Command`: it uses `posix_spawn` only without `pre_exec` hooks,
//! and the shim needs the lock as descriptor 3, the notify pipe as 4 (see
//! `inherited_fds`), no stray descriptor above them, and a scheduling
//! class chosen for it — which `posix_spawn`'s file actions and attributes
//! express, and `Command` does not.

use std::ffi::{CString, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::inherited_fds::{LOCK_FD, NOTIFY_FD, READY_FD};

/// The lowest number the passed descriptors are copied to before the
/// spawn, so that placing them at 0–5 in the child never overwrites one
/// source with another.
const HIGH_FD: RawFd = 10;

/// What the shim's process gets: its output, the locked `shim.lock` (as
/// [`LOCK_FD`]), the exit notification pipe's write end (as [`NOTIFY_FD`])
/// and, for a warm shim, its ready pipe's write end (as [`READY_FD`]). Its
/// stdin is a new pipe.
pub(crate) struct ShimFds<'a> {
    pub stdout: BorrowedFd<'a>,
    pub stderr: BorrowedFd<'a>,
    pub lock: BorrowedFd<'a>,
    pub notify: Option<BorrowedFd<'a>>,
    pub ready: Option<BorrowedFd<'a>>,
}

/// A spawned shim: our child, not reaped yet, and its stdin's write end.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub pid: libc::pid_t,
    pub stdin: OwnedFd,
}

/// Runs `program args…` with this process's environment and `fds` as
/// descriptors 0–5 (no other descriptor reaches it), every signal
/// unblocked and `SIGPIPE` back to its default, in `SCHED_IDLE` when
/// `idle` (a warm shim), else in the normal class (the daemon's own
/// threads run in `SCHED_BATCH`). An `execve` that fails is reported here,
/// with its error; that child is reaped already.
pub(crate) fn spawn(
    program: &Path,
    args: &[OsString],
    fds: ShimFds<'_>,
    idle: bool,
) -> io::Result<Spawned> {
    let path = cstring(program.as_os_str().as_bytes())?;
    let argv: Vec<CString> = std::iter::once(Ok(path.clone()))
        .chain(args.iter().map(|a| cstring(a.as_bytes())))
        .collect::<io::Result<_>>()?;
    // Read through std, which takes its environment lock.
    let envp: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.into_encoded_bytes();
            kv.push(b'=');
            kv.extend_from_slice(v.as_encoded_bytes());
            cstring(&kv)
        })
        .collect::<io::Result<_>>()?;

    let (stdin_r, stdin_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let mut moves = vec![
        (high(stdin_r.as_fd())?, 0),
        (high(fds.stdout)?, 1),
        (high(fds.stderr)?, 2),
        (high(fds.lock)?, LOCK_FD),
    ];
    if let Some(notify) = fds.notify {
        moves.push((high(notify)?, NOTIFY_FD));
    }
    if let Some(ready) = fds.ready {
        moves.push((high(ready)?, READY_FD));
    }
    let first_free = moves.iter().map(|(_, to)| to + 1).max().unwrap_or(3);

    let mut actions = FileActions::new()?;
    for (from, to) in &moves {
        actions.dup2(from.as_raw_fd(), *to)?;
    }
    actions.close_from(first_free)?;
    // glibc's attributes take only SCHED_OTHER, SCHED_FIFO and SCHED_RR;
    // a child inherits its creator's class, so for SCHED_IDLE this thread
    // is put in it for the call.
    let attr = Attr::new((!idle).then_some(libc::SCHED_OTHER))?;
    let _idle = if idle {
        Some(IdleThread::enter()?)
    } else {
        None
    };

    let argv_ptrs = null_terminated(&argv);
    let envp_ptrs = null_terminated(&envp);
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the call: `path` and the strings
    // behind `argv_ptrs`/`envp_ptrs` are live NUL-terminated CStrings, both
    // arrays end with a null pointer, and `actions` and `attr` were
    // initialised by their `init` functions and are not shared. The child
    // runs only glibc's own code (attributes, file actions, execve) on the
    // memory it shares with this thread until it executes or exits.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            actions.as_ptr(),
            attr.as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
        )
    };
    check(rc)?;
    // The copies above HIGH_FD and the pipe's read end close here: the
    // child has its own.
    drop(moves);
    drop(stdin_r);
    Ok(Spawned {
        pid,
        stdin: stdin_w,
    })
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a NUL byte in the shim's command line or environment: {}",
                String::from_utf8_lossy(bytes)
            ),
        )
    })
}

fn null_terminated(strings: &[CString]) -> Vec<*mut libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// A close-on-exec copy of `fd` numbered [`HIGH_FD`] or above.
fn high(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let raw = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(HIGH_FD))?;
    // SAFETY: F_DUPFD_CLOEXEC just created `raw`, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Turns a `posix_spawn*` return value (an error number, not `errno`) into
/// a result.
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// An initialised `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(Box<MaybeUninit<libc::posix_spawn_file_actions_t>>);

impl FileActions {
    fn new() -> io::Result<Self> {
        let mut inner = Box::new(MaybeUninit::uninit());
        // SAFETY: init writes a valid empty object into the boxed memory,
        // which does not move afterwards.
        check(unsafe { libc::posix_spawn_file_actions_init(inner.as_mut_ptr()) })?;
        Ok(FileActions(inner))
    }

    fn as_ptr(&self) -> *const libc::posix_spawn_file_actions_t {
        self.0.as_ptr()
    }

    fn dup2(&mut self, from: RawFd, to: RawFd) -> io::Result<()> {
        // SAFETY: the object was initialised in `new`; glibc copies the
        // numbers. A dup2 to another number clears close-on-exec there.
        check(unsafe { libc::posix_spawn_file_actions_adddup2(self.0.as_mut_ptr(), from, to) })
    }

    fn close_from(&mut self, from: RawFd) -> io::Result<()> {
        // SAFETY: as above; the child closes every descriptor from `from`
        // on (close_range) before execve.
        check(unsafe { libc::posix_spawn_file_actions_addclosefrom_np(self.0.as_mut_ptr(), from) })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe {
            libc::posix_spawn_file_actions_destroy(self.0.as_mut_ptr());
        }
    }
}

/// The calling thread in `SCHED_IDLE` until dropped, then back in the
/// class it had.
struct IdleThread {
    was: libc::c_int,
}

impl IdleThread {
    fn enter() -> io::Result<Self> {
        // SAFETY: sched_getscheduler reads the calling thread's policy and
        // takes no memory.
        let was = unsafe { libc::sched_getscheduler(0) };
        if was < 0 {
            return Err(io::Error::last_os_error());
        }
        crate::priority::set_own_policy(libc::SCHED_IDLE)?;
        Ok(IdleThread { was })
    }
}

impl Drop for IdleThread {
    fn drop(&mut self) {
        if let Err(e) = crate::priority::set_own_policy(self.was) {
            tracing::warn!("a thread that started a warm shim stays in SCHED_IDLE: {e}");
        }
    }
}

/// An initialised `posix_spawnattr_t`, destroyed on drop.
struct Attr(Box<MaybeUninit<libc::posix_spawnattr_t>>);

impl Attr {
    /// Empty signal mask, `SIGPIPE` at its default (the Rust runtime
    /// ignores it here), and scheduling `policy` at priority 0 if given
    /// (else the creating thread's).
    fn new(policy: Option<libc::c_int>) -> io::Result<Self> {
        let mut inner = Box::new(MaybeUninit::uninit());
        // SAFETY: init writes a valid default object into the boxed memory,
        // which does not move afterwards.
        check(unsafe { libc::posix_spawnattr_init(inner.as_mut_ptr()) })?;
        let mut attr = Attr(inner);
        let p = attr.0.as_mut_ptr();
        let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        if policy.is_some() {
            flags |= libc::POSIX_SPAWN_SETSCHEDULER;
        }
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `p` points to the initialised object; the sigset_t values
        // are initialised by sigemptyset before use, and glibc copies every
        // value passed here.
        unsafe {
            let mut none = MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(none.as_mut_ptr());
            let none = none.assume_init();
            let mut pipe = none;
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigmask(p, &none))?;
            check(libc::posix_spawnattr_setsigdefault(p, &pipe))?;
            if let Some(policy) = policy {
                check(libc::posix_spawnattr_setschedpolicy(p, policy))?;
                check(libc::posix_spawnattr_setschedparam(p, &param))?;
            }
            check(libc::posix_spawnattr_setflags(p, flags as libc::c_short))?;
        }
        Ok(attr)
    }

    fn as_ptr(&self) -> *const libc::posix_spawnattr_t {
        self.0.as_ptr()
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe {
            libc::posix_spawnattr_destroy(self.0.as_mut_ptr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Runs `sh -c script` through [`spawn`] with `lock` as the lock and
    /// optional notify and ready pipes; returns its stdout and exit status.
    fn run(
        script: &str,
        notify: Option<BorrowedFd<'_>>,
        ready: Option<BorrowedFd<'_>>,
        idle: bool,
    ) -> (String, i32) {
        let tmp = tempfile::tempdir().unwrap();
        let lock = std::fs::File::create(tmp.path().join("shim.lock")).unwrap();
        let out_path = tmp.path().join("out");
        let out = std::fs::File::create(&out_path).unwrap();
        // A stray descriptor without close-on-exec, as a careless library
        // might leave behind.
        let stray = nix::unistd::dup(&lock).unwrap();
        nix::fcntl::fcntl(
            &stray,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .unwrap();
        let spawned = spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            ShimFds {
                stdout: out.as_fd(),
                stderr: out.as_fd(),
                lock: lock.as_fd(),
                notify,
                ready,
            },
            idle,
        )
        .unwrap();
        let mut stdin = std::fs::File::from(spawned.stdin);
        // A script that does not read its stdin may have ended already;
        // one that does reads it (and its test checks what it read).
        match stdin.write_all(b"spec\n") {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
            _ => {}
        }
        drop(stdin);
        let status =
            nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(spawned.pid), None).unwrap();
        let nix::sys::wait::WaitStatus::Exited(_, code) = status else {
            panic!("{status:?}");
        };
        drop(stray);
        (std::fs::read_to_string(out_path).unwrap(), code)
    }

    #[test]
    fn the_shim_gets_exactly_its_descriptors_and_its_stdin() {
        let (text, code) = run(
            "ls /proc/$$/fd; readlink /proc/$$/fd/3; read line; echo \"got $line\"",
            None,
            None,
            false,
        );
        assert_eq!(code, 0, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..4], &["0", "1", "2", "3"], "{text}");
        assert!(lines[4].ends_with("shim.lock"), "{text}");
        assert_eq!(lines[5], "got spec", "{text}");
        assert_eq!(lines.len(), 6, "{text}");
    }

    #[test]
    fn the_notify_pipe_arrives_as_fd4() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (text, code) = run(
            "ls /proc/$$/fd; readlink /proc/$$/fd/4; echo done >&4",
            Some(w.as_fd()),
            None,
            false,
        );
        drop(w);
        assert_eq!(code, 0, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..5], &["0", "1", "2", "3", "4"], "{text}");
        assert!(lines[5].starts_with("pipe:"), "{text}");
        let mut got = String::new();
        std::fs::File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "done\n");
    }

    #[test]
    fn a_warm_shims_ready_pipe_arrives_as_fd5() {
        let (nr, nw) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (rr, rw) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (text, code) = run(
            "ls /proc/$$/fd; echo ready >&5; echo told >&4",
            Some(nw.as_fd()),
            Some(rw.as_fd()),
            false,
        );
        drop((nw, rw));
        assert_eq!(code, 0, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["0", "1", "2", "3", "4", "5"], "{text}");
        let mut got = String::new();
        std::fs::File::from(rr).read_to_string(&mut got).unwrap();
        assert_eq!(got, "ready\n");
        got.clear();
        std::fs::File::from(nr).read_to_string(&mut got).unwrap();
        assert_eq!(got, "told\n");
    }

    #[test]
    fn the_class_signals_and_mask_are_set_for_the_shim() {
        // Field 41 of /proc/PID/stat is the policy; SigBlk/SigIgn are
        // masks in /proc/PID/status. Rust's test harness ignores SIGPIPE.
        // Shell builtins only: a shell blocks every signal around a fork,
        // so a `cut` or `grep` child could read that passing mask.
        let script = "read -r stat < /proc/$$/stat; set -- $stat; shift 40; echo $1; \
             while read -r line; do case $line in SigBlk*|SigIgn*) echo \"$line\";; esac; \
             done < /proc/$$/status";
        let policy = |idle| {
            let (text, code) = run(script, None, None, idle);
            assert_eq!(code, 0, "{text}");
            text
        };
        let idle = policy(true);
        let normal = policy(false);
        assert!(
            idle.starts_with(&format!("{}\n", libc::SCHED_IDLE)),
            "{idle}"
        );
        assert!(
            normal.starts_with(&format!("{}\n", libc::SCHED_OTHER)),
            "{normal}"
        );
        assert!(normal.contains("SigBlk:\t0000000000000000"), "{normal}");
        // SIGPIPE is signal 13: bit 12 of the ignored mask.
        let ign = normal
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:\t"))
            .unwrap();
        let ign = u64::from_str_radix(ign.trim(), 16).unwrap();
        assert_eq!(ign & (1 << 12), 0, "SIGPIPE ignored: {normal}");
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_an_error_here() {
        let tmp = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(tmp.path().join("f")).unwrap();
        let err = spawn(
            &tmp.path().join("missing"),
            &[],
            ShimFds {
                stdout: f.as_fd(),
                stderr: f.as_fd(),
                lock: f.as_fd(),
                notify: None,
                ready: None,
            },
            false,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    }
}
