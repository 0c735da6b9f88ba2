//! The job's seccomp filter, in three parts: the policy as data
//! ([`policy`]: what is refused, with which errno, which groups an admin
//! may allow), the programs built from it by pure code ([`job_filters`]),
//! and the one call that loads them ([`apply`], by the job process after
//! it dropped its privileges, just before `execve`; the sandbox init has
//! done everything that needs a refused call by then). The programs are
//! checked against [`Policy::decide`] by an interpreter (`tests.rs`).
//!
//! Three programs, loaded together: one answers every number above the
//! policy's table (and the x32 ABI) with `ENOSYS`; one the calls refused
//! with `ENOSYS` (`clone3`, `io_uring_*`, NUMA placement); one those
//! refused with `EPERM` (the rest, `clone` with namespace flags, unusual
//! `personality` values, blocked socket families). Their sets are
//! disjoint, so the kernel's rule for several filters (the most severe
//! action wins) never has to choose. Syscalls of another architecture
//! kill the process (seccompiler's architecture check, in each program).
//! A filter that cannot be built or loaded fails the job's start: the job
//! never runs without it.

mod policy;

#[cfg(test)]
mod interp;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

pub use policy::{denied_syscalls, Denied, Policy, SyscallGroup, Verdict, LAST_KNOWN_SYSCALL};
use policy::{
    BLOCKED_SOCKET_FAMILIES, CLONE_NS_FLAGS, HAS_X32, LAST_SOCKET_FAMILY, PERSONALITY_OK,
    X32_SYSCALL_BIT,
};

/// Building or loading the filter failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SeccompError {
    #[error("seccomp filters are not supported on {0}; run jobs with seccomp off there")]
    Arch(String),
    #[error("building the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("loading the seccomp filter: {0}")]
    Load(#[from] seccompiler::Error),
}

fn arch() -> Result<(TargetArch, u32), SeccompError> {
    let unsupported = || SeccompError::Arch(std::env::consts::ARCH.into());
    let target = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| unsupported())?;
    // AUDIT_ARCH_*: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
    let audit = match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        _ => return Err(unsupported()),
    } | 0x8000_0000
        | 0x4000_0000;
    Ok((target, audit))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

// Classic BPF opcodes, as in <linux/bpf_common.h>: class | op | source.
/// `BPF_LD | BPF_W | BPF_ABS` (0x00 | 0x00 | 0x20).
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
/// `BPF_JMP | BPF_JGT | BPF_K`.
const BPF_JMP_JGT_K: u16 = 0x05 | 0x20;
/// `BPF_JMP | BPF_JSET | BPF_K`.
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
/// `BPF_RET | BPF_K`.
const BPF_RET_K: u16 = 0x06;
// Offsets in `struct seccomp_data`.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The program that answers `ENOSYS` to every syscall number above
/// [`LAST_KNOWN_SYSCALL`] and, on x86-64, to the x32 ABI; it allows the
/// rest (the other programs decide those).
fn unknown_numbers_filter(audit_arch: u32) -> BpfProgram {
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let mut p = vec![
        insn(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        insn(BPF_JMP_JEQ_K, 1, 0, audit_arch),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        insn(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
    ];
    if HAS_X32 {
        // x32 bit set: on to the ENOSYS return, two ahead.
        p.push(insn(BPF_JMP_JSET_K, 1, 0, X32_SYSCALL_BIT));
    }
    p.extend([
        insn(BPF_JMP_JGT_K, 0, 1, LAST_KNOWN_SYSCALL as u32),
        insn(BPF_RET_K, 0, 0, enosys),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]);
    p
}

/// The job's filters for a node that allows `allow`, in load order.
/// The policy of a node allowing `allow`, as the plain rules an OCI
/// seccomp profile is written from (`joblet_oci::seccomp`): the same calls
/// refused with the same errno, `clone3` with `ENOSYS`, `clone` with a
/// namespace flag and the blocked socket families with `EPERM`.
pub fn oci_rules(allow: &[SyscallGroup]) -> joblet_oci::seccomp::PolicyRules {
    let mut denied: Vec<(String, u32)> = Policy::new(allow)
        .denied()
        .iter()
        .map(|d| (d.name.to_string(), d.errno as u32))
        .collect();
    denied.push(("clone3".into(), libc::ENOSYS as u32));
    joblet_oci::seccomp::PolicyRules {
        denied,
        clone_flags: CLONE_NS_FLAGS.iter().map(|&f| u64::from(f)).collect(),
        blocked_socket_families: BLOCKED_SOCKET_FAMILIES
            .iter()
            .map(|&f| u64::from(f))
            .collect(),
        last_socket_family: u64::from(LAST_SOCKET_FAMILY),
        eperm: libc::EPERM as u32,
    }
}

pub(crate) fn job_filters(allow: &[SyscallGroup]) -> Result<Vec<BpfProgram>, SeccompError> {
    let (arch, audit_arch) = arch()?;
    let policy = Policy::new(allow);
    let by_errno = |errno: i32| -> BTreeMap<i64, Vec<SeccompRule>> {
        policy
            .denied()
            .iter()
            .filter(|d| d.errno == errno)
            .map(|d| (d.nr, vec![]))
            .collect()
    };

    let mut enosys = by_errno(libc::ENOSYS);
    enosys.insert(libc::SYS_clone3, vec![]);
    let enosys = SeccompFilter::new(
        enosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;

    let mut eperm = by_errno(libc::EPERM);
    let one = |op: SeccompCmpOp, value: u32| -> Result<SeccompRule, SeccompError> {
        Ok(SeccompRule::new(vec![cond(0, op, u64::from(value))?])?)
    };
    let clone_rules = CLONE_NS_FLAGS
        .iter()
        .map(|&f| one(SeccompCmpOp::MaskedEq(u64::from(f)), f))
        .collect::<Result<Vec<_>, _>>()?;
    eperm.insert(libc::SYS_clone, clone_rules);
    let personality = PERSONALITY_OK
        .iter()
        .map(|&v| cond(0, SeccompCmpOp::Ne, u64::from(v)))
        .collect::<Result<Vec<_>, _>>()?;
    eperm.insert(libc::SYS_personality, vec![SeccompRule::new(personality)?]);
    let mut socket = BLOCKED_SOCKET_FAMILIES
        .iter()
        .map(|&f| one(SeccompCmpOp::Eq, f))
        .collect::<Result<Vec<_>, _>>()?;
    socket.push(one(SeccompCmpOp::Gt, LAST_SOCKET_FAMILY)?);
    eperm.insert(libc::SYS_socket, socket);
    let eperm = SeccompFilter::new(
        eperm,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;

    Ok(vec![
        unknown_numbers_filter(audit_arch),
        enosys.try_into()?,
        eperm.try_into()?,
    ])
}

/// Loads `filters` into this thread (needs `no_new_privs` or
/// `CAP_SYS_ADMIN`). The first that the kernel refuses ends it with an
/// error; the caller fails the job's start (the filters already loaded
/// stay, and the process exits without running the job).
pub(crate) fn apply(filters: &[BpfProgram]) -> Result<(), SeccompError> {
    for f in filters {
        seccompiler::apply_filter(f)?;
    }
    Ok(())
}
