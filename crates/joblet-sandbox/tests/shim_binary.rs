//! How `joblet-shim` is linked (build.rs, `build-support/fast_start.rs`):
//! it starts once per job, so on x86-64 GNU/Linux it is position-dependent
//! (no relative relocations to apply) and linked statically (no dynamic
//! loader runs before its `main`).

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::process::Command;

include!("../../../build-support/elf_headers.rs");

fn shim_binary() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_joblet-shim")).unwrap()
}

#[test]
fn the_shim_is_position_dependent() {
    assert_eq!(
        elf_type(&shim_binary()),
        2,
        "joblet-shim is not linked with -no-pie"
    );
}

#[test]
fn the_shim_is_statically_linked() {
    let types = program_header_types(&shim_binary());
    // PT_LOAD 1, PT_DYNAMIC 2, PT_INTERP 3.
    assert!(types.contains(&1), "no loadable segment in {types:?}");
    assert!(!types.contains(&3), "joblet-shim asks for a dynamic loader");
    assert!(!types.contains(&2), "joblet-shim has a dynamic section");
}

/// The static binary starts and runs its `main`.
#[test]
fn the_static_shim_runs() {
    let out = Command::new(env!("CARGO_BIN_EXE_joblet-shim"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("joblet-shim "),
        "{out:?}"
    );
}
