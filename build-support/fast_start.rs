// Link settings that make a short-lived binary start faster, shared by the
// build scripts of `rnx` (every command a user types) and `joblet-sandbox`
// (for `joblet-shim`, started once per job, and again as the sandbox init
// of a job without a warm sandbox). Each start pays the work the kernel
// and the dynamic loader do before `main`. All settings apply on x86-64
// GNU/Linux only; elsewhere the target's defaults apply. Included with
// `include!` (a build script cannot depend on a workspace crate's code
// without a crate of its own for these lines).
//
// - Position-dependent (`-no-pie`). A PIE spends much of its start applying
//   its relative relocations (~12,000 in `rnx`, ~2,600 in `joblet-shim`),
//   which also copy-on-write-fault every page of its relocated data.
//   Without PIE the linker resolves them: for `rnx` about 50 fewer page
//   faults and ~0.25 ms less per invocation (`perf stat -r 300 rnx
//   --version`: 1.53 -> 1.28 ms). The code is still compiled position-
//   independent; only the executable's load address is fixed (its heap
//   and stacks stay randomised).
// - The C library linked in statically (`-static`; `libc.a` and the other
//   archives of glibc's development package). No dynamic loader runs at
//   all: it mapped `libc.so.6` and `libm.so.6`, looked up and bound their
//   symbols and faulted in their pages before `main`. `perf stat -r 300
//   rnx --version`: 0.96-1.00 -> 0.55-0.66 ms of CPU, 130 -> 92 page
//   faults; `joblet-shim --version`: 0.54-0.57 -> 0.52 ms, 65-67 -> 36 faults
//   (bench/history/runs-17-22.md, "linked statically"). rustc names the
//   target's libraries itself
//   (`-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`), so a linker
//   script per library (`libc.so` holding `GROUP("…/libc.a" …)`) in a
//   directory of our own points each name at its archive. The linker
//   searches the directories in command-line order and a build script's
//   arguments come last: a package whose dependencies put the system's
//   library directory on the link line (hwloc does, for the daemon) would
//   link `libc.so.6` again, which is why `joblet-shim` is built by
//   `joblet-sandbox` and not by `joblet` (`tests/shim_binary.rs` and
//   `rnx`'s `cli.rs` check that both binaries come out static). What a
//   static glibc cannot do alone is load NSS modules of another glibc: host
//   and user lookups from `files` and `dns` are built in; other sources in
//   `nsswitch.conf` (`sss`, `ldap`, `mdns`) load the system's modules,
//   which works with the glibc the binary was built against. `rnx` resolves
//   node host names; `joblet-shim` resolves nothing (the daemon, linked
//   dynamically, resolves `jobs.user`). Skipped, with a build warning, where
//   the C compiler cannot name one of the archives: the next setting then
//   still applies.
// - Otherwise, the GCC unwinder linked in (`libgcc_eh.a`) instead of
//   loaded (`libgcc_s.so.1`), with a `libgcc_s.so` script alone. The loader
//   then maps one library fewer and does not run `libgcc_s`'s start-up (its
//   CPU model probe issues CPUID instructions, each a trap to the
//   hypervisor on a VM): ~0.25 ms less per invocation (`perf stat -r 300
//   rnx --version`: 1.37-1.50 -> 1.13-1.17 ms; bench/history/runs-08-13.md,
//   "whole-program optimisation").
//   Panics unwind and print backtraces either way: the archive is the same
//   unwinder. Skipped, with a build warning, where the C compiler cannot
//   name `libgcc_eh.a`.

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
    // With `+crt-static` rustc links statically itself (as a static PIE,
    // which `-no-pie` would break).
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if features.split(',').any(|f| f == "crt-static") {
        return;
    }
    println!("cargo:rustc-link-arg-bin={bin}=-no-pie");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // One directory per setting: a half-written static one must not be
    // searched when the build falls back to the unwinder alone.
    match scripts_in(&out_dir.join("static-libc"), static_libc) {
        Ok(dir) => {
            println!("cargo:rustc-link-arg-bin={bin}=-static");
            println!("cargo:rustc-link-arg-bin={bin}=-L{}", dir.display());
            return;
        }
        Err(why) => println!("cargo:warning={bin} links the C library dynamically: {why}"),
    }
    match scripts_in(&out_dir.join("static-unwinder"), static_unwinder) {
        Ok(dir) => println!("cargo:rustc-link-arg-bin={bin}=-L{}", dir.display()),
        Err(why) => println!("cargo:warning={bin} links libgcc_s.so.1 dynamically: {why}"),
    }
}

/// Makes `dir` afresh and has `write` put its linker scripts there.
fn scripts_in(dir: &Path, write: fn(&Path) -> Result<(), String>) -> Result<PathBuf, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    write(dir)?;
    Ok(dir.to_owned())
}

/// The C compiler the linker is driven by (`$CC`, else `cc`).
fn c_compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// The full path of `name` as the C compiler links it, or why not.
fn archive(cc: &str, name: &str) -> Result<String, String> {
    let out = Command::new(cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let path = PathBuf::from(&printed);
    // Without the file, the compiler prints the bare name back.
    if !out.status.success() || !path.is_absolute() || !path.is_file() {
        return Err(format!("{cc} does not know {name} (printed {printed:?})"));
    }
    if printed.contains('"') {
        return Err(format!("cannot quote {printed:?} in a linker script"));
    }
    Ok(printed)
}

/// Writes `lib{name}.so` in `dir`: a linker script that sends `-l{name}`
/// to `archives` instead.
fn script(dir: &Path, name: &str, archives: &[String]) -> Result<(), String> {
    let list: Vec<String> = archives.iter().map(|a| format!("\"{a}\"")).collect();
    let text = format!(
        "/* build-support/fast_start.rs: -l{name} resolves to static archives. */\nGROUP({})\n",
        list.join(" ")
    );
    let path = dir.join(format!("lib{name}.so"));
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Points every library rustc names for the target (`-lgcc_s -lutil -lrt
/// -lpthread -lm -ldl -lc`) at the C compiler's static archives.
fn static_libc(dir: &Path) -> Result<(), String> {
    let cc = c_compiler();
    let gcc = archive(&cc, "libgcc.a")?;
    let gcc_eh = archive(&cc, "libgcc_eh.a")?;
    let libc = archive(&cc, "libc.a")?;
    script(dir, "gcc_s", &[gcc_eh.clone(), gcc.clone()])?;
    script(dir, "c", &[libc, gcc, gcc_eh])?;
    for name in ["m", "pthread", "rt", "dl", "util"] {
        let a = archive(&cc, &format!("lib{name}.a"))?;
        script(dir, name, &[a])?;
    }
    Ok(())
}

/// Writes `libgcc_s.so` in `dir`: a linker script naming the static
/// unwinder the C compiler links with.
fn static_unwinder(dir: &Path) -> Result<(), String> {
    let cc = c_compiler();
    script(dir, "gcc_s", &[archive(&cc, "libgcc_eh.a")?])
}
