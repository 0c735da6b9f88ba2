//! The ld.so cache reader against real caches: this machine's
//! `/etc/ld.so.cache`, and caches the real `ldconfig` writes in every
//! format (`new`, `compat`, `old`) for a temp dir holding a driver-like
//! library (an ELF built with `cc` whose SONAME is `libnvidia-ml.so.1`).
//! Each parse is checked entry by entry against `ldconfig -p`. Then the
//! driver-file lookup runs on the generated cache.

use joblet_gpu::exec::ld_cache::HOST_LIB64_FLAGS;
use joblet_gpu::exec::{
    find_driver_files, parse_ld_cache, read_ld_cache, DriverCapabilities, DriverCapability,
    LdCacheEntry, DEFAULT_LD_CACHE,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `ldconfig` (often in /sbin, which a non-root PATH may lack).
fn ldconfig() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/sbin", "/usr/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("ldconfig"))
        .find(|p| p.is_file())
        .expect("ldconfig not found: glibc's ldconfig is needed for these tests")
}

/// `(soname, path)` of every entry `ldconfig -p` prints for `cache`.
fn ldconfig_print(cache: &Path) -> Vec<(String, PathBuf)> {
    let out = Command::new(ldconfig())
        .arg("-p")
        .arg("-C")
        .arg(cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "ldconfig -p: {:?}", out);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut entries: Vec<(String, PathBuf)> = text
        .lines()
        .filter(|l| l.starts_with('\t'))
        .map(|l| {
            let l = l.trim();
            let (soname, _) = l.split_once(" (").expect("soname (flags) => path");
            let (_, path) = l.rsplit_once(" => ").expect("=> path");
            (soname.to_string(), PathBuf::from(path))
        })
        .collect();
    entries.sort();
    entries
}

fn pairs(entries: &[LdCacheEntry]) -> Vec<(String, PathBuf)> {
    let mut v: Vec<_> = entries
        .iter()
        .map(|e| (e.soname.clone(), e.path.clone()))
        .collect();
    v.sort();
    v
}

#[test]
fn this_machines_cache_parses_and_matches_ldconfig() {
    let path = Path::new(DEFAULT_LD_CACHE);
    let entries = read_ld_cache(path).unwrap();
    let libc = entries
        .iter()
        .find(|e| e.soname == "libc.so.6" && e.is_host_lib64())
        .expect("libc.so.6 for this architecture in /etc/ld.so.cache");
    assert!(libc.path.exists(), "{} does not exist", libc.path.display());
    if cfg!(target_arch = "x86_64") {
        assert!(libc.is_x86_64() && libc.is_64bit());
    }
    assert_eq!(pairs(&entries), ldconfig_print(path));
}

/// A shared object whose SONAME is `soname`, built with `cc` (which every
/// machine that links Rust has).
fn build_so(dir: &Path, file: &str, soname: &str) -> PathBuf {
    let src = dir.join(format!("{file}.c"));
    std::fs::write(&src, "int joblet_test_symbol(void) { return 42; }\n").unwrap();
    let out = dir.join(file);
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-nostdlib", "-o"])
        .arg(&out)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(&src)
        .status()
        .expect("cc (the C compiler Rust links with) must be installed");
    assert!(status.success(), "cc failed building {file}");
    std::fs::remove_file(src).unwrap();
    out
}

/// Run the real ldconfig over `<root>/opt/nvidia/lib` in `format`. As
/// root it runs chrooted (`-r`), so only that directory is in the cache
/// and the system's aux cache is left alone; elsewhere (no chroot right)
/// it runs plainly, the system's trusted directories joining the cache.
/// Returns the cache file and the prefix to put before cache paths.
fn generate(root: &Path, format: &str) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let conf = root.join("etc/ld.so.conf");
    let cache = root.join(format!("etc/ld.so.cache.{format}"));
    std::fs::write(&conf, "/opt/nvidia/lib\n").unwrap();
    let chrooted = Command::new(ldconfig())
        .args(["-X", "-c", format, "-r"])
        .arg(root)
        .args(["-C", &format!("/etc/ld.so.cache.{format}")])
        .args(["-f", "/etc/ld.so.conf"])
        .output()
        .unwrap();
    if chrooted.status.success() {
        return (cache, root.to_path_buf());
    }
    std::fs::write(
        &conf,
        format!("{}\n", root.join("opt/nvidia/lib").display()),
    )
    .unwrap();
    let plain = Command::new(ldconfig())
        .args(["-X", "-i", "-c", format, "-C"])
        .arg(&cache)
        .arg("-f")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(plain.status.success(), "ldconfig: {plain:?}");
    (cache, PathBuf::from("/"))
}

/// `<root>/opt/nvidia/lib` laid out like the driver installer does it.
fn driver_root() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("opt/nvidia/lib");
    std::fs::create_dir_all(&lib).unwrap();
    let real = build_so(&lib, "libnvidia-ml.so.550.54.15", "libnvidia-ml.so.1");
    std::os::unix::fs::symlink("libnvidia-ml.so.550.54.15", lib.join("libnvidia-ml.so.1")).unwrap();
    (root, real)
}

fn rooted(prefix: &Path, path: &Path) -> PathBuf {
    prefix.join(path.strip_prefix("/").unwrap_or(path))
}

#[test]
fn ldconfig_caches_in_every_format_parse_like_ldconfig_reads_them() {
    let (root, _) = driver_root();
    for format in ["new", "compat", "old"] {
        let (cache, prefix) = generate(root.path(), format);
        let bytes = std::fs::read(&cache).unwrap();
        let expected_magic: &[u8] = if format == "new" {
            b"glibc-ld.so.cache1.1"
        } else {
            b"ld.so-1.7.0"
        };
        assert!(bytes.starts_with(expected_magic), "{format}");
        let entries = parse_ld_cache(&bytes, &cache).unwrap();
        let nvml = entries
            .iter()
            .find(|e| e.soname == "libnvidia-ml.so.1")
            .unwrap_or_else(|| panic!("{format}: no libnvidia-ml.so.1 in {entries:?}"));
        assert_eq!(Some(nvml.flags), HOST_LIB64_FLAGS, "{format}");
        assert!(rooted(&prefix, &nvml.path).exists(), "{format}: {nvml:?}");
        assert_eq!(pairs(&entries), ldconfig_print(&cache), "{format}");
    }
}

#[test]
fn driver_files_found_through_a_real_cache() {
    let (root, real) = driver_root();
    let (cache, prefix) = generate(root.path(), "new");
    let entries: Vec<LdCacheEntry> = read_ld_cache(&cache)
        .unwrap()
        .into_iter()
        .map(|mut e| {
            e.path = rooted(&prefix, &e.path);
            e
        })
        .collect();
    let caps = DriverCapabilities::parse("utility").unwrap();
    let files = find_driver_files(&caps, &entries, &[]);
    assert_eq!(files.libraries.len(), 1, "{:?}", files.libraries);
    let nvml = &files.libraries[0];
    assert_eq!(nvml.names, ["libnvidia-ml.so.1", "libnvidia-ml.so"]);
    assert_eq!(nvml.path, std::fs::canonicalize(real).unwrap());
    assert_eq!(nvml.capability, DriverCapability::Utility);
    assert!(files.missing.is_empty());
    // Compute asked, but there is no libcuda on this "node".
    let files = find_driver_files(&DriverCapabilities::default(), &entries, &[]);
    assert_eq!(files.missing, ["libcuda.so.1"]);
}

/// Pieces of the real cache, cut and corrupted.
fn real_cache() -> Vec<u8> {
    std::fs::read(DEFAULT_LD_CACHE).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_ld_cache(&bytes, Path::new("random"));
        let mut with_magic = b"glibc-ld.so.cache1.1".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = parse_ld_cache(&with_magic, Path::new("random"));
        let mut old = b"ld.so-1.7.0\0".to_vec();
        old.extend_from_slice(&bytes);
        let _ = parse_ld_cache(&old, Path::new("random"));
    }

    #[test]
    fn truncated_or_corrupted_real_cache_never_panics(
        cut in 0usize..100_000,
        flips in proptest::collection::vec((0usize..100_000, any::<u8>()), 0..8),
    ) {
        let mut bytes = real_cache();
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        let n = bytes.len();
        let _ = parse_ld_cache(&bytes[..cut % (n + 1)], Path::new("cut"));
        let _ = parse_ld_cache(&bytes, Path::new("flipped"));
    }
}
