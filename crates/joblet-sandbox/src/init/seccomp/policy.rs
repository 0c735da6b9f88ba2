//! The job's syscall policy as plain data: which calls are refused and with
//! which errno, which of them an admin may allow per node
//! ([`SyscallGroup`], `sandbox.seccomp_allow`), and [`Policy::decide`], the
//! reference the compiled filter is checked against instruction by
//! instruction (`tests.rs`). No syscalls are made here.
//!
//! The policy refuses at least everything Docker's current default profile
//! (moby/profiles `seccomp/default_linux.go`, which dropped `io_uring_*` in
//! moby PR 46762) refuses a container without added capabilities; where it
//! refuses more, or answers with another errno, `docs/security.md` says
//! why, call by call.

use serde::{Deserialize, Serialize};

/// A group of refused syscalls an admin may allow on a node
/// (`sandbox.seccomp_allow: [io_uring]`). Everything else the policy
/// refuses stays refused; `sandbox.seccomp: false` turns the filter off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyscallGroup {
    /// `io_uring_setup`, `io_uring_enter`, `io_uring_register`: storage
    /// workloads. Operations submitted through a ring are not seen by
    /// seccomp at all.
    IoUring,
    /// `perf_event_open`: profilers. The kernel's `perf_event_paranoid`
    /// still applies.
    Perf,
    /// `ptrace`, `process_vm_readv`, `process_vm_writev`, `kcmp`,
    /// `pidfd_getfd`, `process_madvise`: debuggers and samplers (gdb,
    /// strace, py-spy) on the job's own processes. The kernel's ptrace
    /// access checks still apply (same uid, no capabilities).
    Ptrace,
    /// `get_mempolicy`, `set_mempolicy`, `mbind`, `set_mempolicy_home_node`,
    /// `migrate_pages`, `move_pages`: NUMA placement (numactl, libnuma,
    /// NUMA-aware runtimes).
    Numa,
}

impl SyscallGroup {
    /// Every group, in the order they are documented.
    pub const ALL: [SyscallGroup; 4] = [
        SyscallGroup::IoUring,
        SyscallGroup::Perf,
        SyscallGroup::Ptrace,
        SyscallGroup::Numa,
    ];

    /// The name in `sandbox.seccomp_allow`.
    pub fn name(self) -> &'static str {
        match self {
            SyscallGroup::IoUring => "io_uring",
            SyscallGroup::Perf => "perf",
            SyscallGroup::Ptrace => "ptrace",
            SyscallGroup::Numa => "numa",
        }
    }
}

impl std::fmt::Display for SyscallGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One syscall the job may not make (unless its group is allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    pub name: &'static str,
    /// Its number on this architecture.
    pub nr: i64,
    /// What the job gets: `EPERM` (as Docker answers, and as the kernel
    /// answers a caller without the capability) or `ENOSYS` where
    /// libraries fall back when the call is missing.
    pub errno: i32,
    /// The group that allows it, if an admin may.
    pub group: Option<SyscallGroup>,
}

/// What the filter does with one syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Errno(i32),
}

/// The highest syscall number the policy knows (`removexattrat`, Linux
/// 6.13; numbers from 424 on are the same on every architecture). Anything
/// above it is newer than this table and gets `ENOSYS`, as from a kernel
/// without it (runc answers syscalls newer than its profile the same way),
/// so that libraries fall back instead of the filter allowing what nobody
/// has reviewed.
pub const LAST_KNOWN_SYSCALL: i64 = 466;

/// The x32 ABI marks its syscall numbers with this bit on x86-64; every
/// x32 call gets `ENOSYS`, as from a kernel built without x32.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Whether this architecture has the x32 ABI.
pub const HAS_X32: bool = cfg!(target_arch = "x86_64");

/// Namespace flags `clone` may not carry (`CLONE_NEWTIME` shares its bit
/// with the exit signal in `clone`, and is only usable through `unshare`,
/// which is denied). `clone3`, whose flags live in memory a filter cannot
/// read, gets `ENOSYS` so that libc falls back to `clone`.
pub const CLONE_NS_FLAGS: [u32; 7] = [
    libc::CLONE_NEWNS as u32,
    libc::CLONE_NEWUTS as u32,
    libc::CLONE_NEWIPC as u32,
    libc::CLONE_NEWUSER as u32,
    libc::CLONE_NEWPID as u32,
    libc::CLONE_NEWNET as u32,
    libc::CLONE_NEWCGROUP as u32,
];

/// `personality` values allowed (Docker's list): PER_LINUX, PER_LINUX32,
/// UNAME26, PER_LINUX32|UNAME26 and the query 0xffffffff.
pub const PERSONALITY_OK: [u32; 5] = [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// `AF_MCTP`, the highest socket family Docker allows; higher (future)
/// families are refused.
pub const LAST_SOCKET_FAMILY: u32 = 45;

/// Socket families `socket` may not create (as Docker): `AF_VSOCK`
/// (host/guest sockets, not namespaced: it reaches the hypervisor's side),
/// `AF_ALG` (the kernel crypto API, a record of bugs and no use to a job),
/// and families the kernel has removed or is removing (`AF_DECnet`,
/// `AF_ECONET`, `AF_ATMSVC`, `AF_IRDA`, `AF_WANPIPE`, `AF_ISDN`,
/// `AF_CAIF`).
pub const BLOCKED_SOCKET_FAMILIES: [u32; 9] = [
    libc::AF_DECnet as u32,
    libc::AF_ECONET as u32,
    libc::AF_ATMSVC as u32,
    libc::AF_IRDA as u32,
    libc::AF_WANPIPE as u32,
    libc::AF_ISDN as u32,
    libc::AF_CAIF as u32,
    libc::AF_ALG as u32,
    libc::AF_VSOCK as u32,
];

// Numbers libc does not have (yet: the same on every architecture; the
// x86-64 only ones of removed calls are written in place).
const SYS_LSM_GET_SELF_ATTR: i64 = 459;
const SYS_LSM_SET_SELF_ATTR: i64 = 460;
const SYS_LSM_LIST_MODULES: i64 = 461;

/// Every syscall the policy refuses by number, before any group is
/// allowed. `clone` with namespace flags, `clone3`, unusual `personality`
/// values, some socket families and numbers above
/// [`LAST_KNOWN_SYSCALL`] are refused on top of these.
pub fn denied_syscalls() -> Vec<Denied> {
    use libc::{ENOSYS as NOSYS, EPERM as PERM};
    use SyscallGroup::{IoUring, Numa, Perf, Ptrace};
    let always = |name, nr| (name, nr, PERM, None);
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, i64, i32, Option<SyscallGroup>)> = vec![
        // Mounts, old and new API.
        always("mount", libc::SYS_mount),
        always("umount2", libc::SYS_umount2),
        always("pivot_root", libc::SYS_pivot_root),
        always("open_tree", libc::SYS_open_tree),
        always("move_mount", libc::SYS_move_mount),
        always("fsopen", libc::SYS_fsopen),
        always("fsconfig", libc::SYS_fsconfig),
        always("fsmount", libc::SYS_fsmount),
        always("fspick", libc::SYS_fspick),
        always("mount_setattr", libc::SYS_mount_setattr),
        // Namespaces (clone with namespace flags and clone3: below).
        always("setns", libc::SYS_setns),
        always("unshare", libc::SYS_unshare),
        // The kernel itself: modules, kexec, reboot, swap, accounting.
        always("init_module", libc::SYS_init_module),
        always("finit_module", libc::SYS_finit_module),
        always("delete_module", libc::SYS_delete_module),
        always("kexec_load", libc::SYS_kexec_load),
        always("kexec_file_load", libc::SYS_kexec_file_load),
        always("reboot", libc::SYS_reboot),
        always("swapon", libc::SYS_swapon),
        always("swapoff", libc::SYS_swapoff),
        always("acct", libc::SYS_acct),
        // BPF and the kernel's keyrings (neither namespaced).
        always("bpf", libc::SYS_bpf),
        always("keyctl", libc::SYS_keyctl),
        always("add_key", libc::SYS_add_key),
        always("request_key", libc::SYS_request_key),
        // File handles (open_by_handle_at reads any inode of a mount).
        always("open_by_handle_at", libc::SYS_open_by_handle_at),
        always("name_to_handle_at", libc::SYS_name_to_handle_at),
        // The clock (not namespaced).
        always("settimeofday", libc::SYS_settimeofday),
        always("clock_settime", libc::SYS_clock_settime),
        always("clock_adjtime", libc::SYS_clock_adjtime),
        always("adjtimex", libc::SYS_adjtimex),
        // Quotas, the kernel log, host and domain names, the terminal.
        always("quotactl", libc::SYS_quotactl),
        always("quotactl_fd", libc::SYS_quotactl_fd),
        always("syslog", libc::SYS_syslog),
        always("sethostname", libc::SYS_sethostname),
        always("setdomainname", libc::SYS_setdomainname),
        always("vhangup", libc::SYS_vhangup),
        // Memory and filesystem watching of others, LSM attributes.
        always("userfaultfd", libc::SYS_userfaultfd),
        always("fanotify_init", libc::SYS_fanotify_init),
        always("lookup_dcookie", libc::SYS_lookup_dcookie),
        always("lsm_get_self_attr", SYS_LSM_GET_SELF_ATTR),
        always("lsm_set_self_attr", SYS_LSM_SET_SELF_ATTR),
        always("lsm_list_modules", SYS_LSM_LIST_MODULES),
        // Groups an admin may allow.
        (
            "io_uring_setup",
            libc::SYS_io_uring_setup,
            NOSYS,
            Some(IoUring),
        ),
        (
            "io_uring_enter",
            libc::SYS_io_uring_enter,
            NOSYS,
            Some(IoUring),
        ),
        (
            "io_uring_register",
            libc::SYS_io_uring_register,
            NOSYS,
            Some(IoUring),
        ),
        (
            "perf_event_open",
            libc::SYS_perf_event_open,
            PERM,
            Some(Perf),
        ),
        ("ptrace", libc::SYS_ptrace, PERM, Some(Ptrace)),
        (
            "process_vm_readv",
            libc::SYS_process_vm_readv,
            PERM,
            Some(Ptrace),
        ),
        (
            "process_vm_writev",
            libc::SYS_process_vm_writev,
            PERM,
            Some(Ptrace),
        ),
        ("kcmp", libc::SYS_kcmp, PERM, Some(Ptrace)),
        ("pidfd_getfd", libc::SYS_pidfd_getfd, PERM, Some(Ptrace)),
        (
            "process_madvise",
            libc::SYS_process_madvise,
            PERM,
            Some(Ptrace),
        ),
        ("get_mempolicy", libc::SYS_get_mempolicy, NOSYS, Some(Numa)),
        ("set_mempolicy", libc::SYS_set_mempolicy, NOSYS, Some(Numa)),
        ("mbind", libc::SYS_mbind, NOSYS, Some(Numa)),
        (
            "set_mempolicy_home_node",
            libc::SYS_set_mempolicy_home_node,
            NOSYS,
            Some(Numa),
        ),
        ("migrate_pages", libc::SYS_migrate_pages, NOSYS, Some(Numa)),
        ("move_pages", libc::SYS_move_pages, NOSYS, Some(Numa)),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        // I/O ports.
        always("iopl", libc::SYS_iopl),
        always("ioperm", libc::SYS_ioperm),
        // Obsolete or never implemented: refused rather than reviewed.
        always("_sysctl", libc::SYS__sysctl),
        always("sysfs", libc::SYS_sysfs),
        always("ustat", libc::SYS_ustat),
        always("uselib", libc::SYS_uselib),
        always("nfsservctl", libc::SYS_nfsservctl),
        always("create_module", 174),
        always("get_kernel_syms", 177),
        always("query_module", 178),
        always("afs_syscall", libc::SYS_afs_syscall),
        always("getpmsg", libc::SYS_getpmsg),
        always("putpmsg", libc::SYS_putpmsg),
        always("tuxcall", libc::SYS_tuxcall),
        always("security", libc::SYS_security),
        always("vserver", libc::SYS_vserver),
    ]);
    v.into_iter()
        .map(|(name, nr, errno, group)| Denied {
            name,
            nr,
            errno,
            group,
        })
        .collect()
}

/// The policy of one node: the table above less the groups its admin
/// allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    denied: Vec<Denied>,
}

impl Policy {
    pub fn new(allow: &[SyscallGroup]) -> Policy {
        Policy {
            denied: denied_syscalls()
                .into_iter()
                .filter(|d| d.group.is_none_or(|g| !allow.contains(&g)))
                .collect(),
        }
    }

    /// The syscalls refused by number.
    pub fn denied(&self) -> &[Denied] {
        &self.denied
    }

    /// What the filter must do with syscall `nr` of this architecture
    /// called with `args` (each compared as the low 32 bits, as the
    /// kernel reads `int` and `unsigned int` arguments).
    pub fn decide(&self, nr: u32, args: &[u64; 6]) -> Verdict {
        if HAS_X32 && nr & X32_SYSCALL_BIT != 0 {
            return Verdict::Errno(libc::ENOSYS);
        }
        let nr = i64::from(nr);
        if nr > LAST_KNOWN_SYSCALL || nr == libc::SYS_clone3 {
            return Verdict::Errno(libc::ENOSYS);
        }
        if let Some(d) = self.denied.iter().find(|d| d.nr == nr) {
            return Verdict::Errno(d.errno);
        }
        let arg0 = args[0] as u32;
        let refused = match nr {
            libc::SYS_clone => CLONE_NS_FLAGS.iter().any(|f| arg0 & f != 0),
            libc::SYS_personality => !PERSONALITY_OK.contains(&arg0),
            libc::SYS_socket => {
                arg0 > LAST_SOCKET_FAMILY || BLOCKED_SOCKET_FAMILIES.contains(&arg0)
            }
            _ => false,
        };
        if refused {
            Verdict::Errno(libc::EPERM)
        } else {
            Verdict::Allow
        }
    }
}
