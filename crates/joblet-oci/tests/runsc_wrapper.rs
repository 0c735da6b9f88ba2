//! End-to-end checks of runsc probing: against `tests/data/runsc-nvproxy-wrapper.sh`
//! (a stand-in for an nvproxy-capable runsc that records its invocations and
//! runs the real, older runsc), and against the installed `/usr/bin/runsc`.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use joblet_oci::runsc::{choose_platform, gpu_args, GpuRefusal, GpuRequest, RunscFeatures};

const WRAPPER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/runsc-nvproxy-wrapper.sh"
);
const REAL_RUNSC: &str = "/usr/bin/runsc";

/// Makes `path` executable and waits until it can be executed: a child
/// forked by another test thread may briefly hold the written file open
/// (ETXTBSY).
fn make_runnable(path: &Path) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    for _ in 0..500 {
        match Command::new(path)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(_) => return,
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy => {
                thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("cannot run {}: {e}", path.display()),
        }
    }
    panic!("{} stayed busy", path.display());
}

/// A copy of the wrapper in `dir`, configured through its `.env` file.
fn install_wrapper(dir: &Path, settings: &[(&str, &Path)], drivers: &str) -> PathBuf {
    let wrapper = dir.join("runsc");
    fs::copy(WRAPPER, &wrapper).unwrap();
    make_runnable(&wrapper);
    let mut env = format!("RUNSC_WRAPPER_DRIVERS={drivers}\n");
    for (name, value) in settings {
        env.push_str(&format!("{name}={}\n", value.display()));
    }
    fs::write(dir.join("runsc.env"), env).unwrap();
    wrapper
}

fn gpu(driver: &str, caps: Option<&str>) -> GpuRequest {
    GpuRequest {
        host_driver: Some(driver.to_owned()),
        driver_capabilities: caps.map(str::to_owned),
        gpu_in_spec: true,
    }
}

#[test]
fn wrapper_probes_as_nvproxy_capable_and_gpu_args_give_nvproxy_flags() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("invocations.log");
    let wrapper = install_wrapper(
        dir.path(),
        &[("RUNSC_WRAPPER_LOG", &log)],
        "550.54.15, 535.104.05",
    );

    let features = RunscFeatures::probe(&wrapper).unwrap();
    assert_eq!(features.release.raw, "release-20260831.0");
    assert!(features.has_nvproxy_flag());
    assert!(features.has_nvproxy_driver_version());
    assert!(features.has_nvproxy_allowed_driver_capabilities());
    assert!(features.has_list_supported_drivers());
    let drivers: Vec<String> = features
        .supported_drivers
        .iter()
        .flatten()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(drivers, ["535.104.05", "550.54.15"]);
    assert_eq!(choose_platform(&features, None).unwrap(), "systrap");

    let args = gpu_args(&features, &gpu("550.54.15", Some("compute,utility"))).unwrap();
    assert_eq!(
        args,
        [
            "--nvproxy=true",
            "--nvproxy-allowed-driver-capabilities=compute,utility"
        ]
    );
    let err = gpu_args(&features, &gpu("550.54.14", None)).unwrap_err();
    assert!(matches!(err, GpuRefusal::UnsupportedDriver { .. }), "{err}");

    let logged = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(
        lines,
        [
            "'--version'",
            "'help'",
            "'flags'",
            "'help' 'platforms'",
            "'nvproxy' 'list-supported-drivers'"
        ]
    );
}

#[test]
fn wrapper_strips_what_the_old_runsc_lacks_and_keeps_subcommand_args() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("fake-real-runsc");
    fs::write(
        &real,
        "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n",
    )
    .unwrap();
    make_runnable(&real);
    let log = dir.path().join("invocations.log");
    let wrapper = install_wrapper(
        dir.path(),
        &[("RUNSC_WRAPPER_LOG", &log), ("RUNSC_REAL", &real)],
        "550.54.15",
    );

    let args = [
        "--root",
        "/run/joblet/runsc",
        "--nvproxy=true",
        "--nvproxy-driver-version",
        "550.54.15",
        "-nvproxy-allowed-driver-capabilities=compute,utility",
        "--nvproxy-allow-unsupported-driver",
        "--platform",
        "systrap",
        "--network=none",
        "exec",
        "job-1",
        "sh",
        "-c",
        "echo 'it''s'\n",
        "--platform=systrap",
        "--nvproxy",
    ];
    let out = Command::new(&wrapper).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        passed,
        "[--root]\n[/run/joblet/runsc]\n[--platform]\n[ptrace]\n[--network=none]\n\
         [exec]\n[job-1]\n[sh]\n[-c]\n[echo 'it''s'\n]\n[--platform=systrap]\n[--nvproxy]\n"
    );

    let out = Command::new(&wrapper)
        .args(["--platform=systrap", "list"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "[--platform=ptrace]\n[list]\n"
    );

    // The log holds the arguments as given, re-readable by sh.
    let logged = fs::read_to_string(&log).unwrap();
    let first_call_end = logged.find("'--nvproxy'\n").unwrap() + "'--nvproxy'".len();
    let script = format!(
        "set -- {}\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done",
        &logged[..first_call_end]
    );
    let replay = Command::new("sh").arg("-c").arg(script).output().unwrap();
    let expected: String = args.iter().map(|a| format!("[{a}]\n")).collect();
    assert_eq!(String::from_utf8(replay.stdout).unwrap(), expected);
}

#[test]
fn wrapper_runs_the_real_old_runsc_with_newer_flags() {
    if !Path::new(REAL_RUNSC).exists() {
        eprintln!("skipped: {REAL_RUNSC} is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    fs::create_dir(&root).unwrap();
    let wrapper = install_wrapper(
        dir.path(),
        &[("RUNSC_REAL", Path::new(REAL_RUNSC))],
        "550.54.15",
    );
    let out = Command::new(&wrapper)
        .args([
            "--nvproxy=true",
            "--nvproxy-allowed-driver-capabilities=compute,utility",
            "--platform=systrap",
        ])
        .arg(format!("--root={}", root.display()))
        .arg("list")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "real runsc rejected the rewritten flags: {stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("ID"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn installed_runsc_without_nvproxy_refuses_gpu_jobs_naming_nvproxy() {
    if !Path::new(REAL_RUNSC).exists() {
        eprintln!("skipped: {REAL_RUNSC} is not installed");
        return;
    }
    let features = RunscFeatures::probe(Path::new(REAL_RUNSC)).unwrap();
    if features.has_nvproxy() {
        eprintln!(
            "skipped: {REAL_RUNSC} ({}) has nvproxy; this test is for runsc without it",
            features.release
        );
        return;
    }
    assert!(features.has_flag("platform"), "{features:?}");
    let err = gpu_args(&features, &gpu("550.54.15", Some("compute,utility"))).unwrap_err();
    assert!(matches!(err, GpuRefusal::NvproxyMissing { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("nvproxy") && msg.contains(&features.release.raw),
        "{msg}"
    );
    assert!(msg.contains("release-20230529.0"), "{msg}");
    let no_gpu = GpuRequest {
        gpu_in_spec: false,
        ..gpu("550.54.15", None)
    };
    assert_eq!(gpu_args(&features, &no_gpu), Ok(vec![]));
    if !features.has_platform("systrap") {
        assert!(choose_platform(&features, Some("systrap")).is_err());
        assert_eq!(choose_platform(&features, None).unwrap(), "ptrace");
    }
}
