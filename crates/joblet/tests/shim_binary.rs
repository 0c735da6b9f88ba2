//! How `joblet-shim` is linked (build.rs, `build-support/fast_start.rs`):
//! it starts once per job, so on x86-64 GNU/Linux it is position-dependent
//! (no relative relocations for the loader to apply) and carries the GCC
//! unwinder itself (one library fewer to map and start).

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

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
fn the_shim_does_not_load_libgcc_s() {
    let bin = shim_binary();
    let needs = |name: &[u8]| bin.windows(name.len()).any(|w| w == name);
    assert!(
        needs(b"libc.so.6\0"),
        "the check reads the dynamic string table"
    );
    assert!(
        !needs(b"libgcc_s.so.1\0"),
        "joblet-shim still needs libgcc_s.so.1"
    );
}
