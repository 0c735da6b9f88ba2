//! `joblet-shim sandbox-exec FILE`: a process started inside a running
//! sandboxed job (`rnx job exec`), never with more than the job has.
//!
//! Run as root by the daemon, with the command's stdin, stdout and stderr
//! (a terminal or pipes) already in place and an [`ExecConfig`] in `FILE`
//! (read, then removed). Order:
//! 1. find the job: its leader (checked by start time against pid reuse),
//!    the leader's child (the job's pid 1) and pid 1's first child (the
//!    job's process); read that process's uid, gid, seccomp mode and
//!    environment, and refuse if the uid/gid are not the ones the config
//!    carries or the job is filtered and the config would not be;
//! 2. join the job's cgroups (every hierarchy: its limits and its device
//!    filter now apply), compile the job's seccomp filter;
//! 3. `setns` into pid 1's mount, UTS, IPC, network, cgroup and pid
//!    namespaces through its pidfd (the mount namespace's root is the job's
//!    root, so `/dev` is the job's);
//! 4. fork (the child is in the job's pid namespace): `/work`, a session
//!    and the terminal as controlling terminal (with a terminal), every
//!    signal at its default, the job's privileges dropped as the job's
//!    were (`privileges::apply`: no_new_privs, no capabilities, its uid and
//!    gid), the filter loaded, `execve` with the job's environment and the
//!    config's additions;
//! 5. the parent forwards SIGTERM/SIGINT/SIGHUP to the child, waits, and
//!    ends like it (same code, or the same signal).
//!
//! Failures before the command runs print `joblet exec: …` on stderr and
//! exit [`EXIT_CANNOT_ENTER`] (the command not found: 127).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::Path;

use nix::sched::CloneFlags;
use serde::{Deserialize, Serialize};

use super::config::InitConfig;
use super::error::Stage;
use super::report::{Context, SetupError};
use super::sys::{self, Forked};
use super::{exec, privileges, seccomp};
use crate::cgroup::{JobCgroup, Layout};

/// The exit code when the process could not be started inside the job.
pub const EXIT_CANNOT_ENTER: i32 = 126;
/// The exit code when the command was not found in the job.
pub const EXIT_NOT_FOUND: i32 = 127;

/// What `sandbox-exec` runs, and in which job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecConfig {
    /// The job's leader (the shim's child) and its start time.
    pub leader_pid: i32,
    pub leader_start_time: u64,
    /// The job's cgroup: `cgroup_base/cgroup_name` in every hierarchy.
    pub cgroup_base: String,
    pub cgroup_name: String,
    /// The job's sandbox settings as the node gives them (user, root,
    /// seccomp); `command`, `args` and `env` are the exec's (`env`: added
    /// to the job's environment, replacing what it sets).
    pub init: InitConfig,
    /// stdin is a terminal the command takes as its controlling terminal.
    pub tty: bool,
}

/// Runs `sandbox-exec` with the config in `path`; never returns.
pub fn run_exec(path: &Path) -> ! {
    match prepare(path) {
        Ok(entered) => entered.run(),
        Err(e) => {
            eprintln!("joblet exec: {}", e.message);
            std::process::exit(EXIT_CANNOT_ENTER)
        }
    }
}

/// Everything done before the fork.
struct Entered {
    /// Opened before the setns: the job's `/proc` does not show this process.
    proc_self: sys::ProcSelf,
    config: ExecConfig,
    env: BTreeMap<String, String>,
    filters: Vec<seccompiler::BpfProgram>,
}

fn read_config(path: &Path) -> Result<ExecConfig, SetupError> {
    let text =
        std::fs::read(path).stage(Stage::Config, || format!("reading {}", path.display()))?;
    let _ = std::fs::remove_file(path);
    serde_json::from_slice(&text).stage(Stage::Config, || format!("parsing {}", path.display()))
}

/// The first child of `pid` (as `/proc/PID/task/PID/children` lists them).
fn first_child(proc_root: &Path, pid: i32) -> Result<i32, SetupError> {
    let path = proc_root.join(format!("{pid}/task/{pid}/children"));
    let text = std::fs::read_to_string(&path)
        .stage(Stage::Config, || format!("reading {}", path.display()))?;
    text.split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| {
            SetupError::new(
                Stage::Config,
                format!("process {pid} of the job has no child: the job is ending"),
            )
        })
}

/// The fields of `/proc/PID/status` the checks need.
#[derive(Debug, Default, PartialEq, Eq)]
struct Status {
    uid: Option<u32>,
    gid: Option<u32>,
    seccomp: Option<u32>,
}

fn parse_status(text: &str) -> Status {
    let first = |v: &str| v.split_whitespace().next().and_then(|n| n.parse().ok());
    let mut s = Status::default();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            match k {
                "Uid" => s.uid = first(v),
                "Gid" => s.gid = first(v),
                "Seccomp" => s.seccomp = first(v),
                _ => {}
            }
        }
    }
    s
}

/// Refuses an exec that would have more than the job's process: another
/// user or group, or no filter where the job has one.
fn check_not_more(job: &Status, config: &InitConfig, pid: i32) -> Result<(), SetupError> {
    if job.uid != Some(config.uid) || job.gid != Some(config.gid) {
        return Err(SetupError::new(
            Stage::Privileges,
            format!(
                "the job's process {pid} runs as uid {:?} gid {:?}, not the node's sandbox user {}:{} (the node's settings changed since it started?); refusing to exec as anyone else",
                job.uid, job.gid, config.uid, config.gid
            ),
        ));
    }
    if job.seccomp.unwrap_or(0) != 0 && !config.seccomp {
        return Err(SetupError::new(
            Stage::Seccomp,
            format!("the job's process {pid} runs under a seccomp filter and this node's settings have none now; refusing to exec without one"),
        ));
    }
    Ok(())
}

fn parse_environ(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = std::str::from_utf8(kv).ok()?;
            let (k, v) = kv.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

fn prepare(path: &Path) -> Result<Entered, SetupError> {
    let config = read_config(path)?;
    let proc_root = Path::new("/proc");
    let leader = config.leader_pid;
    let started = joblet_shim::procstat::start_time(proc_root, leader)
        .stage(Stage::Config, || format!("the job's leader {leader}"))?;
    if started != config.leader_start_time {
        return Err(SetupError::new(
            Stage::Config,
            format!("process {leader} is no longer the job's leader: the job has ended"),
        ));
    }
    let pid1 = first_child(proc_root, leader)?;
    let job = first_child(proc_root, pid1)?;
    let status_path = proc_root.join(format!("{job}/status"));
    let status = std::fs::read_to_string(&status_path).stage(Stage::Config, || {
        format!("reading {}", status_path.display())
    })?;
    check_not_more(&parse_status(&status), &config.init, job)?;
    let environ_path = proc_root.join(format!("{job}/environ"));
    let mut env = parse_environ(&std::fs::read(&environ_path).stage(Stage::Config, || {
        format!("reading {}", environ_path.display())
    })?);
    env.extend(config.init.env.clone());

    let pidfd = sys::pidfd_open(pid1).stage(Stage::Config, || {
        format!("pidfd_open of the job's pid 1 ({pid1})")
    })?;
    let layout = Layout::detect(&proc_root.join("self/mountinfo"))
        .stage(Stage::Cgroup, || "reading the cgroup layout".into())?;
    let cgroup = JobCgroup::open(&layout, &config.cgroup_base, &config.cgroup_name).stage(
        Stage::Cgroup,
        || {
            format!(
                "the job's cgroup {}/{}",
                config.cgroup_base, config.cgroup_name
            )
        },
    )?;
    cgroup
        .add_pid(std::process::id() as i32)
        .stage(Stage::Cgroup, || "joining the job's cgroups".into())?;
    let filters = if config.init.seccomp {
        seccomp::job_filters(&config.init.seccomp_allow)
            .stage(Stage::Seccomp, || "building the filter".into())?
    } else {
        Vec::new()
    };
    let flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWNET
        | CloneFlags::CLONE_NEWCGROUP
        | CloneFlags::CLONE_NEWPID;
    let proc_self = sys::ProcSelf::open().stage(Stage::Fork, || "opening /proc/self".into())?;
    nix::sched::setns(&pidfd, flags).stage(Stage::Unshare, || {
        format!("setns into the job's namespaces ({flags:?})")
    })?;
    Ok(Entered {
        proc_self,
        config,
        env,
        filters,
    })
}

impl Entered {
    fn run(self) -> ! {
        let Entered {
            proc_self,
            config,
            env,
            filters,
        } = self;
        let forked = match sys::fork_single_threaded(&proc_self) {
            Ok(f) => f,
            Err(e) => fail(SetupError::new(
                Stage::Fork,
                format!("forking into the job: {e}"),
            )),
        };
        drop(proc_self);
        match forked {
            Forked::Child => {
                let e = match child(config, env, filters) {
                    Ok(never) => match never {},
                    Err(e) => e,
                };
                let code = if e.message.starts_with("command not found") {
                    EXIT_NOT_FOUND
                } else {
                    EXIT_CANNOT_ENTER
                };
                eprintln!("joblet exec: {}", e.message);
                sys::exit_now(code)
            }
            Forked::Parent { child } => {
                if let Err(e) =
                    sys::install_forwarding(child, &[libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
                {
                    eprintln!("joblet exec: cannot forward signals to the command: {e}");
                }
                match sys::wait_pid(child) {
                    Ok(status) if libc::WIFEXITED(status) => {
                        std::process::exit(libc::WEXITSTATUS(status))
                    }
                    Ok(status) if libc::WIFSIGNALED(status) => sys::reraise(libc::WTERMSIG(status)),
                    Ok(_) | Err(_) => std::process::exit(EXIT_CANNOT_ENTER),
                }
            }
        }
    }
}

/// The child, in the job's pid namespace: returns only on failure.
fn child(
    config: ExecConfig,
    env: BTreeMap<String, String>,
    filters: Vec<seccompiler::BpfProgram>,
) -> Result<Infallible, SetupError> {
    if std::env::set_current_dir("/work").is_err() {
        std::env::set_current_dir("/").stage(Stage::Exec, || "chdir /".into())?;
    }
    if config.tty {
        nix::unistd::setsid().stage(Stage::Exec, || "setsid for the terminal".into())?;
        exec::take_terminal()?;
    } else {
        let _ = nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
    }
    sys::reset_signal_dispositions()
        .stage(Stage::Exec, || "resetting signal dispositions".into())?;
    let arguments = exec::arguments(&config.init.command, &config.init.args, &env)?;
    let program = exec::resolve(&config.init.command, &env, exec::executable)?;
    let prepared = exec::with_program(&program, arguments)?;
    privileges::apply(&config.init)?;
    // After the credentials changed (which clears it): the command dies
    // with this helper, which the daemon kills when the client goes away.
    // (Its parent is outside the job's pid namespace, so getppid() says 0
    // here and cannot check it.)
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .stage(Stage::Exec, || "setting the parent-death signal".into())?;
    if config.init.seccomp {
        seccomp::apply(&filters).stage(Stage::Seccomp, || "loading the filter".into())?;
    }
    Err(exec::exec_prepared(
        &prepared,
        &program,
        &config.init.command,
    ))
}

fn fail(e: SetupError) -> ! {
    eprintln!("joblet exec: {}", e.message);
    std::process::exit(EXIT_CANNOT_ENTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_environ_are_read() {
        let s = parse_status(
            "Name:\tsh\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t1\t1\t1\nSeccomp:\t2\n",
        );
        assert_eq!(
            s,
            Status {
                uid: Some(65534),
                gid: Some(65534),
                seccomp: Some(2)
            }
        );
        let env = parse_environ(b"A=1\0B=x=y\0junk\0=v\0");
        assert_eq!(
            env,
            BTreeMap::from([("A".into(), "1".into()), ("B".into(), "x=y".into())])
        );
    }

    #[test]
    fn an_exec_never_gets_more_than_the_job() {
        let mut config = crate::init::config::tests::sample();
        config.uid = 65534;
        config.gid = 65534;
        config.seccomp = true;
        let job = Status {
            uid: Some(65534),
            gid: Some(65534),
            seccomp: Some(2),
        };
        check_not_more(&job, &config, 7).unwrap();
        let root = Status {
            uid: Some(0),
            ..job
        };
        assert!(check_not_more(&root, &config, 7)
            .unwrap_err()
            .message
            .contains("refusing to exec as anyone else"));
        config.seccomp = false;
        let e = check_not_more(&job, &config, 7).unwrap_err();
        assert!(e.message.contains("seccomp"), "{}", e.message);
    }
}
