//! Warm shims: started before their job is known, they wait in
//! `SCHED_IDLE` for its spec, run it like any shim (in the normal class),
//! and, discarded, remove every file they made.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use joblet_shim::{launch_warm, Outcome, ShimError, WarmBuild, WarmShim, WarmSpec};

fn warm(dir: &joblet_shim::JobDir) -> WarmShim {
    init();
    let spec = WarmSpec {
        job_id: "test-job".into(),
        runner: None,
    };
    launch_warm(Path::new(SHIM_BIN), &shim_args(dir), dir, &spec).unwrap()
}

/// Field 41 of /proc/PID/stat: the scheduling policy (0 normal, 5 idle).
fn policy(pid: i32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (field 2) may hold spaces; count after its ')'.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(38).unwrap().parse().unwrap()
}

/// The scheduling policy of thread `tid` of process `pid`.
fn policy_of(pid: i32, tid: i32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(38).unwrap().parse().unwrap()
}

/// The threads of process `pid`: tid and name.
fn threads(pid: i32) -> Vec<(i32, String)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            Some((tid, comm.trim_end().to_owned()))
        })
        .collect()
}

/// Waits until the warm shim has set itself up (it writes shim.pid then).
fn wait_ready(dir: &joblet_shim::JobDir) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while dir.read_shim_pid().ok().flatten().is_none() {
        assert!(
            Instant::now() < deadline,
            "the warm shim never wrote shim.pid"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn a_warm_shim_waits_idle_then_runs_its_job_normally() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = warm(&dir);
    wait_ready(&dir);
    let pid = dir.read_shim_pid().unwrap().unwrap().pid;
    // Ready, the main thread waits for the claim in the normal class (the
    // daemon's write wakes it, and it starts the job at once); every other
    // thread stays in SCHED_IDLE until the job runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    let threads = loop {
        let threads = threads(pid);
        let watching = threads.iter().any(|(_, comm)| comm == "claim-watch");
        if policy(pid) == 0 && !watching {
            break threads;
        }
        assert!(
            Instant::now() < deadline,
            "the warm shim's main thread never left SCHED_IDLE to wait for its claim: {threads:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(threads.len() > 1, "{threads:?}");
    for (tid, comm) in threads.iter().filter(|(tid, _)| *tid != pid) {
        assert_eq!(
            policy_of(pid, *tid),
            5,
            "the warm shim's thread {comm} waits in SCHED_IDLE"
        );
    }
    assert!(!dir.exit_path().exists());

    let spec = sh(tmp.path(), "echo started; cut -d' ' -f41 /proc/self/stat");
    let h = shim.claim(&spec).unwrap();
    assert_eq!(h.pid(), pid);
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    let out: Vec<u8> = records(&dir, 0).into_iter().flat_map(|r| r.data).collect();
    assert_eq!(String::from_utf8_lossy(&out), "started\n0\n");
}

/// The daemon's threads run in SCHED_BATCH; a shim they start (and its
/// job) still runs in the normal class.
#[tokio::test]
async fn a_shim_started_from_a_batch_thread_runs_its_job_normally() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let spec = sh(tmp.path(), "cut -d' ' -f41 /proc/self/stat");
    let (d, s) = (dir.clone(), spec.clone());
    let h = tokio::task::spawn_blocking(move || {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` outlives the call; only this test thread changes.
        let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        assert_eq!(set, 0);
        let h = start(&d, &s);
        // The blocking pool reuses its threads: put this one back.
        // SAFETY: as above.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        h
    })
    .await
    .unwrap();
    let exit = finish(h).await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(output(&dir), "0\n");
}

/// A discarded warm shim removes every file it made; the directory itself
/// stays (a restarted daemon reads "no shim ever had this job" from it, and
/// removes it when no job took the id).
#[tokio::test]
async fn a_discarded_warm_shim_leaves_nothing_but_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = warm(&dir);
    wait_ready(&dir);
    let h = shim.discard();
    match tokio::time::timeout(Duration::from_secs(30), h.wait()).await {
        Ok(Err(ShimError::Lost { .. })) => {}
        other => panic!("expected a shim gone without exit.json, got {other:?}"),
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| {
            // An empty `work` (the daemon's) may stay with the directory.
            !(name == "work" && std::fs::read_dir(dir.work_path()).unwrap().next().is_none())
        })
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
}

#[tokio::test]
async fn uploads_already_in_the_directory_survive_a_discard() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = warm(&dir);
    wait_ready(&dir);
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(dir.path().join("work/data"), "x").unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), shim.discard().wait()).await;
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["work"]);
}

#[tokio::test]
async fn a_warm_shim_refuses_another_jobs_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = warm(&dir);
    let mut spec = sh(tmp.path(), "true");
    spec.job_id = "another-job".into();
    match shim.claim(&spec) {
        Err(ShimError::WrongWarmShim { warm, job }) => {
            assert_eq!((warm.as_str(), job.as_str()), ("test-job", "another-job"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A warm shim whose runner prepared the job's leader.
fn prestarted(dir: &joblet_shim::JobDir) -> WarmShim {
    init();
    let spec = WarmSpec {
        job_id: "test-job".into(),
        runner: Some(serde_json::json!({"prestart": true})),
    };
    launch_warm(Path::new(SHIM_BIN), &shim_args(dir), dir, &spec).unwrap()
}

/// The job's output as text.
fn output(dir: &joblet_shim::JobDir) -> String {
    let out: Vec<u8> = records(dir, 0).into_iter().flat_map(|r| r.data).collect();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_prepared_leader_is_recorded_and_its_end_awaited_before_the_job_comes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = prestarted(&dir);
    wait_ready(&dir);
    // The job tells its end (exit status 7) on the early pipe, then exits 0
    // itself: only a thread the shim started ahead reads that pipe (the
    // runner gives no early_exit of its own).
    let spec = sh(
        tmp.path(),
        r"echo $$; printf '\000\007\000\000' >&3; exit 0",
    );
    let exit = finish(shim.claim(&spec).unwrap()).await;
    assert_eq!(exit.exit_code, Some(7), "{exit:?}");
    let leader: i32 = output(&dir).trim().parse().unwrap();
    let rec = dir.read_job_pid().unwrap().expect("job.pid");
    assert_eq!(rec.pid, leader, "job.pid names the prepared leader");
    assert!(rec.start_time > 0, "{rec:?}");
}

#[tokio::test]
async fn a_job_that_does_not_fit_the_prepared_leader_records_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let shim = prestarted(&dir);
    wait_ready(&dir);
    let mut spec = sh(tmp.path(), "echo $$; exit 3");
    spec.env
        .insert("JOBLET_SHIM_TEST_MISFIT".into(), "1".into());
    let exit = finish(shim.claim(&spec).unwrap()).await;
    assert_eq!(exit.exit_code, Some(3), "{exit:?}");
    let leader: i32 = output(&dir).trim().parse().unwrap();
    let rec = dir.read_job_pid().unwrap().expect("job.pid");
    assert_eq!(rec.pid, leader, "job.pid names the job's own leader");
}

#[tokio::test]
async fn a_warm_shim_says_once_its_sandbox_is_built() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let mut shim = prestarted(&dir);
    let ready = shim.take_ready().expect("a warm shim has a ready pipe");
    assert!(shim.take_ready().is_none(), "taken once");
    let waited = tokio::task::spawn_blocking(move || ready.wait(Duration::from_secs(10)));
    assert_eq!(waited.await.unwrap(), WarmBuild::Built);
    // Said after the preparation: the prepared leader's record is written.
    let pending = dir.path().join(".job.pid.tmp");
    let len = std::fs::metadata(&pending).map(|m| m.len()).unwrap_or(0);
    assert!(len > 0, "{} is empty or missing", pending.display());
    let exit = finish(shim.claim(&sh(tmp.path(), "exit 4")).unwrap()).await;
    assert_eq!(exit.exit_code, Some(4), "{exit:?}");
}

#[tokio::test]
async fn a_warm_shim_that_cannot_build_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    init();
    let spec = WarmSpec {
        job_id: "test-job".into(),
        runner: Some(serde_json::json!({"fail_prepare": true})),
    };
    let mut shim = launch_warm(Path::new(SHIM_BIN), &shim_args(&dir), &dir, &spec).unwrap();
    let ready = shim.take_ready().unwrap();
    let waited = tokio::task::spawn_blocking(move || ready.wait(Duration::from_secs(10)));
    assert_eq!(waited.await.unwrap(), WarmBuild::NotBuilt);
    // Its job still runs (in what the runner gives it then).
    let exit = finish(shim.claim(&sh(tmp.path(), "exit 5")).unwrap()).await;
    assert_eq!(exit.exit_code, Some(5), "{exit:?}");
}
