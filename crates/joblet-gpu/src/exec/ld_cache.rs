//! Reader for glibc's `/etc/ld.so.cache`, the index the dynamic loader
//! (and libnvidia-container) uses to find a library by its SONAME. The
//! driver's libraries carry the driver version in their file names
//! (`libcuda.so.550.54.15`); the cache maps `libcuda.so.1` to them.
//!
//! Two layouts exist (glibc `sysdeps/generic/dl-cache.h`):
//! - new, glibc ≥ 2.32's default: header `glibc-ld.so.cache` + `1.1`,
//!   24-byte entries, string offsets from the start of that header;
//! - compat, older glibc's default (`ldconfig -c compat`): the old
//!   `ld.so-1.7.0` table (12-byte entries, offsets from the end of its
//!   entry array), then the new table at the next 8-byte boundary.
//!
//! The old table alone (`ldconfig -c old`) is read too. Input is never
//! trusted: every offset is bounds-checked, a corrupt or truncated file
//! is an error, never a panic.

use super::error::ExecError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where glibc keeps the cache.
pub const DEFAULT_LD_CACHE: &str = "/etc/ld.so.cache";

/// Flag values from glibc's `sysdeps/generic/ldconfig.h`: the low byte is
/// the library type, the high byte the ABI it requires.
pub mod flags {
    pub const FLAG_TYPE_MASK: u32 = 0x00ff;
    pub const FLAG_ELF: u32 = 0x0001;
    pub const FLAG_ELF_LIBC6: u32 = 0x0003;
    pub const FLAG_REQUIRED_MASK: u32 = 0xff00;
    pub const FLAG_SPARC_LIB64: u32 = 0x0100;
    pub const FLAG_IA64_LIB64: u32 = 0x0200;
    pub const FLAG_X8664_LIB64: u32 = 0x0300;
    pub const FLAG_S390_LIB64: u32 = 0x0400;
    pub const FLAG_POWERPC_LIB64: u32 = 0x0500;
    pub const FLAG_MIPS64_LIBN64: u32 = 0x0700;
    pub const FLAG_X8664_LIBX32: u32 = 0x0800;
    pub const FLAG_ARM_LIBHF: u32 = 0x0900;
    pub const FLAG_AARCH64_LIB64: u32 = 0x0a00;
    pub const FLAG_MIPS64_LIBN64_NAN2008: u32 = 0x0e00;
    pub const FLAG_RISCV_FLOAT_ABI_DOUBLE: u32 = 0x1000;
}

use flags::*;

/// The flags ldconfig gives this host's native 64-bit libraries (what
/// libnvidia-container calls `LIB_ARCH`); `None` on an architecture this
/// crate does not know.
pub const HOST_LIB64_FLAGS: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(FLAG_ELF_LIBC6 | FLAG_X8664_LIB64)
} else if cfg!(target_arch = "aarch64") {
    Some(FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64)
} else if cfg!(target_arch = "powerpc64") {
    Some(FLAG_ELF_LIBC6 | FLAG_POWERPC_LIB64)
} else {
    None
};

/// The flags of this host's 32-bit compatibility libraries
/// (`LIB32_ARCH`): i386 on x86-64, ARM hard-float on aarch64.
pub const HOST_LIB32_FLAGS: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(FLAG_ELF_LIBC6)
} else if cfg!(target_arch = "aarch64") {
    Some(FLAG_ELF_LIBC6 | FLAG_ARM_LIBHF)
} else {
    None
};

/// One library in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdCacheEntry {
    /// The key: the library's ELF SONAME, e.g. `libcuda.so.1`.
    pub soname: String,
    /// Where it is, e.g. `/usr/lib/x86_64-linux-gnu/libcuda.so.1`
    /// (usually a symlink to the versioned file).
    pub path: PathBuf,
    /// ldconfig's flags (see [`flags`]).
    pub flags: u32,
}

impl LdCacheEntry {
    /// A glibc ELF library (`libc6`), as opposed to libc5/a.out leftovers.
    pub fn is_elf_libc6(&self) -> bool {
        self.flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6
    }

    /// An x86-64 (LP64) glibc library: `ldconfig -p` says `libc6,x86-64`.
    pub fn is_x86_64(&self) -> bool {
        self.is_elf_libc6() && self.flags & FLAG_REQUIRED_MASK == FLAG_X8664_LIB64
    }

    /// A 64-bit library of any architecture ldconfig marks as such
    /// (x32 and 32-bit ARM/i386 are not).
    pub fn is_64bit(&self) -> bool {
        matches!(
            self.flags & FLAG_REQUIRED_MASK,
            FLAG_SPARC_LIB64
                | FLAG_IA64_LIB64
                | FLAG_X8664_LIB64
                | FLAG_S390_LIB64
                | FLAG_POWERPC_LIB64
                | FLAG_MIPS64_LIBN64
                | FLAG_AARCH64_LIB64
                | FLAG_MIPS64_LIBN64_NAN2008
                | FLAG_RISCV_FLOAT_ABI_DOUBLE
        )
    }

    /// A native library of this host ([`HOST_LIB64_FLAGS`]; on an unknown
    /// architecture any 64-bit libc6 library).
    pub fn is_host_lib64(&self) -> bool {
        match HOST_LIB64_FLAGS {
            Some(f) => self.flags == f,
            None => self.is_elf_libc6() && self.is_64bit(),
        }
    }

    /// A 32-bit compatibility library of this host ([`HOST_LIB32_FLAGS`]).
    pub fn is_host_lib32(&self) -> bool {
        HOST_LIB32_FLAGS == Some(self.flags)
    }
}

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache";
const NEW_VERSION: &[u8] = b"1.1";
/// `struct cache_file`: magic[11], pad, nlibs.
const OLD_HEADER: usize = 16;
const OLD_ENTRY: usize = 12;
/// `struct cache_file_new` (static-asserted to 48 bytes in glibc).
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;

/// Read and parse a cache file.
pub fn read_ld_cache(path: &Path) -> Result<Vec<LdCacheEntry>, ExecError> {
    let bytes = std::fs::read(path).map_err(|e| ExecError::LdCache {
        path: path.to_path_buf(),
        reason: format!("cannot read it: {e}"),
    })?;
    parse_ld_cache(&bytes, path)
}

/// Parse the bytes of a cache file; `path` is only for messages. Entries
/// come in file order (ldconfig sorts them, preferred first per name).
pub fn parse_ld_cache(bytes: &[u8], path: &Path) -> Result<Vec<LdCacheEntry>, ExecError> {
    let fail = |reason: String| ExecError::LdCache {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.starts_with(NEW_MAGIC) {
        return parse_new(bytes).map_err(fail);
    }
    if !bytes.starts_with(OLD_MAGIC) {
        return Err(fail(
            "not an ld.so cache (it starts with neither `glibc-ld.so.cache1.1` nor \
             `ld.so-1.7.0`)"
                .into(),
        ));
    }
    let nlibs = read_u32(bytes, 12).ok_or_else(|| fail("truncated old-format header".into()))?;
    let entries_end = (nlibs as usize)
        .checked_mul(OLD_ENTRY)
        .and_then(|n| n.checked_add(OLD_HEADER))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| {
            fail(format!(
                "old-format header announces {nlibs} entries, more than the file holds"
            ))
        })?;
    // The new table, if any, hides at the start of the old string table,
    // aligned to 8 (`ALIGN_CACHE`).
    let new_start = entries_end.next_multiple_of(8);
    if let Some(rest) = bytes.get(new_start..) {
        if rest.starts_with(NEW_MAGIC) {
            return parse_new(rest).map_err(fail);
        }
    }
    parse_old(bytes, nlibs as usize, entries_end).map_err(fail)
}

/// The new table at the start of `buf`; string offsets are from `buf`.
fn parse_new(buf: &[u8]) -> Result<Vec<LdCacheEntry>, String> {
    if buf.len() < NEW_HEADER {
        return Err(format!(
            "truncated header ({} bytes, need {NEW_HEADER})",
            buf.len()
        ));
    }
    let version = &buf[NEW_MAGIC.len()..NEW_MAGIC.len() + NEW_VERSION.len()];
    if version != NEW_VERSION {
        return Err(format!(
            "unsupported format version `{}` (this reader knows 1.1)",
            String::from_utf8_lossy(version)
        ));
    }
    let endian = buf[28] & 3;
    let native = if cfg!(target_endian = "little") { 2 } else { 3 };
    match endian {
        0 => {}
        1 => return Err("ldconfig marked it invalid".into()),
        e if e != native => return Err("written for the other byte order".into()),
        _ => {}
    }
    let nlibs = read_u32(buf, 20).ok_or("truncated header")? as usize;
    let entries_end = nlibs
        .checked_mul(NEW_ENTRY)
        .and_then(|n| n.checked_add(NEW_HEADER))
        .filter(|&end| end <= buf.len())
        .ok_or_else(|| format!("header announces {nlibs} entries, more than the file holds"))?;
    let mut out = Vec::with_capacity(nlibs);
    for at in (NEW_HEADER..entries_end).step_by(NEW_ENTRY) {
        out.extend(entry(buf, at)?);
    }
    Ok(out)
}

/// The old table alone; string offsets are from the end of its entries.
fn parse_old(bytes: &[u8], nlibs: usize, entries_end: usize) -> Result<Vec<LdCacheEntry>, String> {
    let strings = &bytes[entries_end..];
    let mut out = Vec::with_capacity(nlibs);
    for i in 0..nlibs {
        let at = OLD_HEADER + i * OLD_ENTRY;
        let flags = read_u32(bytes, at).ok_or("truncated entry")?;
        let key = read_u32(bytes, at + 4).ok_or("truncated entry")?;
        let value = read_u32(bytes, at + 8).ok_or("truncated entry")?;
        out.extend(make_entry(strings, flags, key, value, i)?);
    }
    Ok(out)
}

/// The new-format entry at `at` (flags, key, value, osversion, hwcap).
fn entry(buf: &[u8], at: usize) -> Result<Option<LdCacheEntry>, String> {
    let flags = read_u32(buf, at).ok_or("truncated entry")?;
    let key = read_u32(buf, at + 4).ok_or("truncated entry")?;
    let value = read_u32(buf, at + 8).ok_or("truncated entry")?;
    make_entry(buf, flags, key, value, (at - NEW_HEADER) / NEW_ENTRY)
}

/// An entry from its string offsets into `strings`. A SONAME that is not
/// UTF-8 (no library we look for) is skipped, not an error.
fn make_entry(
    strings: &[u8],
    flags: u32,
    key: u32,
    value: u32,
    index: usize,
) -> Result<Option<LdCacheEntry>, String> {
    let soname = c_string(strings, key)
        .ok_or_else(|| format!("entry {index}: name offset {key} points outside the file"))?;
    let path = c_string(strings, value)
        .ok_or_else(|| format!("entry {index}: path offset {value} points outside the file"))?;
    let Ok(soname) = std::str::from_utf8(soname) else {
        tracing::debug!(index, "ld.so cache entry with a non-UTF-8 name skipped");
        return Ok(None);
    };
    Ok(Some(LdCacheEntry {
        soname: soname.to_string(),
        path: PathBuf::from(OsStr::from_bytes(path)),
        flags,
    }))
}

/// The NUL-terminated string at `offset`, without the NUL.
fn c_string(buf: &[u8], offset: u32) -> Option<&[u8]> {
    let rest = buf.get(offset as usize..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..len])
}

/// A native-endian `u32` at `at` (ldconfig writes the host's order).
fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new-format cache built by hand (the layout of `dl-cache.h`).
    pub(super) fn new_format(entries: &[(&str, &str, u32)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let base = NEW_HEADER + entries.len() * NEW_ENTRY;
        let mut table = Vec::new();
        for (soname, path, flags) in entries {
            let key = (base + strings.len()) as u32;
            strings.extend_from_slice(soname.as_bytes());
            strings.push(0);
            let value = (base + strings.len()) as u32;
            strings.extend_from_slice(path.as_bytes());
            strings.push(0);
            table.extend_from_slice(&flags.to_ne_bytes());
            table.extend_from_slice(&key.to_ne_bytes());
            table.extend_from_slice(&value.to_ne_bytes());
            table.extend_from_slice(&0u32.to_ne_bytes());
            table.extend_from_slice(&0u64.to_ne_bytes());
        }
        let mut out = Vec::new();
        out.extend_from_slice(NEW_MAGIC);
        out.extend_from_slice(NEW_VERSION);
        out.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        out.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        out.push(if cfg!(target_endian = "little") { 2 } else { 3 });
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&[0; 16]);
        assert_eq!(out.len(), NEW_HEADER);
        out.extend(table);
        out.extend(strings);
        out
    }

    fn p() -> &'static Path {
        Path::new("/test/ld.so.cache")
    }

    #[test]
    fn hand_built_new_format_parses() {
        let bytes = new_format(&[
            (
                "libcuda.so.1",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                0x0303,
            ),
            (
                "libcuda.so.1",
                "/usr/lib/i386-linux-gnu/libcuda.so.1",
                0x0003,
            ),
        ]);
        let entries = parse_ld_cache(&bytes, p()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].soname, "libcuda.so.1");
        assert_eq!(
            entries[0].path,
            Path::new("/usr/lib/x86_64-linux-gnu/libcuda.so.1")
        );
        assert!(entries[0].is_x86_64() && entries[0].is_64bit());
        assert!(!entries[1].is_x86_64() && !entries[1].is_64bit());
        assert!(entries[1].is_elf_libc6());
    }

    #[test]
    fn wrong_magic_version_endianness_and_offsets_are_errors() {
        let good = new_format(&[("libc.so.6", "/lib/libc.so.6", 0x0303)]);
        let msg = parse_ld_cache(b"hello world", p()).unwrap_err().to_string();
        assert!(
            msg.contains("not an ld.so cache") && msg.contains("ldconfig"),
            "{msg}"
        );

        let mut v = good.clone();
        v[17..20].copy_from_slice(b"2.0");
        assert!(parse_ld_cache(&v, p())
            .unwrap_err()
            .to_string()
            .contains("version `2.0`"));

        let mut e = good.clone();
        e[28] = 1;
        assert!(parse_ld_cache(&e, p()).is_err());
        let mut e = good.clone();
        e[28] = if cfg!(target_endian = "little") { 3 } else { 2 };
        assert!(parse_ld_cache(&e, p())
            .unwrap_err()
            .to_string()
            .contains("byte order"));

        let mut o = good.clone();
        o[NEW_HEADER + 8..NEW_HEADER + 12].copy_from_slice(&9999u32.to_ne_bytes());
        assert!(parse_ld_cache(&o, p())
            .unwrap_err()
            .to_string()
            .contains("path offset 9999"));

        let mut n = good.clone();
        n[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse_ld_cache(&n, p())
            .unwrap_err()
            .to_string()
            .contains("more than the file holds"));

        // A string without its NUL (file cut in the string table).
        assert!(parse_ld_cache(&good[..good.len() - 1], p()).is_err());
    }

    #[test]
    fn flags_classify_architectures() {
        let e = |flags| LdCacheEntry {
            soname: "x".into(),
            path: "/x".into(),
            flags,
        };
        assert!(e(0x0a03).is_64bit() && !e(0x0a03).is_x86_64());
        assert!(!e(0x0803).is_64bit(), "x32 is not 64-bit");
        assert!(!e(0x0903).is_64bit(), "armhf is not 64-bit");
        assert!(!e(0x0301).is_elf_libc6());
        if let Some(f) = HOST_LIB64_FLAGS {
            assert!(e(f).is_host_lib64() && !e(f).is_host_lib32());
        }
        if let Some(f) = HOST_LIB32_FLAGS {
            assert!(e(f).is_host_lib32() && !e(f).is_host_lib64());
        }
    }
}
