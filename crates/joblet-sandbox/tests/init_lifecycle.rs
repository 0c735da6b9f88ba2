//! The sandboxed job's life: exit codes and signals come back through the
//! outer process, signals sent to it reach the job, setup failures stop
//! the job before it runs, and nothing (process or mount) outlives it.

mod init_common;

use std::fs;
use std::io::Read;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use init_common::*;
use joblet_sandbox::init::{InitError, Stage};

#[test]
fn exit_code_output_environment_and_descriptors_are_the_jobs() {
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &[
            "-c",
            "cat; env | sort; ls /proc/self/fd; grep -E '^Sig(Ign|Blk)' /proc/self/status; echo oops >&2; exit 3",
        ],
    );
    let ended = run(&cfg);
    assert_eq!(ended.code(), Some(3), "stderr: {}", ended.logs.stderr());
    let out = ended.logs.stdout();
    // stdin is /dev/null (cat ends at once); the environment is exactly
    // the config's, plus what sh itself adds (PWD, SHLVL, _).
    assert!(out.contains("JOB_MARK=x y\n"), "{out}");
    assert!(out.contains("PATH=/usr/bin:/bin\n"), "{out}");
    for line in out.lines().filter(|l| l.contains('=')) {
        let key = line.split('=').next().unwrap();
        assert!(
            ["JOB_MARK", "PATH", "PWD", "SHLVL", "_", "OLDPWD"].contains(&key),
            "{line}"
        );
    }
    // ls's own descriptors: 0, 1, 2 and the directory it reads (3).
    let fds: Vec<&str> = out.lines().filter(|l| l.parse::<u32>().is_ok()).collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
    // No signal ignored (Rust ignores SIGPIPE in the init) or blocked.
    assert!(out.contains("SigIgn:\t0000000000000000\n"), "{out}");
    assert!(out.contains("SigBlk:\t0000000000000000\n"), "{out}");
    assert_eq!(ended.logs.stderr(), "oops\n");
}

/// Once pid 1 runs, the outer process holds no copy of the job's output
/// pipes (its descriptors 1 and 2 are /dev/null): the reader sees their end
/// as soon as the job and pid 1 are gone.
#[test]
fn the_outer_process_gives_up_the_jobs_output_pipes() {
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &[
            "-c",
            "touch /work/ready; while [ ! -e /work/stop ]; do sleep 0.05; done",
        ],
    );
    let (pid, _logs) = start(&cfg);
    let pid = pid.unwrap();
    wait_for(&work.path().join("ready"));
    for fd in [0, 1, 2] {
        let target = fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert_eq!(target, Path::new("/dev/null"), "outer fd {fd}");
    }
    fs::write(work.path().join("stop"), "").unwrap();
    let status = wait(pid);
    assert!(libc::WIFEXITED(status), "status {status:#x}");
}

/// Waiting for the job's `execve` the caller's thread is in SCHED_BATCH
/// (no wake-up preemption of the fresh job); it is back in SCHED_OTHER
/// once release returns, also when the start fails.
#[test]
fn release_leaves_the_callers_scheduling_class_as_it_was() {
    // SAFETY: sched_getscheduler takes no memory.
    let policy = || unsafe { libc::sched_getscheduler(0) };
    assert_eq!(policy(), libc::SCHED_OTHER);
    let work = work_dir();
    let ended = run(&config(work.path(), "true", &[]));
    assert_eq!(ended.code(), Some(0));
    assert_eq!(policy(), libc::SCHED_OTHER, "after a start");
    let (failed, _logs) = start(&config(work.path(), "/no/such/command", &[]));
    assert!(failed.is_err());
    assert_eq!(policy(), libc::SCHED_OTHER, "after a failed start");
}

#[test]
fn a_job_killed_by_a_signal_kills_the_outer_process_with_it() {
    let work = work_dir();
    let cfg = config(work.path(), "sh", &["-c", "kill -USR1 $$; sleep 5"]);
    let ended = run(&cfg);
    assert_eq!(
        ended.signal(),
        Some(libc::SIGUSR1),
        "status {:#x}",
        ended.status
    );
}

#[test]
fn sigterm_to_the_outer_process_reaches_the_job() {
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &[
            "-c",
            "trap 'exit 7' TERM; touch /work/ready; while :; do sleep 0.05; done",
        ],
    );
    let (pid, logs) = start(&cfg);
    let pid = pid.unwrap();
    wait_for(&work.path().join("ready"));
    // SAFETY: signalling the child we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = wait(pid);
    assert!(
        libc::WIFEXITED(status),
        "status {status:#x}, stderr {}",
        logs.stderr()
    );
    assert_eq!(libc::WEXITSTATUS(status), 7);
}

#[test]
fn sigterm_to_the_process_group_reaches_the_job_once() {
    // The shim signals the leader's group; pid 1 and the job lead groups
    // of their own, so the job sees one SIGTERM, not three.
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &[
            "-c",
            "n=0; trap 'n=$((n+1)); echo term >> /work/terms' TERM; touch /work/ready; \
             while [ ! -e /work/stop ]; do sleep 0.05; done; exit $n",
        ],
    );
    let (pid, _logs) = start(&cfg);
    let pid = pid.unwrap();
    wait_for(&work.path().join("ready"));
    // SAFETY: signalling the process group we created.
    assert_eq!(unsafe { libc::killpg(pid, libc::SIGTERM) }, 0);
    wait_for(&work.path().join("terms"));
    sleep(Duration::from_millis(300));
    fs::write(work.path().join("stop"), "").unwrap();
    let status = wait(pid);
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 1, "SIGTERMs counted");
}

#[test]
fn a_missing_read_only_mount_fails_release_and_nothing_runs() {
    missing_mount_fails_release(false);
}

/// The init builds most of the sandbox before it is released; when that
/// fails it has exited by the time the caller releases it, and release
/// still reports the stage and reason, not a broken release pipe.
#[test]
fn a_setup_error_before_release_is_reported_by_a_late_release() {
    missing_mount_fails_release(true);
}

/// A read-only mount that does not exist on the host: release reports the
/// rootfs stage naming it, the job never ran and the init is reaped.
/// `late`: release only once the init has failed and exited.
fn missing_mount_fails_release(late: bool) {
    let work = work_dir();
    let mut cfg = config(work.path(), "sh", &["-c", "touch /work/ran"]);
    cfg.ro_mounts.push("/no-such-dir-for-joblet-test".into());
    let (pending, _logs) = spawn(&cfg);
    let pending = pending.unwrap();
    let pid = pending.pid();
    if late {
        // Until the init has failed and exited (a zombie: not reaped yet).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "init {pid} did not fail"
            );
            sleep(Duration::from_millis(5));
        }
    }
    match pending.release() {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Rootfs);
            assert!(
                message.contains("/no-such-dir-for-joblet-test"),
                "{message}"
            );
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    assert!(!work.path().join("ran").exists());
    assert!(!alive(pid), "init {pid} was killed and reaped");
}

#[test]
fn a_missing_command_fails_release_at_the_exec_stage() {
    let work = work_dir();
    let cfg = config(work.path(), "no-such-command-xyz", &[]);
    let (pid, _logs) = start(&cfg);
    match pid {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Exec);
            assert!(message.contains("command not found"), "{message}");
            assert!(message.contains("no-such-command-xyz"), "{message}");
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    let cfg = config(work.path(), "/work/not-there", &[]);
    let (pid, _logs) = start(&cfg);
    assert!(
        matches!(
            pid,
            Err(InitError::Setup {
                stage: Stage::Exec,
                ..
            })
        ),
        "{pid:?}"
    );
}

#[test]
fn a_missing_extra_device_fails_release_at_the_dev_stage() {
    let work = work_dir();
    let mut cfg = config(work.path(), "true", &[]);
    cfg.extra_devices = vec!["/dev/joblet-test-missing".into()];
    let (pid, _logs) = start(&cfg);
    match pid {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Dev);
            assert!(message.contains("/dev/joblet-test-missing"), "{message}");
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
}

#[test]
fn abort_kills_the_waiting_init_and_the_job_never_runs() {
    let work = work_dir();
    let cfg = config(work.path(), "sh", &["-c", "touch /work/ran"]);
    let (pending, _logs) = spawn(&cfg);
    let pending = pending.unwrap();
    let pid = pending.pid();
    assert!(alive(pid));
    pending.abort();
    assert!(!alive(pid));
    assert!(!work.path().join("ran").exists());
}

#[test]
fn invalid_config_is_refused_before_anything_starts() {
    let work = work_dir();
    let mut cfg = config(work.path(), "true", &[]);
    cfg.uid = 0;
    let (pending, _logs) = spawn(&cfg);
    assert!(
        matches!(pending, Err(InitError::InvalidConfig(_))),
        "{pending:?}"
    );
}

fn ns_of(pid: &str) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.display().to_string())
}

fn members_of(ns: &str) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.parse::<u32>().is_ok())
        .filter(|n| ns_of(n).as_deref() == Some(ns))
        .collect()
}

#[test]
fn no_process_or_mount_outlives_the_job() {
    let before = host_mounts();
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &[
            "-c",
            "sleep 1000 & sleep 1000 & touch /work/ready; \
             while [ ! -e /work/stop ]; do sleep 0.05; done",
        ],
    );
    let (pid, _logs) = start(&cfg);
    let pid = pid.unwrap();
    wait_for(&work.path().join("ready"));
    let ns = fs::read_link(format!("/proc/{pid}/ns/pid_for_children"))
        .unwrap()
        .display()
        .to_string();
    // pid 1, sh, two sleeps (and maybe a short-lived sleep 0.05).
    assert!(members_of(&ns).len() >= 4, "{:?}", members_of(&ns));
    fs::write(work.path().join("stop"), "").unwrap();
    let status = wait(pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    assert_eq!(
        members_of(&ns),
        Vec::<String>::new(),
        "processes left in {ns}"
    );
    assert_eq!(
        host_mounts(),
        before,
        "the sandbox's mounts leaked to the host"
    );
}

#[test]
fn killing_the_outer_process_takes_the_whole_sandbox_down() {
    let work = work_dir();
    let cfg = config(
        work.path(),
        "sh",
        &["-c", "sleep 1000 & touch /work/ready; sleep 1000"],
    );
    let (pid, _logs) = start(&cfg);
    let pid = pid.unwrap();
    wait_for(&work.path().join("ready"));
    let ns = fs::read_link(format!("/proc/{pid}/ns/pid_for_children"))
        .unwrap()
        .display()
        .to_string();
    // SAFETY: killing the child we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let status = wait(pid);
    assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !members_of(&ns).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            members_of(&ns)
        );
        sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_program_that_is_not_the_init_is_never_taken_for_a_started_job() {
    let work = work_dir();
    let cfg = config(work.path(), "true", &[]);
    let (logs, out, err) = Logs::new();
    let pending =
        joblet_sandbox::init::spawn(Path::new("/bin/sleep"), &["0.2".into()], &cfg, out, err);
    drop(logs);
    // sleep never reads its stdin, but the config fits in the pipe.
    let pending = pending.unwrap();
    let pid = pending.pid();
    match pending.release() {
        Err(InitError::NotInit { program, .. }) => assert_eq!(program, Path::new("/bin/sleep")),
        Err(InitError::Release { .. }) => {}
        other => panic!("expected NotInit, got {other:?}"),
    }
    assert!(!alive(pid));
}

/// Host pids of the processes whose command line is exactly `argv`.
fn pids_running(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Runs `script` and returns the raw wait status told on the end pipe and
/// the outer process's own one.
fn told_and_ended(script: &str) -> (i32, i32) {
    let work = work_dir();
    let cfg = config(work.path(), "sh", &["-c", script]);
    let (pending, logs) = spawn(&cfg);
    let started = pending
        .and_then(joblet_sandbox::init::PendingInit::release)
        .unwrap_or_else(|e| panic!("sandbox did not start: {e}; stderr: {}", logs.stderr()));
    let mut raw = [0u8; 4];
    std::fs::File::from(started.end)
        .read_exact(&mut raw)
        .expect("the job's end was told");
    (i32::from_ne_bytes(raw), wait(started.pid))
}

/// The end pipe tells the job's raw wait status only once nothing of the
/// job is left (a process it left running in the background included), and
/// the outer process then ends the same way.
#[test]
fn the_end_pipe_tells_the_jobs_status_once_nothing_of_it_is_left() {
    let marker = (900_000 + std::process::id() % 99_999).to_string();
    let (told, ended) = told_and_ended(&format!(
        "sleep {marker} & until grep -q {marker} /proc/$!/cmdline 2>/dev/null; do :; done; exit 3"
    ));
    assert!(
        libc::WIFEXITED(told) && libc::WEXITSTATUS(told) == 3,
        "told {told:#x}"
    );
    assert!(
        pids_running(&["sleep", &marker]).is_empty(),
        "the job's background process outlived the word of its end"
    );
    assert!(
        libc::WIFEXITED(ended) && libc::WEXITSTATUS(ended) == 3,
        "ended {ended:#x}"
    );

    let (told, ended) = told_and_ended("kill -TERM $$; sleep 5");
    assert!(
        libc::WIFSIGNALED(told) && libc::WTERMSIG(told) == libc::SIGTERM,
        "told {told:#x}"
    );
    assert!(
        libc::WIFSIGNALED(ended) && libc::WTERMSIG(ended) == libc::SIGTERM,
        "ended {ended:#x}"
    );
}
