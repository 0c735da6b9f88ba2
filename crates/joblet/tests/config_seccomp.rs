//! `sandbox.seccomp_allow`: named syscall groups, checked when the config
//! is read (by `joblet server` and `joblet check-config` alike).

use std::path::Path;

use joblet::config::{Config, ConfigError};
use joblet_sandbox::init::SyscallGroup;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("joblet-config.yml"))
}

#[test]
fn the_default_allows_no_group() {
    assert!(Config::default().sandbox.seccomp_allow.is_empty());
    assert!(parse("sandbox:\n  seccomp: true\n")
        .unwrap()
        .sandbox
        .seccomp_allow
        .is_empty());
}

#[test]
fn named_groups_are_accepted() {
    let cfg = parse("sandbox:\n  seccomp_allow: [io_uring, perf, ptrace, numa]\n").unwrap();
    assert_eq!(cfg.sandbox.seccomp_allow, SyscallGroup::ALL.to_vec());
    let cfg = parse("sandbox:\n  seccomp_allow:\n    - io_uring\n").unwrap();
    assert_eq!(cfg.sandbox.seccomp_allow, vec![SyscallGroup::IoUring]);
}

#[test]
fn an_unknown_group_is_refused_naming_the_key_and_the_accepted_groups() {
    for (text, key) in [
        (
            "sandbox:\n  seccomp_allow: [io_uring, mount]\n",
            "sandbox.seccomp_allow[1]",
        ),
        (
            "sandbox:\n  seccomp_allow: [IO_URING]\n",
            "sandbox.seccomp_allow[0]",
        ),
        (
            "sandbox:\n  seccomp_allow: io_uring\n",
            "sandbox.seccomp_allow",
        ),
    ] {
        let e = parse(text).unwrap_err();
        let ConfigError::Invalid { key: got, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(got, key, "{text}: {e}");
        let msg = e.to_string();
        if key.ends_with(']') {
            for g in SyscallGroup::ALL {
                assert!(msg.contains(g.name()), "{text}: {msg}");
            }
        }
    }
}
