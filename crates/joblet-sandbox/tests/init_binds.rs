//! The config's extra binds and masks, seen from inside a real sandboxed
//! job: host files and directories bound read-only at new paths, over
//! existing files and over a procfs file; masked files, directories and
//! device nodes that read as empty; missing masks skipped; and setup
//! failures that name the offending bind.

mod init_common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use init_common::*;
use joblet_sandbox::init::{Bind, InitError, Stage};
use tempfile::TempDir;

/// A host directory that the job user can read, under `parent`.
fn readable_dir(parent: &str) -> TempDir {
    let d = tempfile::Builder::new()
        .prefix("joblet-binds-test-")
        .tempdir_in(parent)
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
        fs::set_permissions(parent, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(path, content).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}

fn bind(source: &Path, target: &str) -> Bind {
    Bind {
        source: source.to_path_buf(),
        target: target.into(),
        writable: false,
    }
}

fn content(v: &serde_json::Value, path: &str) -> String {
    let t = attempt(v, "read-file", path);
    assert_eq!(t["result"], "ok", "{t}");
    t["content"].as_str().unwrap().to_string()
}

const LIB: &str = "/run/nvidia/driver/lib";

#[test]
fn binds_and_masks_shape_what_the_job_sees() {
    // A "driver" directory on the host: two libraries, a symlink, a
    // firmware subdirectory.
    let drv = readable_dir("/tmp");
    write(&drv.path().join("libcuda.so.1"), "CUDA-LIB");
    write(&drv.path().join("libnvidia-ml.so.1"), "NVML-LIB");
    write(&drv.path().join("firmware/gsp.bin"), "GSP");
    symlink("libcuda.so.1", drv.path().join("libcuda.so")).unwrap();
    let params_dir = readable_dir("/tmp");
    let params = params_dir.path().join("params");
    write(&params, "ModifyDeviceFiles: 0\n");
    // A read-only host mount (not under /tmp, which ro_mounts refuse).
    let ro = readable_dir("/var/tmp");
    write(&ro.path().join("secret.conf"), "SECRET");
    write(&ro.path().join("keep.conf"), "KEEP");
    write(&ro.path().join("hidden/inside"), "INSIDE");
    let ro_path = ro.path().to_str().unwrap().to_string();
    let secret = format!("{ro_path}/secret.conf");
    let keep = format!("{ro_path}/keep.conf");
    let hidden = format!("{ro_path}/hidden");

    let cuda = format!("{LIB}/libcuda.so.1");
    let cuda_link = format!("{LIB}/libcuda.so");
    let nvml = format!("{LIB}/libnvidia-ml.so.1");
    let firmware = format!("{LIB}/firmware");
    let firmware_new = format!("{LIB}/firmware/new");
    let lib_new = format!("{LIB}/new");
    let params_target = "/run/joblet/params";
    let proc_target = "/proc/version";
    let proc_masked = "/proc/sys/kernel/ostype";
    let missing = "/no/such/joblet-mask";

    let work = work_dir();
    let probe_path = install_probe(work.path());
    let args: Vec<&str> = [
        ("--read-file", cuda.as_str()),
        ("--try-write", &cuda),
        ("--try-write", &lib_new),
        ("--read-file", &cuda_link),
        ("--read-file", params_target),
        ("--try-write", params_target),
        ("--read-file", proc_target),
        ("--try-write", proc_target),
        ("--read-file", &keep),
        ("--read-file", &nvml),
        ("--stat", &nvml),
        ("--try-write", &nvml),
        ("--stat", &firmware),
        ("--try-write", &firmware_new),
        ("--read-file", &secret),
        ("--stat", &hidden),
        ("--read-file", proc_masked),
        ("--stat", "/dev/full"),
        ("--stat", missing),
        ("--try-write", "/.joblet-empty"),
    ]
    .iter()
    .flat_map(|(op, t)| [*op, *t])
    .collect();
    let mut cfg = config(work.path(), &probe_path, &args);
    cfg.ro_mounts.push(ro.path().to_path_buf());
    cfg.binds = vec![
        bind(&params, proc_target),
        bind(&params, params_target),
        bind(drv.path(), LIB),
        bind(&params, &keep),
    ];
    cfg.masks = vec![
        nvml.clone().into(),
        firmware.clone().into(),
        cuda_link.clone().into(),
        secret.clone().into(),
        hidden.clone().into(),
        proc_masked.into(),
        "/dev/full".into(),
        missing.into(),
    ];
    let before = host_mounts();
    let v = probe(&cfg);
    assert_eq!(host_mounts(), before, "the binds leaked to the host");

    // A bound directory at a new path: its files, read-only, nosuid, nodev.
    assert_eq!(content(&v, &cuda), "CUDA-LIB");
    assert_eq!(tried(&v, "write", Some(&cuda)), "EROFS");
    assert_eq!(tried(&v, "write", Some(&lib_new)), "EROFS");
    let m = mount(&v, LIB).unwrap_or_else(|| panic!("no mount at {LIB}: {}", v["mounts"]));
    assert_eq!(m["ro"], true, "{m}");
    let opts = m["options"].as_str().unwrap();
    assert!(opts.contains("nosuid") && opts.contains("nodev"), "{m}");
    // A masked symlink is skipped, not followed.
    assert_eq!(content(&v, &cuda_link), "CUDA-LIB");

    // A bound file at a new path, over a file of a read-only mount, and
    // over a procfs file.
    assert_eq!(content(&v, params_target), "ModifyDeviceFiles: 0\n");
    assert_eq!(tried(&v, "write", Some(params_target)), "EROFS");
    assert_eq!(content(&v, &keep), "ModifyDeviceFiles: 0\n");
    assert_eq!(content(&v, proc_target), "ModifyDeviceFiles: 0\n");
    assert_eq!(tried(&v, "write", Some(proc_target)), "EROFS");

    // Masked files read as empty read-only regular files: inside a bound
    // directory, inside a read-only mount, inside /proc, a device node.
    for path in [nvml.as_str(), &secret, proc_masked] {
        assert_eq!(content(&v, path), "", "{path}");
    }
    let st = attempt(&v, "stat", &nvml);
    assert_eq!(st["kind"], "file", "{st}");
    assert_eq!(st["size"], 0, "{st}");
    assert_eq!(st["mode"], 0o444, "{st}");
    assert_eq!(tried(&v, "write", Some(&nvml)), "EROFS");
    assert_eq!(attempt(&v, "stat", "/dev/full")["kind"], "file");
    assert_eq!(tried(&v, "write", Some("/.joblet-empty")), "EROFS");

    // Masked directories are empty and read-only.
    for dir in [firmware.as_str(), &hidden] {
        let st = attempt(&v, "stat", dir);
        assert_eq!(st["kind"], "dir", "{st}");
        assert_eq!(st["entries"], serde_json::json!([]), "{st}");
    }
    assert_eq!(tried(&v, "write", Some(&firmware_new)), "EROFS");

    // A mask of a missing path is skipped.
    assert_eq!(tried(&v, "stat", Some(missing)), "ENOENT");
}

/// Starts a job that would leave a mark and returns its setup error.
fn setup_error(cfg_binds: Vec<Bind>) -> (Stage, String) {
    let work = work_dir();
    let mut cfg = config(work.path(), "sh", &["-c", "touch /work/ran"]);
    cfg.binds = cfg_binds;
    let (pid, _logs) = start(&cfg);
    let r = match pid {
        Err(InitError::Setup { stage, message, .. }) => (stage, message),
        other => panic!("expected a setup error, got {other:?}"),
    };
    assert!(!work.path().join("ran").exists(), "the job ran");
    r
}

#[test]
fn a_missing_bind_source_fails_the_start_naming_it() {
    let gone = "/no-such-dir-for-joblet-test/libcuda.so.1";
    let (stage, message) = setup_error(vec![Bind {
        source: gone.into(),
        target: "/run/lib/libcuda.so.1".into(),
        writable: false,
    }]);
    assert_eq!(stage, Stage::Binds);
    assert!(message.contains("binds[0]"), "{message}");
    assert!(message.contains(gone), "{message}");
    assert!(message.contains("does not exist on the host"), "{message}");
}

#[test]
fn a_target_that_cannot_be_created_in_a_read_only_place_fails_the_start() {
    let dir = readable_dir("/tmp");
    let file = dir.path().join("f");
    write(&file, "x");
    // Inside a read-only bind of the host's /usr, and under /proc (where
    // nothing can be created).
    for target in ["/usr/no-such-joblet-dir/f", "/proc/no-such-joblet-dir/f"] {
        let (stage, message) = setup_error(vec![
            Bind {
                source: file.clone(),
                target: "/run/fine".into(),
                writable: false,
            },
            Bind {
                source: file.clone(),
                target: target.into(),
                writable: false,
            },
        ]);
        assert_eq!(stage, Stage::Binds, "{message}");
        assert!(message.contains("binds[1]"), "{message}");
        assert!(message.contains(target), "{message}");
        assert!(
            message.contains("parent is inside a read-only mount"),
            "{message}"
        );
        assert!(
            message.contains("choose a target outside the sandbox's mounts"),
            "{message}"
        );
    }
}

#[test]
fn a_directory_cannot_be_bound_over_a_file() {
    let dir = readable_dir("/tmp");
    let (stage, message) = setup_error(vec![Bind {
        source: dir.path().to_path_buf(),
        target: "/etc/passwd".into(),
        writable: false,
    }]);
    assert_eq!(stage, Stage::Binds);
    assert!(message.contains("same kind"), "{message}");
}

#[test]
fn a_source_behind_an_absolute_symlink_is_resolved_as_on_the_host() {
    // The link points into the host's /tmp; resolved in the job's tree it
    // would land in the job's empty /tmp instead.
    let dir = readable_dir("/tmp");
    let real = dir.path().join("libcuda.so.550.54.15");
    write(&real, "REAL-LIB");
    let link = dir.path().join("libcuda.so.1");
    symlink(&real, &link).unwrap();
    let target = "/run/lib/libcuda.so.1";
    let work = work_dir();
    let probe_path = install_probe(work.path());
    let mut cfg = config(work.path(), &probe_path, &["--read-file", target]);
    cfg.binds = vec![bind(&link, target)];
    let v = probe(&cfg);
    assert_eq!(content(&v, target), "REAL-LIB");
}
