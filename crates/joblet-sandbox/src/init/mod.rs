//! The process that becomes the job (runc-init style): the caller
//! [`spawn`]s a re-exec of a binary whose `main` calls [`run_init`] first
//! thing (before any thread exists), or, while it is itself still
//! single-threaded, forks one ahead ([`fork_ahead`], a warm shim) that
//! runs [`run_init`] without the exec; that process reads an [`InitConfig`]
//! from standard input, builds what it can of the sandbox, and blocks
//! until [`PendingInit::release`], so the caller can meanwhile create the
//! job's cgroups and then put it in them.
//!
//! Order of operations:
//! 1. outer process (the job leader in the host pid namespace), before
//!    release — nothing here lets the job run, and nothing is forked, so
//!    it overlaps with the caller's cgroup and device-filter setup: block
//!    the forwarded signals; `unshare` mount, UTS, IPC, pid (and, for
//!    [`NetMode::None`], network) namespaces; `/` rslave; root tmpfs +
//!    `pivot_root` with the host root parked at `/.oldroot`; read-only
//!    binds; `/work`; `/tmp`; `/dev`; hostname; `lo` up; the seccomp
//!    filter compiled (the job only loads it).
//! 2. outer process, after release (now in the job's cgroups): `unshare`
//!    the cgroup namespace (rooted at the job's cgroup), fork pid 1,
//!    forward signals to it, wait, and end like the job (same exit code or
//!    same signal).
//! 3. pid 1 (mini-init): `PR_SET_PDEATHSIG(SIGKILL)` + a pidfd check that
//!    the outer process is still alive, non-dumpable, own process group;
//!    `/proc`; the config's [`Bind`]s at their targets, then its masks;
//!    host root detached; `/` remounted read-only; fork
//!    the job; keep only `CAP_KILL`; forward signals to the job's process
//!    group; reap every child; exit with the job's status.
//! 4. the job (pid 2): own process group; every signal to its default
//!    action; `no_new_privs`; bounding and ambient capabilities dropped;
//!    no supplementary groups, gid, uid; effective/permitted emptied (a
//!    root job keeps a small set) and verified; `chdir /work`; `PATH`
//!    lookup; seccomp filter; signals unblocked; `execve`.
//!
//! A warm init ([`InitConfig::warm`], built before its job is known) runs
//! step 1 without the job's own part (`/work`, its devices, `/dev/shm`, the
//! hostname), and after the first release (into the cgroup, see
//! [`PendingInit::enter`]) step 2 and pid 1's `/proc`. Pid 1 then detaches
//! the host root, reports ready and waits on the release socket for the
//! job's config ([`PendingInit::start`]), which comes with the host sources
//! of the job's own part (see `hostfds`); with it, it checks that the
//! sandbox fits ([`InitConfig::warm_mismatch`]), leaves `SCHED_IDLE`, builds
//! the job's part and goes on with step 3's binds as a cold pid 1 does
//! (from those sources), then waits for a go byte on the same socket:
//! the caller sends the config as soon as the job's limits are written
//! ([`PendingInit::send_job`]) and the go once its device filter is too
//! ([`PendingInit::go`]), so pid 1's build overlaps the filter's; end of
//! file instead of the go (the caller gave up) ends pid 1 and the job
//! process without running anything.
//!
//! The job's end is told twice: pid 1, once it has reaped the job and
//! killed and reaped whatever the job left, writes the job's raw wait
//! status on a third pipe ([`Started::end`]); the outer process then exits
//! like the job. Its exit comes later: it tears down the namespaces
//! (unmounting the job's tree waits for an RCU grace period), which is no
//! part of the job's run. After a job that ended normally, the outer
//! process waits for that until the caller closes [`Started::teardown`]
//! (it has recorded the end; a second at most): the teardown is kernel
//! work no scheduling class preempts, and would otherwise share the CPUs
//! with the caller recording the end.
//!
//! Setup failures are reported to the caller over a close-on-exec pipe, so
//! `release` either returns an error naming the [`Stage`] (and the job
//! never ran) or sees the pipe close because the job's `execve` succeeded.
//!
//! Process groups: the outer process leads its own group (as the shim
//! expects); pid 1 and the job each lead a group of their own, so a
//! `killpg` of the outer group reaches the job exactly once, through the
//! forwarding chain. When the outer process dies, pid 1 dies with it, and
//! with pid 1 the whole pid namespace.

mod binds;
mod config;
mod devfs;
mod enter;
mod entry;
mod error;
mod exec;
mod forked;
mod frame;
mod hostfds;
mod job;
mod outer;
mod pid1;
mod privileges;
mod procfs;
mod report;
mod rootfs;
mod seccomp;
mod spawn;
mod sys;
mod work;

pub use config::{check_ro_mount, Bind, ConfigError, InitConfig, JobStdin, NetMode};
pub use enter::{run_exec, ExecConfig, EXIT_CANNOT_ENTER, EXIT_NOT_FOUND};
pub use error::{InitError, Stage};
pub use forked::{fork_ahead, ForkedInit};
pub use outer::run_init;
pub use seccomp::{
    denied_syscalls, oci_rules, Denied, Policy, SyscallGroup, Verdict, LAST_KNOWN_SYSCALL,
};
pub use spawn::{spawn, spawn_with_stdin, PendingInit, Started, RELEASE_TIMEOUT};
pub(crate) use sys::loopback_up;
pub(crate) use sys::{
    inherit_fds as sys_inherit_fds, kill_raw as sys_kill,
    take_inherited_fd as sys_take_inherited_fd, wait_any as sys_wait_any,
    write_all_raw as sys_write_all,
};

/// Whether this kernel can start a job in a warm sandbox: its pid 1 gets
/// the job's host sources as `open_tree` copies (Linux 5.2).
pub fn warm_start_supported() -> bool {
    sys::has_open_tree()
}

/// The descriptor on which the init process waits for the "go" byte.
pub(crate) const GO_FD: i32 = 3;
/// The descriptor on which the init process (and its descendants until the
/// job's `execve`) report warnings and setup errors.
pub(crate) const STATUS_FD: i32 = 4;
/// The descriptor on which pid 1 tells the job's raw wait status once every
/// process of the job is gone, before the outer process's exit tears the
/// namespaces down.
pub(crate) const END_FD: i32 = 5;
/// The descriptor whose end of file lets the outer process exit after a
/// job that ended normally, and so tear the namespaces down (a burst of
/// kernel work that no scheduling class can preempt): the caller holds the
/// write end ([`Started::teardown`]) until it has recorded the job's end.
pub(crate) const TEARDOWN_FD: i32 = 6;
/// An interactive job's standard input ([`InitConfig::stdin`]): the job
/// makes it its descriptor 0; the outer process and pid 1 close theirs once
/// they have forked.
pub(crate) const JOB_STDIN_FD: i32 = 7;
