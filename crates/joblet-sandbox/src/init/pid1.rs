//! Pid 1 of the job's pid namespace, a mini-init: dies with the outer
//! process, finishes the filesystem (`/proc`, binds, host root detached,
//! `/` read-only), forks the job, forwards signals to the
//! job's process group, reaps every child and exits with the job's status.
//! Once the job is forked, pid 1 keeps only `CAP_KILL` (to signal it).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{sigprocmask, SigmaskHow, Signal};
use nix::unistd::{setpgid, Pid};
use seccompiler::BpfProgram;

use super::config::InitConfig;
use super::error::Stage;
use super::outer::{self, forwarded_raw, forwarded_set, EXIT_SETUP_FAILED};
use super::report::{self, Context, SetupError};
use super::sys::{self, Forked};
use super::{binds, job, privileges, rootfs};

/// Runs pid 1; `outer` is a pidfd of the outer process, `exit_w` where the
/// job's raw wait status goes.
/// `filters`: the job's seccomp filter, compiled before release.
/// `claim`: a warm init's release pipe, on which the job's own config
/// arrives (see [`take_job`]); `None` when `config` is the job's.
pub(crate) fn run(
    config: &InitConfig,
    filters: &[BpfProgram],
    outer: OwnedFd,
    exit_w: OwnedFd,
    claim: Option<File>,
) -> ! {
    match setup(config, filters, &outer, claim) {
        Ok(job) => {
            drop(outer);
            reap(job, exit_w)
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

/// Largest job config accepted on the release pipe.
const MAX_JOB_CONFIG: u64 = 16 << 20;

/// A warm pid 1's wait for its job: says it is ready, reads the job's
/// config from `claim` (its length as 8 little-endian bytes, then the JSON)
/// and checks that the sandbox built from `warm` fits it. End of file
/// before a config means the sandbox was discarded: pid 1 exits quietly,
/// taking the namespaces with it.
fn take_job(warm: &InitConfig, mut claim: File) -> Result<InitConfig, SetupError> {
    report::ready();
    let mut len = [0u8; 8];
    match claim.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => std::process::exit(0),
        Err(e) => {
            return Err(SetupError::new(
                Stage::Config,
                format!("reading the job's config: {e}"),
            ))
        }
    }
    let len = u64::from_le_bytes(len);
    if len > MAX_JOB_CONFIG {
        return Err(SetupError::new(
            Stage::Config,
            format!("the job's config is {len} bytes, more than {MAX_JOB_CONFIG}"),
        ));
    }
    let mut json = vec![0u8; len as usize];
    claim
        .read_exact(&mut json)
        .stage(Stage::Config, || "reading the job's config".into())?;
    drop(claim);
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
    Ok(job)
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
    let job_config;
    let (config, premasked) = match claim {
        None => (config, None),
        Some(claim) => {
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
            job_config = take_job(config, claim)?;
            outer::prepare_job(&job_config, Some(config))?;
            (&job_config, premasked)
        }
    };
    rootfs::build_job(config, premasked)?;
    rootfs::finish()?;

    // The job's own /proc, mounted above.
    let proc_self = sys::ProcSelf::open().stage(Stage::Fork, || "opening /proc/self".into())?;
    let forked =
        sys::fork_single_threaded(&proc_self).stage(Stage::Fork, || "forking the job".into())?;
    drop(proc_self);
    match forked {
        Forked::Child => job::run(config, filters),
        Forked::Parent { child } => {
            // The job does the same; whichever runs first wins, the other
            // fails harmlessly (EACCES once the job has exec'd).
            let _ = setpgid(Pid::from_raw(child), Pid::from_raw(child));
            if let Err(e) = privileges::keep_only_kill() {
                let _ = sys::kill_raw(child, libc::SIGKILL);
                return Err(e);
            }
            Ok(child)
        }
    }
}

fn reap(job: i32, exit_w: OwnedFd) -> ! {
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
                let _ = File::from(exit_w).write_all(&status.to_ne_bytes());
                // Exiting kills whatever else is left in the namespace.
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
