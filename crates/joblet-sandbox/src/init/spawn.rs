//! The caller's side: start the sandbox init blocked ([`spawn`]), then let
//! it go and learn whether the job started ([`PendingInit::release`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::config::InitConfig;
use super::error::InitError;
use super::report::{decode, StatusLine, HELLO};
use super::{frame, hostfds, sys, END_FD, GO_FD, STATUS_FD, TEARDOWN_FD};

/// How long [`PendingInit::release`] waits for the sandbox to be built
/// and the job's `execve` to happen.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(30);

/// The byte that releases the init.
const GO: u8 = b'G';

/// Starts `program args…` (a binary whose `main` calls
/// [`super::run_init`] before anything else) as the sandbox init for
/// `config`: standard input carries the JSON config (and is `/dev/null`
/// once read), `stdout`/`stderr` become the job's, the process leads its own
/// process group, its environment is empty, and it inherits no other
/// descriptor than its two private pipes. It blocks until
/// [`PendingInit::release_into`] (a warm init, [`InitConfig::warm`]:
/// [`PendingInit::enter_into`]), which gives it the job's cgroups to enter.
pub fn spawn(
    program: &Path,
    args: &[OsString],
    config: &InitConfig,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> Result<PendingInit, InitError> {
    spawn_with_stdin(program, args, config, stdout, stderr, None)
}

/// [`spawn`] for an interactive job: `stdin` (which `config.stdin` must
/// describe) becomes the job's standard input.
pub fn spawn_with_stdin(
    program: &Path,
    args: &[OsString],
    config: &InitConfig,
    stdout: OwnedFd,
    stderr: OwnedFd,
    stdin: Option<OwnedFd>,
) -> Result<PendingInit, InitError> {
    if config.stdin.is_some() != stdin.is_some() {
        return Err(InitError::SendConfig {
            pid: 0,
            source: io::Error::other("the config's stdin and the descriptor given for it disagree"),
        });
    }
    let json = encode_config(config)?;
    let (ours, theirs) = Channels::new()?;

    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    match &stdin {
        None => sys::inherit_fds(&mut cmd, theirs.targets()),
        Some(fd) => {
            let [a, b, c, d] = theirs.targets();
            sys::inherit_fds(
                &mut cmd,
                [a, b, c, d, (fd.as_raw_fd(), super::JOB_STDIN_FD)],
            );
        }
    }
    let mut child = cmd.spawn().map_err(|source| InitError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    drop(theirs);
    drop(stdin);
    // Pids are positive pid_t values, so the cast is exact.
    let pid = child.id() as i32;
    let stdin = child.stdin.take();
    // From here on, dropping `pending` kills and reaps the init. Dropping
    // `child` neither waits for nor kills it.
    let mut pending = PendingInit::new(pid, program.to_path_buf(), ours);
    pending.set_config(config);
    let Some(mut stdin) = stdin else {
        return Err(InitError::SendConfig {
            pid,
            source: io::Error::other("standard input pipe missing"),
        });
    };
    stdin
        .write_all(&json)
        .map_err(|source| InitError::SendConfig { pid, source })?;
    drop(stdin);
    Ok(pending)
}

/// Checks `config` and encodes it as the JSON the init reads.
pub(super) fn encode_config(config: &InitConfig) -> Result<Vec<u8>, InitError> {
    config.validate()?;
    // Validation guarantees UTF-8 paths, so encoding cannot fail; should it
    // anyway, the message says where.
    serde_json::to_vec(config).map_err(|e| {
        InitError::Pipe(io::Error::other(format!(
            "encoding the sandbox config as JSON: {e}"
        )))
    })
}

/// The caller's ends of the init's private descriptors.
pub(super) struct Channels {
    go: OwnedFd,
    status: OwnedFd,
    end: OwnedFd,
    teardown: OwnedFd,
}

/// The init's ends, each bound for its fixed number.
pub(super) struct InitEnds {
    go: OwnedFd,
    status: OwnedFd,
    end: OwnedFd,
    teardown: OwnedFd,
}

impl Channels {
    /// The release socket (a stream socket, so that a warm init's job can
    /// come with the descriptors of its host sources, see `hostfds`) and
    /// the status, end and teardown pipes.
    pub(super) fn new() -> Result<(Channels, InitEnds), InitError> {
        let (go_r, go_w) = std::os::unix::net::UnixStream::pair().map_err(InitError::Pipe)?;
        let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| InitError::Pipe(e.into()));
        let (status_r, status_w) = pipe()?;
        let (end_r, end_w) = pipe()?;
        let (teardown_r, teardown_w) = pipe()?;
        Ok((
            Channels {
                go: go_w.into(),
                status: status_r,
                end: end_r,
                teardown: teardown_w,
            },
            InitEnds {
                go: go_r.into(),
                status: status_w,
                end: end_w,
                teardown: teardown_r,
            },
        ))
    }
}

impl InitEnds {
    /// Each end with the number the init takes it from.
    pub(super) fn targets(&self) -> [(i32, i32); 4] {
        [
            (self.go.as_raw_fd(), GO_FD),
            (self.status.as_raw_fd(), STATUS_FD),
            (self.end.as_raw_fd(), END_FD),
            (self.teardown.as_raw_fd(), TEARDOWN_FD),
        ]
    }
}

/// A sandbox init that is waiting to be released. Dropping it (or
/// [`PendingInit::abort`]) kills and reaps the process. Do not reap the
/// pid yourself before `release` (or `start`) has returned.
///
/// A cold init ([`InitConfig::warm`] false) is released once with
/// [`PendingInit::release_into`]. A warm one is let into its cgroups with
/// [`PendingInit::enter_into`], which returns when its pid 1 waits for a
/// job, and given that job with [`PendingInit::start`]. ([`PendingInit::release`]
/// and [`PendingInit::enter`] leave it in the caller's cgroups.)
#[derive(Debug)]
pub struct PendingInit {
    pid: i32,
    program: PathBuf,
    go: Option<OwnedFd>,
    status: Option<File>,
    /// The read end of the pipe on which the job's end is told.
    end: Option<OwnedFd>,
    /// The write end of the pipe that holds the outer process's exit back.
    teardown: Option<OwnedFd>,
    /// A warm init's pid 1 (in our pid namespace), found once it is ready.
    pid1: Option<i32>,
    /// A warm init's config: what it builds before its job comes.
    warm: Option<Box<InitConfig>>,
    /// Why sending the job's config to a warm pid 1 failed (it had
    /// exited), kept for [`PendingInit::go`] to report if the status pipe
    /// says nothing better.
    go_failed: Option<io::Error>,
    /// Status bytes read but not yet a whole line.
    buf: Vec<u8>,
    greeted: bool,
    armed: bool,
}

/// A job whose `execve` succeeded.
#[derive(Debug)]
pub struct Started {
    /// The init's pid: the job leader in the caller's pid namespace, whom
    /// the caller must reap.
    pub pid: i32,
    /// Yields the job's raw wait status (4 bytes, native endian) once every
    /// process of the job has ended, before the leader's own exit (which
    /// first tears down the job's namespaces). End of file without it: the
    /// leader was killed first, and its own exit status is all there is.
    pub end: OwnedFd,
    /// Holds back the leader's exit after a job that ended normally, and
    /// with it the namespaces' teardown: close it once the job's end is
    /// recorded (the leader goes on by itself after a second, should the
    /// caller never close it).
    pub teardown: OwnedFd,
}

/// What [`PendingInit::wait_status`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// A warm init's pid 1 says it is ready for the job.
    Ready,
    /// Every writer of the status pipe is gone: the job's `execve`.
    Exec,
}

impl PendingInit {
    /// The init `pid` (our child, started by `program`) with the caller's
    /// ends of its descriptors; armed: dropping it kills and reaps `pid`.
    pub(super) fn new(pid: i32, program: PathBuf, ours: Channels) -> PendingInit {
        PendingInit {
            pid,
            program,
            go: Some(ours.go),
            status: Some(File::from(ours.status)),
            end: Some(ours.end),
            teardown: Some(ours.teardown),
            pid1: None,
            warm: None,
            go_failed: None,
            buf: Vec::new(),
            greeted: false,
            armed: true,
        }
    }

    /// Records that `config` (sent to the init) builds a warm sandbox.
    pub(super) fn set_config(&mut self, config: &InitConfig) {
        self.warm = config.warm.then(|| Box::new(config.clone()));
    }

    /// The init's pid: the future job leader, in the caller's pid namespace.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the init build the sandbox and start the job, in the caller's
    /// cgroups (see [`PendingInit::release_into`]); waits up to
    /// [`RELEASE_TIMEOUT`]. `Ok` means the job's `execve` succeeded (or the
    /// process was killed meanwhile: its exit status tells); the caller now
    /// owns (and must reap) [`Started::pid`]. On error the init has been
    /// killed and reaped, and the job never ran.
    pub fn release(self) -> Result<Started, InitError> {
        self.release_within(RELEASE_TIMEOUT)
    }

    /// [`PendingInit::release`] with a chosen time limit.
    pub fn release_within(self, limit: Duration) -> Result<Started, InitError> {
        self.release_into(Vec::new(), limit)
    }

    /// [`PendingInit::release`] into the job's cgroups: `cgroups` are
    /// `JobCgroup::entry`'s descriptors, which the init uses to move
    /// itself into every v1 cgroup and to fork pid 1 into the cgroup2
    /// directory before anything of the job runs (an init that cannot
    /// fails, and the job never runs). Empty: it stays in this process's.
    pub fn release_into(
        mut self,
        cgroups: Vec<OwnedFd>,
        limit: Duration,
    ) -> Result<Started, InitError> {
        let go_failed = self.send(&[GO], &cgroups, true)?;
        let quiet = sys::NoWakeupPreemption::enter();
        self.wait_status(Until::Exec, limit, go_failed)?;
        drop(quiet);
        self.started()
    }

    /// For a warm init: lets it go on where it is (pid 1, cgroup namespace,
    /// `/proc`) and waits up to `limit` until its pid 1 waits for the job.
    /// On error the init is not usable; drop it.
    pub fn enter(&mut self, limit: Duration) -> Result<(), InitError> {
        self.enter_into(Vec::new(), limit)
    }

    /// [`PendingInit::enter`] into the job's cgroups (`JobCgroup::entry`'s
    /// descriptors, as for [`PendingInit::release_into`]).
    pub fn enter_into(&mut self, cgroups: Vec<OwnedFd>, limit: Duration) -> Result<(), InitError> {
        let go_failed = self.send(&[GO], &cgroups, false)?;
        self.wait_status(Until::Ready, limit, go_failed)?;
        // Looked up now, so that `start` need not on the job's path.
        self.pid1 = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()));
        Ok(())
    }

    /// A duplicate of the pipe [`Started::end`] will be, for a caller that
    /// waits for the job's end before the job starts; `None` once it was
    /// handed over (or cannot be duplicated).
    pub fn end_duplicate(&self) -> Option<OwnedFd> {
        self.end.as_ref()?.try_clone().ok()
    }

    /// Gives a warm init that [`PendingInit::enter`]ed its job, whose config
    /// must fit the sandbox built ([`InitConfig::warm_mismatch`]; the init
    /// refuses it otherwise), and waits like [`PendingInit::release`]. The
    /// cgroup's limits and device filter must be the job's by now.
    pub fn start(mut self, job: &InitConfig, limit: Duration) -> Result<Started, InitError> {
        self.send_job(job)?;
        self.go(limit)
    }

    /// The first half of [`PendingInit::start`]: hands a warm init's pid 1
    /// the job's config, so it builds the job's part of the tree (its
    /// devices' nodes, binds, masks, `/work`) while the caller finishes the
    /// cgroup's limits and device filter. Nothing of the job runs before
    /// [`PendingInit::go`]; dropping the init instead kills it. The
    /// cgroup's limits must be the job's by now (the tree's pages are
    /// charged to them).
    pub fn send_job(&mut self, job: &InitConfig) -> Result<(), InitError> {
        job.validate()?;
        let json = serde_json::to_vec(job).map_err(|e| {
            InitError::Pipe(io::Error::other(format!(
                "encoding the job's sandbox config as JSON: {e}"
            )))
        })?;
        let framed = frame::encode(&json);
        // Opened here, in the host's mount namespace: the warm pid 1 has
        // detached the host root already. Only for what it did not build
        // ahead (pid 1 checks that the job fits it).
        let part;
        let to_build = match &self.warm {
            Some(warm) => {
                part = warm.job_part(job);
                &part
            }
            None => job,
        };
        let sources = hostfds::open_all(to_build).map_err(InitError::HostSource)?;
        // A warm sandbox is built in SCHED_IDLE (the shim's class); the
        // outer process ends like the job, and pid 1 (which resets itself
        // too, but must first get the CPU to read the config) starts it, in
        // the normal one. Failing here only costs speed.
        for pid in std::iter::once(self.pid).chain(self.pid1) {
            if let Err(e) = sys::set_normal_priority(pid) {
                tracing::warn!(pid, "resetting the sandbox init's priority: {e}");
            }
        }
        self.go_failed = self.send_with_sources(&framed, &sources)?;
        Ok(())
    }

    /// Sends the framed config with the job's host sources (see
    /// `hostfds`); a broken pipe is kept like [`PendingInit::send`]'s.
    fn send_with_sources(
        &mut self,
        framed: &[u8],
        sources: &[OwnedFd],
    ) -> Result<Option<io::Error>, InitError> {
        let pid = self.pid;
        let Some(go) = self.go.as_ref() else {
            return Err(InitError::Release {
                pid,
                source: io::Error::other("the release socket is already closed"),
            });
        };
        match sys::send_with_fds(go.as_fd(), framed, sources) {
            Ok(()) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Some(e)),
            Err(source) => Err(InitError::Release { pid, source }),
        }
    }

    /// The second half of [`PendingInit::start`], once the cgroup's limits
    /// and device filter are the job's: lets pid 1 start the job with the
    /// config [`PendingInit::send_job`] sent, and waits like
    /// [`PendingInit::release`].
    pub fn go(mut self, limit: Duration) -> Result<Started, InitError> {
        let go_failed = match self.go_failed.take() {
            Some(e) => Some(e),
            None => self.send(&[GO], &[], true)?,
        };
        let quiet = sys::NoWakeupPreemption::enter();
        self.wait_status(Until::Exec, limit, go_failed)?;
        drop(quiet);
        self.started()
    }

    /// After the job's `execve`: hands over the pid and the end pipe.
    fn started(mut self) -> Result<Started, InitError> {
        let end = self.end.take().ok_or_else(|| InitError::Release {
            pid: self.pid,
            source: io::Error::other("the end pipe is already taken"),
        })?;
        let teardown = self.teardown.take().ok_or_else(|| InitError::Release {
            pid: self.pid,
            source: io::Error::other("the teardown pipe is already taken"),
        })?;
        Ok(Started {
            pid: self.pid,
            end,
            teardown,
        })
    }

    /// Writes `bytes` to the release socket with `fds` attached (closing
    /// it if `close`). An init that failed while building the sandbox has
    /// exited and closed the socket; its status pipe says why, so a broken
    /// pipe is returned for [`PendingInit::wait_status`] to report only if
    /// that says nothing.
    fn send(
        &mut self,
        bytes: &[u8],
        fds: &[OwnedFd],
        close: bool,
    ) -> Result<Option<io::Error>, InitError> {
        let pid = self.pid;
        let Some(go) = self.go.take() else {
            return Err(InitError::Release {
                pid,
                source: io::Error::other("the release socket is already closed"),
            });
        };
        let failed = match sys::send_with_fds(go.as_fd(), bytes, fds) {
            Ok(()) => None,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Some(e),
            Err(source) => return Err(InitError::Release { pid, source }),
        };
        if !close {
            self.go = Some(go);
        }
        Ok(failed)
    }

    /// Reads status lines until `until` (or an error, a timeout, or the
    /// end of the pipe before `Ready`).
    fn wait_status(
        &mut self,
        until: Until,
        limit: Duration,
        go_failed: Option<io::Error>,
    ) -> Result<(), InitError> {
        let pid = self.pid;
        let release_err = |source| InitError::Release { pid, source };
        let Some(status) = self.status.as_mut() else {
            return Err(release_err(io::Error::other(
                "status pipe already consumed",
            )));
        };
        let deadline = Instant::now() + limit;
        let mut chunk = [0u8; 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(InitError::Timeout { pid, after: limit });
            }
            let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(status.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(release_err(e.into())),
            }
            let n = match status.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(release_err(e)),
            };
            if n > 0 {
                self.buf.extend_from_slice(&chunk[..n]);
            }
            while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                match decode(&text) {
                    Some(StatusLine::Hello { name }) if name == HELLO => self.greeted = true,
                    Some(StatusLine::Ready) if until == Until::Ready => return Ok(()),
                    Some(StatusLine::Hello { .. } | StatusLine::Ready) => {
                        return Err(InitError::Protocol { pid, line: text })
                    }
                    Some(StatusLine::Warning { stage, message }) => {
                        tracing::warn!(pid, %stage, "sandbox init: {message}");
                    }
                    Some(StatusLine::Error { stage, message }) => {
                        return Err(InitError::Setup {
                            pid,
                            stage,
                            message,
                        });
                    }
                    None => return Err(InitError::Protocol { pid, line: text }),
                }
            }
            if n == 0 {
                if !self.buf.is_empty() {
                    let line = String::from_utf8_lossy(&self.buf).into_owned();
                    return Err(InitError::Protocol { pid, line });
                }
                if !self.greeted {
                    return Err(InitError::NotInit {
                        pid,
                        program: self.program.clone(),
                    });
                }
                if let Some(e) = go_failed {
                    return Err(release_err(e));
                }
                if until == Until::Ready {
                    return Err(release_err(io::Error::other(
                        "the warm sandbox init ended before it was ready for a job",
                    )));
                }
                // Every writer is gone: the job's execve closed the last one.
                self.status = None;
                self.armed = false;
                return Ok(());
            }
        }
    }

    /// Kills and reaps the init without starting the job.
    pub fn abort(self) {
        drop(self);
    }
}

impl Drop for PendingInit {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Err(e) = sys::kill_raw(self.pid, libc::SIGKILL) {
            tracing::warn!(pid = self.pid, "killing sandbox init: {e}");
        }
        if let Err(e) = sys::wait_pid(self.pid) {
            tracing::warn!(pid = self.pid, "reaping sandbox init: {e}");
        }
        // A warm init's pid 1 dies with the outer process (PDEATHSIG) and
        // is then the child of the nearest subreaper: the shim, which
        // would otherwise exit first and leave it to the host's init (a
        // zombie where that init never reaps). Not a subreaper, or reaped
        // by the shim's reaper thread first: ECHILD, nothing to do. Only
        // waited for, never signalled: its pid may be reused once reaped.
        if let Some(pid1) = self.pid1 {
            match sys::wait_pid(pid1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {}
                Err(e) => tracing::warn!(pid = pid1, "reaping a warm sandbox's pid 1: {e}"),
            }
        }
    }
}
