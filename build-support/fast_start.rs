// Link settings that make a short-lived binary start faster, shared by the
// build scripts of `rnx` (every command a user types) and `joblet`
// (for `joblet-shim`, started once per job, and again as the sandbox init
// of a job without a warm sandbox). Each start pays the work the kernel
// and the dynamic loader do before `main`. Both settings apply on x86-64
// GNU/Linux only; elsewhere the target's defaults apply. Included with
// `include!` (a build script cannot depend on a workspace crate's code
// without a crate of its own for these sixty lines).
//
// - Position-dependent (`-no-pie`). A PIE spends much of its start applying
//   its relative relocations (~12,000 in `rnx`, ~2,600 in `joblet-shim`),
//   which also copy-on-write-fault every page of its relocated data.
//   Without PIE the linker resolves them: for `rnx` about 50 fewer page
//   faults and ~0.25 ms less per invocation (`perf stat -r 300 rnx
//   --version`: 1.53 -> 1.28 ms). The code is still compiled position-
//   independent; only the executable's load address is fixed (its
//   libraries, heap and stacks stay randomised).
// - The GCC unwinder linked in (`libgcc_eh.a`) instead of loaded
//   (`libgcc_s.so.1`). Rust's standard library asks for `-lgcc_s` by name;
//   a linker script of that name in a directory searched first points the
//   linker at the static archive, so the loader maps one library fewer and
//   does not run `libgcc_s`'s start-up (its CPU model probe issues CPUID
//   instructions, each a trap to the hypervisor on a VM). ~0.25 ms less per
//   invocation (`perf stat -r 300 rnx --version`: 1.37-1.50 -> 1.13-1.17
//   ms; BENCHMARKS.md, run 10). Panics unwind and print backtraces as
//   before: the archive is the same unwinder. Skipped, with a build
//   warning, where the C compiler cannot name `libgcc_eh.a`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Prints the link arguments of both settings for the binary `bin` of the
/// package being built.
fn link_for_fast_start(bin: &str) {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../build-support/fast_start.rs");
    println!("cargo:rerun-if-env-changed=CC");
    if target_os != "linux" || target_arch != "x86_64" || target_env != "gnu" {
        return;
    }
    println!("cargo:rustc-link-arg-bin={bin}=-no-pie");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    match static_unwinder(&out_dir) {
        Ok(dir) => println!("cargo:rustc-link-arg-bin={bin}=-L{}", dir.display()),
        Err(why) => println!("cargo:warning={bin} links libgcc_s.so.1 dynamically: {why}"),
    }
}

/// Writes `libgcc_s.so`, a linker script naming the static unwinder the C
/// compiler links with, into a directory of its own under `out_dir`, and
/// returns that directory.
fn static_unwinder(out_dir: &Path) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let archive = PathBuf::from(&printed);
    // Without the file, the compiler prints the bare name back.
    if !out.status.success() || !archive.is_absolute() || !archive.is_file() {
        return Err(format!(
            "{cc} does not know libgcc_eh.a (printed {printed:?})"
        ));
    }
    if printed.contains('"') {
        return Err(format!("cannot quote {printed:?} in a linker script"));
    }
    let dir = out_dir.join("static-unwinder");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let script = dir.join("libgcc_s.so");
    let text = format!(
        "/* build-support/fast_start.rs: -lgcc_s resolves to the static unwinder. */\nINPUT(\"{printed}\")\n"
    );
    std::fs::write(&script, text).map_err(|e| format!("writing {}: {e}", script.display()))?;
    Ok(dir)
}
