use std::os::unix::process::CommandExt;
use std::process::Command;

use super::interp::{run_all, Data};
use super::policy::{
    BLOCKED_SOCKET_FAMILIES, CLONE_NS_FLAGS, HAS_X32, LAST_SOCKET_FAMILY, PERSONALITY_OK,
    X32_SYSCALL_BIT,
};
use super::*;

/// Every subset of the groups, the empty one first.
fn group_subsets() -> Vec<Vec<SyscallGroup>> {
    (0..1u32 << SyscallGroup::ALL.len())
        .map(|bits| {
            SyscallGroup::ALL
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, g)| *g)
                .collect()
        })
        .collect()
}

fn verdict(ret: u32) -> Verdict {
    match ret & libc::SECCOMP_RET_ACTION_FULL {
        libc::SECCOMP_RET_ALLOW => Verdict::Allow,
        libc::SECCOMP_RET_ERRNO => Verdict::Errno((ret & libc::SECCOMP_RET_DATA) as i32),
        _ => panic!("unexpected filter result {ret:#x}"),
    }
}

/// The arguments worth trying for syscall `nr`: the ones its rules look
/// at, each way, and zeros.
fn interesting_args(nr: i64) -> Vec<[u64; 6]> {
    let mut firsts: Vec<u64> = vec![0, u64::MAX];
    if nr == libc::SYS_clone {
        firsts.push(libc::SIGCHLD as u64);
        firsts.push((libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64);
        firsts.extend(CLONE_NS_FLAGS.iter().map(|&f| u64::from(f)));
        firsts.extend(
            CLONE_NS_FLAGS
                .iter()
                .map(|&f| u64::from(f) | 0xffff_ffff_0000_0000),
        );
    }
    if nr == libc::SYS_personality {
        firsts.extend(PERSONALITY_OK.iter().map(|&v| u64::from(v)));
        firsts.extend([0x1, 0x9, 0x0040_0000, 0x0000_0001_0000_0000]);
    }
    if nr == libc::SYS_socket {
        firsts.extend(0..=u64::from(LAST_SOCKET_FAMILY) + 8);
        firsts.push(0xffff_ffff);
    }
    firsts
        .into_iter()
        .map(|a| [a, 0x1234, 0, 0, 0, 0])
        .collect()
}

#[test]
fn the_programs_do_what_the_policy_says_for_every_number_and_argument() {
    let (_, audit_arch) = arch().unwrap();
    let mut numbers: Vec<u32> = (0..=600).chain([u32::MAX, 0x7fff_ffff]).collect();
    if HAS_X32 {
        numbers.extend((0..=600).map(|n| n | X32_SYSCALL_BIT));
    }
    for allow in group_subsets() {
        let filters = job_filters(&allow).unwrap();
        let policy = Policy::new(&allow);
        for &nr in &numbers {
            for args in interesting_args(i64::from(nr)) {
                let data = Data {
                    nr,
                    arch: audit_arch,
                    args,
                };
                assert_eq!(
                    verdict(run_all(&filters, &data)),
                    policy.decide(nr, &args),
                    "syscall {nr} args {args:x?} allowing {allow:?}"
                );
            }
        }
        // Another architecture's calls (i386 on x86-64) kill the process.
        let foreign = Data {
            nr: 1,
            arch: 0x4000_0003,
            args: [0; 6],
        };
        assert_eq!(
            run_all(&filters, &foreign),
            libc::SECCOMP_RET_KILL_PROCESS,
            "{allow:?}"
        );
    }
}

fn default_verdict(name: &str) -> Verdict {
    let d = denied_syscalls()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} is not in the deny table"));
    Policy::new(&[]).decide(d.nr as u32, &[0; 6])
}

/// What Docker's current default profile (moby/profiles
/// `seccomp/default_linux.go`, after moby PR 46762) refuses on x86-64 to
/// a container without added capabilities: every syscall of the kernel's
/// table not on its allow list, and those it allows only with a
/// capability Docker does not grant by default. Ours refuses each.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_default_refuses_everything_dockers_default_refuses() {
    const DOCKER_REFUSES: &[&str] = &[
        "_sysctl",
        "acct",
        "add_key",
        "afs_syscall",
        "bpf",
        "clock_settime",
        "create_module",
        "delete_module",
        "fanotify_init",
        "finit_module",
        "fsconfig",
        "fsmount",
        "fsopen",
        "fspick",
        "get_kernel_syms",
        "get_mempolicy",
        "getpmsg",
        "init_module",
        "io_uring_enter",
        "io_uring_register",
        "io_uring_setup",
        "ioperm",
        "iopl",
        "kcmp",
        "kexec_file_load",
        "kexec_load",
        "keyctl",
        "lookup_dcookie",
        "lsm_get_self_attr",
        "lsm_list_modules",
        "lsm_set_self_attr",
        "mbind",
        "migrate_pages",
        "mount",
        "mount_setattr",
        "move_mount",
        "move_pages",
        "nfsservctl",
        "open_by_handle_at",
        "open_tree",
        "perf_event_open",
        "pidfd_getfd",
        "pivot_root",
        "process_madvise",
        "putpmsg",
        "query_module",
        "quotactl",
        "quotactl_fd",
        "reboot",
        "request_key",
        "security",
        "set_mempolicy",
        "set_mempolicy_home_node",
        "setdomainname",
        "sethostname",
        "setns",
        "settimeofday",
        "swapoff",
        "swapon",
        "sysfs",
        "syslog",
        "tuxcall",
        "umount2",
        "unshare",
        "uselib",
        "userfaultfd",
        "ustat",
        "vhangup",
        "vserver",
    ];
    for name in DOCKER_REFUSES {
        assert_ne!(default_verdict(name), Verdict::Allow, "{name}");
    }
    let policy = Policy::new(&[]);
    // Newer than Docker's list (open_tree_attr, file_getattr,
    // file_setattr) and anything after them: ENOSYS.
    for nr in [467, 468, 469, 470, 1000] {
        assert_eq!(policy.decide(nr, &[0; 6]), Verdict::Errno(libc::ENOSYS));
    }
    let clone = libc::SYS_clone as u32;
    let user = u64::from(libc::CLONE_NEWUSER as u32);
    assert_eq!(
        policy.decide(clone, &[user, 0, 0, 0, 0, 0]),
        Verdict::Errno(libc::EPERM)
    );
    assert_eq!(
        policy.decide(libc::SYS_clone3 as u32, &[0; 6]),
        Verdict::Errno(libc::ENOSYS)
    );
    let socket = libc::SYS_socket as u32;
    for family in [libc::AF_VSOCK, libc::AF_ALG] {
        assert_eq!(
            policy.decide(socket, &[family as u64, 0, 0, 0, 0, 0]),
            Verdict::Errno(libc::EPERM)
        );
    }
    for family in [
        libc::AF_UNIX,
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
    ] {
        assert_eq!(
            policy.decide(socket, &[family as u64, 0, 0, 0, 0, 0]),
            Verdict::Allow
        );
    }
    let personality = libc::SYS_personality as u32;
    assert_eq!(
        policy.decide(personality, &[0x0040_0000, 0, 0, 0, 0, 0]),
        Verdict::Errno(libc::EPERM),
        "ADDR_NO_RANDOMIZE"
    );
}

#[test]
fn io_uring_and_numa_answer_enosys_so_libraries_fall_back_the_rest_eperm() {
    for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
        assert_eq!(
            default_verdict(name),
            Verdict::Errno(libc::ENOSYS),
            "{name}"
        );
    }
    for name in ["get_mempolicy", "mbind", "set_mempolicy", "move_pages"] {
        assert_eq!(
            default_verdict(name),
            Verdict::Errno(libc::ENOSYS),
            "{name}"
        );
    }
    for name in [
        "perf_event_open",
        "bpf",
        "keyctl",
        "userfaultfd",
        "kexec_load",
        "open_by_handle_at",
        "ptrace",
        "process_vm_readv",
        "mount",
        "unshare",
    ] {
        assert_eq!(default_verdict(name), Verdict::Errno(libc::EPERM), "{name}");
    }
}

#[test]
fn each_group_allows_exactly_its_own_calls() {
    let all = denied_syscalls();
    for g in SyscallGroup::ALL {
        let members: Vec<&Denied> = all.iter().filter(|d| d.group == Some(g)).collect();
        assert!(!members.is_empty(), "{g} has no syscall");
        let with = Policy::new(&[g]);
        for d in &all {
            let v = with.decide(d.nr as u32, &[0; 6]);
            if d.group == Some(g) {
                assert_eq!(v, Verdict::Allow, "{} with {g}", d.name);
            } else {
                assert_eq!(v, Verdict::Errno(d.errno), "{} with {g}", d.name);
            }
        }
    }
    assert_eq!(
        Policy::new(&SyscallGroup::ALL).denied().len(),
        all.iter().filter(|d| d.group.is_none()).count()
    );
}

#[test]
fn the_table_is_consistent() {
    let all = denied_syscalls();
    let mut nrs: Vec<i64> = all.iter().map(|d| d.nr).collect();
    nrs.sort();
    nrs.dedup();
    assert_eq!(nrs.len(), all.len(), "two names share a number");
    let mut names: Vec<&str> = all.iter().map(|d| d.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len(), "a name twice");
    for d in &all {
        assert!(
            [libc::EPERM, libc::ENOSYS].contains(&d.errno),
            "{}: {}",
            d.name,
            d.errno
        );
        assert!(d.nr <= LAST_KNOWN_SYSCALL, "{} beyond the table", d.name);
        assert!(
            ![
                libc::SYS_clone,
                libc::SYS_clone3,
                libc::SYS_personality,
                libc::SYS_socket
            ]
            .contains(&d.nr),
            "{} has argument rules of its own",
            d.name
        );
    }
    for must in [
        "mount",
        "umount2",
        "pivot_root",
        "setns",
        "unshare",
        "bpf",
        "keyctl",
        "kexec_load",
        "init_module",
        "finit_module",
        "open_by_handle_at",
        "reboot",
        "fsopen",
        "open_tree",
        "io_uring_setup",
        "perf_event_open",
        "userfaultfd",
    ] {
        assert!(names.contains(&must), "{must}");
    }
    for f in BLOCKED_SOCKET_FAMILIES {
        assert!(f <= LAST_SOCKET_FAMILY);
    }
}

/// docs/security.md lists every refused call and every group, and the
/// README's config section names the key and each group.
#[test]
fn the_security_doc_and_readme_name_every_refused_call_and_group() {
    let doc = include_str!("../../../../../docs/security.md");
    let readme = include_str!("../../../../../README.md");
    for d in denied_syscalls() {
        assert!(
            doc.contains(&format!("`{}`", d.name)),
            "docs/security.md does not name `{}`",
            d.name
        );
    }
    for name in ["clone", "clone3", "personality", "socket"] {
        assert!(doc.contains(&format!("`{name}`")), "{name}");
    }
    assert!(readme.contains("seccomp_allow"));
    for g in SyscallGroup::ALL {
        assert!(
            doc.contains(&format!("`{g}`")),
            "docs/security.md: group {g}"
        );
        assert!(readme.contains(g.name()), "README: group {g}");
    }
}

#[test]
fn filters_compile_into_three_nonempty_programs() {
    let f = job_filters(&[]).unwrap();
    assert_eq!(f.len(), 3);
    assert!(f.iter().all(|p| !p.is_empty()));
    // Well within the kernel's 4096 instructions.
    assert!(
        f.iter().all(|p| p.len() < 1024),
        "{:?}",
        f.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

/// Runs `call` in a forked child with `filters` loaded; returns what it
/// returned or its errno.
fn in_filtered_child(filters: &[BpfProgram], call: fn() -> libc::c_long) -> Result<(), i32> {
    // SAFETY: the child only makes raw syscalls (prctl, seccomp through
    // seccompiler with built programs, `call`'s syscall) and _exit: nothing
    // that allocates or takes a lock another thread of the test process
    // might hold.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let errno = || {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(255)
        };
        // SAFETY: prctl with integer arguments only.
        let code = if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            200
        } else if apply(filters).is_err() {
            201
        } else if call() < 0 {
            errno()
        } else {
            0
        };
        // SAFETY: ends the child without running the test harness's code.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        200 => panic!("no_new_privs could not be set"),
        201 => panic!("the filter could not be loaded"),
        e => Err(e),
    }
}

fn io_uring_setup() -> libc::c_long {
    let mut params = [0u32; 30]; // struct io_uring_params, 120 bytes
                                 // SAFETY: `params` is a zeroed io_uring_params the kernel may write;
                                 // the ring descriptor is left to the child's exit.
    unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) }
}

fn perf_event_open() -> libc::c_long {
    // struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): a software
    // task-clock counter of this process, user space only, disabled.
    let mut attr = [0u64; 8];
    attr[0] = 1 | (64 << 32); // type PERF_TYPE_SOFTWARE, size 64
    attr[1] = 1; // PERF_COUNT_SW_TASK_CLOCK
    attr[5] = 1 | (1 << 5) | (1 << 6); // disabled, exclude_kernel, exclude_hv
                                       // SAFETY: `attr` is a valid perf_event_attr that outlives the call.
    unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) }
}

fn beyond_the_table() -> libc::c_long {
    // SAFETY: a syscall number no kernel has yet; no arguments.
    unsafe { libc::syscall(LAST_KNOWN_SYSCALL + 100) }
}

#[test]
fn the_kernel_answers_io_uring_with_enosys_and_perf_with_eperm_unless_allowed() {
    let unfiltered = in_filtered_child(&[], io_uring_setup);
    let default = job_filters(&[]).unwrap();
    assert_eq!(
        in_filtered_child(&default, io_uring_setup),
        Err(libc::ENOSYS)
    );
    assert_eq!(
        in_filtered_child(&default, perf_event_open),
        Err(libc::EPERM)
    );
    assert_eq!(
        in_filtered_child(&default, beyond_the_table),
        Err(libc::ENOSYS)
    );
    let storage = job_filters(&[SyscallGroup::IoUring]).unwrap();
    match unfiltered {
        Ok(()) => assert_eq!(in_filtered_child(&storage, io_uring_setup), Ok(())),
        Err(e) => eprintln!(
            "SKIPPED the io_uring allowed case: io_uring_setup fails with errno {e} without any \
             filter on this kernel (io_uring disabled?)"
        ),
    }
    assert_eq!(
        in_filtered_child(&storage, perf_event_open),
        Err(libc::EPERM)
    );
    let profiling = job_filters(&[SyscallGroup::Perf]).unwrap();
    assert_ne!(
        in_filtered_child(&profiling, perf_event_open),
        Err(libc::EPERM)
    );
}

/// A filter the kernel refuses is an error, never a job without one.
#[test]
fn a_filter_that_cannot_be_loaded_is_an_error() {
    assert!(apply(&[Vec::new()]).is_err(), "an empty program");
    // An invalid opcode: the kernel refuses the program (EINVAL).
    let bad = vec![vec![sock_filter {
        code: 0xff,
        jt: 0,
        jf: 0,
        k: 0,
    }]];
    // SAFETY: the child only makes raw syscalls and _exit (as above).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: prctl with integer arguments; _exit ends the child.
        unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            libc::_exit(if apply(&bad).is_err() { 0 } else { 1 });
        }
    }
    let mut status = 0;
    // SAFETY: `status` is a valid writable int.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
}

/// Runs `sh -c script` with the default filters loaded and returns its
/// output.
fn run_filtered(script: &str) -> (i32, String) {
    let filters = job_filters(&[]).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    // SAFETY: the hook runs after fork, before exec, in the child: prctl
    // and seccomp(2) with an already built program do not allocate or
    // take locks.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            apply(&filters).map_err(std::io::Error::other)
        });
    }
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn unshare_and_mount_fail_with_eperm_under_the_filter_while_normal_work_goes_on() {
    // As root without the filter both would succeed; under it the
    // kernel answers EPERM before checking capabilities.
    let (code, text) = run_filtered("unshare --user --map-root-user true");
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("Operation not permitted"), "{text}");
    let (code, text) = run_filtered("unshare --mount true");
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("Operation not permitted"), "{text}");
    // Pipes, forks (clone without namespace flags, clone3 falling back),
    // reads of the whole tree, sockets of the usual families.
    let (code, text) = run_filtered(
        "echo hi | cat; ls / >/dev/null; (true) & wait; \
         if command -v python3 >/dev/null; then python3 -c 'import socket; socket.socket()'; fi; true",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("hi"), "{text}");
}
