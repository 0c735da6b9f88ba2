//! Builds a runtime into a store and prints what it took:
//!
//! ```text
//! cargo run -p joblet-runtime --example build -- RUNTIME STORE_DIR [--extra NAME]... [--rebuild]
//! ```
//!
//! RUNTIME is a runtime directory (`runtimes/python-3.11-ml`) or the name of an embedded
//! catalog entry (`python-3.11`). Needs root, mmdebstrap and uv.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use joblet_runtime::manifest::write_files;
use joblet_runtime::{build, catalog, BuildOptions, Manifest, Phase, RuntimeStore};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: build RUNTIME STORE_DIR [--extra NAME]... [--rebuild]";
    let runtime = args.next().ok_or(usage)?;
    let store_dir = PathBuf::from(args.next().ok_or(usage)?);
    let mut opts = BuildOptions::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--extra" => opts.extras.push(args.next().ok_or(usage)?),
            "--rebuild" => opts.rebuild = true,
            _ => return Err(usage.into()),
        }
    }

    let store = RuntimeStore::open(&store_dir)?;
    // A catalog entry's files are written out, as the daemon does with uploaded ones.
    let scratch = tempfile::tempdir()?;
    let (manifest, files_dir) = if Path::new(&runtime).is_dir() {
        (
            Manifest::load(Path::new(&runtime))?,
            PathBuf::from(&runtime),
        )
    } else {
        let entry = catalog::get(&runtime)
            .ok_or_else(|| format!("no runtime directory or catalog entry `{runtime}`"))?;
        let files: BTreeMap<String, Vec<u8>> = entry.files();
        write_files(&files, scratch.path())?;
        (Manifest::from_files(&files)?, scratch.path().to_path_buf())
    };

    let started = Instant::now();
    let mut phase_started = Instant::now();
    let mut phase = None;
    let mut times: Vec<(Phase, f64)> = Vec::new();
    let mut last_line = Instant::now();
    let installed = build(
        &manifest,
        &files_dir,
        &store,
        &opts,
        &mut |p| {
            if phase != Some(p.phase) {
                if let Some(done) = phase {
                    times.push((done, phase_started.elapsed().as_secs_f64()));
                }
                phase = Some(p.phase);
                phase_started = Instant::now();
                eprintln!(
                    "[{:>6.1}s] == {:?}: {}",
                    started.elapsed().as_secs_f64(),
                    p.phase,
                    p.message
                );
            } else if last_line.elapsed().as_secs() >= 5 {
                let total = if p.total > 0 {
                    format!("/{}", p.total)
                } else {
                    String::new()
                };
                eprintln!(
                    "[{:>6.1}s]    {}{} {}",
                    started.elapsed().as_secs_f64(),
                    p.done,
                    total,
                    p.message
                );
                last_line = Instant::now();
            }
        },
        &AtomicBool::new(false),
    )?;
    let secs = started.elapsed().as_secs_f64();
    let usage = store.disk_usage()?;
    println!("runtime:     {}@{}", installed.name, installed.version);
    println!("digest:      {}", installed.digest);
    println!("root:        {}", installed.root.display());
    println!("build time:  {secs:.1} s");
    for (phase, secs) in times {
        println!("  {phase:?}: {secs:.1} s");
    }
    println!(
        "tree:        {} files, {:.1} MiB apparent",
        installed.files,
        installed.size_bytes as f64 / 1048576.0
    );
    println!(
        "store:       {} objects, {:.1} MiB; {} trees",
        usage.objects,
        usage.object_bytes as f64 / 1048576.0,
        usage.trees
    );
    println!("python:      {} packages", installed.python_packages.len());
    println!("debian:      {} packages", installed.debian_packages.len());
    Ok(())
}
