//! Temp-dir cgroup trees (v1 hierarchies, a cgroup2 root, a sysfs with a
//! block device) and tests of [`JobCgroup`] against them: which file gets
//! which value, what fails closed and what is cleaned up.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::*;

/// Files the kernel shows in a new v1 cgroup of each controller.
fn v1_files(c: Controller) -> &'static [(&'static str, &'static str)] {
    match c {
        Controller::Cpu => &[
            ("cpu.cfs_period_us", "100000\n"),
            ("cpu.cfs_quota_us", "-1\n"),
        ],
        Controller::Cpuacct => &[("cpuacct.usage", "0\n")],
        Controller::Cpuset => &[("cpuset.cpus", "\n"), ("cpuset.mems", "\n")],
        Controller::Memory => &[
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory.memsw.limit_in_bytes", "9223372036854771712\n"),
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            ),
            ("memory.failcnt", "0\n"),
            ("memory.usage_in_bytes", "0\n"),
            ("memory.max_usage_in_bytes", "0\n"),
        ],
        Controller::Io => &[
            ("blkio.throttle.read_bps_device", ""),
            ("blkio.throttle.write_bps_device", ""),
        ],
        Controller::Pids => &[("pids.max", "max\n"), ("pids.current", "0\n")],
        Controller::Devices => &[("devices.allow", ""), ("devices.deny", "")],
        Controller::Freezer => &[("freezer.state", "THAWED\n")],
    }
}

/// Files of a new v2 cgroup with `controllers` enabled by its parent.
fn v2_files(controllers: &[&str]) -> Vec<(&'static str, &'static str)> {
    let mut f = vec![
        ("cgroup.procs", ""),
        ("cgroup.kill", ""),
        ("cgroup.subtree_control", ""),
        ("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"),
    ];
    for c in controllers {
        f.extend_from_slice(match *c {
            "cpu" => &[("cpu.max", "max 100000\n")][..],
            "cpuset" => &[("cpuset.cpus", "\n")][..],
            "memory" => &[
                ("memory.max", "max\n"),
                ("memory.swap.max", "max\n"),
                ("memory.oom.group", "0\n"),
                ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"),
                ("memory.current", "0\n"),
                ("memory.peak", "0\n"),
            ][..],
            "io" => &[("io.max", "")][..],
            "pids" => &[("pids.max", "max\n"), ("pids.current", "0\n")][..],
            _ => &[][..],
        });
    }
    f
}

fn write_files(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (f, v) in files {
        std::fs::write(dir.join(f), v).unwrap();
    }
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// A fake host: hierarchies and sysfs in one temp dir.
struct Fake {
    tmp: tempfile::TempDir,
    layout: Layout,
    v2_controllers: Vec<&'static str>,
}

impl Fake {
    /// This machine's shape: eight v1 hierarchies plus a cgroup2 tree that
    /// holds only hugetlb.
    fn hybrid() -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let mut v1 = BTreeMap::new();
        for c in Controller::ALL {
            let m = tmp.path().join("cg").join(c.v1_name());
            write_files(&m, &[("cgroup.procs", "1\n")]);
            if c == Controller::Cpuset {
                write_files(&m, &[("cpuset.cpus", "0-3\n"), ("cpuset.mems", "0\n")]);
            }
            v1.insert(c, m);
        }
        let unified = tmp.path().join("cg/unified");
        write_files(
            &unified,
            &[
                ("cgroup.controllers", "hugetlb\n"),
                ("cgroup.subtree_control", ""),
            ],
        );
        let fake = Fake {
            tmp,
            layout: Layout::Hybrid { v1, unified },
            v2_controllers: vec![],
        };
        fake.sysfs_disk();
        fake
    }

    /// A modern host: cgroup2 only, all controllers available.
    fn unified(controllers: &str) -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("cg");
        write_files(
            &root,
            &[
                ("cgroup.controllers", controllers),
                ("cgroup.subtree_control", ""),
                ("cgroup.procs", "1\n"),
            ],
        );
        let names = ["cpu", "cpuset", "io", "memory", "pids"];
        let fake = Fake {
            tmp,
            layout: Layout::Unified { root },
            v2_controllers: names
                .into_iter()
                .filter(|n| controllers.split_whitespace().any(|c| c == *n))
                .collect(),
        };
        fake.sysfs_disk();
        fake
    }

    fn roots(&self) -> CgroupRoots {
        CgroupRoots {
            mountinfo: self.tmp.path().join("mountinfo"),
            sysfs: self.tmp.path().join("sys"),
        }
    }

    /// The directory jobs write to, and the disk sysfs says backs it.
    fn work(&self) -> PathBuf {
        self.tmp.path().join("work")
    }

    fn dev(&self) -> String {
        let d = std::fs::metadata(self.work()).unwrap().dev();
        format!("{}:{}", nix::sys::stat::major(d), nix::sys::stat::minor(d))
    }

    fn sysfs_disk(&self) {
        std::fs::create_dir_all(self.work()).unwrap();
        let entry = self.tmp.path().join("sys/dev/block").join(self.dev());
        write_files(&entry, &[("dev", "x\n")]);
    }

    /// Pre-creates every level of `base` with the files joblet reads there
    /// (v1 cpuset levels start empty; v2 levels have subtree_control).
    fn base_dirs(&self, base: &str) {
        let mut rel = PathBuf::new();
        for comp in base.split('/') {
            rel.push(comp);
            for (mount, ctrls) in self.layout.v1_hierarchies() {
                std::fs::create_dir_all(mount.join(&rel)).unwrap();
                if ctrls.contains(&Controller::Cpuset) {
                    write_files(
                        &mount.join(&rel),
                        &[("cpuset.cpus", "\n"), ("cpuset.mems", "\n")],
                    );
                }
            }
            if let Some(root) = self.layout.unified_root() {
                write_files(&root.join(&rel), &v2_files(&[]));
            }
        }
    }

    /// Pre-creates the base and `<base>/<name>` everywhere with the files
    /// the kernel would show (a plain directory cannot sprout them itself).
    fn job_dirs(&self, base: &str, name: &str) {
        self.base_dirs(base);
        for (mount, ctrls) in self.layout.v1_hierarchies() {
            let job = mount.join(base).join(name);
            write_files(&job, &[("cgroup.procs", "")]);
            for c in &ctrls {
                write_files(&job, v1_files(*c));
            }
        }
        if let Some(root) = self.layout.unified_root() {
            write_files(&root.join(base).join(name), &v2_files(&self.v2_controllers));
        }
    }

    fn v1(&self, c: Controller) -> PathBuf {
        self.layout.v1_mount(c).unwrap().to_path_buf()
    }
}

fn full_limits(work: &Path) -> Limits {
    Limits {
        cpu_percent: Some(50),
        cpuset: Some(vec![0, 2]),
        memory_mb: Some(64),
        io_bps: Some(1_048_576),
        io_path: Some(work.to_path_buf()),
        pids_max: 10,
    }
}

#[test]
fn hybrid_create_writes_the_v1_files() {
    let f = Fake::hybrid();
    f.job_dirs("joblet", "j1");
    let job = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap();
    let j = |c: Controller, file: &str| read(f.v1(c).join("joblet/j1").join(file));
    assert_eq!(j(Controller::Cpu, "cpu.cfs_period_us"), "100000");
    assert_eq!(j(Controller::Cpu, "cpu.cfs_quota_us"), "50000");
    assert_eq!(j(Controller::Cpuset, "cpuset.cpus"), "0,2");
    assert_eq!(j(Controller::Cpuset, "cpuset.mems"), "0");
    // The base level inherited the root's CPUs and memory nodes.
    assert_eq!(
        read(f.v1(Controller::Cpuset).join("joblet/cpuset.cpus")),
        "0-3"
    );
    assert_eq!(
        read(f.v1(Controller::Cpuset).join("joblet/cpuset.mems")),
        "0"
    );
    assert_eq!(j(Controller::Memory, "memory.limit_in_bytes"), "67108864");
    assert_eq!(
        j(Controller::Memory, "memory.memsw.limit_in_bytes"),
        "67108864"
    );
    let dev = f.dev();
    assert_eq!(
        j(Controller::Io, "blkio.throttle.read_bps_device"),
        format!("{dev} 1048576")
    );
    assert_eq!(
        j(Controller::Io, "blkio.throttle.write_bps_device"),
        format!("{dev} 1048576")
    );
    assert_eq!(j(Controller::Pids, "pids.max"), "10");
    // Untouched: devices (the devices module's job) and the freezer.
    assert_eq!(j(Controller::Devices, "devices.allow"), "");
    assert_eq!(j(Controller::Freezer, "freezer.state"), "THAWED\n");
    // No v2 controllers to enable here: subtree_control left alone.
    let unified = f.layout.unified_root().unwrap();
    assert_eq!(read(unified.join("cgroup.subtree_control")), "");
    assert_eq!(job.unified_dir(), Some(unified.join("joblet/j1").as_path()));
    assert_eq!(
        job.v1_devices_dir(),
        Some(f.v1(Controller::Devices).join("joblet/j1").as_path())
    );
    assert_eq!(job.dirs().len(), 9);
}

#[test]
fn unified_create_writes_the_v2_files_and_enables_controllers() {
    let f = Fake::unified("cpuset cpu io memory hugetlb pids rdma misc\n");
    f.job_dirs("joblet", "j1");
    let job = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap();
    let root = f.layout.unified_root().unwrap();
    let j = |file: &str| read(root.join("joblet/j1").join(file));
    assert_eq!(j("cpu.max"), "50000 100000");
    assert_eq!(j("cpuset.cpus"), "0,2");
    assert_eq!(j("memory.max"), "67108864");
    assert_eq!(j("memory.swap.max"), "0");
    assert_eq!(j("memory.oom.group"), "1");
    assert_eq!(
        j("io.max"),
        format!("{} rbps=1048576 wbps=1048576", f.dev())
    );
    assert_eq!(j("pids.max"), "10");
    let enabled = "+cpu +cpuset +memory +io +pids";
    assert_eq!(read(root.join("cgroup.subtree_control")), enabled);
    assert_eq!(read(root.join("joblet/cgroup.subtree_control")), enabled);
    assert_eq!(job.v1_devices_dir(), None);
    assert_eq!(job.unified_dir(), Some(root.join("joblet/j1").as_path()));
    assert_eq!(job.dirs(), vec![root.join("joblet/j1").as_path()]);
}

#[test]
fn only_pids_is_written_when_nothing_else_is_asked() {
    let f = Fake::unified("cpu memory pids\n");
    f.job_dirs("joblet", "j1");
    let limits = Limits {
        pids_max: 64,
        ..Limits::default()
    };
    JobCgroup::create(&f.layout, &f.roots(), "joblet", "j1", &limits).unwrap();
    let root = f.layout.unified_root().unwrap();
    assert_eq!(read(root.join("joblet/j1/pids.max")), "64");
    assert_eq!(read(root.join("joblet/j1/cpu.max")), "max 100000\n");
    assert_eq!(read(root.join("joblet/j1/memory.max")), "max\n");
    assert_eq!(
        read(root.join("cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
}

#[test]
fn a_limit_without_its_controller_is_refused_before_anything_is_created() {
    let f = Fake::unified("cpu memory pids\n");
    let limits = Limits {
        io_bps: Some(1000),
        io_path: Some(f.work()),
        pids_max: 10,
        ..Limits::default()
    };
    let err = JobCgroup::create(&f.layout, &f.roots(), "joblet", "j1", &limits).unwrap_err();
    assert!(
        matches!(err, CgroupError::ControllerUnavailable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("io_bps"), "{err}");
    assert!(!f.layout.unified_root().unwrap().join("joblet").exists());

    // pids is always needed.
    let f = Fake::unified("cpu memory\n");
    let err = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &Limits {
            pids_max: 1,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("pids"), "{err}");
}

#[test]
fn io_on_a_path_without_a_block_device_is_refused() {
    let f = Fake::hybrid();
    f.job_dirs("joblet", "j1");
    let limits = full_limits(&f.work());
    let roots = CgroupRoots {
        sysfs: f.tmp.path().join("empty-sys"),
        ..f.roots()
    };
    let err = JobCgroup::create(&f.layout, &roots, "joblet", "j1", &limits).unwrap_err();
    assert!(matches!(err, CgroupError::NoBlockDevice { .. }), "{err}");
    assert!(err.to_string().contains(&f.work().display().to_string()));
    // Nothing was written.
    assert_eq!(
        read(
            f.v1(Controller::Memory)
                .join("joblet/j1/memory.limit_in_bytes")
        ),
        "9223372036854771712\n"
    );
}

#[test]
fn a_failed_write_removes_the_job_directories_it_created() {
    // No pre-created job dirs: the plain directories lack the interface
    // files, so the first limit write fails (as with a missing controller).
    let f = Fake::hybrid();
    f.base_dirs("joblet");
    let err = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap_err();
    assert!(matches!(err, CgroupError::Write { .. }), "{err}");
    assert!(err.to_string().contains("joblet/j1/"), "{err}");
    for dir in f.layout.dirs_for("joblet/j1") {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    // The shared base stays.
    for dir in f.layout.dirs_for("joblet") {
        assert!(dir.is_dir(), "{}", dir.display());
    }
}

#[test]
fn an_existing_job_directory_with_processes_is_busy_and_kept() {
    let f = Fake::hybrid();
    f.job_dirs("joblet", "j1");
    let mem_job = f.v1(Controller::Memory).join("joblet/j1");
    std::fs::write(mem_job.join("cgroup.procs"), "4242\n").unwrap();
    let err = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap_err();
    let CgroupError::Busy { path, pids } = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &mem_job);
    assert_eq!(pids, &vec![4242]);
    assert!(mem_job.is_dir());
}

#[test]
fn add_pid_writes_every_hierarchy() {
    let f = Fake::hybrid();
    f.job_dirs("joblet", "j1");
    let job = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap();
    job.add_pid(777).unwrap();
    for dir in f.layout.dirs_for("joblet/j1") {
        assert_eq!(read(dir.join("cgroup.procs")), "777", "{}", dir.display());
    }
    assert_eq!(job.pids().unwrap(), vec![777]);
}

#[test]
fn oom_and_stats_come_from_the_serving_version() {
    let f = Fake::hybrid();
    f.job_dirs("joblet", "j1");
    let job = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &full_limits(&f.work()),
    )
    .unwrap();
    assert!(!job.oom_killed().unwrap());
    assert_eq!(job.death_reason().unwrap(), None);
    let mem = f.v1(Controller::Memory).join("joblet/j1");
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    )
    .unwrap();
    std::fs::write(mem.join("memory.usage_in_bytes"), "1000\n").unwrap();
    std::fs::write(mem.join("memory.max_usage_in_bytes"), "67108864\n").unwrap();
    std::fs::write(
        f.v1(Controller::Cpuacct).join("joblet/j1/cpuacct.usage"),
        "3000000\n",
    )
    .unwrap();
    std::fs::write(f.v1(Controller::Pids).join("joblet/j1/pids.current"), "3\n").unwrap();
    assert!(job.oom_killed().unwrap());
    assert_eq!(
        job.death_reason().unwrap().as_deref(),
        Some("out of memory: limit 64 MB")
    );
    assert_eq!(
        job.stats().unwrap(),
        CgroupStats {
            memory_current_bytes: Some(1000),
            memory_peak_bytes: Some(67108864),
            cpu_usage_usec: Some(3000),
            pids_current: Some(3),
            oom_kills: Some(1),
        }
    );

    let f = Fake::unified("cpu memory pids\n");
    f.job_dirs("joblet", "j1");
    let job = JobCgroup::create(
        &f.layout,
        &f.roots(),
        "joblet",
        "j1",
        &Limits {
            pids_max: 5,
            ..Limits::default()
        },
    )
    .unwrap();
    let dir = f.layout.unified_root().unwrap().join("joblet/j1");
    std::fs::write(dir.join("memory.events"), "oom 2\noom_kill 2\n").unwrap();
    std::fs::write(dir.join("cpu.stat"), "usage_usec 77\n").unwrap();
    assert!(job.oom_killed().unwrap());
    // memory.max is "max": no limit to name.
    assert_eq!(
        job.death_reason().unwrap().as_deref(),
        Some("out of memory")
    );
    let s = job.stats().unwrap();
    assert_eq!(s.cpu_usage_usec, Some(77));
    assert_eq!(s.oom_kills, Some(2));
}

#[test]
fn open_names_the_same_directories_as_create() {
    let f = Fake::hybrid();
    f.job_dirs("a/b", "j1");
    let created =
        JobCgroup::create(&f.layout, &f.roots(), "a/b", "j1", &full_limits(&f.work())).unwrap();
    let opened = JobCgroup::open(&f.layout, "a/b", "j1").unwrap();
    assert_eq!(created.dirs(), opened.dirs());
    // Nested base levels were prepared too.
    assert_eq!(read(f.v1(Controller::Cpuset).join("a/cpuset.cpus")), "0-3");
}

#[test]
fn destroy_of_empty_and_missing_cgroups_succeeds() {
    let f = Fake::hybrid();
    for dir in f.layout.dirs_for("joblet/j1") {
        std::fs::create_dir_all(&dir).unwrap();
    }
    JobCgroup::open(&f.layout, "joblet", "j1")
        .unwrap()
        .destroy()
        .unwrap();
    for dir in f.layout.dirs_for("joblet/j1") {
        assert!(!dir.exists());
    }
    // Again: nothing there any more.
    JobCgroup::open(&f.layout, "joblet", "j1")
        .unwrap()
        .destroy()
        .unwrap();
}

#[test]
fn bad_names_are_refused() {
    let f = Fake::hybrid();
    let l = full_limits(&f.work());
    for (base, name) in [
        ("", "j"),
        ("/abs", "j"),
        ("a//b", "j"),
        ("..", "j"),
        ("joblet", ""),
        ("joblet", ".."),
        ("joblet", "a/b"),
        ("joblet", "sp ace"),
    ] {
        let err = JobCgroup::create(&f.layout, &f.roots(), base, name, &l).unwrap_err();
        assert!(
            matches!(err, CgroupError::InvalidName { .. }),
            "{base:?} {name:?}: {err}"
        );
    }
}

#[test]
fn cleanup_stale_removes_empty_job_cgroups_and_reports_busy_ones() {
    let f = Fake::hybrid();
    let mem = f.v1(Controller::Memory);
    // Empty plain directories stand for empty cgroups (rmdir works).
    std::fs::create_dir_all(mem.join("joblet/old1/sub")).unwrap();
    std::fs::create_dir_all(mem.join("joblet/running")).unwrap();
    std::fs::write(mem.join("joblet/running/cgroup.procs"), "99\n").unwrap();
    std::fs::create_dir_all(f.v1(Controller::Cpu).join("joblet/old2")).unwrap();
    // The daemon's own job is never touched, empty or not.
    std::fs::create_dir_all(mem.join("joblet/mine")).unwrap();
    let kept = cleanup_stale(&f.layout, "joblet", &|name| name == "mine").unwrap();
    assert_eq!(kept, vec![mem.join("joblet/running")]);
    assert!(!mem.join("joblet/old1").exists());
    assert!(!f.v1(Controller::Cpu).join("joblet/old2").exists());
    assert!(mem.join("joblet/mine").is_dir());
    assert!(mem.join("joblet").is_dir());
    // No base anywhere: nothing to do.
    assert!(cleanup_stale(&f.layout, "other", &|_| false)
        .unwrap()
        .is_empty());
    assert!(cleanup_stale(&f.layout, "../x", &|_| false).is_err());
}

/// Shims of an earlier daemon remove their jobs' cgroups while the sweep
/// runs, and new ones appear: the sweep never fails on that.
#[test]
fn cleanup_stale_tolerates_cgroups_vanishing_and_appearing_while_it_runs() {
    let f = Fake::hybrid();
    let mem = f.v1(Controller::Memory);
    std::fs::create_dir_all(mem.join("joblet")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (mem, stop) = (mem.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let job = mem.join(format!("joblet/job{}", n % 7));
                let _ = std::fs::create_dir_all(job.join("a/b"));
                let _ = std::fs::remove_dir(job.join("a/b"));
                let _ = std::fs::remove_dir(job.join("a"));
                let _ = std::fs::remove_dir(&job);
                n += 1;
            }
        })
    };
    for _ in 0..300 {
        if let Err(e) = cleanup_stale(&f.layout, "joblet", &|_| false) {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            churn.join().unwrap();
            panic!("the sweep failed on a directory that vanished: {e}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
}
