//! The shim process: `joblet-shim --job-dir DIR` calls [`run_shim`].
//!
//! Sequence: take the lock on fd 3, reset ignored signals, catch
//! SIGTERM/SIGINT/SIGHUP, clear the signal mask, read the spec from stdin, leave the daemon's
//! terminal (a session or process group of its own), write `shim.pid`, open `output.log`, bind
//! `control.sock`, start the helper threads, spawn the job through the
//! [`Runner`], write `job.pid`, supervise until the leader exits (kill the
//! rest of its process group and reap it; the shim is a child subreaper) or
//! the runner tells the job's end first (`Runner::early_exit`: a sandbox
//! init does before tearing its namespaces down), drain the output, write
//! `exit.json`, close the notification pipe (fd 4), reap a leader still
//! exiting, and only then let the runner clean up (`Runner::cleanup`). A
//! warm shim ([`run_warm_shim_with`]) does the same once its job comes.

mod ahead;
mod close;
mod control;
mod early;
mod interactive;
mod outcome;
mod output;
mod reaper;
mod signals;
mod spec_in;
mod supervise;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use self::ahead::Ahead;
use self::close::close_job;
use self::spec_in::{parse_spec, read_spec, read_stdin, read_warm_spec, ClaimWatch};
use crate::atomic::{prepare_atomic, tmp_path, write_atomic};
use crate::inherited_fds::{self, Fd3Error, READY_BUILT, READY_NOT_BUILT};
use crate::jobdir::JobDir;
use crate::priority;
use crate::procstat::{self, ProcStatError, PROC_ROOT};
use crate::runner::{HostRunner, Runner};
use crate::spec::{Outcome, ShimExit, ShimSpec};

/// How long the rest of the job's process group gets to die and its pipes
/// to reach end-of-file after its leader exits and the group is killed.
const DRAIN: Duration = Duration::from_secs(2);

/// Errors that keep the shim from doing its job. Except for the lock and
/// "already ran" errors, the shim records them in `exit.json` as
/// [`Outcome::FailedToStart`] before returning them.
#[derive(Debug, thiserror::Error)]
pub enum ShimRunError {
    #[error("{path} was not passed as fd 3 ({source}): `shim` is started by the daemon, which locks that file and passes it")]
    NoLock { path: PathBuf, source: Fd3Error },

    #[error("fd 3 is not {path}: `shim` is started by the daemon, which locks that file and passes it as fd 3")]
    WrongLock { path: PathBuf },

    #[error("another process holds the lock on {path}: a shim is already running for this job")]
    LockHeld { path: PathBuf },

    #[error("cannot set up the lock on {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },

    #[error("cannot install handlers for SIGTERM/SIGINT/SIGHUP: {source}")]
    Signals { source: io::Error },

    #[error("cannot clear the signal mask: {source}")]
    SignalMask { source: Errno },

    #[error("cannot mark inherited descriptors close-on-exec: {source}")]
    StrayFds { source: io::Error },

    #[error("{path} exists: a shim already ran for this job; use a fresh job directory")]
    AlreadyRan { path: PathBuf },

    #[error("cannot read the shim spec from stdin: {source}")]
    ReadSpec { source: io::Error },

    #[error("invalid shim spec on stdin: {source}")]
    ParseSpec { source: serde_json::Error },

    #[error("no shim spec on stdin: the daemon sends one, then closes stdin")]
    NoSpec,

    #[error("this warm shim was started for job {warm}, not {job}")]
    WrongJob { warm: String, job: String },

    #[error("cannot reopen stdin as /dev/null: {source}")]
    NullStdin { source: io::Error },

    #[error("cannot identify the shim process: {source}")]
    ProcStat { source: ProcStatError },

    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },

    #[error("cannot open {path}: {source}")]
    OpenLog { path: PathBuf, source: io::Error },

    #[error("cannot listen on {path}: {source} (unix socket paths are limited to 107 bytes)")]
    Bind { path: PathBuf, source: io::Error },

    #[error("cannot create the output pipes: {source}")]
    Pipe { source: Errno },

    #[error("cannot start the shim's {what} thread: {source}")]
    Thread {
        what: &'static str,
        source: io::Error,
    },
}

/// A warm shim (`joblet-shim --job-dir DIR --warm`): started before its
/// job is known, it reads a [`WarmSpec`] line from stdin, sets itself up
/// (in `SCHED_IDLE`, see `priority`) and has `runner` build the sandbox ahead
/// ([`Runner::prepare`]), then waits for the rest of stdin: the job's
/// [`ShimSpec`], after which it runs the job like [`run_shim_with`]. Stdin
/// closed without a spec (the daemon went away or no longer needs it)
/// discards the sandbox and removes the files the shim made: `Ok(None)`, no
/// `exit.json`.
pub fn run_warm_shim_with(
    job_dir: &Path,
    runner: &dyn Runner,
) -> Result<Option<ShimExit>, ShimRunError> {
    let Taken {
        dir,
        lock,
        notify,
        ready: ready_pipe,
    } = take_job_dir(job_dir)?;
    // First (the daemon normally did it already), so every thread and
    // process started from here inherits it.
    if let Err(e) = priority::enter_idle() {
        tracing::warn!("cannot put the warm shim in SCHED_IDLE: {e}");
    }
    let result = process_state().and_then(|signals| {
        let warm = read_warm_spec()?;
        let ready = setup(&dir, signals, |stdout, stderr| {
            if warm.runner.is_some() {
                runner.fork_ahead(stdout, stderr);
            }
        })?;
        let watch = ClaimWatch::start()?;
        Ok((warm, ready, watch))
    });
    let (warm, ready, watch) = match result {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("{e}");
            discard_files(&dir, lock);
            return Err(e);
        }
    };
    let mut ahead = None;
    // Without runner settings there is nothing to build ahead.
    let mut built = true;
    if let Some(settings) = &warm.runner {
        let t0 = Instant::now();
        match runner.prepare(settings, ready.out_w.as_fd(), ready.err_w.as_fd()) {
            Ok(()) => {
                ahead = runner
                    .prepared_leader()
                    .map(|leader| Ahead::start(&dir, leader, ready.events_tx.clone()));
                tracing::info!(
                    elapsed_us = t0.elapsed().as_micros() as u64,
                    "warm sandbox prepared; waiting for the job"
                )
            }
            // The job will get a fresh sandbox, which reports the problem.
            Err(e) => {
                tracing::warn!("cannot prepare a warm sandbox: {e}");
                built = false;
            }
        }
    }
    tell_ready(ready_pipe, built);
    // This thread now waits for the claim itself, in the normal class: the
    // daemon's write wakes the thread that starts the job, with no hand-off
    // on the way. The shim's other threads leave SCHED_IDLE once the job
    // runs (`run_job`).
    watch.stop();
    if let Err(e) = priority::leave_idle_main() {
        tracing::warn!("the shim's main thread stays in SCHED_IDLE: {e}");
    }
    let spec = match read_stdin().and_then(|buf| parse_spec(&buf)) {
        Ok(Some(spec)) if spec.job_id == warm.job_id => spec,
        Ok(Some(spec)) => {
            let e = ShimRunError::WrongJob {
                warm: warm.job_id,
                job: spec.job_id,
            };
            runner.discard();
            return Err(finish_failed(&dir, lock, e));
        }
        Ok(None) => {
            tracing::info!(job_id = %warm.job_id, "no job came for this warm shim; discarding it");
            // The sandbox first (its cgroup goes), `shim.lock` last: a
            // daemon restarted meanwhile may start this job id's queued job
            // in a fresh shim, in the same directory and cgroup, and waits
            // for the lock to be free before it does.
            runner.discard();
            discard_files(&dir, lock);
            return Ok(None);
        }
        Err(e) => {
            runner.discard();
            return Err(finish_failed(&dir, lock, e));
        }
    };
    tracing::debug!(job_id = %spec.job_id, command = %spec.command, "warm shim starting its job");
    let run = run_job(&dir, spec, ready, runner, ahead, true);
    close_job(&dir, &run, notify, runner);
    drop(lock);
    Ok(Some(run.exit))
}

/// Bytes kept for the exit record (`exit.json`) from the shim's start: an
/// exit record is a few hundred bytes, its message at most a few KiB.
const EXIT_RESERVE: usize = 16 * 1024;

/// Records `e` as the job's failure to start (`exit.json`) and returns it.
fn finish_failed(dir: &JobDir, lock: File, e: ShimRunError) -> ShimRunError {
    tracing::error!("{e}");
    let exit = failed_to_start(format!("shim setup failed: {e}"), None, 0);
    if let Err(source) = write_exit(dir, &exit) {
        tracing::error!("cannot write {}: {source}", dir.exit_path().display());
    }
    remove_unused_tmp(dir);
    drop(lock);
    e
}

/// Removes `job.pid`'s temporary file, made ahead in `setup`, which is
/// still there when the job never started.
fn remove_unused_tmp(dir: &JobDir) {
    let _ = std::fs::remove_file(tmp_path(&dir.job_pid_path()));
}

/// Removes what a warm shim that never got a job made in its directory.
/// `shim.lock` goes while still locked, so a shim started for the same
/// directory later never finds it held. The directory itself stays: a
/// restarted daemon tells a job it recorded as started, but whose shim
/// never got it, by its directory without shim files; the daemon removes
/// the directories of warm shims no job took.
fn discard_files(dir: &JobDir, lock: File) {
    remove_shim_files(dir);
    drop(lock);
}

/// Removes the files a shim makes in its job directory before its job
/// starts (control socket, output log, pid files, its log, `shim.lock`,
/// and the exit record of a shim that never got its job): what a shim that
/// never ran its job leaves, also when it was killed. The job's uploads
/// (`work/`) stay.
pub fn remove_shim_files(dir: &JobDir) {
    for path in [
        dir.exit_path(),
        dir.control_sock_path(),
        dir.input_sock_path(),
        dir.output_log_path(),
        dir.shim_pid_path(),
        tmp_path(&dir.job_pid_path()),
        tmp_path(&dir.exit_path()),
        dir.shim_log_path(),
        dir.lock_path(),
    ] {
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Runs the shim for the job directory `job_dir` with [`HostRunner`].
///
/// Call it first thing in `main` (descriptor 3 must still be the inherited
/// lock), with a tracing subscriber writing to stderr (`shim.log`); exit the
/// process soon after it returns: helper threads stay blocked (accepting
/// control connections, waiting for signals, reaping).
pub fn run_shim(job_dir: &Path) -> Result<ShimExit, ShimRunError> {
    run_shim_with(job_dir, &HostRunner)
}

/// [`run_shim`] with another [`Runner`] (an isolating one).
pub fn run_shim_with(job_dir: &Path, runner: &dyn Runner) -> Result<ShimExit, ShimRunError> {
    // A cold shim has no ready pipe to keep.
    let Taken {
        dir, lock, notify, ..
    } = take_job_dir(job_dir)?;
    let result = process_state().and_then(|signals| {
        let spec = read_spec()?.ok_or(ShimRunError::NoSpec)?;
        tracing::info!(job_id = %spec.job_id, command = %spec.command, "shim starting");
        let ready = setup(&dir, signals, |_, _| {})?;
        Ok(run_job(&dir, spec, ready, runner, None, false))
    });
    let run = match result {
        Ok(run) => run,
        Err(e) => {
            tracing::error!("{e}");
            let mut exit = failed_to_start(format!("shim setup failed: {e}"), None, 0);
            if matches!(e, ShimRunError::NoSpec) {
                exit.outcome = Outcome::NeverGiven;
            }
            close_job(
                &dir,
                &JobRun {
                    exit,
                    unreaped: None,
                    control: None,
                    input_sock: false,
                },
                notify,
                runner,
            );
            drop(lock);
            return Err(e);
        }
    };
    close_job(&dir, &run, notify, runner);
    drop(lock);
    Ok(run.exit)
}

/// Puts the shim's signal state and descriptors in order, for itself and
/// for the job, which inherits them: ignored signals reset, SIGTERM, SIGINT
/// and SIGHUP caught, nothing blocked, inherited strays close-on-exec.
fn process_state() -> Result<signal_hook::iterator::Signals, ShimRunError> {
    match crate::signal_defaults::reset_ignored() {
        Ok(sigs) if !sigs.is_empty() => tracing::info!("reset ignored signals {sigs:?} to default"),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot reset ignored signals: {e}"),
    }
    let signals = signals::install().map_err(|source| ShimRunError::Signals { source })?;
    SigSet::empty()
        .thread_set_mask()
        .map_err(|source| ShimRunError::SignalMask { source })?;
    inherited_fds::cloexec_above(inherited_fds::LOCK_FD)
        .map_err(|source| ShimRunError::StrayFds { source })?;
    Ok(signals)
}

/// What a shim takes over first, cold or warm.
struct Taken {
    dir: JobDir,
    /// `shim.lock`, held for the shim's whole life.
    lock: File,
    /// The exit notification pipe, when the daemon passed one.
    notify: Option<OwnedFd>,
    /// A warm shim's ready pipe, when the daemon passed one.
    ready: Option<OwnedFd>,
}

/// Takes the lock (fd 3), the notification pipe (fd 4) and a warm shim's
/// ready pipe (fd 5) before anything is opened, and refuses a job
/// directory whose job already ran.
fn take_job_dir(job_dir: &Path) -> Result<Taken, ShimRunError> {
    let dir = JobDir::new(job_dir);
    let lock = take_lock(&dir)?;
    let notify = inherited_fds::take_notify();
    let ready = inherited_fds::take_ready();
    let exit_path = dir.exit_path();
    if exit_path.exists() {
        return Err(ShimRunError::AlreadyRan { path: exit_path });
    }
    Ok(Taken {
        dir,
        lock,
        notify,
        ready,
    })
}

/// Tells the daemon, on the ready pipe, that this warm shim has built its
/// sandbox as far as it goes without the job ([`READY_BUILT`]) or found it
/// could not ([`READY_NOT_BUILT`]): one byte, then the pipe closes. A shim
/// that dies before closes it without a byte: nothing is being built any
/// more either.
fn tell_ready(ready: Option<OwnedFd>, built: bool) {
    if let Some(fd) = ready {
        let word = if built { READY_BUILT } else { READY_NOT_BUILT };
        if let Err(e) = File::from(fd).write_all(&[word]) {
            tracing::debug!("cannot tell the daemon the warm sandbox is ready: {e}");
        }
    }
}

/// Fd 3 must be the daemon's locked `shim.lock`; keep it, out of the job's
/// reach.
fn take_lock(dir: &JobDir) -> Result<File, ShimRunError> {
    let path = dir.lock_path();
    let fd = inherited_fds::take_fd3().map_err(|source| ShimRunError::NoLock {
        path: path.clone(),
        source,
    })?;
    let lock = File::from(fd);
    let lock_err = |source| ShimRunError::Lock {
        path: path.clone(),
        source,
    };
    let ours = lock.metadata().map_err(lock_err)?;
    let theirs = std::fs::metadata(&path).map_err(lock_err)?;
    if (ours.dev(), ours.ino()) != (theirs.dev(), theirs.ino()) {
        return Err(ShimRunError::WrongLock { path });
    }
    fcntl(&lock, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map_err(|e| lock_err(io::Error::from(e)))?;
    // Already ours if the daemon locked it; taken now if it did not.
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(ShimRunError::LockHeld { path }),
        Err(std::fs::TryLockError::Error(e)) => Err(lock_err(e)),
    }
}

/// Everything set up before the job is spawned.
struct Ready {
    out_w: OwnedFd,
    err_w: OwnedFd,
    capture: output::Capture,
    events: mpsc::Receiver<supervise::Event>,
    /// For the runner's early word of the job's end.
    events_tx: mpsc::Sender<supervise::Event>,
    reaper: reaper::Reaper,
    finished: Arc<AtomicBool>,
    /// Set once a stop, kill or timeout has begun (`state` says so).
    stopping: Arc<AtomicBool>,
    control: control::Control,
}

/// Sets the shim up for its job; `before_threads` gets the job's output
/// pipes while the shim still has a single thread.
fn setup(
    dir: &JobDir,
    signals: signal_hook::iterator::Signals,
    before_threads: impl FnOnce(BorrowedFd<'_>, BorrowedFd<'_>),
) -> Result<Ready, ShimRunError> {
    leave_terminal();
    // Orphaned job processes become the shim's children, so it can reap
    // them and know when the whole group is gone.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("cannot become a child subreaper: {e}; orphaned job processes go to init");
    }
    let me = std::process::id() as i32;
    let rec = procstat::pid_record(Path::new(PROC_ROOT), me)
        .map_err(|source| ShimRunError::ProcStat { source })?;
    write_json(&dir.shim_pid_path(), &rec)?;
    // The files written once the job runs get their inodes now (see
    // `prepare_atomic`); `close_job` removes what is left unused. The exit
    // record's also gets its space: a job that fills the disk with output
    // still has its outcome recorded.
    for (path, reserve) in [(dir.job_pid_path(), 0), (dir.exit_path(), EXIT_RESERVE)] {
        if let Err(e) = prepare_atomic(&path, reserve) {
            tracing::warn!(
                "cannot create the temporary file for {}: {e}",
                path.display()
            );
        }
    }

    let log_path = dir.output_log_path();
    let log = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|source| ShimRunError::OpenLog {
            path: log_path.clone(),
            source,
        })?;
    let listener = bind_control(&dir.control_sock_path())?;
    let (out_r, out_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|source| ShimRunError::Pipe { source })?;
    let (err_r, err_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|source| ShimRunError::Pipe { source })?;
    before_threads(out_w.as_fd(), err_w.as_fd());

    let thread_err = |what| move |source| ShimRunError::Thread { what, source };
    let (ev_tx, events) = mpsc::channel();
    signals::start(signals, ev_tx.clone()).map_err(thread_err("signal"))?;
    let finished = Arc::new(AtomicBool::new(false));
    let stopping = Arc::new(AtomicBool::new(false));
    let control = control::start(listener, ev_tx.clone(), finished.clone(), stopping.clone())
        .map_err(thread_err("control"))?;
    let reaper = reaper::start_reaper(ev_tx.clone()).map_err(thread_err("reaper"))?;
    let capture = output::start(log, out_r, err_r).map_err(thread_err("output"))?;
    Ok(Ready {
        out_w,
        err_w,
        capture,
        events,
        events_tx: ev_tx,
        reaper,
        finished,
        stopping,
        control,
    })
}

/// A job run to its end.
struct JobRun {
    exit: ShimExit,
    /// The job's leader when its end was told before its exit: reaped by
    /// [`close_job`].
    unreaped: Option<Pid>,
    /// The control socket's server, when the job ran: [`close_job`] removes
    /// the socket and lets the answer that ended the job go out.
    control: Option<control::Control>,
    /// An interactive job's `input.sock` may exist: [`close_job`] removes it.
    input_sock: bool,
}

/// Spawns and supervises the job; returns its exit record. `ahead`: what
/// a warm shim did for its prepared leader before the job came.
/// `leave_idle`: the shim's threads are still in a warm shim's `SCHED_IDLE`
/// (moved to the normal class once the job runs: until then they only
/// wait, and the job's start should not wait for them).
fn run_job(
    dir: &JobDir,
    spec: ShimSpec,
    ready: Ready,
    runner: &dyn Runner,
    ahead: Option<Ahead>,
    leave_idle: bool,
) -> JobRun {
    let Ready {
        out_w,
        err_w,
        capture,
        events,
        events_tx,
        reaper,
        finished,
        stopping,
        control,
    } = ready;
    let spawned = if spec.stdio.is_batch() {
        runner.spawn(&spec, out_w, err_w)
    } else {
        match interactive::start(dir, &spec.stdio, out_w, err_w) {
            Ok(io) => runner.spawn_interactive(&spec, io),
            Err(e) => Err(crate::runner::RunnerError::Isolation(format!(
                "setting up the job's {} input: {e}",
                if spec.stdio.tty.is_some() {
                    "terminal and"
                } else {
                    "standard"
                }
            ))),
        }
    };
    let pid = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            tracing::error!("{e}");
            drop(reaper);
            let written = capture.finish(DRAIN);
            return JobRun {
                exit: failed_to_start(e.to_string(), None, written.bytes),
                unreaped: None,
                control: None,
                input_sock: spec.stdio.is_interactive(),
            };
        }
    };
    if leave_idle {
        if let Err(e) = priority::leave_idle_threads() {
            tracing::warn!("the shim's threads stay in SCHED_IDLE: {e}");
        }
    }
    let ahead = ahead.and_then(|a| a.for_leader(pid));
    let mut early_end = ahead.as_ref().is_some_and(|a| a.watching);
    if !early_end {
        if let Some(fd) = runner.early_exit() {
            match early::watch(fd, events_tx) {
                Ok(()) => early_end = true,
                Err(e) => tracing::warn!(
                    "cannot start the job-end thread: {e}; waiting for the leader instead"
                ),
            }
        }
    }
    if !early_end {
        // The end will come from the leader's exit: nothing may hold it.
        runner.end_told();
    }
    let started = now_unix_ms();
    tracing::info!("job leader started: pid {pid}");
    if !ahead.as_ref().is_some_and(|a| a.publish_record(dir)) {
        match procstat::pid_record(Path::new(PROC_ROOT), pid.as_raw()) {
            Ok(rec) => {
                if let Err(e) = write_json(&dir.job_pid_path(), &rec) {
                    tracing::error!("{e}");
                }
            }
            Err(e) => tracing::error!("cannot record the job's pid {pid}: {e}"),
        }
    }
    reaper.set_leader(pid);

    let ended = supervise::supervise(
        pid,
        events,
        &reaper,
        supervise::Rules {
            timeout: spec.timeout_ms.map(Duration::from_millis),
            stop_grace: Duration::from_millis(spec.stop_grace_ms),
            fence: spec.fence.as_deref(),
            stopping: &stopping,
        },
        early_end,
    );
    finished.store(true, Ordering::SeqCst);
    // Everything in the job's group was killed; once its members are reaped
    // no job process is left, and their pipe ends are closed. An early word
    // of the job's end means that is so already (the leader, still
    // exiting, has let go of the pipes).
    let deadline = Instant::now() + DRAIN;
    if ended.unreaped.is_none() && !reaper.wait_group(DRAIN) {
        tracing::warn!("processes of the job's group were still dying after {DRAIN:?}");
    }
    let written = capture.finish(deadline.saturating_duration_since(Instant::now()));
    let death_reason = runner.finish();

    let (outcome, exit_code, signal, mut message) = match ended.status {
        Ok(status) => outcome::classify(status, ended.reason),
        Err(e) => (
            Outcome::Signaled,
            None,
            None,
            format!("the job's exit status was lost: {e}"),
        ),
    };
    if let Some(reason) = death_reason {
        message = format!("{reason} ({message})");
    }
    if let Some(err) = written.error {
        message.push_str(&format!(
            " (output truncated: {} bytes discarded after {err})",
            written.discarded
        ));
    }
    JobRun {
        exit: ShimExit {
            outcome,
            exit_code,
            signal,
            message,
            started_unix_ms: Some(started),
            ended_unix_ms: now_unix_ms(),
            log_bytes: written.bytes,
        },
        unreaped: ended.unreaped,
        control: Some(control),
        input_sock: spec.stdio.is_interactive(),
    }
}

fn failed_to_start(message: String, started: Option<i64>, log_bytes: u64) -> ShimExit {
    ShimExit {
        outcome: Outcome::FailedToStart,
        exit_code: None,
        signal: None,
        message,
        started_unix_ms: started,
        ended_unix_ms: now_unix_ms(),
        log_bytes,
    }
}

/// Keeps terminal signals and the daemon's terminal away from the shim and
/// its job. With a controlling terminal the shim starts a session of its
/// own (the job could otherwise open it as `/dev/tty`); without one a
/// process group of its own is enough, and cheaper: `setsid` also creates a
/// scheduler autogroup, which takes up to ~3 ms on some calls.
fn leave_terminal() {
    let has_terminal = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/tty")
    {
        Ok(_) => true,
        // ENXIO: this session has no controlling terminal.
        Err(e) => e.raw_os_error() != Some(libc::ENXIO),
    };
    let left = if has_terminal {
        nix::unistd::setsid().map(drop)
    } else {
        nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))
    };
    if let Err(e) = left {
        // EPERM: already a session or group leader, e.g. started by hand.
        tracing::warn!(has_terminal, "leaving the daemon's terminal: {e}");
    }
}

fn bind_control(path: &Path) -> Result<UnixListener, ShimRunError> {
    let bind_err = |source| ShimRunError::Bind {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
    Ok(listener)
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), ShimRunError> {
    let write_err = |source| ShimRunError::Write {
        path: path.to_owned(),
        source,
    };
    let bytes = serde_json::to_vec(value).map_err(|e| write_err(io::Error::other(e)))?;
    write_atomic(path, &bytes).map_err(write_err)
}

fn write_exit(dir: &JobDir, exit: &ShimExit) -> Result<(), ShimRunError> {
    write_json(&dir.exit_path(), exit)
}

pub(crate) fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
