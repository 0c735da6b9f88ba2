//! `InitConfig::dev_shm`, seen from inside a real sandboxed job: a host
//! directory bound read-write (nosuid, nodev, noexec) at `/dev/shm`, so
//! files pass both ways between the host and the job; without it
//! `/dev/shm` stays a private tmpfs; a missing directory fails the start
//! at the `dev` stage naming it.

mod init_common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use init_common::*;
use joblet_sandbox::init::{InitError, Stage};
use tempfile::TempDir;

/// What the job reports: the host's file, an exec attempt, its own write,
/// and its `/dev/shm` mount line (`root mountpoint options - fstype`).
const SCRIPT: &str = "\
cat /dev/shm/from-host || echo NO-HOST-FILE
/dev/shm/run.sh 2>/dev/null && echo EXECUTED || echo NOT-EXECUTED
echo from-the-job > /dev/shm/from-job && echo WROTE
awk '$5 == \"/dev/shm\" { i = 7; while ($i != \"-\") i++; print \"MOUNT\", $4, $6, $(i + 1) }' /proc/self/mountinfo
";

/// A host directory everyone may write to (sticky, like a `/dev/shm`),
/// holding `from-host` and an executable `run.sh`.
fn shared_dir() -> TempDir {
    let d = tempfile::Builder::new()
        .prefix("joblet-dev-shm-test-")
        .tempdir_in("/tmp")
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(d.path().join("from-host"), "written-on-the-host\n").unwrap();
    fs::set_permissions(
        d.path().join("from-host"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    fs::write(d.path().join("run.sh"), "#!/bin/sh\ntrue\n").unwrap();
    fs::set_permissions(d.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Runs [`SCRIPT`] with `dev_shm`, in a fresh sandbox or a warm one (built
/// without `dev_shm`: its private `/dev/shm` is mounted before the job
/// comes, and must give way to the job's directory).
fn run_script(dev_shm: Option<&TempDir>, warm: bool) -> String {
    let work = work_dir();
    let base = config(work.path(), "sh", &["-c", SCRIPT]);
    let mut cfg = base.clone();
    cfg.dev_shm = dev_shm.map(|d| d.path().to_path_buf());
    let before = host_mounts();
    let ended = if warm {
        run_warm(&base, &cfg)
    } else {
        run(&cfg)
    };
    assert_eq!(host_mounts(), before, "a mount leaked to the host");
    assert_eq!(
        ended.code(),
        Some(0),
        "status {:#x}, stderr: {}",
        ended.status,
        ended.logs.stderr()
    );
    ended.logs.stdout()
}

/// The job's one `/dev/shm` mount (a second one stacked there fails).
fn mount_line(out: &str) -> Vec<String> {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("MOUNT ")).collect();
    assert_eq!(lines.len(), 1, "not one /dev/shm mount in the job: {out}");
    lines[0].split(' ').skip(1).map(str::to_string).collect()
}

#[test]
fn a_dev_shm_dir_is_shared_between_the_host_and_the_job() {
    for warm in [false, true] {
        shared_with_the_job(warm);
    }
}

fn shared_with_the_job(warm: bool) {
    let dir = shared_dir();
    let out = run_script(Some(&dir), warm);
    // The host's file is visible in the job, the job's lands on the host.
    assert!(out.contains("written-on-the-host\n"), "{out}");
    assert!(out.contains("WROTE\n"), "{out}");
    let written = dir.path().join("from-job");
    assert_eq!(fs::read_to_string(&written).unwrap(), "from-the-job\n");
    let meta = fs::metadata(&written).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
    // Read-write, nosuid, nodev, noexec; not a tmpfs of its own.
    assert!(out.contains("NOT-EXECUTED\n"), "{out}");
    let m = mount_line(&out);
    let opts: Vec<&str> = m[1].split(',').collect();
    for want in ["rw", "nosuid", "nodev", "noexec"] {
        assert!(opts.contains(&want), "{want} missing in {m:?}");
    }
    assert!(
        m[0].ends_with(dir.path().file_name().unwrap().to_str().unwrap()),
        "the mount's root is not the host directory: {m:?}"
    );
}

#[test]
fn without_dev_shm_the_job_has_a_private_tmpfs() {
    for warm in [false, true] {
        private_tmpfs(warm);
    }
}

fn private_tmpfs(warm: bool) {
    let dir = shared_dir();
    let out = run_script(None, warm);
    assert!(out.contains("NO-HOST-FILE\n"), "{out}");
    assert!(out.contains("WROTE\n"), "{out}");
    assert!(!dir.path().join("from-job").exists());
    let m = mount_line(&out);
    assert_eq!((m[0].as_str(), m[2].as_str()), ("/", "tmpfs"), "{m:?}");
    let opts: Vec<&str> = m[1].split(',').collect();
    for want in ["rw", "nosuid", "nodev", "noexec"] {
        assert!(opts.contains(&want), "{want} missing in {m:?}");
    }
}

#[test]
fn a_missing_dev_shm_dir_fails_the_start_naming_it() {
    let work = work_dir();
    let gone = "/no-such-dir-for-joblet-test/shm";
    let mut cfg = config(work.path(), "sh", &["-c", "touch /work/ran"]);
    cfg.dev_shm = Some(gone.into());
    let (pid, _logs) = start(&cfg);
    match pid {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Dev, "{message}");
            assert!(message.contains(&format!("dev_shm {gone}")), "{message}");
            assert!(message.contains("cannot stat it on the host"), "{message}");
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    assert!(!work.path().join("ran").exists(), "the job ran");

    // A file is refused too.
    let dir = shared_dir();
    cfg.dev_shm = Some(dir.path().join("from-host"));
    let (pid, _logs) = start(&cfg);
    match pid {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Dev, "{message}");
            assert!(
                message.contains("is not a directory on the host"),
                "{message}"
            );
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
}
