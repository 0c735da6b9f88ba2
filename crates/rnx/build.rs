//! Links the `rnx` binary as a position-dependent executable (`-no-pie`).
//!
//! `rnx` is a short-lived client: every command pays its start-up, and a PIE
//! spends much of that applying ~12,000 relative relocations, which also
//! copy-on-write-fault every page of its relocated data. Without PIE the
//! linker resolves them at link time: about 50 fewer page faults and ~0.25 ms
//! less per invocation on the machine of BENCHMARKS.md (`perf stat -r 300 rnx
//! --version`: 1.53 → 1.28 ms). The code is still compiled position-
//! independent; only this executable's load address is fixed. The daemon,
//! the shim and the sandbox init (long-lived or privileged) stay PIE.
//! x86-64 Linux only, where the GNU toolchain takes the flag; elsewhere the
//! target's default applies.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_arch == "x86_64" && target_env == "gnu" {
        println!("cargo:rustc-link-arg-bin=rnx=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
