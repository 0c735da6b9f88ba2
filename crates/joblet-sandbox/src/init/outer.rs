//! The re-exec'd init process itself ([`run_init`]): reads the config,
//! unshares every namespace but the cgroup one and builds the job's tree
//! (a warm init: the part every job shares) while the caller sets up the
//! cgroup, waits to be released, enters the job's cgroups from the
//! descriptors that come with the release (see [`super::entry`]), forks
//! pid 1 of the new pid namespace into them (pid 1 unshares the cgroup
//! namespace; a warm init's pid 1 gets its job's config on the release
//! socket; pid 1 tells the job's end on the end pipe), forwards signals to
//! it and ends the way the job ended.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, IntoRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::unistd::sethostname;
use seccompiler::BpfProgram;

use super::config::{InitConfig, NetMode};
use super::error::Stage;
use super::hostfds::Host;
use super::report::{self, Context, SetupError};
use super::sys::{self, Forked};
use super::{entry, pid1, privileges, rootfs, seccomp, END_FD, GO_FD, STATUS_FD, TEARDOWN_FD};

/// Signals passed on outer -> pid 1 -> the job's process group.
pub(crate) const FORWARDED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

pub(crate) fn forwarded_set() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set
}

pub(crate) fn forwarded_raw() -> [libc::c_int; 6] {
    FORWARDED.map(|s| s as libc::c_int)
}

/// The init's (and its pid 1's) process name.
pub(crate) const INIT_COMM: &std::ffi::CStr = c"sandbox-init";

/// Exit code when the init was started without its pipes.
pub(crate) const EXIT_NOT_SPAWNED: i32 = 125;
/// Exit code after a setup error was reported.
pub(crate) const EXIT_SETUP_FAILED: i32 = 126;

/// The whole life of the sandbox init process; call it first thing in the
/// `main` of the binary given to [`super::spawn`], before starting any
/// thread or async runtime. Never returns: exits with the job's exit code,
/// or dies of the signal that killed the job.
pub fn run_init() -> ! {
    let status = match sys::take_inherited_fd(STATUS_FD) {
        Ok(fd) => fd,
        // Not started by `spawn`: nobody to report to.
        Err(_) => std::process::exit(EXIT_NOT_SPAWNED),
    };
    report::set_status_fd(status.into_raw_fd());
    report::hello();
    // `ps` and `/proc/PID/comm` tell the init (and pid 1, forked from it)
    // from the shim whose binary it runs or was forked from.
    let _ = nix::sys::prctl::set_name(INIT_COMM);
    std::panic::set_hook(Box::new(|info| {
        report::error(Stage::Internal, &format!("sandbox init panicked: {info}"));
    }));
    match outer() {
        Ok(never) => match never {},
        Err(e) => {
            report::error(e.stage, &e.message);
            std::process::exit(EXIT_SETUP_FAILED)
        }
    }
}

fn outer() -> Result<std::convert::Infallible, SetupError> {
    let go = sys::take_inherited_fd(GO_FD).stage(Stage::Config, || {
        format!("descriptor {GO_FD} (release socket) is not open; start the init through spawn()")
    })?;
    let end = sys::take_inherited_fd(END_FD).stage(Stage::Config, || {
        format!("descriptor {END_FD} (end pipe) is not open; start the init through spawn()")
    })?;
    let teardown = sys::take_inherited_fd(TEARDOWN_FD).stage(Stage::Config, || {
        format!(
            "descriptor {TEARDOWN_FD} (teardown pipe) is not open; start the init through spawn()"
        )
    })?;
    let config = read_config()?;
    let null = File::open("/dev/null").stage(Stage::Config, || "opening /dev/null".into())?;
    nix::unistd::dup2_stdin(&null)
        .stage(Stage::Config, || "replacing stdin with /dev/null".into())?;
    drop(null);

    // Signals that arrive from here until the handlers exist stay pending.
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&forwarded_set()), None)
        .stage(Stage::Config, || "blocking signals".into())?;

    // Opened while /proc is the host's: the fork below checks through it
    // that this process is still single-threaded.
    let proc_self = sys::ProcSelf::open().stage(Stage::Fork, || "opening /proc/self".into())?;

    let filters = before_release(&config)?;

    let go = File::from(go);
    let mut byte = [0u8; 1];
    let (n, cgroups) = sys::recv_with_fds(go.as_fd(), &mut byte, entry::MAX_FDS)
        .stage(Stage::Config, || "waiting for release".into())?;
    if n == 0 {
        // The caller aborted: the job never runs.
        std::process::exit(1);
    }
    let cgroups = entry::Entry::from_fds(cgroups)?;
    cgroups.enter_v1()?;

    let me = sys::pidfd_open(std::process::id() as i32)
        .stage(Stage::Fork, || "pidfd_open(self)".into())?;
    let (exit_r, exit_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .stage(Stage::Fork, || "creating the exit status pipe".into())?;

    // Pid 1 starts in the job's cgroup2 directory, and in its v1 cgroups
    // like this process.
    let forked = cgroups.fork_pid1(&proc_self)?;
    // Neither pid 1 nor this process needs the host's /proc any more.
    drop(proc_self);
    match forked {
        Forked::Child => {
            drop(exit_r);
            drop(teardown);
            // The cgroup namespace's root is the job's own cgroup.
            if let Err(e) = entry::enter_namespace() {
                report::error(e.stage, &e.message);
                std::process::exit(EXIT_SETUP_FAILED)
            }
            // A warm init's pid 1 reads the job's config from the release
            // pipe; a cold one has it already.
            let claim = config.warm.then_some(go);
            pid1::run(&config, &filters, me, exit_w, end, claim)
        }
        Forked::Parent { child } => {
            drop(go);
            drop(exit_w);
            drop(me);
            // Only pid 1 and the job report from now on.
            report::close_status_fd();
            // Pid 1 tells the job's end.
            drop(end);
            // Nor does this process write the job's output: its copies of
            // the output pipes go (stdin is /dev/null), so the reader sees
            // their end once the job and pid 1 are gone, not only after
            // this process has exited and torn the namespaces down.
            let _ = nix::unistd::dup2_stdout(std::io::stdin());
            let _ = nix::unistd::dup2_stderr(std::io::stdin());
            // Nor its input: a terminal's reader sees its end (EIO) once
            // the job's processes are gone.
            if config.stdin.is_some() {
                sys::close_raw(super::JOB_STDIN_FD);
            }
            supervise(child, exit_r, teardown)
        }
    }
}

/// What the init builds before it is released, while the caller creates
/// the job's cgroup: what neither needs the cgroup nor lets anything of the
/// job run. Nothing is forked here (a child would stay in the caller's
/// cgroup). Returns the job's seccomp filter, compiled here and loaded by
/// the job just before its `execve`.
fn before_release(config: &InitConfig) -> Result<Vec<BpfProgram>, SetupError> {
    let mut flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWPID;
    if config.net == NetMode::None {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).stage(Stage::Unshare, || format!("unshare({flags:?})"))?;
    rootfs::prepare_base(config)?;
    if config.warm {
        rootfs::premount_job_part(config)?;
    } else {
        prepare_job(config, None, &Host::Parked)?;
    }
    let filters = if config.seccomp {
        seccomp::job_filters(&config.seccomp_allow)
            .stage(Stage::Seccomp, || "building the filter".into())?
    } else {
        Vec::new()
    };
    privileges::probe_supported();
    if config.net == NetMode::None {
        if let Err(e) = sys::loopback_up() {
            report::warn(
                Stage::Network,
                &format!(
                    "bringing lo up in the job's network namespace failed ({e}); it stays down"
                ),
            );
        }
    }
    Ok(filters)
}

/// What of the sandbox belongs to the job itself and is built before pid
/// 1's part: `/work`, its devices and `/dev/shm`, its hostname. Done before
/// release by a cold init, by a warm init's pid 1 once it has the job.
/// `warm`: the warm sandbox's config, when the job came to one.
pub(crate) fn prepare_job(
    config: &InitConfig,
    warm: Option<&InitConfig>,
    host: &Host,
) -> Result<(), SetupError> {
    rootfs::prepare_job(config, warm, host)?;
    sethostname(&config.hostname).stage(Stage::Hostname, || {
        format!("sethostname({:?})", config.hostname)
    })
}

fn read_config() -> Result<InitConfig, SetupError> {
    // Read from a copy of descriptor 0, not through `std::io::stdin()`:
    // an init forked from the shim (`forked`) inherits that global's
    // buffer, which may hold bytes the shim read from its own stdin.
    let mut json = Vec::new();
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .and_then(|mut stdin| stdin.read_to_end(&mut json))
        .stage(Stage::Config, || "reading the config from stdin".into())?;
    let config: InitConfig = serde_json::from_slice(&json).stage(Stage::Config, || {
        "parsing the config JSON from stdin".into()
    })?;
    config
        .validate()
        .stage(Stage::Config, || "checking the config".into())?;
    Ok(config)
}

/// Forwards signals to pid 1 until it ends, then ends like the job.
fn supervise(pid1: i32, exit_r: OwnedFd, teardown: OwnedFd) -> ! {
    // Failing to install forwarding leaves the default actions, which end
    // this process and so (through PDEATHSIG) the sandbox: fail closed.
    let _ = sys::install_forwarding(pid1, &forwarded_raw());
    let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&forwarded_set()), None);
    let pid1_status = match sys::wait_pid(pid1) {
        Ok(s) => s,
        Err(_) => std::process::exit(EXIT_SETUP_FAILED),
    };
    // Its copies of the output pipes went when pid 1 was forked; pid 1 runs
    // its exit in SCHED_IDLE, and so does this one (the namespaces'
    // teardown): the shim records the end first.
    let _ = sys::set_idle_priority();
    // pid 1 sends the job's raw wait status before it exits.
    let mut raw = [0u8; 4];
    let status = match File::from(exit_r).read(&mut raw) {
        Ok(4) => {
            // The job ended and pid 1 told it: the shim records that end
            // before this exit tears the namespaces down.
            wait_for_teardown(&teardown);
            i32::from_ne_bytes(raw)
        }
        _ => pid1_status,
    };
    end_like(status)
}

/// How long (ms) the outer process waits at most for its caller's word that
/// the job's end is recorded.
const TEARDOWN_WAIT_MS: u16 = 1000;

/// Waits until every writer of `teardown` is gone (the caller recorded the
/// job's end, see `Started::teardown`), at most [`TEARDOWN_WAIT_MS`].
fn wait_for_teardown(teardown: &OwnedFd) {
    let mut fds = [PollFd::new(teardown.as_fd(), PollFlags::POLLIN)];
    loop {
        match poll(&mut fds, PollTimeout::from(TEARDOWN_WAIT_MS)) {
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// Exits with the code, or dies of the signal, in a raw wait status.
pub(crate) fn end_like(status: i32) -> ! {
    if libc::WIFEXITED(status) {
        let _ = std::io::stdout().flush();
        std::process::exit(libc::WEXITSTATUS(status))
    }
    if libc::WIFSIGNALED(status) {
        sys::reraise(libc::WTERMSIG(status))
    }
    std::process::exit(EXIT_SETUP_FAILED)
}
