//! Pid 1 of the job's pid namespace, a mini-init: dies with the outer
//! process, finishes the filesystem (`/proc`, binds, host root detached,
//! `/` read-only), forks the job (a warm pid 1: before the job comes, and
//! hands it the job's config once the tree is finished), forwards signals
//! to the job's process group, reaps every child and exits with the job's
//! status. Once the job is forked, pid 1 keeps only `CAP_KILL` (to signal
//! it).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{sigprocmask, SigmaskHow, Signal};
use nix::unistd::{setpgid, Pid};
use seccompiler::BpfProgram;

use super::config::InitConfig;
use super::error::Stage;
use super::hostfds::{self, Handed, Host};
use super::outer::{self, forwarded_raw, forwarded_set, EXIT_SETUP_FAILED};
use super::report::{self, Context, SetupError};
use super::sys::{self, Forked};
use super::{binds, frame, job, privileges, rootfs};

/// Runs pid 1; `outer` is a pidfd of the outer process, `exit_w` where the
/// job's raw wait status goes for the outer process, `end` where it goes
/// for the caller once nothing of the job is left (see [`reap`]).
/// `filters`: the job's seccomp filter, compiled before release.
/// `claim`: a warm init's release socket, on which the job's own config
/// arrives (see [`take_job`]); `None` when `config` is the job's.
pub(crate) fn run(
    config: &InitConfig,
    filters: &[BpfProgram],
    outer: OwnedFd,
    exit_w: OwnedFd,
    end: OwnedFd,
    claim: Option<File>,
) -> ! {
    match setup(config, filters, &outer, claim) {
        Ok(job) => {
            drop(outer);
            reap(job, exit_w, end)
        }
        Err(e) => {
            report::error(e.stage, &e.message);
            std::process::exit(EXIT_SETUP_FAILED)
        }
    }
}

/// True if the process behind `pidfd` has exited.
fn exited(pidfd: &OwnedFd) -> Result<bool, SetupError> {
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    let n = poll(&mut fds, PollTimeout::ZERO)
        .stage(Stage::Fork, || "polling the outer process's pidfd".into())?;
    Ok(n > 0)
}

/// A warm pid 1's wait for its job: says it is ready, reads the job's
/// config from `claim` (framed, see `frame`) and checks that the sandbox
/// built from `warm` fits it. End of file before a config means the
/// sandbox was discarded: pid 1 exits quietly, taking the namespaces (and
/// the job process forked ahead) with it. Returns what is left to build
/// of the job's config ([`InitConfig::job_part`]), the whole config's JSON
/// (for the job process) and the host sources of that part; `claim` stays
/// open for [`wait_for_go`].
fn take_job(
    warm: &InitConfig,
    claim: &mut File,
) -> Result<(InitConfig, Vec<u8>, Handed), SetupError> {
    report::ready();
    let (json, fds) = match hostfds::read_job(claim) {
        Ok(Some(got)) => got,
        Ok(None) => std::process::exit(0),
        Err(e) => {
            return Err(SetupError::new(
                Stage::Config,
                format!("reading the job's config: {e}"),
            ))
        }
    };
    let job: InitConfig = serde_json::from_slice(&json)
        .stage(Stage::Config, || "parsing the job's config JSON".into())?;
    job.validate()
        .stage(Stage::Config, || "checking the job's config".into())?;
    if job.warm {
        return Err(SetupError::new(
            Stage::Config,
            "the job's config asks for a warm start again",
        ));
    }
    if let Some(field) = warm.warm_mismatch(&job) {
        return Err(SetupError::new(
            Stage::Config,
            format!("this warm sandbox was built with another {field} than the job's; start the job in a fresh one"),
        ));
    }
    // Built in SCHED_IDLE while waiting; the job runs normally.
    sys::set_normal_priority(0).stage(Stage::Config, || "resetting the scheduling class".into())?;
    // What is left to build: the shim sent the sources of just that.
    let part = warm.job_part(&job);
    let host =
        Handed::new(fds, &part).stage(Stage::Config, || "taking the job's host sources".into())?;
    Ok((part, json, host))
}

/// The shim's word that the job's cgroup limits and device filter are in
/// place (the go byte after the config, see `PendingInit::go`); only then
/// may the job process run. End of file instead: the shim gave up on the
/// job (it could not apply them) and kills the sandbox; pid 1 exits
/// first, taking the job process forked ahead with it.
fn wait_for_go(mut claim: File) -> Result<(), SetupError> {
    let mut byte = [0u8; 1];
    loop {
        match claim.read(&mut byte) {
            Ok(0) => std::process::exit(EXIT_SETUP_FAILED),
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(SetupError::new(
                    Stage::Config,
                    format!("waiting for the word to start the job: {e}"),
                ))
            }
        }
    }
}

/// A warm sandbox's job process, forked before its job came (see
/// [`job::run_prestarted`]).
struct Prestarted {
    pid: i32,
    channel: UnixStream,
}

impl Prestarted {
    /// Forks the job process and waits until it has entered (dropped its
    /// privileges, loaded the filter). If it fails, it has reported why.
    fn fork(config: &InitConfig, filters: &[BpfProgram]) -> Result<Prestarted, SetupError> {
        let (mut ours, theirs) = UnixStream::pair()
            .stage(Stage::Fork, || "creating the job process's channel".into())?;
        let proc_self = sys::ProcSelf::open().stage(Stage::Fork, || "opening /proc/self".into())?;
        let forked = sys::fork_single_threaded(&proc_self)
            .stage(Stage::Fork, || "forking the job process".into())?;
        drop(proc_self);
        let pid = match forked {
            Forked::Child => {
                drop(ours);
                job::run_prestarted(config, filters, theirs)
            }
            Forked::Parent { child } => child,
        };
        drop(theirs);
        // The job process does the same; whichever runs first wins.
        let _ = setpgid(Pid::from_raw(pid), Pid::from_raw(pid));
        let mut byte = [0u8; 1];
        match ours.read(&mut byte) {
            Ok(1) if byte[0] == job::ENTERED => Ok(Prestarted { pid, channel: ours }),
            // It reported its error on the status pipe first.
            _ => Err(SetupError::new(
                Stage::Fork,
                "the job process ended before it was ready",
            )),
        }
    }

    /// Hands it the job's config (in the normal scheduling class): it
    /// prepares the job's `execve` while pid 1 builds the tree.
    fn send(&mut self, json: &[u8]) -> Result<(), SetupError> {
        sys::set_normal_priority(self.pid).stage(Stage::Fork, || {
            "resetting the job process's scheduling class".into()
        })?;
        frame::write(&mut self.channel, json)
            .stage(Stage::Fork, || "handing the job process its config".into())
    }

    /// Lets it run the job, once the tree is finished.
    fn go(mut self) -> Result<i32, SetupError> {
        self.channel
            .write_all(&[job::GO])
            .stage(Stage::Fork, || "letting the job process run the job".into())?;
        Ok(self.pid)
    }
}

fn setup(
    config: &InitConfig,
    filters: &[BpfProgram],
    outer: &OwnedFd,
    claim: Option<File>,
) -> Result<i32, SetupError> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .stage(Stage::Fork, || "prctl(PR_SET_PDEATHSIG, SIGKILL)".into())?;
    // getppid() is 0 for a namespace's pid 1, so the usual race check is
    // done on a pidfd: if the outer process died before PDEATHSIG was
    // armed, nobody would kill us.
    if exited(outer)? {
        std::process::exit(1);
    }
    // Not dumpable: a job running as root cannot ptrace or read /proc/1
    // (the job itself becomes dumpable again at its execve).
    nix::sys::prctl::set_dumpable(false)
        .stage(Stage::Fork, || "prctl(PR_SET_DUMPABLE, 0)".into())?;
    // Our own process group: a killpg of the outer's group must reach the
    // job once, through forwarding, not also directly.
    setpgid(Pid::from_raw(0), Pid::from_raw(0))
        .stage(Stage::Fork, || "setpgid for pid 1".into())?;

    rootfs::build_proc()?;
    let child = match claim {
        None => {
            rootfs::build_job(config, None, &Host::Parked)?;
            rootfs::finish()?;
            fork_job(config, filters)?
        }
        Some(mut claim) => {
            // The binds every job this sandbox serves starts with (a
            // GPU-ready one's driver files), from the parked host root.
            binds::apply_binds(&config.binds, &Host::Parked)?;
            // A CPU job's masks (the node's driver files) go on ahead:
            // most jobs keep them.
            let premasked = if config.binds.is_empty() {
                Some(rootfs::Premasked {
                    masks: &config.masks,
                    paths: binds::apply_masks(&config.masks)?,
                })
            } else {
                None
            };
            let mut prestarted = Prestarted::fork(config, filters)?;
            // Before the job comes: the unmount waits for a grace period.
            // The job's host sources come from the shim (see `hostfds`).
            rootfs::detach_host_root()?;
            let (job, json, handed) = take_job(config, &mut claim)?;
            prestarted.send(&json)?;
            let host = Host::Handed(handed);
            outer::prepare_job(&job, Some(config), &host)?;
            rootfs::build_job(&job, premasked, &host)?;
            rootfs::root_read_only()?;
            // Attached, the copies are part of the tree; one left detached
            // (a bind whose target another bind took) would be freed after
            // a grace period when closed: they are closed with pid 1.
            std::mem::forget(host);
            wait_for_go(claim)?;
            prestarted.go()?
        }
    };
    if config.stdin.is_some() {
        // The job has its copy (pid 1 forwards signals, it reads nothing).
        sys::close_raw(super::JOB_STDIN_FD);
    }
    // The job does the same; whichever runs first wins, the other fails
    // harmlessly (EACCES once the job has exec'd). Not for a job on a
    // terminal: it starts a session of its own (which makes it a group
    // leader too), and `setsid` fails for a process that already leads a
    // group.
    if !config.stdin.is_some_and(|s| s.tty) {
        let _ = setpgid(Pid::from_raw(child), Pid::from_raw(child));
    }
    if let Err(e) = privileges::keep_only_kill() {
        let _ = sys::kill_raw(child, libc::SIGKILL);
        return Err(e);
    }
    Ok(child)
}

/// A cold sandbox's job process, forked once the tree is finished.
fn fork_job(config: &InitConfig, filters: &[BpfProgram]) -> Result<i32, SetupError> {
    // The job's own /proc, mounted above.
    let proc_self = sys::ProcSelf::open().stage(Stage::Fork, || "opening /proc/self".into())?;
    let forked =
        sys::fork_single_threaded(&proc_self).stage(Stage::Fork, || "forking the job".into())?;
    drop(proc_self);
    match forked {
        Forked::Child => job::run(config, filters),
        Forked::Parent { child } => Ok(child),
    }
}

/// Forwards signals to the job's process group and reaps every child. Once
/// the job has exited: kills and reaps whatever is left in the namespace,
/// so that nothing of the job runs any more, and tells the job's raw wait
/// status on `end` (for the caller) and on `exit_w` (for the outer
/// process), then exits. The caller learns the job's end before the outer
/// process's exit tears the namespaces down (unmounting the job's tree waits
/// for an RCU grace period).
fn reap(job: i32, exit_w: OwnedFd, end: OwnedFd) -> ! {
    // Only the job reports from now on; its execve closes the last writer.
    report::close_status_fd();
    if sys::install_forwarding(-job, &forwarded_raw()).is_err() {
        let _ = sys::kill_raw(job, libc::SIGKILL);
        std::process::exit(EXIT_SETUP_FAILED);
    }
    let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&forwarded_set()), None);
    loop {
        match sys::wait_any() {
            Ok((pid, status)) if pid == job => {
                // Only this process and the outer one still hold the job's
                // output pipes; keeping them open until exit would hold
                // the end of its output back by the namespaces' teardown.
                release_output();
                // What exiting would kill anyway, killed and reaped now:
                // orphans come to pid 1 (those of a subreaper too, once it
                // dies), so no child left means no process left.
                let _ = sys::kill_raw(-1, libc::SIGKILL);
                while sys::wait_any().is_ok() {}
                // What is left here (the two writes, this exit, and the
                // outer process's, which tears the namespaces down) gives
                // way to the shim: in SCHED_IDLE before the write that wakes
                // it, the shim's reader takes this CPU at once instead of
                // waiting for this exit (~0.2 ms) when the kernel wakes it
                // here.
                let _ = sys::set_idle_priority();
                // SIGPIPE is ignored here (Rust's runtime did it), so a
                // reader gone away only costs an EPIPE.
                let _ = File::from(end).write_all(&status.to_ne_bytes());
                let _ = File::from(exit_w).write_all(&status.to_ne_bytes());
                if libc::WIFEXITED(status) {
                    std::process::exit(libc::WEXITSTATUS(status));
                }
                if libc::WIFSIGNALED(status) {
                    // A namespace's init cannot die of its own signal.
                    std::process::exit(128 + libc::WTERMSIG(status));
                }
                std::process::exit(EXIT_SETUP_FAILED);
            }
            Ok(_) => continue,
            Err(_) => std::process::exit(EXIT_SETUP_FAILED),
        }
    }
}

/// Closes this process's standard descriptors (the job's stdin, output and
/// error pipes), so the shim sees the end of the job's output as soon as
/// the job is gone.
pub(crate) fn release_output() {
    for fd in 0..=2 {
        sys::close_raw(fd);
    }
}
