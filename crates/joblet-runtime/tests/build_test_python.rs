//! Builds the `runtimes/test-python` runtime for real (mmdebstrap + uv, as root), from a
//! probe wheel this test rebuilds, and checks the tree from inside with `chroot`.
//!
//! Skipped (with a printed SKIPPED line) only where mmdebstrap, uv or root are missing.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use joblet_runtime::manifest::{collect_files, write_files};
use joblet_runtime::{
    build, BuildError, BuildOptions, Installed, Manifest, Phase, Progress, RuntimeStore,
};

fn repo_runtime() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runtimes/test-python")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Why this machine cannot run the build, if it cannot.
fn cannot_build() -> Option<&'static str> {
    if !on_path("mmdebstrap") {
        Some("mmdebstrap not installed")
    } else if !on_path("uv") {
        Some("uv not installed")
    } else if !nix::unistd::geteuid().is_root() {
        Some("not root (mmdebstrap --mode=root)")
    } else {
        None
    }
}

/// The test runtime's directory, with its wheel rebuilt from source by this test.
fn runtime_dir(at: &Path) -> PathBuf {
    let dir = at.join("test-python");
    for file in [
        "runtime.yml",
        "requirements.lock",
        "probe/make_wheel.py",
        "probe/probe/__init__.py",
    ] {
        fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        fs::copy(repo_runtime().join(file), dir.join(file)).unwrap();
    }
    let out = Command::new("python3")
        .arg(dir.join("probe/make_wheel.py"))
        .arg(dir.join("wheels"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wheel = "wheels/probe-0.1.0-py3-none-any.whl";
    assert!(
        fs::read(dir.join(wheel)).unwrap() == fs::read(repo_runtime().join(wheel)).unwrap(),
        "the rebuilt probe wheel differs from runtimes/test-python/{wheel}: rebuild it and re-lock"
    );
    dir
}

/// Runs `argv` inside `root` with a clean environment: the runtime's own.
fn in_chroot(installed: &Installed, argv: &[&str]) -> String {
    let out = Command::new("chroot")
        .arg(&installed.root)
        .args(argv)
        .env_clear()
        .envs(&installed.environment)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{argv:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn host_site_packages() -> Vec<String> {
    let out = Command::new("python3")
        .args(["-c", "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn walk(dir: &Path, each: &mut dyn FnMut(&Path, &fs::Metadata)) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = fs::symlink_metadata(&path).unwrap();
        each(&path, &meta);
        if meta.is_dir() {
            walk(&path, each);
        }
    }
}

#[test]
fn builds_the_test_runtime_and_it_runs_under_chroot() {
    if let Some(why) = cannot_build() {
        println!("SKIPPED: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let source = runtime_dir(work.path());
    // As the daemon gets it: the client uploads the directory's files.
    let files = collect_files(&source).unwrap();
    assert!(files.contains_key("wheels/probe-0.1.0-py3-none-any.whl"));
    let manifest = Manifest::from_files(&files).unwrap();
    let upload = work.path().join("upload");
    fs::create_dir(&upload).unwrap();
    write_files(&files, &upload).unwrap();

    let store = RuntimeStore::open(&work.path().join("store")).unwrap();
    let opts = BuildOptions::default();

    // Two installs of the same runtime at once: one builds, the other waits, then finds it.
    let started = Instant::now();
    let results: Vec<(Result<Installed, BuildError>, Vec<Progress>, f64)> =
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut seen = Vec::new();
                        let r = build(
                            &manifest,
                            &upload,
                            &store,
                            &opts,
                            &mut |p| seen.push(p),
                            &AtomicBool::new(false),
                        );
                        (r, seen, started.elapsed().as_secs_f64())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    let mut builders = 0;
    let mut installed = Vec::new();
    for (result, seen, secs) in results {
        let record = result.unwrap();
        let phases: Vec<Phase> = seen.iter().map(|p| p.phase).collect();
        assert_eq!(phases.last(), Some(&Phase::Done));
        if phases.contains(&Phase::Base) {
            builders += 1;
            for phase in [Phase::Base, Phase::Python, Phase::Ingest] {
                assert!(phases.contains(&phase), "{phase:?} missing from {phases:?}");
            }
            assert!(seen
                .iter()
                .any(|p| p.phase == Phase::Python && p.done == 1 && p.total == 1));
            println!("built test-python in {secs:.1} s");
        } else {
            assert!(phases.contains(&Phase::Wait), "{phases:?}");
            assert!(seen.last().unwrap().message.contains("already installed"));
        }
        installed.push(record);
    }
    assert_eq!(builders, 1, "exactly one of two concurrent installs builds");
    assert_eq!(installed[0].digest, installed[1].digest);
    let rt = installed.pop().unwrap();

    // The record.
    assert_eq!(
        (rt.name.as_str(), rt.version.as_str()),
        ("test-python", "1")
    );
    assert_eq!(
        rt.python_packages,
        [("probe".to_string(), "0.1.0".to_string())]
    );
    assert!(rt
        .debian_packages
        .iter()
        .any(|p| p.starts_with("python3-minimal=")));
    assert!(rt
        .debian_packages
        .iter()
        .any(|p| p.starts_with("libc6=2.36")));
    assert_eq!(rt.root, store.root().join("trees").join(rt.digest_hex()));
    assert_eq!(store.list().unwrap(), vec![rt.clone()]);
    println!("tree: {} files, {} bytes", rt.files, rt.size_bytes);

    // The tree: Debian's python3, the wheel in /usr/local's dist-packages, compiled; the
    // console script moved to /usr/local/bin and pointed at the root's Python.
    let dist = rt.root.join("usr/local/lib/python3.11/dist-packages");
    assert!(rt.root.join("usr/bin/python3").exists());
    assert!(dist.join("probe/__init__.py").is_file());
    assert!(dist
        .join("probe/__pycache__/__init__.cpython-311.pyc")
        .is_file());
    let script = fs::read_to_string(rt.root.join("usr/local/bin/probe-hello")).unwrap();
    assert!(script.starts_with("#!/usr/bin/python3\n"), "{script}");
    assert!(!dist.join("bin").exists());
    let mut special = Vec::new();
    walk(&rt.root, &mut |path, meta| {
        let kind = meta.file_type();
        if meta.mode() & 0o6000 != 0
            || kind.is_char_device()
            || kind.is_block_device()
            || kind.is_fifo()
            || kind.is_socket()
        {
            special.push(path.to_path_buf());
        }
    });
    assert!(
        special.is_empty(),
        "setuid/setgid or special files in the tree: {special:?}"
    );
    assert_eq!(fs::read_dir(rt.root.join("dev")).unwrap().count(), 0);

    // Inside: the package imports from the runtime, and nothing of the host's Python leaks.
    let out = in_chroot(
        &rt,
        &["/usr/bin/python3", "-c", "import sys, probe; print(probe.hello()); print(probe.__file__); print('\\n'.join(sys.path))"],
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("probe ok"));
    assert_eq!(
        lines.next(),
        Some("/usr/local/lib/python3.11/dist-packages/probe/__init__.py")
    );
    let sys_path: Vec<&str> = lines.collect();
    assert!(
        sys_path.contains(&"/usr/local/lib/python3.11/dist-packages"),
        "{sys_path:?}"
    );
    for host in host_site_packages() {
        assert!(
            !sys_path.contains(&host.as_str()),
            "host site-packages {host} in {sys_path:?}"
        );
    }
    assert!(in_chroot(&rt, &["probe-hello"]).starts_with("probe ok\n"));
    let check: Vec<&str> = rt.self_check.iter().map(String::as_str).collect();
    assert_eq!(in_chroot(&rt, &check), "probe ok\n");

    // The same inputs under another name reuse the tree: no tool runs, no new tree.
    let mut renamed: BTreeMap<String, Vec<u8>> = files.clone();
    let text = String::from_utf8(files["runtime.yml"].clone()).unwrap();
    renamed.insert(
        "runtime.yml".into(),
        text.replace("name: test-python", "name: test-python-copy")
            .into_bytes(),
    );
    let copy_manifest = Manifest::from_files(&renamed).unwrap();
    let t = Instant::now();
    let mut phases = Vec::new();
    let copy = build(
        &copy_manifest,
        &upload,
        &store,
        &opts,
        &mut |p| phases.push(p.phase),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(copy.digest, rt.digest);
    assert!(!phases.contains(&Phase::Base), "{phases:?}");
    assert!(t.elapsed().as_secs() < 5);
    assert_eq!(store.disk_usage().unwrap().trees, 1);

    // The same name and version from other inputs is refused unless rebuilt.
    let mut changed = files.clone();
    changed.insert(
        "runtime.yml".into(),
        text.replace("variant: essential", "variant: apt")
            .into_bytes(),
    );
    let changed = Manifest::from_files(&changed).unwrap();
    let err = build(
        &changed,
        &upload,
        &store,
        &opts,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::VersionConflict { .. }), "{err}");

    // Removing both leaves an empty store.
    store.remove("test-python-copy", None).unwrap();
    assert!(
        rt.root.join("usr/bin/python3").exists(),
        "still used by test-python"
    );
    store.remove("test-python", None).unwrap();
    let usage = store.disk_usage().unwrap();
    assert_eq!((usage.trees, usage.objects), (0, 0));
}

#[test]
fn a_cancelled_build_leaves_nothing_behind() {
    if let Some(why) = cannot_build() {
        println!("SKIPPED: {why}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let source = runtime_dir(work.path());
    let manifest = Manifest::load(&source).unwrap();
    let store_dir = work.path().join("store");
    let store = RuntimeStore::open(&store_dir).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let mut base_lines = 0;
    let err = build(
        &manifest,
        &source,
        &store,
        &BuildOptions::default(),
        &mut |p| {
            if p.phase == Phase::Base {
                base_lines += 1;
                // Let mmdebstrap get going (mounts in its chroot), then cancel.
                if base_lines == 8 {
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        },
        &cancel,
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::Cancelled), "{err}");
    println!(
        "cancelled after {base_lines} lines, {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(store.list().unwrap().is_empty());
    assert_eq!(fs::read_dir(store_dir.join("tmp")).unwrap().count(), 0);
    assert_eq!(store.disk_usage().unwrap().trees, 0);
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(store_dir.to_str().unwrap()),
        "mounts left under the store"
    );
}
