//! The NVIDIA driver files a job gets, by `NVIDIA_DRIVER_CAPABILITIES`:
//! user-space driver libraries found through the ld.so cache
//! ([`super::ld_cache`]) and driver binaries found in the host's binary
//! directories. The daemon bind-mounts them read-only into a GPU job, and
//! masks all of them ([`all_driver_files`]) in a CPU job.
//!
//! The lists are libnvidia-container's (`src/nvc_info.c`, NVIDIA/
//! libnvidia-container, `utility_libs`, `compute_libs`, `video_libs`,
//! `graphics_libs`, `graphics_libs_glvnd`, `ngx_libs`, `utility_bins`,
//! `compute_bins`), and so is the capability mapping (`src/options.h`):
//! `video` also brings the compute libraries, `display` the graphics ones.

use super::caps::{DriverCapabilities, DriverCapability};
use super::ld_cache::LdCacheEntry;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `utility`: NVML and friends.
pub const UTILITY_LIBS: &[&str] = &[
    "libnvidia-ml.so",   // management library (NVML)
    "libnvidia-cfg.so",  // GPU configuration
    "libnvidia-nscq.so", // NVSwitch/GPU topology (NSCQ)
];

/// `compute`: CUDA driver and OpenCL.
pub const COMPUTE_LIBS: &[&str] = &[
    "libcuda.so",                   // CUDA driver API
    "libcudadebugger.so",           // CUDA debugger backend
    "libnvidia-opencl.so",          // OpenCL ICD
    "libnvidia-gpucomp.so",         // shared compiler library
    "libnvidia-ptxjitcompiler.so",  // PTX JIT (used by libcuda)
    "libnvidia-fatbinaryloader.so", // fatbin loader (older drivers)
    "libnvidia-allocator.so",       // allocator runtime
    "libnvidia-compiler.so",        // NVVM-PTX compiler for OpenCL
    "libnvidia-nvvm.so",            // NVVM compiler (JIT LTO)
    "libnvidia-pkcs11.so",          // confidential computing crypto
    "libnvidia-pkcs11-openssl3.so", // same, OpenSSL 3
    "libnvidia-tileiras.so",        // Tile IR JIT (newer drivers, nvc_info.c)
];

/// `video`: encode/decode.
pub const VIDEO_LIBS: &[&str] = &[
    "libvdpau_nvidia.so",
    "libnvidia-encode.so",
    "libnvidia-opticalflow.so",
    "libnvcuvid.so",
];

/// `graphics` (and `display`): the NVIDIA GL/EGL/Vulkan cores and their
/// GLVND vendor libraries. The non-GLVND `libGL.so`/`libEGL.so` that
/// libnvidia-container takes only with `no-glvnd`, and only after
/// checking their ELF dependencies, are left out.
pub const GRAPHICS_LIBS: &[&str] = &[
    "libnvidia-eglcore.so",
    "libnvidia-glcore.so",
    "libnvidia-tls.so",
    "libnvidia-glsi.so",
    "libnvidia-fbc.so",
    "libnvidia-ifr.so",
    "libnvidia-rtcore.so",
    "libnvoptix.so",
    "libGLX_nvidia.so",
    "libEGL_nvidia.so",
    "libGLESv2_nvidia.so",
    "libGLESv1_CM_nvidia.so",
    "libnvidia-glvkspirv.so",
    "libnvidia-cbl.so",
];

/// `ngx`: DLSS.
pub const NGX_LIBS: &[&str] = &["libnvidia-ngx.so"];

/// `utility` binaries. libnvidia-container also lists `nv-fabricmanager`,
/// a host daemon that a job has no business running; it is left out.
pub const UTILITY_BINS: &[&str] = &["nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"];

/// `compute` binaries (MPS).
pub const COMPUTE_BINS: &[&str] = &["nvidia-cuda-mps-control", "nvidia-cuda-mps-server"];

/// Libraries that also get their unversioned name (`libcuda.so`) in the
/// job: build tools link with `-lcuda` (Triton, `nvcc` at run time) and
/// some tools dlopen `libnvidia-ml.so` without a version.
const UNVERSIONED: &[&str] = &["libcuda.so", "libnvidia-ml.so"];

/// One driver library to put in the job's library directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverLib {
    /// Names to expose: the SONAME (`libcuda.so.1`), plus the unversioned
    /// `libcuda.so` / `libnvidia-ml.so` for those two.
    pub names: Vec<String>,
    /// The real file (symlinks followed), e.g. `.../libcuda.so.550.54.15`.
    pub path: PathBuf,
    /// The capability whose list holds it.
    pub capability: DriverCapability,
    /// A 32-bit library (only with `compat32`); goes in the job's 32-bit
    /// library directory, not beside the 64-bit one of the same name.
    pub compat32: bool,
}

/// The driver files for a set of capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverFiles {
    /// In list order, 64-bit first.
    pub libraries: Vec<DriverLib>,
    /// Paths as found in the binary directories (the daemon mounts each
    /// under its file name).
    pub binaries: Vec<PathBuf>,
    /// Required libraries not found: `libnvidia-ml.so.1` for `utility`,
    /// `libcuda.so.1` for `compute`. Non-empty means the node's driver is
    /// not (fully) installed for what the job asked.
    pub missing: Vec<String>,
}

/// The driver files a job with `caps` gets, from the parsed ld.so cache
/// and the directories to look for binaries in (e.g. `/usr/bin`). Only
/// this host's 64-bit libraries, plus its 32-bit ones with `compat32`.
/// Cache entries whose file is gone (a stale cache) are skipped.
pub fn find_driver_files(
    caps: &DriverCapabilities,
    cache: &[LdCacheEntry],
    bin_dirs: &[PathBuf],
) -> DriverFiles {
    let wanted = wanted_libs(caps);
    let mut files = DriverFiles::default();
    let mut arches = vec![false];
    if caps.contains(DriverCapability::Compat32) {
        arches.push(true);
    }
    for compat32 in arches {
        for &(base, capability) in &wanted {
            for (soname, path) in lookup(cache, base, compat32) {
                if files
                    .libraries
                    .iter()
                    .any(|l| l.path == path && l.compat32 == compat32)
                {
                    continue;
                }
                let mut names = vec![soname.clone()];
                if UNVERSIONED.contains(&base) && soname != base {
                    names.push(base.to_string());
                }
                files.libraries.push(DriverLib {
                    names,
                    path,
                    capability,
                    compat32,
                });
            }
        }
    }
    for (cap, core) in [
        (DriverCapability::Utility, "libnvidia-ml.so"),
        (DriverCapability::Compute, "libcuda.so"),
    ] {
        let found = files
            .libraries
            .iter()
            .any(|l| !l.compat32 && l.names.iter().any(|n| matches_base(n, core)));
        if caps.contains(cap) && !found {
            files.missing.push(format!("{core}.1"));
        }
    }
    for (cap, bins) in [
        (DriverCapability::Utility, UTILITY_BINS),
        (DriverCapability::Compute, COMPUTE_BINS),
    ] {
        if !caps.contains(cap) {
            continue;
        }
        for bin in bins {
            match find_binary(bin, bin_dirs) {
                Some(path) => files.binaries.push(path),
                None => tracing::debug!(binary = bin, "driver binary not found"),
            }
        }
    }
    files
}

/// Every driver file of every capability, 32-bit ones included: what a
/// CPU job must not see.
pub fn all_driver_files(cache: &[LdCacheEntry], bin_dirs: &[PathBuf]) -> DriverFiles {
    find_driver_files(&DriverCapabilities::all(), cache, bin_dirs)
}

/// `(library base name, capability)` in list order, each base once.
fn wanted_libs(caps: &DriverCapabilities) -> Vec<(&'static str, DriverCapability)> {
    use DriverCapability::*;
    let mut lists: Vec<(&[&str], DriverCapability)> = Vec::new();
    for cap in caps.iter() {
        match cap {
            Utility => lists.push((UTILITY_LIBS, Utility)),
            Compute | Video => {
                lists.push((COMPUTE_LIBS, Compute));
                if cap == Video {
                    lists.push((VIDEO_LIBS, Video));
                }
            }
            Graphics | Display => lists.push((GRAPHICS_LIBS, Graphics)),
            Ngx => lists.push((NGX_LIBS, Ngx)),
            Compat32 => {}
        }
    }
    // Utility first: its library is the one every GPU job needs.
    lists.sort_by_key(|(_, c)| *c != Utility);
    let mut out: Vec<(&'static str, DriverCapability)> = Vec::new();
    for (list, cap) in lists {
        for &base in list {
            if !out.iter().any(|(b, _)| *b == base) {
                out.push((base, cap));
            }
        }
    }
    out
}

/// `libcuda.so.1` and `libcuda.so` match `libcuda.so`; `libcudadebugger.so.1`
/// does not.
fn matches_base(soname: &str, base: &str) -> bool {
    soname
        .strip_prefix(base)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Each distinct SONAME for `base` of the wanted word size, first usable
/// entry per SONAME, with its real path.
fn lookup(cache: &[LdCacheEntry], base: &str, compat32: bool) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for e in cache {
        let arch_ok = if compat32 {
            e.is_host_lib32()
        } else {
            e.is_host_lib64()
        };
        if !arch_ok || !matches_base(&e.soname, base) || out.iter().any(|(s, _)| *s == e.soname) {
            continue;
        }
        match std::fs::canonicalize(&e.path) {
            Ok(real) if real.is_file() => out.push((e.soname.clone(), real)),
            Ok(real) => {
                tracing::debug!(path = %real.display(), "ld.so cache entry is not a file; skipped")
            }
            Err(err) => {
                tracing::debug!(path = %e.path.display(), error = %err, "stale ld.so cache entry skipped")
            }
        }
    }
    out
}

/// The first executable regular file `name` in `dirs`.
fn find_binary(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ld_cache::{HOST_LIB32_FLAGS, HOST_LIB64_FLAGS};
    use std::os::unix::fs::symlink;

    const V: &str = "550.54.15";

    fn lib64() -> u32 {
        HOST_LIB64_FLAGS.unwrap_or(0x0303)
    }

    /// A driver install in `root`: `<soname>` → `<base>.<V>` in lib/ (and
    /// lib32/), like the NVIDIA installer lays it out.
    struct Install {
        root: tempfile::TempDir,
        cache: Vec<LdCacheEntry>,
    }

    impl Install {
        fn new() -> Install {
            let root = tempfile::tempdir().unwrap();
            for d in ["lib", "lib32", "bin", "sbin"] {
                std::fs::create_dir(root.path().join(d)).unwrap();
            }
            Install {
                root,
                cache: Vec::new(),
            }
        }

        fn lib(&mut self, dir: &str, base: &str, soname: &str, flags: u32) -> PathBuf {
            let d = self.root.path().join(dir);
            let real = d.join(format!("{base}.{V}"));
            std::fs::write(&real, b"\x7fELF").unwrap();
            // soname → intermediate link → real file: a chain.
            let mid = d.join(format!("{base}.mid"));
            if !mid.exists() {
                symlink(real.file_name().unwrap(), &mid).unwrap();
            }
            let link = d.join(soname);
            if !link.exists() {
                symlink(mid.file_name().unwrap(), &link).unwrap();
            }
            self.cache.push(LdCacheEntry {
                soname: soname.into(),
                path: link,
                flags,
            });
            real
        }

        fn bin(&self, dir: &str, name: &str, mode: u32) -> PathBuf {
            let p = self.root.path().join(dir).join(name);
            std::fs::write(&p, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        }

        fn bin_dirs(&self) -> Vec<PathBuf> {
            vec![self.root.path().join("bin"), self.root.path().join("sbin")]
        }
    }

    fn canon(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).unwrap()
    }

    #[test]
    fn default_caps_get_utility_and_compute_files() {
        let mut i = Install::new();
        let nvml = i.lib("lib", "libnvidia-ml.so", "libnvidia-ml.so.1", lib64());
        let cuda = i.lib("lib", "libcuda.so", "libcuda.so.1", lib64());
        let ptx = i.lib(
            "lib",
            "libnvidia-ptxjitcompiler.so",
            "libnvidia-ptxjitcompiler.so.1",
            lib64(),
        );
        // Not for utility,compute:
        i.lib("lib", "libnvcuvid.so", "libnvcuvid.so.1", lib64());
        i.lib("lib", "libGLX_nvidia.so", "libGLX_nvidia.so.0", lib64());
        // A name that merely starts like one of ours:
        i.lib("lib", "libcudart.so", "libcudart.so.12", lib64());
        // 32-bit copy: only with compat32.
        if let Some(f32) = HOST_LIB32_FLAGS {
            i.lib("lib32", "libcuda.so", "libcuda.so.1", f32);
        }
        let smi = i.bin("bin", "nvidia-smi", 0o755);
        i.bin("bin", "nvidia-debugdump", 0o644); // not executable
        let dump = i.bin("sbin", "nvidia-debugdump", 0o755);
        let mps = i.bin("sbin", "nvidia-cuda-mps-control", 0o755);

        let f = find_driver_files(&DriverCapabilities::default(), &i.cache, &i.bin_dirs());
        assert_eq!(
            f.libraries,
            [
                DriverLib {
                    names: vec!["libnvidia-ml.so.1".into(), "libnvidia-ml.so".into()],
                    path: canon(&nvml),
                    capability: DriverCapability::Utility,
                    compat32: false,
                },
                DriverLib {
                    names: vec!["libcuda.so.1".into(), "libcuda.so".into()],
                    path: canon(&cuda),
                    capability: DriverCapability::Compute,
                    compat32: false,
                },
                DriverLib {
                    names: vec!["libnvidia-ptxjitcompiler.so.1".into()],
                    path: canon(&ptx),
                    capability: DriverCapability::Compute,
                    compat32: false,
                },
            ]
        );
        assert_eq!(f.binaries, [smi, dump, mps]);
        assert!(f.missing.is_empty(), "{:?}", f.missing);
    }

    #[test]
    fn utility_only_and_missing_core_libraries() {
        let mut i = Install::new();
        i.lib("lib", "libcuda.so", "libcuda.so.1", lib64());
        i.bin("bin", "nvidia-cuda-mps-control", 0o755);
        let caps = DriverCapabilities::parse("utility").unwrap();
        let f = find_driver_files(&caps, &i.cache, &i.bin_dirs());
        assert!(f.libraries.is_empty(), "{:?}", f.libraries);
        assert!(f.binaries.is_empty(), "MPS is compute's: {:?}", f.binaries);
        assert_eq!(f.missing, ["libnvidia-ml.so.1"]);

        let f = find_driver_files(&DriverCapabilities::default(), &[], &[]);
        assert_eq!(f.missing, ["libnvidia-ml.so.1", "libcuda.so.1"]);
    }

    #[test]
    fn stale_entries_and_other_arches_are_skipped() {
        let mut i = Install::new();
        i.cache.push(LdCacheEntry {
            soname: "libnvidia-ml.so.1".into(),
            path: i.root.path().join("lib/gone.so.1"),
            flags: lib64(),
        });
        // An aarch64 (or x86-64, on aarch64) entry: not this host's.
        let foreign = if lib64() == 0x0303 { 0x0a03 } else { 0x0303 };
        i.lib("lib", "libcuda.so", "libcuda.so.1", foreign);
        let nvml = i.lib("lib", "libnvidia-ml.so", "libnvidia-ml.so.1", lib64());
        let f = find_driver_files(&DriverCapabilities::default(), &i.cache, &[]);
        assert_eq!(f.libraries.len(), 1, "{:?}", f.libraries);
        assert_eq!(f.libraries[0].path, canon(&nvml));
        assert_eq!(f.missing, ["libcuda.so.1"]);
    }

    #[test]
    fn video_brings_compute_libs_but_not_mps() {
        let mut i = Install::new();
        i.lib("lib", "libcuda.so", "libcuda.so.1", lib64());
        i.lib("lib", "libnvcuvid.so", "libnvcuvid.so.1", lib64());
        i.bin("bin", "nvidia-cuda-mps-server", 0o755);
        let caps = DriverCapabilities::parse("video").unwrap();
        let f = find_driver_files(&caps, &i.cache, &i.bin_dirs());
        let got: Vec<_> = f
            .libraries
            .iter()
            .map(|l| (l.names[0].as_str(), l.capability))
            .collect();
        assert_eq!(
            got,
            [
                ("libcuda.so.1", DriverCapability::Compute),
                ("libnvcuvid.so.1", DriverCapability::Video)
            ]
        );
        assert!(f.binaries.is_empty());
        assert!(f.missing.is_empty(), "libcuda is only required for compute");
    }

    #[test]
    fn all_driver_files_covers_every_list_and_32_bit() {
        let mut i = Install::new();
        i.lib("lib", "libnvidia-ml.so", "libnvidia-ml.so.1", lib64());
        i.lib("lib", "libcuda.so", "libcuda.so.1", lib64());
        i.lib(
            "lib",
            "libnvidia-encode.so",
            "libnvidia-encode.so.1",
            lib64(),
        );
        i.lib("lib", "libEGL_nvidia.so", "libEGL_nvidia.so.0", lib64());
        i.lib("lib", "libnvidia-ngx.so", "libnvidia-ngx.so.1", lib64());
        let f32 = HOST_LIB32_FLAGS;
        if let Some(f32) = f32 {
            i.lib("lib32", "libcuda.so", "libcuda.so.1", f32);
        }
        let smi = i.bin("bin", "nvidia-smi", 0o755);
        let all = all_driver_files(&i.cache, &i.bin_dirs());
        let names: Vec<_> = all
            .libraries
            .iter()
            .map(|l| (l.names[0].as_str(), l.compat32))
            .collect();
        let mut expected = vec![
            ("libnvidia-ml.so.1", false),
            ("libcuda.so.1", false),
            ("libEGL_nvidia.so.0", false),
            ("libnvidia-ngx.so.1", false),
            ("libnvidia-encode.so.1", false),
        ];
        if f32.is_some() {
            expected.push(("libcuda.so.1", true));
        }
        assert_eq!(names, expected);
        assert_eq!(all.binaries, [smi]);
        // Same libraries, 32-bit copy included, through compat32 alone.
        let c = DriverCapabilities::parse("compute,compat32").unwrap();
        let f = find_driver_files(&c, &i.cache, &[]);
        assert_eq!(f.libraries.len(), 1 + usize::from(f32.is_some()));
        assert_ne!(
            f.libraries.first().map(|l| &l.path),
            f.libraries.get(1).map(|l| &l.path)
        );
    }

    #[test]
    fn base_matching_is_by_whole_name() {
        assert!(matches_base("libcuda.so.1", "libcuda.so"));
        assert!(matches_base("libcuda.so", "libcuda.so"));
        assert!(!matches_base("libcudadebugger.so.1", "libcuda.so"));
        assert!(!matches_base(
            "libnvidia-pkcs11-openssl3.so.1",
            "libnvidia-pkcs11.so"
        ));
        assert!(matches_base(
            "libnvidia-pkcs11-openssl3.so.1",
            "libnvidia-pkcs11-openssl3.so"
        ));
    }
}
