//! A stand-in for `joblet sandbox-init` in tests: a binary whose `main`
//! is only the sandbox init. With `--clone3-enosys` it first installs a
//! seccomp filter under which `clone3` fails with `ENOSYS`, as on a kernel
//! before 5.3 or under a container runtime's profile that filters it, so
//! that tests see the init's way without `CLONE_INTO_CGROUP`.

fn main() {
    if std::env::args().any(|a| a == "--clone3-enosys") {
        let filter: seccompiler::BpfProgram = seccompiler::SeccompFilter::new(
            [(libc::SYS_clone3, vec![])].into_iter().collect(),
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(libc::ENOSYS as u32),
            std::env::consts::ARCH
                .try_into()
                .expect("an architecture seccompiler knows"),
        )
        .and_then(TryInto::try_into)
        .expect("a seccomp filter denying clone3");
        seccompiler::apply_filter(&filter).expect("installing the seccomp filter");
    }
    joblet_sandbox::init::run_init()
}
