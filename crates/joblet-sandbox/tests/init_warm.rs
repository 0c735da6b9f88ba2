//! Warm sandboxes (`InitConfig::warm`): built from a placeholder before
//! the job is known, then given the job. A job must not be able to tell a
//! warm sandbox from a cold one, must get its own settings (hostname,
//! env, devices, `/work`, scheduling class), must be refused when the
//! sandbox was built differently, and a warm sandbox nobody uses must leave
//! no process and no mount behind.

mod init_common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use init_common::*;
use joblet_sandbox::init::{Bind, InitConfig, InitError, NetMode, Stage};
use serde_json::Value;

/// Sets this thread's scheduling policy (the init it forks inherits it).
fn set_policy(policy: libc::c_int) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is valid for the call and only read; 0 = this thread.
    let ret = unsafe { libc::sched_setscheduler(0, policy, &param) };
    assert_eq!(ret, 0, "{}", std::io::Error::last_os_error());
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// The probe's report without what differs between any two runs (pids of
/// the host, memory figures, timings).
fn comparable(v: &Value) -> Value {
    let mut mounts: Vec<String> = v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.to_string())
        .collect();
    mounts.sort();
    serde_json::json!({
        "pid": v["pid"], "ppid": v["ppid"], "uid": v["uid"], "gid": v["gid"],
        "groups": v["groups"], "hostname": v["hostname"], "cwd": v["cwd"],
        "pids": v["pids"], "mounts": mounts, "dev": v["dev"],
        "cap_eff": v["cap_eff"], "cap_prm": v["cap_prm"], "cap_bnd": v["cap_bnd"],
        "cap_inh": v["cap_inh"], "cap_amb": v["cap_amb"], "seccomp": v["seccomp"],
        "no_new_privs": v["no_new_privs"], "net_ifaces": v["net_ifaces"],
        "loopback_works": v["loopback_works"], "tries": v["tries"],
    })
}

fn probe_args() -> Vec<&'static str> {
    vec![
        "--try-write",
        "/usr/joblet-warm-test",
        "--try-write",
        "/work/out",
        "--try-mount",
        "--try-setns",
        "--try-bpf",
        "--try-read",
        "/proc/1/environ",
        "--try-unshare-user",
    ]
}

#[test]
fn a_warm_sandbox_looks_to_its_job_exactly_like_a_cold_one() {
    let work = work_dir();
    let probe_path = install_probe(work.path());
    let args = probe_args();
    let mut job = config(work.path(), &probe_path, &args);
    // A CPU job's masks go on before the job comes.
    job.masks = masks_here();

    let cold = probe(&job);
    let _ = fs::remove_file(work.path().join("out"));
    let ended = run_warm(&job, &job);
    assert_eq!(
        ended.code(),
        Some(0),
        "warm probe failed: {}",
        ended.logs.stderr()
    );
    let warm: Value = serde_json::from_str(&ended.logs.stdout()).unwrap();
    assert_eq!(comparable(&warm), comparable(&cold));
    // And the report is the one of a sandbox, not of the host.
    assert_eq!(warm["pid"], 2, "{warm}");
    assert_eq!(
        attempt(&warm, "write", "/usr/joblet-warm-test")["result"],
        "EROFS"
    );
    assert_eq!(attempt(&warm, "write", "/work/out")["result"], "ok");
}

#[test]
fn the_job_gets_its_own_settings_not_the_placeholders() {
    let work = work_dir();
    fs::write(work.path().join("upload.txt"), "from the host\n").unwrap();
    let base = InitConfig {
        hostname: "warm-placeholder".into(),
        ..config(work.path(), "/bin/false", &[])
    };
    let mut job = config(
        work.path(),
        "sh",
        &[
            "-c",
            // policy (field 41) and nice (19) of the job's process.
            "hostname; echo \"mark=$JOB_MARK\"; ls /dev/joblet-extra; cat /work/upload.txt; \
             cut -d' ' -f19,41 /proc/self/stat; id -u",
        ],
    );
    job.hostname = "job-real".into();
    job.env.insert("JOB_MARK".into(), "the job's".into());
    job.device_binds = vec![Bind {
        source: PathBuf::from("/dev/zero"),
        target: PathBuf::from("/dev/joblet-extra"),
        writable: false,
    }];

    // Built in SCHED_IDLE, as a warm shim builds it.
    set_policy(libc::SCHED_IDLE);
    let (pid, logs) = start_warm(&base, &job);
    set_policy(libc::SCHED_OTHER);
    let pid = pid.unwrap_or_else(|e| panic!("warm sandbox did not start: {e}"));
    let status = wait(pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}: {}",
        logs.stderr()
    );
    assert_eq!(
        logs.stdout(),
        "job-real\nmark=the job's\n/dev/joblet-extra\nfrom the host\n0 0\n65534\n"
    );
}

/// A file and a directory to mask that exist here.
fn masks_here() -> Vec<PathBuf> {
    let masks: Vec<PathBuf> = ["/etc/hostname", "/usr/share/doc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
        .collect();
    assert_eq!(
        masks.len(),
        2,
        "this test needs /etc/hostname and /usr/share/doc"
    );
    masks
}

#[test]
fn a_job_with_other_masks_does_not_keep_the_placeholders() {
    let work = work_dir();
    let [file, dir] = <[PathBuf; 2]>::try_from(masks_here()).unwrap();
    let base = InitConfig {
        masks: vec![file.clone()],
        ..config(work.path(), "/bin/false", &[])
    };
    let script = format!("wc -c < {}; ls {} | wc -l", file.display(), dir.display());
    let mut job = config(work.path(), "sh", &["-c", &script]);
    job.masks = vec![dir.clone()];
    let ended = run_warm(&base, &job);
    assert_eq!(ended.code(), Some(0), "{}", ended.logs.stderr());
    let out = ended.logs.stdout();
    let counts: Vec<u64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert!(
        counts[0] > 0,
        "the placeholder's mask stayed on {}: {out}",
        file.display()
    );
    assert_eq!(
        counts[1],
        0,
        "the job's mask is missing on {}: {out}",
        dir.display()
    );
}

#[test]
fn a_sized_work_is_mounted_ahead_and_still_gets_the_jobs_files_and_size() {
    for (warm_mb, job_mb) in [(16, 16), (16, 32)] {
        let work = work_dir();
        fs::write(work.path().join("upload.txt"), "uploaded\n").unwrap();
        let base = InitConfig {
            work_size_mb: warm_mb,
            ..config(work.path(), "/bin/false", &[])
        };
        let mut job = config(
            work.path(),
            "sh",
            &[
                "-c",
                "cat /work/upload.txt; df -k /work | tail -1 | awk '{print $2}'",
            ],
        );
        job.work_size_mb = job_mb;
        let ended = run_warm(&base, &job);
        assert_eq!(ended.code(), Some(0), "{}", ended.logs.stderr());
        assert_eq!(
            ended.logs.stdout(),
            format!("uploaded\n{}\n", job_mb * 1024),
            "warm /work of {warm_mb} MiB, job's {job_mb} MiB"
        );
    }
}

#[test]
fn a_job_the_sandbox_was_not_built_for_is_refused_before_it_runs() {
    let work = work_dir();
    let marker = work.path().join("ran");
    let base = config(work.path(), "/bin/false", &[]);
    let script = format!("touch {}", marker.display());
    let mut job = config(work.path(), "sh", &["-c", &script]);
    job.net = NetMode::Host;
    let (started, _logs) = start_warm(&base, &job);
    match started {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Config);
            assert!(message.contains("another net"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!marker.exists(), "the job ran");
}

#[test]
fn an_unused_warm_sandbox_leaves_no_process_and_no_mount() {
    let work = work_dir();
    let before = host_mounts();
    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    let (pending, _logs) = spawn(&base);
    let mut pending = pending.unwrap();
    pending.enter(Duration::from_secs(10)).unwrap();
    let outer = pending.pid();
    let (pid1, job) = pid1_and_job(&pending);
    assert!(alive(pid1));
    drop(pending);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid1) {
        assert!(
            Instant::now() < deadline,
            "pid 1 {pid1} outlived its sandbox"
        );
        sleep(Duration::from_millis(10));
    }
    assert!(!alive(outer), "the outer process was not reaped");
    assert!(!alive(job), "the job process {job} outlived its sandbox");
    assert_eq!(host_mounts(), before);
    // Nothing was left in the work dir either.
    assert_eq!(fs::read_dir(work.path()).unwrap().count(), 0);
}

/// The line `key:` of `/proc/<pid>/status`, without the key.
fn status_field(pid: i32, key: &str) -> String {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in the status of {pid}"))
        .trim()
        .to_string()
}

/// A warm sandbox forks its job's process before the job comes, and that
/// process has already given up everything by then: the job's user, no
/// capability at all, `no_new_privs`, the seccomp filter. The job then
/// runs in it (the probe sees itself as pid 2, pid 1's only child).
#[test]
fn the_job_process_waits_unprivileged_and_filtered_before_the_job_comes() {
    let work = work_dir();
    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    let (pending, logs) = spawn(&base);
    let mut pending = pending.unwrap();
    pending.enter(Duration::from_secs(10)).unwrap();
    let (_, job) = pid1_and_job(&pending);
    let uid = base.uid.to_string();
    assert_eq!(
        status_field(job, "Uid")
            .split_whitespace()
            .collect::<Vec<_>>(),
        [uid.as_str(); 4]
    );
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(job, caps), "0000000000000000", "{caps}");
    }
    assert_eq!(status_field(job, "NoNewPrivs"), "1");
    assert_eq!(status_field(job, "Seccomp"), "2");

    let cfg = config(work.path(), &install_probe(work.path()), &[]);
    let v = probe_report(pending.start(&cfg, Duration::from_secs(10)), &logs);
    assert_eq!(v["pid"], 2, "{v}");
    assert_eq!(v["ppid"], 1, "{v}");
}

/// The report of a probe started in a warm sandbox, once it has exited 0.
fn probe_report(started: Result<joblet_sandbox::init::Started, InitError>, logs: &Logs) -> Value {
    let pid = started
        .unwrap_or_else(|e| panic!("warm sandbox did not start: {e}; stderr: {}", logs.stderr()))
        .pid;
    let status = wait(pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}, stderr: {}",
        logs.stderr()
    );
    serde_json::from_str(&logs.stdout()).unwrap()
}

/// The pid 1 of `pending`'s outer process, and pid 1's only child (the job
/// process forked ahead); each must be its parent's only child.
fn pid1_and_job(pending: &joblet_sandbox::init::PendingInit) -> (i32, i32) {
    let only_child = |parent: i32| -> i32 {
        let children =
            fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).unwrap();
        let pids: Vec<i32> = children
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(pids.len(), 1, "children of {parent}: {children:?}");
        pids[0]
    };
    let pid1 = only_child(pending.pid());
    (pid1, only_child(pid1))
}

/// The job's config goes to pid 1 ahead (`send_job`), so it builds the
/// job's tree while the shim finishes the cgroup; the job runs only after
/// `go`, and never when the shim gives up in between (drops the init).
#[test]
fn a_job_sent_ahead_runs_only_after_go_and_never_if_abandoned() {
    let work = work_dir();
    let probe_path = install_probe(work.path());
    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    let job = config(work.path(), &probe_path, &["--try-write", "/work/out"]);

    let (pending, logs) = spawn(&base);
    let mut pending = pending.unwrap();
    pending.enter(Duration::from_secs(10)).unwrap();
    let (_, waiting) = pid1_and_job(&pending);
    pending.send_job(&job).unwrap();
    sleep(Duration::from_millis(300));
    // The probe reports on its stdout once it ran.
    assert_eq!(logs.stdout(), "", "the job ran before go");
    assert!(alive(waiting));
    assert_ne!(
        fs::read_link(format!("/proc/{waiting}/exe")).unwrap(),
        PathBuf::from(&probe_path),
        "the job process exec'd its command before go"
    );
    let v = probe_report(pending.go(Duration::from_secs(10)), &logs);
    assert_eq!(v["pid"], 2, "{v}");

    // Abandoned after the config went ahead: nothing of the job runs.
    let (pending, logs) = spawn(&base);
    let mut pending = pending.unwrap();
    pending.enter(Duration::from_secs(10)).unwrap();
    let (pid1, waiting) = pid1_and_job(&pending);
    pending.send_job(&job).unwrap();
    sleep(Duration::from_millis(100));
    drop(pending);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid1) || alive(waiting) {
        assert!(
            Instant::now() < deadline,
            "pid 1 {pid1} or the job process {waiting} outlived its abandoned sandbox"
        );
        sleep(Duration::from_millis(10));
    }
    assert_eq!(logs.stdout(), "", "an abandoned job ran");
}

/// `waitpid(pid, WNOHANG)`: the raw status once `pid` has exited.
fn try_wait(pid: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    assert!(r >= 0, "waitpid: {}", std::io::Error::last_os_error());
    (r == pid).then_some(status)
}

/// After a job that ended normally, the leader (the outer process) tells
/// its end on `end` at once but holds its own exit (the namespaces'
/// teardown) back while `teardown` is open: until the caller has recorded
/// the end, or a second at most.
#[test]
fn the_leader_exits_only_once_the_end_is_recorded() {
    use std::io::Read;
    let work = work_dir();
    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    let job = config(work.path(), "/bin/sh", &["-c", "exit 3"]);
    for release in [true, false] {
        let (pending, logs) = spawn(&base);
        let mut pending = pending.unwrap();
        pending.enter(Duration::from_secs(10)).unwrap();
        let started = pending
            .start(&job, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("did not start: {e}; stderr: {}", logs.stderr()));
        let mut raw = [0u8; 4];
        fs::File::from(started.end).read_exact(&mut raw).unwrap();
        let told = i32::from_ne_bytes(raw);
        assert!(libc::WIFEXITED(told) && libc::WEXITSTATUS(told) == 3);
        sleep(Duration::from_millis(300));
        assert_eq!(
            try_wait(started.pid),
            None,
            "the leader exited before the end was recorded"
        );
        let held = Instant::now();
        if release {
            drop(started.teardown);
        } else {
            std::mem::forget(started.teardown);
        }
        let status = wait(started.pid);
        assert_eq!(status, told, "the leader ends like the job");
        if release {
            assert!(
                held.elapsed() < Duration::from_millis(400),
                "the leader waited {:?} after the end was recorded",
                held.elapsed()
            );
        }
    }
}

/// The mount points under the host root in `pid`'s mount namespace.
fn host_root_mounts(pid: i32) -> Vec<String> {
    fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|p| *p == "/.oldroot" || p.starts_with("/.oldroot/"))
        .map(str::to_owned)
        .collect()
}

/// A warm sandbox built from `base`, its pid 1 waiting for a job.
fn waiting(base: &InitConfig) -> (joblet_sandbox::init::PendingInit, Logs, i32) {
    let (pending, logs) = spawn(base);
    let mut pending = pending.unwrap();
    pending.enter(Duration::from_secs(10)).unwrap();
    let (pid1, _) = pid1_and_job(&pending);
    (pending, logs, pid1)
}

/// Gives the waiting sandbox `job` and returns its raw wait status.
fn run_to_end(pending: joblet_sandbox::init::PendingInit, job: &InitConfig) -> i32 {
    let started = pending
        .start(job, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("warm sandbox did not start: {e}"));
    wait(started.pid)
}

/// A warm pid 1 detaches the host root before its job comes (the unmount
/// waits for an RCU grace period), and the job's own host sources come
/// from the caller as detached copies: a file bound read-only, a device
/// node, the uploads of a sized `/work`.
#[test]
fn the_host_root_is_gone_before_the_job_comes_and_the_jobs_sources_are_handed_over() {
    let work = work_dir();
    fs::write(work.path().join("upload.txt"), "uploaded\n").unwrap();
    let data = host_file("bound from the host\n");

    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    let (pending, logs, pid1) = waiting(&base);
    assert_eq!(
        host_root_mounts(pid1),
        Vec::<String>::new(),
        "the host root is still mounted in a warm sandbox waiting for its job"
    );

    let mut job = config(
        work.path(),
        "sh",
        &[
            "-c",
            "cat /run/joblet-test/data.txt; ls /dev/joblet-extra; cat /work/upload.txt; \
             grep -c oldroot /proc/self/mountinfo",
        ],
    );
    job.binds = vec![Bind {
        source: data.path().to_path_buf(),
        target: PathBuf::from("/run/joblet-test/data.txt"),
        writable: false,
    }];
    job.device_binds = vec![Bind {
        source: PathBuf::from("/dev/zero"),
        target: PathBuf::from("/dev/joblet-extra"),
        writable: false,
    }];
    let status = run_to_end(pending, &job);
    assert_eq!(
        logs.stdout(),
        "bound from the host\n/dev/joblet-extra\nuploaded\n0\n",
        "status {status:#x}: {}",
        logs.stderr()
    );
}

/// A GPU-ready warm sandbox's binds and device nodes (its placeholder's)
/// are made before the job comes; a job whose own start with them gets
/// just the rest from the shim: the bind is mounted once, and the nodes
/// are made (`mknod`), not mounted.
#[test]
fn binds_and_nodes_made_ahead_serve_a_job_that_starts_with_them() {
    let work = work_dir();
    let (ahead, own) = (host_file("made ahead\n"), host_file("the job's own\n"));
    let ahead_bind = Bind {
        source: ahead.path().to_path_buf(),
        target: PathBuf::from("/run/joblet-test/ahead.txt"),
        writable: false,
    };
    let ahead_node = Bind {
        source: PathBuf::from("/dev/zero"),
        target: PathBuf::from("/dev/joblet-ahead"),
        writable: false,
    };
    let mut base = config(work.path(), "/bin/false", &[]);
    base.warm = true;
    base.binds = vec![ahead_bind.clone()];
    base.device_binds = vec![ahead_node.clone()];
    let (pending, logs, pid1) = waiting(&base);
    let before = fs::read_to_string(format!("/proc/{pid1}/mountinfo")).unwrap();
    assert!(
        before.contains(" /run/joblet-test/ahead.txt "),
        "the bind is not mounted before the job comes:\n{before}"
    );
    // Device nodes are made (mknod), not bound: a copy of /dev/zero.
    let node = fs::metadata(format!("/proc/{pid1}/root/dev/joblet-ahead"))
        .expect("the node is made before the job comes");
    assert!(node.file_type().is_char_device());
    assert_eq!(node.rdev(), fs::metadata("/dev/zero").unwrap().rdev());
    assert_eq!(node.mode() & 0o777, 0o666);

    let mut job = config(
        work.path(),
        "sh",
        &[
            "-c",
            "cat /run/joblet-test/ahead.txt /run/joblet-test/own.txt;              ls /dev/joblet-ahead /dev/joblet-own;              for t in /run/joblet-test/ahead.txt /dev/joblet-ahead; do                grep -c \" $t \" /proc/self/mountinfo; done",
        ],
    );
    job.binds = vec![
        ahead_bind,
        Bind {
            source: own.path().to_path_buf(),
            target: PathBuf::from("/run/joblet-test/own.txt"),
            writable: false,
        },
    ];
    job.device_binds = vec![
        ahead_node,
        Bind {
            source: PathBuf::from("/dev/null"),
            target: PathBuf::from("/dev/joblet-own"),
            writable: false,
        },
    ];
    let status = run_to_end(pending, &job);
    assert_eq!(
        logs.stdout(),
        "made ahead\nthe job's own\n/dev/joblet-ahead\n/dev/joblet-own\n1\n0\n",
        "status {status:#x}: {}",
        logs.stderr()
    );
}

/// A source missing on the host fails a warm start before anything of the
/// job runs, naming the config field, as a cold start does.
#[test]
fn a_missing_source_fails_a_warm_start_naming_it() {
    let work = work_dir();
    let base = config(work.path(), "/bin/false", &[]);
    let mut job = config(work.path(), "/bin/true", &[]);
    let gone = "/no-such-dir-for-joblet-test/libcuda.so.1";
    job.binds = vec![Bind {
        source: gone.into(),
        target: "/run/lib/libcuda.so.1".into(),
        writable: false,
    }];
    let (started, _logs) = start_warm(&base, &job);
    let message = match started {
        Err(e) => e.to_string(),
        Ok(pid) => {
            let status = wait(pid);
            panic!("the job started ({status:#x}) without its bind source");
        }
    };
    assert!(message.contains("binds[0]"), "{message}");
    assert!(message.contains(gone), "{message}");
    // Where the job would have seen it: what the user asked for.
    assert!(
        message.contains("at /run/lib/libcuda.so.1 in the job"),
        "{message}"
    );
    assert!(message.contains("does not exist on the host"), "{message}");
    assert!(!message.contains("run_init"), "{message}");
}
