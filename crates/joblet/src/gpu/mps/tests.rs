//! Tests of the MPS control daemons, against a fake control program
//! (mounts tmpfs instances: needs root).

use super::*;

/// A control program that records each call (args, the three
/// variables, stdin for commands) in `calls`, writes the GPU's UUID
/// into [`marker`] in its `/dev/shm` on `-d`, and fails `-d` while
/// `fail` exists.
fn fake_control(dir: &Path) -> PathBuf {
    let p = dir.join("fake-mps-control");
    let calls = dir.join("calls");
    let fail = dir.join("fail");
    write_script(
        &p,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -d ]; then\n  if [ -e '{fail}' ]; then echo 'cannot start: no GPU' >&2; exit 3; fi\n  echo \"start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY\" >> '{calls}'\n  touch \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n  echo \"$CUDA_VISIBLE_DEVICES\" > '/dev/shm/{marker}'\nelse\n  read cmd\n  echo \"cmd $CUDA_VISIBLE_DEVICES $cmd\" >> '{calls}'\nfi\n",
            fail = fail.display(),
            calls = calls.display(),
            marker = marker(dir),
        ),
    );
    p
}

/// Writes an executable script through a child `sh`, never opening it for
/// writing in this process: a process another test thread forks while it
/// is open would hold it until that child execs, and executing the script
/// meanwhile fails with ETXTBSY (seen in CI).
fn write_script(path: &Path, text: &str) {
    let mut child = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "writing {}",
        path.display()
    );
}

/// The fake's marker file name, unique to the test's temp dir (were
/// the namespace missing it would land in the host's `/dev/shm`).
fn marker(dir: &Path) -> String {
    format!(
        "joblet-mps-test-{}",
        dir.file_name().unwrap().to_str().unwrap()
    )
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn daemons(dir: &Path, pct: Option<u32>) -> MpsDaemons {
    let cfg = GpuConfig {
        mps_control: Some(fake_control(dir)),
        mps_dir: dir.join("mps"),
        mps_active_thread_percentage: pct,
        mps_shm_size_mb: 4,
        ..GpuConfig::default()
    };
    MpsDaemons::new(&cfg)
}

#[test]
fn each_control_daemon_has_its_gpus_tmpfs_as_dev_shm_until_it_quits() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mps");
    // A tmpfs an earlier daemon left on a GPU's shm, for a job that is
    // not reattached, is stopped and detached once recovery is done.
    let stale = dirs(&root, "GPU-old").shm;
    std::fs::create_dir_all(&stale).unwrap();
    shm::mount(&stale, 1).unwrap();
    let mut m = daemons(tmp.path(), None);
    assert!(shm::is_mount_point(&stale), "kept until recovery is done");
    m.finish_recovery();
    assert!(!shm::is_mount_point(&stale));
    assert_eq!(calls(tmp.path()), ["cmd GPU-old quit"]);
    m.acquire("j1", "GPU-a").unwrap();
    m.acquire("j2", "GPU-b").unwrap();
    let on_host = Path::new("/dev/shm").join(marker(tmp.path()));
    let leaked = on_host.exists();
    let _ = std::fs::remove_file(&on_host);
    assert!(!leaked, "the control daemon wrote the host's /dev/shm");
    for gpu in ["GPU-a", "GPU-b"] {
        let d = dirs(&root, gpu);
        assert!(shm::is_mount_point(&d.shm), "{gpu}");
        assert_eq!(
            std::fs::read_to_string(d.shm.join(marker(tmp.path()))).unwrap(),
            format!("{gpu}\n"),
            "each daemon writes its own GPU's tmpfs"
        );
        let st = nix::sys::statvfs::statvfs(&d.shm).unwrap();
        assert_eq!(st.blocks() * st.fragment_size(), 4 << 20);
    }
    m.release("j1");
    assert!(!shm::is_mount_point(&dirs(&root, "GPU-a").shm));
    assert!(shm::is_mount_point(&dirs(&root, "GPU-b").shm));
    // Daemon shutdown with j2 still running: its control daemon and tmpfs
    // stay; the next daemon takes them over for the reattached j2.
    drop(m);
    let b = dirs(&root, "GPU-b").shm;
    assert!(shm::is_mount_point(&b), "left for the running job");
    let mut next = daemons(tmp.path(), None);
    next.adopt("j2", "GPU-b").unwrap();
    next.finish_recovery();
    assert!(shm::is_mount_point(&b), "taken over, not restarted");
    assert_eq!(
        std::fs::read_to_string(b.join(marker(tmp.path()))).unwrap(),
        "GPU-b\n",
        "the same tmpfs the job has"
    );
    next.release("j2");
    assert!(!shm::is_mount_point(&b));
}

#[test]
fn one_daemon_per_gpu_started_once_and_stopped_when_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mps");
    let mut m = daemons(tmp.path(), None);
    m.acquire("j1", "GPU-a").unwrap();
    m.acquire("j2", "GPU-a").unwrap();
    m.acquire("j3", "GPU-b").unwrap();
    let d = dirs(&root, "GPU-a");
    assert!(d.pipe.join("control").exists());
    assert_eq!(
        calls(tmp.path()),
        [
            format!("start GPU-a {} {}", d.pipe.display(), d.log.display()),
            format!(
                "start GPU-b {} {}",
                dirs(&root, "GPU-b").pipe.display(),
                dirs(&root, "GPU-b").log.display()
            ),
        ]
    );
    m.release("j1");
    assert_eq!(calls(tmp.path()).len(), 2, "GPU-a still has j2");
    m.release("j2");
    assert_eq!(calls(tmp.path())[2], "cmd GPU-a quit");
    m.release("j2");
    assert_eq!(calls(tmp.path()).len(), 3, "released once");
    assert_eq!(m.running().keys().collect::<Vec<_>>(), ["GPU-b"]);
    drop(m);
    assert_eq!(calls(tmp.path()).len(), 3, "shutdown leaves j3's daemon");
    // The next daemon: j3 is reattached and takes it over (no second
    // start); a GPU whose job is gone is stopped once recovery is done.
    let mut next = daemons(tmp.path(), None);
    next.adopt("j3", "GPU-b").unwrap();
    next.finish_recovery();
    assert_eq!(calls(tmp.path()).len(), 3, "no new start");
    next.adopt("j4", "GPU-c").unwrap();
    assert!(
        calls(tmp.path())[3].starts_with("start GPU-c "),
        "nothing left there: started"
    );
    next.release("j3");
    next.release("j4");
    assert_eq!(
        &calls(tmp.path())[4..],
        ["cmd GPU-b quit", "cmd GPU-c quit"]
    );
}

#[test]
fn a_failed_start_is_an_error_with_the_output_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = daemons(tmp.path(), Some(30));
    std::fs::write(tmp.path().join("fail"), "").unwrap();
    let e = m.acquire("j1", "GPU-a").unwrap_err().to_string();
    assert!(e.contains("-d` failed"), "{e}");
    assert!(e.contains("cannot start: no GPU"), "{e}");
    assert!(m.running().is_empty());
    let shm_dir = dirs(&tmp.path().join("mps"), "GPU-a").shm;
    assert!(!shm::is_mount_point(&shm_dir), "a failed start unmounts");
    std::fs::remove_file(tmp.path().join("fail")).unwrap();
    m.acquire("j1", "GPU-a").unwrap();
    // The node's thread share is the daemon's default.
    assert_eq!(
        calls(tmp.path())[1],
        "cmd GPU-a set_default_active_thread_percentage 30"
    );
    // A daemon that stops leaves the tmpfs of running jobs: release j1 so
    // the test leaves no mount behind.
    m.release("j1");
    assert!(!shm::is_mount_point(&shm_dir));
}

#[test]
fn a_missing_program_fails_every_start() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = GpuConfig {
        mps_dir: tmp.path().join("mps"),
        driver_bin_dirs: vec![tmp.path().to_path_buf()],
        ..GpuConfig::default()
    };
    let mut m = MpsDaemons {
        control: find_control(None, &cfg.driver_bin_dirs, None),
        root: cfg.mps_dir.clone(),
        default_thread_percentage: None,
        shm_size_mb: 4,
        running: BTreeMap::new(),
        left: BTreeSet::new(),
    };
    let e = m.acquire("j", "GPU-a").unwrap_err().to_string();
    assert!(e.contains("nvidia-cuda-mps-control was not found"), "{e}");
    assert!(e.contains("gpu.mps_control"), "{e}");
    std::fs::write(tmp.path().join(CONTROL_PROGRAM), "").unwrap();
    assert_eq!(
        find_control(None, &cfg.driver_bin_dirs, None).unwrap(),
        tmp.path().join(CONTROL_PROGRAM)
    );
}

#[test]
fn a_missing_program_names_where_it_was_looked_for() {
    let e = find_control(
        None,
        &[PathBuf::from("/no/bin")],
        Some(std::ffi::OsStr::new("/no/a:/no/b")),
    )
    .unwrap_err();
    assert_eq!(
        e.searched,
        [
            PathBuf::from("/no/bin"),
            PathBuf::from("/no/a"),
            PathBuf::from("/no/b")
        ]
    );
    assert_eq!(
        MpsError::from(e).to_string(),
        "the MPS control program nvidia-cuda-mps-control was not found in gpu.driver_bin_dirs and PATH (/no/bin:/no/a:/no/b); install the NVIDIA driver's MPS binaries or set gpu.mps_control"
    );
}

#[test]
fn thread_percentage_is_the_jobs_capped_by_the_nodes() {
    let c = |node| MpsClient {
        root: PathBuf::from("/run/joblet/mps"),
        active_thread_percentage: node,
    };
    assert_eq!(c(Some(50)).thread_percentage(Some("25")).unwrap(), Some(25));
    assert_eq!(c(Some(50)).thread_percentage(Some("80")).unwrap(), Some(50));
    assert_eq!(c(Some(50)).thread_percentage(None).unwrap(), Some(50));
    assert_eq!(c(None).thread_percentage(Some(" 40 ")).unwrap(), Some(40));
    assert_eq!(c(None).thread_percentage(None).unwrap(), None);
    for bad in ["0", "101", "half", "-5"] {
        let e = c(None).thread_percentage(Some(bad)).unwrap_err();
        assert!(e.to_string().contains("1 to 100"), "{bad}: {e}");
    }
}
