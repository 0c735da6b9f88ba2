//! How `joblet-shim` is linked (build.rs, `build-support/fast_start.rs`):
//! it starts once per job, so on x86-64 GNU/Linux it is position-dependent
//! (no relative relocations to apply) and linked statically (no dynamic
//! loader runs before its `main`).

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::process::Command;

fn shim_binary() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_joblet-shim")).unwrap()
}

#[test]
fn the_shim_is_position_dependent() {
    let bin = shim_binary();
    assert_eq!(&bin[..4], b"\x7fELF", "not an ELF file");
    // e_type, little-endian at offset 16: 2 is ET_EXEC, 3 ET_DYN (a PIE).
    let e_type = u16::from_le_bytes([bin[16], bin[17]]);
    assert_eq!(e_type, 2, "joblet-shim is not linked with -no-pie");
}

#[test]
fn the_shim_is_statically_linked() {
    let bin = shim_binary();
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([bin[o], bin[o + 1]]));
    let phoff = u64::from_le_bytes(bin[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    let types: Vec<u32> = (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            u32::from_le_bytes(bin[o..o + 4].try_into().unwrap())
        })
        .collect();
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
