//! Privileged, real-kernel proof of the device allow-list: for cgroup v1
//! (`devices.deny`/`devices.allow`) and cgroup v2 (the generated eBPF
//! program), a process moved into the job's cgroup gets ENXIO opening an
//! allowed node with no driver (195:0), EPERM on a denied one (195:1) and
//! can open /dev/null. Needs root; creates cgroups only under
//! `joblet-test-<pid>-devices-<n>` and removes them even on failure.

use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::Duration;

use joblet_sandbox::cgroup::Layout;
use joblet_sandbox::devices::{
    bpf, program, v1, Access, BpfInsn, DeviceError, DeviceRule, DeviceRules,
};
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, pipe, ForkResult, Pid};

const V1_DEVICES: &str = "/sys/fs/cgroup/devices";

/// The cgroup2 mount: `/sys/fs/cgroup/unified` on hybrid hosts, else
/// `/sys/fs/cgroup` on pure v2 hosts.
fn unified_root() -> PathBuf {
    let hybrid = Path::new("/sys/fs/cgroup/unified");
    if hybrid.join("cgroup.procs").exists() {
        hybrid.to_path_buf()
    } else {
        PathBuf::from("/sys/fs/cgroup")
    }
}

/// Whether `test` can run its v1 part: the v1 devices hierarchy exists.
/// On the hybrid layout CI has (v1 controllers plus a cgroup2 tree) it
/// must: its absence fails the test. On other layouts the skip says so
/// loudly, with the layout, instead of passing silently.
fn v1_available(test: &str) -> bool {
    if Path::new(V1_DEVICES).join("devices.allow").exists() {
        return true;
    }
    let layout = Layout::detect(Path::new("/proc/self/mountinfo"))
        .map(|l| describe(&l))
        .unwrap_or_else(|e| format!("not detected: {e}"));
    assert!(
        !layout.starts_with("hybrid"),
        "{test}: no cgroup v1 devices hierarchy at {V1_DEVICES} on a hybrid host ({layout}), \
         the layout CI runs: the v1 device filter is untested"
    );
    eprintln!(
        "SKIPPED {test} (v1 part): no cgroup v1 devices hierarchy at {V1_DEVICES}; \
         cgroup layout: {layout}"
    );
    false
}

/// A one-line account of a cgroup layout for skip messages.
fn describe(layout: &Layout) -> String {
    match layout {
        Layout::Unified { root } => format!("unified (cgroup2 only, at {})", root.display()),
        Layout::Hybrid { v1, unified } => format!(
            "hybrid (v1 {:?}, cgroup2 at {})",
            v1.keys().collect::<Vec<_>>(),
            unified.display()
        ),
        Layout::Legacy { v1 } => format!("legacy (v1 only: {:?})", v1.keys().collect::<Vec<_>>()),
    }
}

fn unique_name() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "joblet-test-{}-devices-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `<root>/<unique>/job`, removed (deepest first) on drop.
struct CgroupGuard {
    dirs: Vec<PathBuf>,
}

impl CgroupGuard {
    fn new(root: &Path) -> Self {
        let base = root.join(unique_name());
        let job = base.join("job");
        let mut guard = CgroupGuard { dirs: Vec::new() };
        fs::create_dir(&base).unwrap_or_else(|e| panic!("mkdir {}: {e}", base.display()));
        guard.dirs.push(base);
        fs::create_dir(&job).unwrap_or_else(|e| panic!("mkdir {}: {e}", job.display()));
        guard.dirs.push(job);
        guard
    }

    fn job(&self) -> &Path {
        &self.dirs[1]
    }

    fn subdir(&mut self, name: &str) -> PathBuf {
        let dir = self.job().join(name);
        fs::create_dir(&dir).unwrap();
        self.dirs.push(dir.clone());
        dir
    }

    fn add_process(&self, dir: &Path, pid: Pid) {
        fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
    }
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            // A just-reaped process can keep a cgroup busy for a moment.
            for _ in 0..100 {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => sleep(Duration::from_millis(10)),
                }
            }
        }
    }
}

/// A temp dir holding `nvidia0` (c 195:0) and `nvidia1` (c 195:1) nodes;
/// removing the dir removes them.
struct Nodes {
    dir: tempfile::TempDir,
}

impl Nodes {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for minor in [0, 1] {
            let path = dir.path().join(format!("nvidia{minor}"));
            mknod(
                &path,
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                makedev(195, minor),
            )
            .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
        }
        Nodes { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// What the probe process tries once released.
enum Op {
    Open(CString, libc::c_int),
    MknodChar(CString, u64, u64),
}

fn open_rw(path: &Path) -> Op {
    Op::Open(
        CString::new(path.as_os_str().as_encoded_bytes()).unwrap(),
        libc::O_RDWR,
    )
}

fn open_ro(path: &Path) -> Op {
    Op::Open(
        CString::new(path.as_os_str().as_encoded_bytes()).unwrap(),
        libc::O_RDONLY,
    )
}

fn mknod_char(path: &Path, major: u64, minor: u64) -> Op {
    Op::MknodChar(
        CString::new(path.as_os_str().as_encoded_bytes()).unwrap(),
        major,
        minor,
    )
}

/// A forked child that waits on a pipe until it has been moved into the
/// cgroup(s), then runs its ops and reports one errno per op (0 = success).
/// Killed and reaped on drop if still running.
struct Probe {
    pid: Pid,
    go: Option<OwnedFd>,
    results: OwnedFd,
    ops: usize,
    reaped: bool,
}

impl Probe {
    fn spawn(ops: &[Op]) -> Probe {
        let (go_r, go_w) = pipe().unwrap();
        let (res_r, res_w) = pipe().unwrap();
        // SAFETY: the child only makes async-signal-safe libc calls on
        // memory prepared before the fork (see `probe_child`) and _exits.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => probe_child(go_r.as_raw_fd(), res_w.as_raw_fd(), ops),
            ForkResult::Parent { child } => {
                drop(go_r);
                drop(res_w);
                Probe {
                    pid: child,
                    go: Some(go_w),
                    results: res_r,
                    ops: ops.len(),
                    reaped: false,
                }
            }
        }
    }

    /// Releases the child and collects its errnos.
    fn run(mut self) -> Vec<Errno> {
        let go = self.go.take().unwrap();
        nix::unistd::write(&go, b"g").unwrap();
        drop(go);
        let mut out = Vec::new();
        let mut buf = [0u8; 4];
        for _ in 0..self.ops {
            let mut got = 0;
            while got < 4 {
                let n = nix::unistd::read(&self.results, &mut buf[got..]).unwrap();
                assert!(n > 0, "probe {} exited early", self.pid);
                got += n;
            }
            out.push(Errno::from_raw(i32::from_ne_bytes(buf)));
        }
        waitpid(self.pid, None).unwrap();
        self.reaped = true;
        out
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = kill(self.pid, Signal::SIGKILL);
            let _ = waitpid(self.pid, None);
        }
    }
}

fn probe_child(go: libc::c_int, results: libc::c_int, ops: &[Op]) -> ! {
    let mut byte = 0u8;
    // SAFETY: read/open/close/mknod/write/_exit are async-signal-safe; the
    // C strings and buffers were allocated before the fork and stay valid.
    unsafe {
        libc::read(go, (&mut byte as *mut u8).cast(), 1);
        for op in ops {
            let rc = match op {
                Op::Open(path, flags) => {
                    let fd = libc::open(path.as_ptr(), *flags | libc::O_CLOEXEC);
                    if fd >= 0 {
                        libc::close(fd);
                        0
                    } else {
                        *libc::__errno_location()
                    }
                }
                Op::MknodChar(path, major, minor) => {
                    let dev = libc::makedev(*major as u32, *minor as u32);
                    if libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o600, dev) == 0 {
                        0
                    } else {
                        *libc::__errno_location()
                    }
                }
            };
            let bytes = rc.to_ne_bytes();
            libc::write(results, bytes.as_ptr().cast(), bytes.len());
        }
        libc::_exit(0)
    }
}

/// minimal + `c 195:0 rw`.
fn job_rules() -> DeviceRules {
    let mut rules = DeviceRules::minimal();
    rules.allow(DeviceRule::char(195, 0, Access::RW));
    rules
}

/// The ops every case runs and what a filtered process must get.
fn standard_ops(nodes: &Nodes) -> Vec<Op> {
    vec![
        open_rw(&nodes.path("nvidia0")),
        open_ro(&nodes.path("nvidia0")),
        open_rw(&nodes.path("nvidia1")),
        open_ro(&nodes.path("nvidia1")),
        open_rw(Path::new("/dev/null")),
        open_ro(Path::new("/dev/urandom")),
        mknod_char(&nodes.path("made"), 1, 3),
    ]
}

const FILTERED: [Errno; 7] = [
    Errno::ENXIO,        // 195:0 allowed rw, no driver
    Errno::ENXIO,        // 195:0 allowed r
    Errno::EPERM,        // 195:1 denied
    Errno::EPERM,        // 195:1 denied
    Errno::UnknownErrno, // /dev/null opens (errno 0)
    Errno::UnknownErrno, // /dev/urandom opens
    Errno::EPERM,        // mknod of 1:3: minimal has no `m`
];

/// Without a filter both nodes give ENXIO, so EPERM above comes from ours.
fn unfiltered_baseline(nodes: &Nodes) {
    let got = Probe::spawn(&[
        open_rw(&nodes.path("nvidia1")),
        open_rw(&nodes.path("nvidia0")),
    ])
    .run();
    assert_eq!(got, [Errno::ENXIO, Errno::ENXIO], "outside any job cgroup");
}

#[test]
fn v1_devices_cgroup_enforces_the_allow_list() {
    if !v1_available("v1_devices_cgroup_enforces_the_allow_list") {
        return;
    }
    let nodes = Nodes::new();
    unfiltered_baseline(&nodes);
    let cg = CgroupGuard::new(Path::new(V1_DEVICES));
    v1::apply(cg.job(), &job_rules()).unwrap();

    let list = fs::read_to_string(cg.job().join("devices.list")).unwrap();
    assert_eq!(
        list,
        "c 1:3 rw\nc 1:5 rw\nc 1:7 rw\nc 1:8 rw\nc 1:9 rw\nc 5:0 rw\nc 5:2 rw\nc 136:* rw\nc 195:0 rw\n"
    );

    let probe = Probe::spawn(&standard_ops(&nodes));
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), FILTERED);
}

#[test]
fn v1_read_back_matches_the_kernel_for_varied_rules() {
    if !v1_available("v1_read_back_matches_the_kernel_for_varied_rules") {
        return;
    }
    let mut cg = CgroupGuard::new(Path::new(V1_DEVICES));
    let mut rules = DeviceRules::deny_all();
    for line in [
        "c 1:3 r",
        "c 1:3 w",
        "b 8:* rwm",
        "a *:7 m",
        "c 10:200 rw",
        "c *:* m",
    ] {
        rules.allow(DeviceRule::parse(line).unwrap());
    }
    v1::apply(cg.job(), &rules).unwrap();
    // Re-applying a smaller set replaces the list, it does not add to it.
    v1::apply(cg.job(), &DeviceRules::minimal()).unwrap();
    v1::apply(cg.job(), &DeviceRules::deny_all()).unwrap();
    assert_eq!(
        fs::read_to_string(cg.job().join("devices.list")).unwrap(),
        ""
    );

    // The kernel refuses `a` in devices.deny once the cgroup has children:
    // the error names the file and the line.
    cg.subdir("child");
    let err = v1::apply(cg.job(), &DeviceRules::minimal()).unwrap_err();
    match &err {
        DeviceError::V1Write { path, line, source } => {
            assert_eq!(path, &cg.job().join("devices.deny"));
            assert_eq!(line, "a");
            assert_eq!(source.raw_os_error(), Some(libc::EINVAL));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn v2_bpf_program_enforces_the_allow_list_until_detached() {
    let nodes = Nodes::new();
    unfiltered_baseline(&nodes);
    let cg = CgroupGuard::new(&unified_root());
    let filter = bpf::attach(cg.job(), &job_rules()).unwrap();
    assert_eq!(
        bpf::attached_program_ids(cg.job()).unwrap(),
        [filter.prog_id()]
    );
    assert_eq!(filter.cgroup_dir(), cg.job());

    let probe = Probe::spawn(&standard_ops(&nodes));
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), FILTERED);

    filter.detach().unwrap();
    assert_eq!(
        bpf::attached_program_ids(cg.job()).unwrap(),
        Vec::<u32>::new()
    );
    let probe = Probe::spawn(&[open_rw(&nodes.path("nvidia1"))]);
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), [Errno::ENXIO], "no filter after detach");
}

/// A warm sandbox's filter: the minimal rules and an empty device table
/// deny both GPUs; once the table holds `c 195:0 rw` the filter decides as
/// the job's rules do, with the same program.
#[test]
fn v2_table_program_denies_until_the_table_names_the_device() {
    let nodes = Nodes::new();
    let cg = CgroupGuard::new(&unified_root());
    let mut filter = bpf::attach_with_table(cg.job(), &DeviceRules::minimal()).unwrap();
    let id = filter.prog_id();

    let probe = Probe::spawn(&[
        open_rw(&nodes.path("nvidia0")),
        open_rw(&nodes.path("nvidia1")),
        open_rw(Path::new("/dev/null")),
    ]);
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(
        probe.run(),
        [Errno::EPERM, Errno::EPERM, Errno::UnknownErrno],
        "empty table"
    );

    let added = DeviceRules::minimal().extension(&job_rules()).unwrap();
    assert_eq!(added, [DeviceRule::char(195, 0, Access::RW)]);
    let table = filter.table_mut().expect("built with a table");
    let room = table.room();
    table.extend(&added).unwrap();
    assert_eq!(table.room(), room - 1);
    assert_eq!(
        bpf::attached_program_ids(cg.job()).unwrap(),
        [id],
        "the same program"
    );
    let probe = Probe::spawn(&standard_ops(&nodes));
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), FILTERED);

    // Read access only for 195:1: opening it read-write stays denied.
    table
        .extend(&[DeviceRule::char(195, 1, Access::R)])
        .unwrap();
    let probe = Probe::spawn(&[
        open_rw(&nodes.path("nvidia1")),
        open_ro(&nodes.path("nvidia1")),
    ]);
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), [Errno::EPERM, Errno::ENXIO]);

    // Only exact devices go in the table; nothing is written otherwise.
    let err = table
        .extend(&[DeviceRule::parse("c 195:* rw").unwrap()])
        .unwrap_err();
    assert!(matches!(err, DeviceError::TableRefused { .. }), "{err}");
    assert!(err.to_string().contains("c 195:* rw"), "{err}");
}

/// v1: extending the minimal list by the GPU's rule gives the job's list,
/// enforced as if applied whole.
#[test]
fn v1_extension_allows_exactly_the_added_devices() {
    if !v1_available("v1_extension_allows_exactly_the_added_devices") {
        return;
    }
    let nodes = Nodes::new();
    let cg = CgroupGuard::new(Path::new(V1_DEVICES));
    v1::apply(cg.job(), &DeviceRules::minimal()).unwrap();
    let added = DeviceRules::minimal().extension(&job_rules()).unwrap();
    v1::extend(cg.job(), &added, &job_rules()).unwrap();
    let probe = Probe::spawn(&standard_ops(&nodes));
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), FILTERED);
    // The read-back fails closed when the list is not the one expected.
    let mut more = job_rules();
    more.allow(DeviceRule::char(195, 1, Access::RW));
    let err = v1::extend(cg.job(), &[], &more).unwrap_err();
    assert!(matches!(err, DeviceError::V1Mismatch { .. }), "{err}");
}

#[test]
fn v2_dropping_the_handle_leaves_the_filter_attached() {
    let nodes = Nodes::new();
    let cg = CgroupGuard::new(&unified_root());
    let filter = bpf::attach(cg.job(), &job_rules()).unwrap();
    let id = filter.prog_id();
    drop(filter);
    assert_eq!(bpf::attached_program_ids(cg.job()).unwrap(), [id]);

    let probe = Probe::spawn(&[
        open_rw(&nodes.path("nvidia1")),
        open_rw(&nodes.path("nvidia0")),
    ]);
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), [Errno::EPERM, Errno::ENXIO]);
    // The guard's rmdir succeeds with the program still attached: the
    // cgroup takes it along.
}

#[test]
fn v2_filters_of_parent_and_job_must_both_allow() {
    let nodes = Nodes::new();
    let mut cg = CgroupGuard::new(&unified_root());
    let inner = cg.subdir("inner");
    // The job's cgroup allows 195:1 only; its child allows 195:0 only.
    let mut only_1 = DeviceRules::minimal();
    only_1.allow(DeviceRule::char(195, 1, Access::RW));
    let _outer = bpf::attach(cg.job(), &only_1).unwrap();
    let _inner = bpf::attach(&inner, &job_rules()).unwrap();

    let probe = Probe::spawn(&[
        open_rw(&nodes.path("nvidia0")),
        open_rw(&nodes.path("nvidia1")),
        open_rw(Path::new("/dev/null")),
    ]);
    cg.add_process(&inner, probe.pid);
    assert_eq!(
        probe.run(),
        [Errno::EPERM, Errno::EPERM, Errno::UnknownErrno]
    );
}

#[test]
fn v1_and_v2_together_need_both_to_allow() {
    if !v1_available("v1_and_v2_together_need_both_to_allow") {
        return;
    }
    let nodes = Nodes::new();
    let v1_cg = CgroupGuard::new(Path::new(V1_DEVICES));
    let v2_cg = CgroupGuard::new(&unified_root());
    let mut both = job_rules();
    both.allow(DeviceRule::char(195, 1, Access::RW));
    v1::apply(v1_cg.job(), &both).unwrap();
    let _filter = bpf::attach(v2_cg.job(), &job_rules()).unwrap();

    let probe = Probe::spawn(&[
        open_rw(&nodes.path("nvidia0")),
        open_rw(&nodes.path("nvidia1")),
    ]);
    v1_cg.add_process(v1_cg.job(), probe.pid);
    v2_cg.add_process(v2_cg.job(), probe.pid);
    assert_eq!(
        probe.run(),
        [Errno::ENXIO, Errno::EPERM],
        "v1 allows 195:1, the v2 program does not"
    );
}

#[test]
fn attach_to_something_not_a_cgroup_v2_dir_fails_closed() {
    let not_cgroup = tempfile::tempdir().unwrap();
    let err = bpf::attach(not_cgroup.path(), &job_rules()).unwrap_err();
    match &err {
        DeviceError::BpfAttach { path, errno } => {
            assert_eq!(path, not_cgroup.path());
            assert_eq!(*errno, Errno::EBADF);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains(&not_cgroup.path().display().to_string()),
        "{err}"
    );

    let missing = not_cgroup.path().join("missing");
    let err = bpf::attach(&missing, &job_rules()).unwrap_err();
    assert!(
        matches!(&err, DeviceError::CgroupOpen { path, .. } if path == &missing),
        "{err:?}"
    );

    if v1_available("attach_to_something_not_a_cgroup_v2_dir_fails_closed") {
        let cg = CgroupGuard::new(Path::new(V1_DEVICES));
        let err = bpf::attach(cg.job(), &job_rules()).unwrap_err();
        assert!(
            matches!(
                &err,
                DeviceError::BpfAttach {
                    errno: Errno::EBADF,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    let err = v1::apply(not_cgroup.path(), &job_rules()).unwrap_err();
    // A plain directory has no devices.deny, and none is created there.
    assert!(
        matches!(&err, DeviceError::V1Write { path, line, .. }
            if path == &not_cgroup.path().join("devices.deny") && line == "a"),
        "{err:?}"
    );
    assert!(!not_cgroup.path().join("devices.deny").exists());
}

#[test]
fn an_invalid_program_is_refused_with_the_verifier_log() {
    // `exit` with r0 never set.
    let exit = BpfInsn {
        code: 0x95,
        regs: 0,
        off: 0,
        imm: 0,
    };
    let err = bpf::load(&[exit]).unwrap_err();
    match &err {
        DeviceError::BpfLoad {
            errno,
            insns,
            verifier_log,
        } => {
            assert_eq!(*errno, Errno::EACCES);
            assert_eq!(*insns, 1);
            assert!(verifier_log.contains("R0 !read_ok"), "{verifier_log}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("R0 !read_ok"), "{err}");

    // A read past the end of bpf_cgroup_dev_ctx.
    let load_past_ctx = BpfInsn {
        code: 0x61,
        regs: 0x10,
        off: 12,
        imm: 0,
    };
    let err = bpf::load(&[load_past_ctx, exit]).unwrap_err();
    assert!(
        matches!(&err, DeviceError::BpfLoad { verifier_log, .. } if verifier_log.contains("invalid bpf_context access")),
        "{err:?}"
    );
}

#[test]
fn generated_programs_load_for_many_rule_sets() {
    let mut rules = DeviceRules::deny_all();
    assert!(bpf::load(&program::generate(&rules)).is_ok());
    for line in [
        "a *:* rwm",
        "b 8:* r",
        "c *:5 wm",
        "c 4294967294:1048575 m",
        "c 195:255 rw",
    ] {
        rules.allow(DeviceRule::parse(line).unwrap());
    }
    for major in 0..2000 {
        rules.allow(DeviceRule::char(major, major % 7, Access::RW));
    }
    let insns = program::generate(&rules);
    let loaded = bpf::load(&insns).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.id() > 0);
}

/// More exact devices than a table holds: the filter keeps them all as
/// blocks with an empty table, and still enforces them.
#[test]
fn a_filter_with_more_exact_devices_than_its_table_holds_keeps_them_as_blocks() {
    let nodes = Nodes::new();
    let cg = CgroupGuard::new(&unified_root());
    let mut rules = job_rules();
    for minor in 1000..1000 + bpf::TABLE_CAPACITY {
        rules.allow(DeviceRule::char(195, minor, Access::RW));
    }
    let mut filter = bpf::attach_with_table(cg.job(), &rules).unwrap();
    let table = filter.table_mut().expect("built with a table");
    assert_eq!(table.room(), bpf::TABLE_CAPACITY as usize, "nothing in it");
    let probe = Probe::spawn(&standard_ops(&nodes));
    cg.add_process(cg.job(), probe.pid);
    assert_eq!(probe.run(), FILTERED);
}
