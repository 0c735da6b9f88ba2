//! What finding a job's driver files costs (`find_driver_files`): the
//! ld.so cache scan, one `canonicalize` per library found and a `stat`
//! per binary directory. The daemon did this for every job on a node with
//! a real driver (a CPU job's masks, a GPU job's binds, a GPU job's
//! submission check); it now does it once per set of capabilities.
//!
//! The cache: this host's own `/etc/ld.so.cache` entries (most of a
//! real one: hundreds of libraries) plus a driver laid out as on a real
//! H100 machine (`lib64/libcuda.so.1 -> libcuda.so.580.159.04`, every
//! library of every capability), in a temp dir.
//!
//! `cargo bench -p joblet-gpu --bench driver_files`

use criterion::Criterion;
use joblet_gpu::exec::driver_files::{
    COMPUTE_LIBS, GRAPHICS_LIBS, NGX_LIBS, UTILITY_BINS, UTILITY_LIBS, VIDEO_LIBS,
};
use joblet_gpu::exec::ld_cache::HOST_LIB64_FLAGS;
use joblet_gpu::exec::{find_driver_files, read_ld_cache, DriverCapabilities, LdCacheEntry};
use std::hint::black_box;
use std::path::{Path, PathBuf};

const VERSION: &str = "580.159.04";

/// A driver in `root`: `lib64/<base>.<VERSION>` with `<base>.1` and
/// `<base>` links, as the driver's installer makes them, and `bin/`.
fn driver(root: &Path) -> Vec<LdCacheEntry> {
    let lib = root.join("lib64");
    let bin = root.join("bin");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let flags = HOST_LIB64_FLAGS.expect("a 64-bit host");
    let mut out = Vec::new();
    for libs in [
        UTILITY_LIBS,
        COMPUTE_LIBS,
        VIDEO_LIBS,
        GRAPHICS_LIBS,
        NGX_LIBS,
    ] {
        for base in libs {
            let real = format!("{base}.{VERSION}");
            std::fs::write(lib.join(&real), b"\x7fELF").unwrap();
            let soname = format!("{base}.1");
            std::os::unix::fs::symlink(&real, lib.join(&soname)).unwrap();
            std::os::unix::fs::symlink(&soname, lib.join(base)).unwrap();
            for name in [soname, base.to_string()] {
                out.push(LdCacheEntry {
                    path: lib.join(&name),
                    soname: name,
                    flags,
                });
            }
        }
    }
    for b in UTILITY_BINS {
        let p = bin.join(b);
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    out
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let mut cache = read_ld_cache(Path::new("/etc/ld.so.cache")).unwrap_or_default();
    let host = cache.len();
    cache.extend(driver(root.path()));
    // The default driver_bin_dirs with the driver's own last, as on the
    // H100 machine (its nvidia-smi is in /usr/local/nvidia/bin).
    let bin_dirs: Vec<PathBuf> = ["/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin"]
        .iter()
        .map(PathBuf::from)
        .chain([root.path().join("bin")])
        .collect();
    eprintln!(
        "ld.so cache: {host} host entries + {} driver ones",
        cache.len() - host
    );
    let mut c = Criterion::default().configure_from_args();
    for (name, caps) in [
        (
            "utility,compute",
            DriverCapabilities::parse("utility,compute").unwrap(),
        ),
        ("all", DriverCapabilities::all()),
    ] {
        let found = find_driver_files(&caps, &cache, &bin_dirs);
        assert!(found.missing.is_empty(), "{:?}", found.missing);
        c.bench_function(&format!("find_driver_files {name}"), |b| {
            b.iter(|| black_box(find_driver_files(black_box(&caps), &cache, &bin_dirs)))
        });
    }
    c.final_summary();
}
