//! The job's seccomp filter: everything is allowed except the calls that
//! reach past the sandbox (mounts, namespaces, kernel modules and keyrings,
//! BPF, kexec, reboot, swap, the clock, accounting, handles), which fail
//! with `EPERM`; `clone` with any namespace flag fails with `EPERM`;
//! `clone3` (whose flags live in memory a filter cannot read) fails with
//! `ENOSYS` so that libc falls back to `clone`, as Docker does; and
//! `personality` is limited to Docker's safe values. Syscalls of another
//! architecture kill the process (seccompiler's architecture check); on
//! x86-64 the x32 numbers of the denied calls are denied too.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
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

/// The syscalls the job may never make, by name and number (for this
/// architecture). `clone` with namespace flags, `clone3` and unusual
/// `personality` values are refused on top of these.
pub fn denied_syscalls() -> Vec<(&'static str, i64)> {
    // seccompiler only targets 64-bit architectures, where c_long is i64.
    vec![
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("open_tree", libc::SYS_open_tree),
        ("move_mount", libc::SYS_move_mount),
        ("fsopen", libc::SYS_fsopen),
        ("fsconfig", libc::SYS_fsconfig),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("setns", libc::SYS_setns),
        ("unshare", libc::SYS_unshare),
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("bpf", libc::SYS_bpf),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("reboot", libc::SYS_reboot),
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("acct", libc::SYS_acct),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("clock_adjtime", libc::SYS_clock_adjtime),
        ("quotactl", libc::SYS_quotactl),
    ]
}

/// Namespace flags `clone` may not carry (`CLONE_NEWTIME` shares its bit
/// with the exit signal in `clone`, and is only usable through `unshare`,
/// which is denied).
const CLONE_NS_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// `personality` values allowed (Docker's list): PER_LINUX, PER_LINUX32,
/// UNAME26, PER_LINUX32|UNAME26 and the query 0xffffffff.
const PERSONALITY_OK: [u64; 5] = [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// The x32 ABI marks its syscall numbers with this bit on x86-64.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH.into()))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

/// Adds the x32 twin of every rule on x86-64.
fn with_x32(rules: BTreeMap<i64, Vec<SeccompRule>>) -> BTreeMap<i64, Vec<SeccompRule>> {
    if std::env::consts::ARCH != "x86_64" {
        return rules;
    }
    let mut all = rules.clone();
    for (nr, r) in rules {
        all.insert(nr | X32_SYSCALL_BIT, r);
    }
    all
}

/// The job's filters, in load order: `clone3` -> `ENOSYS`, then the
/// `EPERM` rules.
pub(crate) fn job_filters() -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = arch()?;

    let enosys = with_x32(BTreeMap::from([(libc::SYS_clone3, vec![])]));
    let enosys = SeccompFilter::new(
        enosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;

    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = denied_syscalls()
        .into_iter()
        .map(|(_, nr)| (nr, vec![]))
        .collect();
    let clone_rules = CLONE_NS_FLAGS
        .iter()
        .map(|&f| {
            let f = f as u64;
            Ok(SeccompRule::new(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(f),
                f,
            )?])?)
        })
        .collect::<Result<Vec<_>, SeccompError>>()?;
    eperm.insert(libc::SYS_clone, clone_rules);
    let personality = PERSONALITY_OK
        .iter()
        .map(|&v| cond(0, SeccompCmpOp::Ne, v))
        .collect::<Result<Vec<_>, _>>()?;
    eperm.insert(libc::SYS_personality, vec![SeccompRule::new(personality)?]);
    let eperm = SeccompFilter::new(
        with_x32(eperm),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;

    Ok(vec![enosys.try_into()?, eperm.try_into()?])
}

/// Loads `filters` into this thread (needs `no_new_privs` or
/// `CAP_SYS_ADMIN`).
pub(crate) fn apply(filters: &[BpfProgram]) -> Result<(), SeccompError> {
    for f in filters {
        seccompiler::apply_filter(f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn the_deny_list_covers_the_escape_hatches() {
        let names: Vec<&str> = denied_syscalls().into_iter().map(|(n, _)| n).collect();
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
        ] {
            assert!(names.contains(&must), "{must}");
        }
        let mut nrs: Vec<i64> = denied_syscalls().into_iter().map(|(_, n)| n).collect();
        nrs.sort();
        nrs.dedup();
        assert_eq!(nrs.len(), names.len(), "two names share a number");
    }

    #[test]
    fn filters_compile() {
        let f = job_filters().unwrap();
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|p| !p.is_empty()));
    }

    /// Runs `sh -c script` with the filters loaded and returns its output.
    fn run_filtered(script: &str) -> (i32, String) {
        let filters = job_filters().unwrap();
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
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
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
        let (code, text) = run_filtered("echo hi | cat; ls / >/dev/null; true");
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("hi"), "{text}");
    }
}
