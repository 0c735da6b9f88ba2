// Reading an executable's ELF header and program headers, for the tests
// that check how `build-support/fast_start.rs` linked `rnx` and
// `joblet-shim` (x86-64: 64-bit, little-endian). Included with `include!`
// by both tests, which live in different packages.

/// `e_type`: 2 is `ET_EXEC` (position-dependent), 3 `ET_DYN` (a PIE).
fn elf_type(bin: &[u8]) -> u16 {
    assert_eq!(&bin[..4], b"\x7fELF", "not an ELF file");
    u16::from_le_bytes([bin[16], bin[17]])
}

/// The `p_type` of every program header: 1 `PT_LOAD`, 2 `PT_DYNAMIC`,
/// 3 `PT_INTERP`.
fn program_header_types(bin: &[u8]) -> Vec<u32> {
    assert_eq!(&bin[..4], b"\x7fELF", "not an ELF file");
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([bin[o], bin[o + 1]]));
    let phoff = u64::from_le_bytes(bin[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            u32::from_le_bytes(bin[o..o + 4].try_into().unwrap())
        })
        .collect()
}
