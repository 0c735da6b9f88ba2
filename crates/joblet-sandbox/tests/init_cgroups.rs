//! The sandbox init enters its job's cgroups itself on release (root, real
//! cgroups): from `JobCgroup::entry`'s descriptors it moves into every v1
//! cgroup and forks pid 1 into the cgroup2 one, so pid 1 and the job are
//! in every job directory and see their cgroup as the namespace root; a
//! warm init does the same on `enter_into`; a descriptor that is no cgroup
//! stops the job before it runs. Each test works under its own base
//! `joblet-test-<pid>-entry-<n>`, removed (killing only the test's own
//! processes) even when an assertion fails.

mod init_common;

use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use init_common::*;
use joblet_sandbox::cgroup::{CgroupRoots, JobCgroup, Layout, Limits};
use joblet_sandbox::init::{self, InitError, PendingInit, Stage};

/// A job's cgroups under a base of this test's own, destroyed on drop.
struct Cgroup {
    job: Option<JobCgroup>,
    unified: Option<std::path::PathBuf>,
    base_dirs: Vec<std::path::PathBuf>,
}

impl Cgroup {
    fn new() -> Cgroup {
        static N: AtomicUsize = AtomicUsize::new(0);
        assert!(
            nix::unistd::geteuid().is_root(),
            "the real-cgroup tests need root (CI runs them as root)"
        );
        let base = format!(
            "joblet-test-{}-entry-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let layout = Layout::detect(Path::new("/proc/self/mountinfo")).unwrap();
        let job = JobCgroup::create(
            &layout,
            &CgroupRoots::default(),
            &base,
            "job",
            &Limits {
                pids_max: 100,
                ..Limits::default()
            },
        )
        .unwrap();
        let base_dirs = job
            .dirs()
            .iter()
            .map(|d| d.parent().unwrap().to_path_buf())
            .collect();
        let unified = job.unified_dir().map(Path::to_path_buf);
        Cgroup {
            job: Some(job),
            unified,
            base_dirs,
        }
    }

    fn job(&self) -> &JobCgroup {
        self.job.as_ref().unwrap()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            let _ = job.destroy();
        }
        for d in &self.base_dirs {
            let _ = fs::remove_dir(d);
        }
    }
}

fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn children(pid: i32) -> Vec<i32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The job writes its own `/proc/self/cgroup` and waits for `/work/stop`.
fn job_config(work: &Path) -> joblet_sandbox::init::InitConfig {
    config(
        work,
        "sh",
        &[
            "-c",
            "cat /proc/self/cgroup > /work/cg; touch /work/ready; while [ ! -e /work/stop ]; do sleep 0.02; done",
        ],
    )
}

/// With the job running: pid 1 and the job are in every directory of the
/// job, the outer process in every v1 one and in the cgroup2 one only if
/// `outer_in_unified` (it is forked into it, and the outer process stays
/// in its caller's, unless the kernel has no `clone3`), and the job sees
/// each of its cgroups as `/`. Then lets the job end and checks that it
/// exited 0 (`outer`: the outer process's pid, `Started::pid`, to reap).
fn check_placement_and_end(
    cg: &Cgroup,
    outer: i32,
    work: &Path,
    outer_in_unified: bool,
    logs: &Logs,
) {
    wait_for(&work.join("ready"));
    let pid1 = children(outer);
    assert_eq!(pid1.len(), 1, "outer {outer} has one child, pid 1");
    let pid1 = pid1[0];
    let job = children(pid1);
    assert_eq!(job.len(), 1, "pid 1 {pid1} has one child, the job");
    let job = job[0];
    for dir in cg.job().dirs() {
        let in_dir = procs(dir);
        assert!(
            in_dir.contains(&pid1),
            "pid 1 {pid1} in {}: {in_dir:?}",
            dir.display()
        );
        assert!(
            in_dir.contains(&job),
            "job {job} in {}: {in_dir:?}",
            dir.display()
        );
        let is_unified = cg.unified.as_deref() == Some(dir);
        assert_eq!(
            in_dir.contains(&outer),
            !is_unified || outer_in_unified,
            "outer {outer} in {} (cgroup2: {is_unified}): {in_dir:?}",
            dir.display()
        );
    }
    let seen = fs::read_to_string(work.join("cg")).unwrap();
    assert!(!seen.is_empty());
    for line in seen.lines() {
        assert!(
            line.ends_with(":/"),
            "the job sees its cgroup as the root: {seen}"
        );
    }
    File::create(work.join("stop")).unwrap();
    let status = wait(outer);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}, stderr: {}",
        logs.stderr()
    );
}

#[test]
fn a_released_init_puts_pid_1_and_the_job_in_every_job_cgroup() {
    let cg = Cgroup::new();
    let work = work_dir();
    let (pending, logs) = spawn(&job_config(work.path()));
    let pending = pending.unwrap();
    let outer = pending.pid();
    let started = pending
        .release_into(cg.job().entry().unwrap(), init::RELEASE_TIMEOUT)
        .unwrap_or_else(|e| panic!("sandbox did not start: {e}"));
    assert_eq!(started.pid, outer);
    check_placement_and_end(&cg, started.pid, work.path(), false, &logs);
}

/// Where `clone3` fails with `ENOSYS`, the init moves itself into the
/// cgroup2 directory (`0` to its `cgroup.procs`) and forks pid 1 there.
#[test]
fn without_clone3_the_init_enters_the_cgroup2_directory_itself() {
    let cg = Cgroup::new();
    let work = work_dir();
    let (logs, out, err) = Logs::new();
    let pending = init::spawn(
        &init_bin(),
        &["sandbox-init".into(), "--clone3-enosys".into()],
        &job_config(work.path()),
        out,
        err,
    )
    .unwrap();
    let outer = pending.pid();
    let started = pending
        .release_into(cg.job().entry().unwrap(), init::RELEASE_TIMEOUT)
        .unwrap_or_else(|e| panic!("sandbox did not start: {e}"));
    assert_eq!(started.pid, outer);
    check_placement_and_end(&cg, started.pid, work.path(), cg.unified.is_some(), &logs);
}

#[test]
fn a_warm_init_enters_the_jobs_cgroups_before_its_pid_1_exists() {
    let cg = Cgroup::new();
    let work = work_dir();
    let job = job_config(work.path());
    let base = init::InitConfig {
        warm: true,
        ..job.clone()
    };
    let (pending, logs) = spawn(&base);
    let mut pending: PendingInit = pending.unwrap();
    let outer = pending.pid();
    pending
        .enter_into(cg.job().entry().unwrap(), init::RELEASE_TIMEOUT)
        .unwrap();
    let started = pending.start(&job, init::RELEASE_TIMEOUT).unwrap();
    assert_eq!(started.pid, outer);
    check_placement_and_end(&cg, started.pid, work.path(), false, &logs);
}

/// Fail closed: a release whose descriptors are not the job's cgroups (here
/// /dev/null) stops the init at the cgroup stage; the job never runs.
#[test]
fn a_descriptor_that_is_no_cgroup_stops_the_job_at_the_cgroup_stage() {
    let work = work_dir();
    let cfg = config(work.path(), "sh", &["-c", "touch /work/ran"]);
    let (pending, _logs) = spawn(&cfg);
    let pending = pending.unwrap();
    let pid = pending.pid();
    let not_a_cgroup = File::open("/dev/null").unwrap().into();
    match pending.release_into(vec![not_a_cgroup], init::RELEASE_TIMEOUT) {
        Err(InitError::Setup { stage, message, .. }) => {
            assert_eq!(stage, Stage::Cgroup);
            assert!(message.contains("neither a cgroup v1"), "{message}");
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    assert!(!work.path().join("ran").exists());
    assert!(!alive(pid), "init {pid} was killed and reaped");
}
