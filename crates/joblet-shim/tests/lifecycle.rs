//! The shim end to end: launch the real shim binary, run jobs, and check
//! output.log, exit.json and the processes left behind.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use joblet_core::joblog::Stream;
use joblet_shim::{read_exit, reattach, request_kill, request_stop, Outcome, ShimError};

#[tokio::test]
async fn echo_to_stdout_and_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "echo out; echo err >&2"));
    let pid = h.pid();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(exit.exit_code, Some(0));
    assert_eq!(exit.signal, None);
    assert_eq!(exit.message, "exited with code 0");
    assert_eq!(exit.log_bytes, 8);
    let started = exit.started_unix_ms.unwrap();
    assert!(started <= exit.ended_unix_ms);

    let recs = records(&dir, 0);
    let mut next = 0;
    for r in &recs {
        assert_eq!(r.seq, next, "{recs:?}");
        next += r.data.len() as u64;
    }
    assert_eq!(next, 8);
    let of = |s: Stream| -> Vec<u8> {
        recs.iter()
            .filter(|r| r.stream == s)
            .flat_map(|r| r.data.clone())
            .collect()
    };
    assert_eq!(of(Stream::Stdout), b"out\n");
    assert_eq!(of(Stream::Stderr), b"err\n");

    // The record comes first, on the launcher's pipe; exit.json, the
    // control socket's removal and the cleanup follow; the shim then exits.
    assert!(wait_gone(pid, Duration::from_secs(10)), "shim {pid} stayed");
    assert_eq!(read_exit(&dir).unwrap(), Some(exit));
    assert_eq!(dir.read_shim_pid().unwrap().unwrap().pid, pid);
    assert!(dir.read_job_pid().unwrap().is_some());
    assert!(!dir.control_sock_path().exists());
    assert!(
        dir.closed_control_sock_path().exists(),
        "renamed, not removed"
    );
    assert!(reattach(&dir).unwrap().is_none());
}

#[tokio::test]
async fn the_launcher_hears_the_end_on_its_pipe_before_exit_json() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    // The job puts a directory where exit.json goes, so the shim cannot
    // write it: only the record on the notification pipe tells the end.
    let script = format!("mkdir {}; exit 4", dir.exit_path().display());
    let exit = finish(start(&dir, &sh(tmp.path(), &script))).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(exit.exit_code, Some(4), "{exit:?}");
    assert!(dir.exit_path().is_dir());
}

#[tokio::test]
async fn exit_code_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let exit = finish(start(&dir, &sh(tmp.path(), "exit 3"))).await;
    assert_eq!(exit.outcome, Outcome::Exited);
    assert_eq!(exit.exit_code, Some(3));
    assert_eq!(exit.message, "exited with code 3");
    assert_eq!(exit.log_bytes, 0);
}

#[tokio::test]
async fn job_killed_by_a_signal_nobody_sent_is_signaled() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let exit = finish(start(&dir, &sh(tmp.path(), "kill -SEGV $$"))).await;
    assert_eq!(exit.outcome, Outcome::Signaled, "{exit:?}");
    assert_eq!((exit.exit_code, exit.signal), (Some(139), Some(11)));
    assert!(
        exit.message.starts_with("killed by signal 11 (SIGSEGV)"),
        "{}",
        exit.message
    );
}

#[tokio::test]
async fn nonexistent_command_fails_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let exit = finish(start(&dir, &spec(tmp.path(), "nosuchcmd-joblet", &[]))).await;
    assert_eq!(exit.outcome, Outcome::FailedToStart, "{exit:?}");
    assert_eq!(
        exit.message,
        "failed to start: No such file or directory (os error 2): nosuchcmd-joblet"
    );
    assert_eq!(
        (exit.exit_code, exit.signal, exit.started_unix_ms),
        (None, None, None)
    );
    assert_eq!(exit.log_bytes, 0);
    assert!(dir.read_job_pid().unwrap().is_none());
}

#[tokio::test]
async fn missing_working_directory_fails_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let exit = finish(start(&dir, &spec(&tmp.path().join("nope"), "true", &[]))).await;
    assert_eq!(exit.outcome, Outcome::FailedToStart, "{exit:?}");
    assert!(
        exit.message.contains("No such file or directory"),
        "{}",
        exit.message
    );
}

#[tokio::test]
async fn job_gets_exactly_its_env_cwd_and_stdio_and_secrets_stay_off_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut s = sh(
        &work,
        "pwd; echo \"FOO=$FOO\"; echo \"HOME=${HOME-unset}\"; readlink /proc/$$/fd/0; ls /proc/$$/fd",
    );
    s.env.insert("FOO".into(), "bar baz".into());
    s.env.insert("API_TOKEN".into(), "tok-7f3a9c-secret".into());
    let exit = finish(start(&dir, &s)).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    let out = output(&dir);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], work.to_str().unwrap());
    assert_eq!(lines[1], "FOO=bar baz");
    assert_eq!(lines[2], "HOME=unset");
    assert_eq!(lines[3], "/dev/null");
    // Only stdin/stdout/stderr: neither the lock (fd 3) nor any other shim
    // descriptor leaks into the job.
    assert_eq!(&lines[4..], &["0", "1", "2"], "{out}");

    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        if let Ok(bytes) = std::fs::read(&p) {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains("tok-7f3a9c-secret"),
                "secret in {}",
                p.display()
            );
        }
    }
}

/// The job starts with no blocked and no ignored standard signals, even
/// when its launcher had some (both are inherited across spawn and exec).
#[tokio::test]
async fn job_starts_with_default_signal_state() {
    use nix::sys::signal::{signal, SigHandler, SigSet, SigmaskHow, Signal};
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGTERM);
    blocked.add(Signal::SIGUSR1);
    let old_mask = blocked.thread_swap_mask(SigmaskHow::SIG_BLOCK).unwrap();
    // SAFETY: SIG_IGN installs no handler. Other tests' shims may inherit
    // it meanwhile; they reset it like this one must.
    let old_usr2 = unsafe { signal(Signal::SIGUSR2, SigHandler::SigIgn) }.unwrap();
    let h = start(
        &dir,
        &spec(
            tmp.path(),
            "grep",
            &["-E", "^Sig(Blk|Ign)", "/proc/self/status"],
        ),
    );
    // SAFETY: restores the previous disposition.
    unsafe { signal(Signal::SIGUSR2, old_usr2) }.unwrap();
    old_mask.thread_set_mask().unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    let out = output(&dir);
    let mask = |name: &str| -> u64 {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{out}");
    // Signals 1-31 (bits 0-30); glibc-internal real-time ones the test
    // environment may ignore are out of reach and out of scope.
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{out}");
}

#[tokio::test]
async fn stop_with_a_job_that_exits_on_term_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(
        &dir,
        &sh(
            tmp.path(),
            "trap 'echo got-term; exit 0' TERM; echo ready; sleep 100 & wait",
        ),
    );
    wait_for_output(&dir, "ready").await;
    request_stop(&dir, Duration::from_secs(20)).await.unwrap();
    let t = Instant::now();
    let exit = finish(h).await;
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "waited for the grace"
    );
    assert_eq!(exit.outcome, Outcome::Stopped, "{exit:?}");
    assert_eq!((exit.exit_code, exit.signal), (Some(0), None));
    assert_eq!(exit.message, "stopped by request; exited with code 0");
    assert!(output(&dir).contains("got-term"));
}

#[tokio::test]
async fn stop_kills_a_job_ignoring_term_after_the_grace() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(
        &dir,
        &sh(
            tmp.path(),
            "trap '' TERM; echo ready; while true; do sleep 1; done",
        ),
    );
    wait_for_output(&dir, "ready").await;
    let t = Instant::now();
    request_stop(&dir, Duration::from_millis(400))
        .await
        .unwrap();
    let exit = finish(h).await;
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(exit.outcome, Outcome::Stopped, "{exit:?}");
    assert_eq!((exit.exit_code, exit.signal), (Some(137), Some(9)));
    assert_eq!(
        exit.message,
        "stopped by request; killed by signal 9 (SIGKILL)"
    );
}

#[tokio::test]
async fn kill_through_a_reattached_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "echo ready; sleep 100"));
    let pid = h.pid();
    // Forget the launch handle, as a restarted daemon would have.
    drop(h);
    wait_for_output(&dir, "ready").await;
    let h = reattach(&dir).unwrap().expect("shim alive");
    assert_eq!(h.pid(), pid);
    request_kill(&dir).await.unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Killed, "{exit:?}");
    assert_eq!((exit.exit_code, exit.signal), (Some(137), Some(9)));
    // The shim is gone: control requests say so, reattach finds nothing.
    assert!(matches!(
        request_kill(&dir).await,
        Err(ShimError::NotRunning { .. })
    ));
    assert!(reattach(&dir).unwrap().is_none());
}

#[tokio::test]
async fn timeout_stops_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut s = spec(tmp.path(), "sleep", &["100"]);
    s.timeout_ms = Some(300);
    let t = Instant::now();
    let exit = finish(start(&dir, &s)).await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(exit.outcome, Outcome::TimedOut, "{exit:?}");
    // SIGTERM is enough for sleep: the job does not inherit the shim's
    // blocked signals.
    assert_eq!((exit.exit_code, exit.signal), (Some(143), Some(15)));
    assert_eq!(
        exit.message,
        "timed out after 300ms; killed by signal 15 (SIGTERM)"
    );
}

#[tokio::test]
async fn background_children_are_killed_with_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let t = Instant::now();
    // The sleep keeps the stdout pipe open; only the group kill ends it.
    let exit = finish(start(&dir, &sh(tmp.path(), "sleep 100 & echo $!"))).await;
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    let sleep_pid: i32 = output(&dir).trim().parse().unwrap();
    // Gone, not merely killed: the shim reaped it before reporting the exit.
    assert!(
        !Path::new(&format!("/proc/{sleep_pid}")).exists(),
        "background sleep {sleep_pid} outlived the job"
    );
}

/// A process orphaned while the job runs becomes the shim's child (it is a
/// subreaper) and is reaped when it exits, not left a zombie.
#[tokio::test]
async fn orphans_are_reaped_while_the_job_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let script = "(sleep 0.2 & echo $! > orphan.pid); o=$(cat orphan.pid); \
                  ppid=$(cut -d' ' -f4 /proc/$o/stat); sleep 1.5; \
                  if [ -e /proc/$o ]; then echo present; else echo gone; fi; echo \"ppid=$ppid\"";
    let h = start(&dir, &sh(tmp.path(), script));
    let shim = h.pid();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(output(&dir), format!("gone\nppid={shim}\n"));
}

#[tokio::test]
async fn unknown_control_requests_are_refused_and_stop_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    // The job takes a moment to die of SIGTERM, so the second stop below
    // reaches a shim that is still stopping it (once the shim has exited,
    // requests are answered NotRunning).
    let h = start(
        &dir,
        &sh(
            tmp.path(),
            "trap 'sleep 0.5; trap - TERM; kill -TERM $$' TERM; echo ready; sleep 100 & wait",
        ),
    );
    wait_for_output(&dir, "ready").await;
    let reply = {
        use std::io::{BufRead, BufReader};
        let mut c = std::os::unix::net::UnixStream::connect(dir.control_sock_path()).unwrap();
        c.write_all(b"reboot\n").unwrap();
        let mut line = String::new();
        BufReader::new(c).read_line(&mut line).unwrap();
        line
    };
    assert!(reply.starts_with("err unknown request"), "{reply}");
    request_stop(&dir, Duration::from_secs(30)).await.unwrap();
    // A second stop while the first is under way is answered too; its
    // shorter grace ends the dying job with SIGKILL.
    request_stop(&dir, Duration::from_millis(1)).await.unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Stopped, "{exit:?}");
    assert_eq!(exit.signal, Some(9), "{exit:?}");
}

#[tokio::test]
async fn sigterm_to_the_shim_stops_and_sighup_sigint_are_ignored() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "echo ready; sleep 100"));
    let shim = Pid::from_raw(h.pid());
    wait_for_output(&dir, "ready").await;
    kill(shim, Signal::SIGHUP).unwrap();
    kill(shim, Signal::SIGINT).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        reattach(&dir).unwrap().is_some(),
        "shim died of SIGHUP/SIGINT"
    );
    assert!(read_exit(&dir).unwrap().is_none());
    kill(shim, Signal::SIGTERM).unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Stopped, "{exit:?}");
    assert_eq!(exit.signal, Some(15));
}

#[tokio::test]
async fn a_second_launch_into_a_live_job_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "echo ready; sleep 100"));
    wait_for_output(&dir, "ready").await;
    let again = joblet_shim::launch(
        Path::new(SHIM_BIN),
        &shim_args(&dir),
        &dir,
        &sh(tmp.path(), "true"),
    );
    assert!(
        matches!(again, Err(ShimError::AlreadyRunning { .. })),
        "{again:?}"
    );
    request_kill(&dir).await.unwrap();
    assert_eq!(finish(h).await.outcome, Outcome::Killed);
}

#[test]
fn shim_refuses_to_run_without_the_lock_on_fd_3() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(SHIM_BIN)
        .args(["shim", "--job-dir"])
        .arg(tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shim.lock was not passed as fd 3"), "{err}");
    assert!(!tmp.path().join("exit.json").exists());
}

/// The shim outlives the process that launched it (a daemon killed with
/// `kill -9`), and a new process reattaches to it.
#[tokio::test]
async fn shim_survives_its_launcher_and_is_reattached() {
    init();
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let spec = sh(tmp.path(), "echo started; sleep 100");
    let mut launcher = Command::new(SHIM_BIN)
        .args(["launch-detached", "--job-dir"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    launcher
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&spec).unwrap())
        .unwrap();
    let out = launcher.wait_with_output().unwrap();
    assert!(out.status.success());
    let shim_pid: i32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    wait_for_output(&dir, "started").await;
    let h = reattach(&dir)
        .unwrap()
        .expect("shim alive after its launcher exited");
    assert_eq!(h.pid(), shim_pid);
    assert!(read_exit(&dir).unwrap().is_none());

    request_stop(&dir, Duration::from_secs(5)).await.unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Stopped, "{exit:?}");
    assert_eq!(exit.signal, Some(15));
    assert!(reattach(&dir).unwrap().is_none());
    assert_eq!(read_exit(&dir).unwrap(), Some(exit));
    assert!(wait_gone(shim_pid, Duration::from_secs(5)));
}

#[tokio::test]
async fn reattach_to_a_dir_without_a_shim_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = joblet_shim::JobDir::new(tmp.path().join("never"));
    assert!(reattach(&dir).unwrap().is_none());
    std::fs::create_dir(dir.path()).unwrap();
    std::fs::write(dir.lock_path(), b"").unwrap();
    assert!(reattach(&dir).unwrap().is_none());
    assert!(matches!(
        request_stop(&dir, Duration::from_secs(1)).await,
        Err(ShimError::NotRunning { .. })
    ));
}

/// Session id and process group id of `pid` (fields 5 and 6 of its stat).
fn pgid_and_session(pid: i32) -> (i32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// The shim keeps terminal signals and the daemon's terminal away from the
/// job: without a controlling terminal it leads a process group of its own
/// (no session: setsid is the expensive call); started from a terminal it
/// leads a session of its own, so the job cannot open that terminal.
#[tokio::test]
async fn the_shim_leaves_the_daemons_terminal() {
    // No terminal (as under systemd, and in this test process).
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let h = start(&dir, &sh(tmp.path(), "echo ready; sleep 100"));
    wait_for_output(&dir, "ready").await;
    let (pgid, sid) = pgid_and_session(h.pid());
    assert_eq!(pgid, h.pid(), "its own process group");
    assert_eq!(sid, pgid_and_session(std::process::id() as i32).1);
    request_kill(&dir).await.unwrap();
    finish(h).await;

    // Launched from a terminal: script(1) runs the launcher as the leader of
    // a session whose controlling terminal is a new pty.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let spec_file = tmp.path().join("spec.json");
    std::fs::write(
        &spec_file,
        serde_json::to_vec(&sh(
            tmp.path(),
            "echo ready; cat /dev/tty 2>&1 | head -c 60; echo; sleep 100",
        ))
        .unwrap(),
    )
    .unwrap();
    // The terminal stays open a moment after the launch: closing it hangs
    // up its session, which a real daemon's terminal does not do at once.
    let line = format!(
        "{SHIM_BIN} launch-detached --job-dir {} < {}; sleep 1",
        dir.path().display(),
        spec_file.display()
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shim: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let text = wait_for_output(&dir, "ready").await;
    let (pgid, sid) = pgid_and_session(shim);
    assert_eq!((pgid, sid), (shim, shim), "a session of its own");
    let h = reattach(&dir).unwrap().expect("shim alive");
    request_kill(&dir).await.unwrap();
    finish(h).await;
    let text = if text.contains("/dev/tty") {
        text
    } else {
        output(&dir)
    };
    assert!(text.contains("No such device or address"), "{text}");
}

#[tokio::test]
async fn the_exit_is_reported_before_the_shims_cleanup_and_the_shim_is_reaped_after() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut spec = sh(tmp.path(), "exit 4");
    spec.env
        .insert("JOBLET_SHIM_TEST_CLEANUP_MS".into(), "1500".into());
    let h = start(&dir, &spec);
    let pid = h.pid();
    let exit = finish(h).await;
    assert_eq!(exit.exit_code, Some(4), "{exit:?}");
    // The record came while the shim was still cleaning up.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(
        !stat.contains(") Z "),
        "the shim had already exited: {stat}"
    );
    // And it is reaped (by the handle's background task) once it exits.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "shim {pid} was never reaped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The state letter of `pid` in /proc (`None` once it is reaped).
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// A raw wait status as the bytes a runner's early word carries, in
/// printf's octal escapes.
fn printf_status(raw: i32) -> String {
    raw.to_ne_bytes()
        .iter()
        .map(|b| format!("\\{b:03o}"))
        .collect()
}

/// The runner's word of the job's end is what the record says even when it
/// comes after the leader's exit (here a process the leader left writes it
/// later; a sandbox init writes it before its leader exits).
#[tokio::test]
async fn a_runners_word_after_the_leaders_exit_is_still_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let told = printf_status(6 << 8);
    let mut spec = sh(
        tmp.path(),
        &format!("(sleep 0.3; printf '{told}' >&3) & exit 0"),
    );
    spec.env
        .insert("JOBLET_SHIM_TEST_EARLY_EXIT".into(), "1".into());
    let exit = finish(start(&dir, &spec)).await;
    assert_eq!(exit.exit_code, Some(6), "{exit:?}");
}

/// A runner's early word of the job's end (a sandbox init tells it before
/// its own exit tears the namespaces down) is what the exit record says,
/// and it is written at once, while the leader still runs; the shim then
/// lets the leader go on (`Runner::end_told`: the test leader waits for it
/// on fd 4, as a sandbox's outer process waits to tear down), reaps it,
/// and only then cleans up and exits.
#[tokio::test]
async fn an_early_word_of_the_jobs_end_is_recorded_while_the_leader_still_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    // Exit code 5 as wait(2) encodes it.
    let told = printf_status(5 << 8);
    let mut spec = sh(
        tmp.path(),
        &format!(
            "echo $$ > leader; echo hi; exec >/dev/null 2>&1; \
             printf '{told}' >&3; exec 3>&-; cat <&4; sleep 1; exit 9"
        ),
    );
    spec.env
        .insert("JOBLET_SHIM_TEST_EARLY_EXIT".into(), "1".into());
    let h = start(&dir, &spec);
    let shim = h.pid();
    let exit = finish(h).await;
    assert_eq!(exit.exit_code, Some(5), "{exit:?}");
    assert_eq!(output(&dir), "hi\n");
    let leader: i32 = std::fs::read_to_string(tmp.path().join("leader"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        proc_state(leader).is_some_and(|s| s != 'Z'),
        "the leader had already exited: {:?}",
        proc_state(leader)
    );
    assert!(
        proc_state(shim).is_some_and(|s| s != 'Z'),
        "the shim did not wait for its leader"
    );
    // The shim reaps the leader once it exits, then exits itself (and is
    // reaped by the handle's background task); the record stays the told one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while proc_state(leader).is_some() || proc_state(shim).is_some() {
        assert!(
            Instant::now() < deadline,
            "leader {leader} ({:?}) or shim {shim} ({:?}) never went away",
            proc_state(leader),
            proc_state(shim)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(read_exit(&dir).unwrap().unwrap().exit_code, Some(5));
}

#[tokio::test]
async fn the_teardown_after_the_end_is_told_runs_in_sched_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let policy = tmp.path().join("cleanup-policy");
    let mut spec = sh(tmp.path(), "exit 0");
    spec.env.insert(
        "JOBLET_SHIM_TEST_CLEANUP_POLICY".into(),
        policy.to_str().unwrap().into(),
    );
    let exit = finish(start(&dir, &spec)).await;
    assert_eq!(exit.exit_code, Some(0), "{exit:?}");
    // The record comes before the teardown: wait for the runner's cleanup.
    let deadline = Instant::now() + Duration::from_secs(10);
    let seen = loop {
        if let Ok(p) = std::fs::read_to_string(&policy) {
            if !p.is_empty() {
                break p;
            }
        }
        assert!(Instant::now() < deadline, "the runner's cleanup never ran");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(seen, libc::SCHED_IDLE.to_string());
}
