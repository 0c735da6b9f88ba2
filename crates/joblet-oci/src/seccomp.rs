//! The project's seccomp policy as an OCI seccomp profile, which the
//! runtime compiles with libseccomp.
//!
//! The native sandbox loads its own classic-BPF programs; a profile says
//! the same in the runtime spec's terms where libseccomp can: every call
//! the policy refuses by name, with the same errno; `clone` with any
//! namespace flag (one masked-equality rule per flag); `socket` of a
//! blocked family or of one above the newest known. What a profile cannot
//! say is documented in `docs/executors.md` and tested as such:
//! `personality`'s "none but these values" (a rule compares an argument
//! once, so a set of allowed values cannot be written with an allowing
//! default), and `ENOSYS` for numbers above the policy's table (the
//! runtime's libseccomp decides what it knows). Calls of other
//! architectures are refused by the profile's single architecture, as the
//! native filter refuses them.

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

/// The policy, as plain data (from the sandbox's policy table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRules {
    /// Calls refused by name, with the errno the job gets.
    pub denied: Vec<(String, u32)>,
    /// `clone` flags that refuse the call (`CLONE_NEW*`), with `EPERM`.
    pub clone_flags: Vec<u64>,
    /// `socket` families refused with `EPERM`.
    pub blocked_socket_families: Vec<u64>,
    /// Families above this are refused with `EPERM`.
    pub last_socket_family: u64,
    /// `EPERM` on this architecture.
    pub eperm: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum SeccompProfileError {
    #[error("seccomp profiles are not built for architecture {0}; run jobs with sandbox.seccomp off there")]
    Arch(String),
    #[error("building the seccomp profile: {0}")]
    Spec(#[from] oci_spec::OciSpecError),
}

/// The profile's architecture for the one this binary runs on.
pub fn arch() -> Result<Arch, SeccompProfileError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(Arch::ScmpArchX86_64),
        "aarch64" => Ok(Arch::ScmpArchAarch64),
        "riscv64" => Ok(Arch::ScmpArchRiscv64),
        other => Err(SeccompProfileError::Arch(other.into())),
    }
}

fn errno_rule(
    names: Vec<String>,
    errno: u32,
    args: Option<Vec<oci_spec::runtime::LinuxSeccompArg>>,
) -> Result<LinuxSyscall, SeccompProfileError> {
    let mut b = LinuxSyscallBuilder::default()
        .names(names)
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(errno);
    if let Some(args) = args {
        b = b.args(args);
    }
    Ok(b.build()?)
}

/// The OCI profile of `rules`: allow by default, refuse what the policy
/// refuses.
pub fn profile(rules: &PolicyRules) -> Result<LinuxSeccomp, SeccompProfileError> {
    let mut syscalls = Vec::new();
    // One rule per errno, names sorted: a stable, readable profile.
    let mut by_errno: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for (name, errno) in &rules.denied {
        by_errno.entry(*errno).or_default().push(name.clone());
    }
    for (errno, mut names) in by_errno {
        names.sort();
        names.dedup();
        syscalls.push(errno_rule(names, errno, None)?);
    }
    for &flag in &rules.clone_flags {
        let arg = LinuxSeccompArgBuilder::default()
            .index(0usize)
            .value(flag)
            .value_two(flag)
            .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
            .build()?;
        syscalls.push(errno_rule(
            vec!["clone".into()],
            rules.eperm,
            Some(vec![arg]),
        )?);
    }
    for &family in &rules.blocked_socket_families {
        let arg = LinuxSeccompArgBuilder::default()
            .index(0usize)
            .value(family)
            .op(LinuxSeccompOperator::ScmpCmpEq)
            .build()?;
        syscalls.push(errno_rule(
            vec!["socket".into()],
            rules.eperm,
            Some(vec![arg]),
        )?);
    }
    let above = LinuxSeccompArgBuilder::default()
        .index(0usize)
        .value(rules.last_socket_family)
        .op(LinuxSeccompOperator::ScmpCmpGt)
        .build()?;
    syscalls.push(errno_rule(
        vec!["socket".into()],
        rules.eperm,
        Some(vec![above]),
    )?);
    Ok(LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .architectures(vec![arch()?])
        .syscalls(syscalls)
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> PolicyRules {
        PolicyRules {
            denied: vec![
                ("mount".into(), 1),
                ("bpf".into(), 1),
                ("clone3".into(), 38),
                ("mount".into(), 1),
            ],
            clone_flags: vec![0x1000_0000, 0x2000_0000],
            blocked_socket_families: vec![40],
            last_socket_family: 45,
            eperm: 1,
        }
    }

    #[test]
    fn refused_calls_keep_their_errno_and_the_rest_is_allowed() {
        let v = serde_json::to_value(profile(&rules()).unwrap()).unwrap();
        assert_eq!(v["defaultAction"], "SCMP_ACT_ALLOW");
        let sys = v["syscalls"].as_array().unwrap();
        assert_eq!(sys[0]["names"], serde_json::json!(["bpf", "mount"]));
        assert_eq!(sys[0]["errnoRet"], 1);
        assert_eq!(sys[1]["names"], serde_json::json!(["clone3"]));
        assert_eq!(sys[1]["errnoRet"], 38);
    }

    #[test]
    fn clone_is_refused_per_namespace_flag_and_socket_per_family() {
        let v = serde_json::to_value(profile(&rules()).unwrap()).unwrap();
        let sys = v["syscalls"].as_array().unwrap();
        let clones: Vec<_> = sys.iter().filter(|s| s["names"][0] == "clone").collect();
        assert_eq!(clones.len(), 2);
        let a = &clones[0]["args"][0];
        assert_eq!(
            (
                a["index"].as_u64(),
                a["value"].as_u64(),
                a["valueTwo"].as_u64(),
                a["op"].as_str()
            ),
            (
                Some(0),
                Some(0x1000_0000),
                Some(0x1000_0000),
                Some("SCMP_CMP_MASKED_EQ")
            )
        );
        let sockets: Vec<_> = sys.iter().filter(|s| s["names"][0] == "socket").collect();
        assert_eq!(sockets.len(), 2);
        assert_eq!(sockets[0]["args"][0]["op"], "SCMP_CMP_EQ");
        assert_eq!(sockets[1]["args"][0]["op"], "SCMP_CMP_GT");
        assert_eq!(sockets[1]["args"][0]["value"], 45);
    }
}
