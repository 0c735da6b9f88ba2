//! The `rnx` binary as scripts see it, without a node: `--help` texts,
//! usage errors (exit 2) and config errors (exit 4).

use std::path::Path;
use std::process::{Command, Output};

fn rnx(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rnx"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("COLUMNS", "100")
        .output()
        .expect("run rnx")
}

fn help(args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = rnx(args, home.path());
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    assert!(out.stderr.is_empty());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_rnx() {
    insta::assert_snapshot!(help(&["--help"]));
}

#[test]
fn help_rnx_job() {
    insta::assert_snapshot!(help(&["job", "--help"]));
}

#[test]
fn help_rnx_job_run() {
    insta::assert_snapshot!(help(&["job", "run", "--help"]));
}

#[test]
fn help_rnx_audit() {
    insta::assert_snapshot!(help(&["audit", "--help"]));
}

#[test]
fn help_rnx_gpu() {
    insta::assert_snapshot!(help(&["gpu", "--help"]));
}

#[test]
fn help_rnx_gpu_offline() {
    insta::assert_snapshot!(help(&["gpu", "offline", "--help"]));
}

#[test]
fn help_rnx_gpu_status() {
    insta::assert_snapshot!(help(&["gpu", "status", "--help"]));
}

#[test]
fn help_rnx_node() {
    insta::assert_snapshot!(help(&["node", "--help"]));
}

#[test]
fn help_rnx_node_list() {
    insta::assert_snapshot!(help(&["node", "list", "--help"]));
}

#[test]
fn help_rnx_node_drain() {
    insta::assert_snapshot!(help(&["node", "drain", "--help"]));
}

#[test]
fn help_rnx_runtime() {
    insta::assert_snapshot!(help(&["runtime", "--help"]));
}

#[test]
fn help_rnx_runtime_install() {
    insta::assert_snapshot!(help(&["runtime", "install", "--help"]));
}

#[test]
fn help_rnx_runtime_build() {
    insta::assert_snapshot!(help(&["runtime", "build", "--help"]));
}

#[test]
fn help_rnx_volume() {
    insta::assert_snapshot!(help(&["volume", "--help"]));
}

#[test]
fn help_rnx_volume_create() {
    insta::assert_snapshot!(help(&["volume", "create", "--help"]));
}

#[test]
fn help_rnx_workflow() {
    insta::assert_snapshot!(help(&["workflow", "--help"]));
}

#[test]
fn help_rnx_workflow_run() {
    insta::assert_snapshot!(help(&["workflow", "run", "--help"]));
}

#[test]
fn help_rnx_workflow_status() {
    insta::assert_snapshot!(help(&["workflow", "status", "--help"]));
}

#[test]
fn help_rnx_workflow_logs() {
    insta::assert_snapshot!(help(&["workflow", "logs", "--help"]));
}

#[test]
fn version() {
    assert_eq!(
        help(&["--version"]),
        format!("rnx {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2_and_name_the_flag() {
    let home = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            &["job", "run", "--gpu-memory=8XB", "python", "x.py"][..],
            "invalid value '8XB' for '--gpu-memory <SIZE>': expected a size like 8GB, 4096MB or 4096 (megabytes)",
        ),
        (&["job", "run", "--gpu-mem=8GB", "python"], "unexpected argument '--gpu-mem'"),
        (&["job", "run"], "<COMMAND>..."),
        (&["job", "run", "--gpu-memory=8GB", "x"], "rnx: error: invalid --gpu-memory"),
        (&["job", "frobnicate"], "unrecognized subcommand"),
        (
            &["gpu", "drain", "--gpu-id", "../0"],
            "invalid GPU id \"../0\": expected a GPU UUID",
        ),
        (&["gpu", "drain"], "--gpu-id <ID>"),
        (
            &["gpu", "watch", "--interval", "10ms"],
            "expected at least 100ms",
        ),
        (
            &["job", "run", "--gpu=1", "--gpu-time=soon", "x"],
            "invalid value 'soon' for '--gpu-time <DURATION>': expected a GPU time limit like 90s",
        ),
        (
            &["job", "run", "--gpu=1", "--cuda=twelve", "x"],
            "invalid value 'twelve' for '--cuda <VERSION>': expected a CUDA version like 12.2",
        ),
        (&["job", "run", "--cuda=12.2", "x"], "rnx: error: invalid --cuda"),
        (
            &["audit", "--since", "yesterday"],
            "invalid value 'yesterday' for '--since <DURATION|RFC3339>'",
        ),
        (
            &["job", "run", "--volume=data:rx", "x"],
            "invalid value 'data:rx' for '--volume <NAME[:ro]>': unknown mount mode \"rx\": expected --volume=NAME[:ro]",
        ),
        (
            &["job", "run", "--runtime=rt@", "x"],
            "invalid value 'rt@' for '--runtime <NAME[@VERSION]>': expected NAME[@VERSION]",
        ),
        (
            &["runtime", "install", "rt@1 0"],
            "invalid value 'rt@1 0' for '<NAME[@VERSION]>': expected NAME[@VERSION]",
        ),
        (
            &["volume", "create", "v", "--size=1XB"],
            "invalid value '1XB' for '--size <SIZE>': expected a size like 1GB, 512MB or 16MB",
        ),
        (&["volume", "create", "v"], "--size <SIZE>"),
        (
            &["workflow", "status", "wf-1"],
            "invalid workflow id \"wf-1\": expected a workflow id or a unique prefix of one",
        ),
        (&["workflow", "run"], "<FILE>"),
        (
            &["workflow", "list", "--limit=-1"],
            "invalid value '-1' for '--limit <N>'",
        ),
    ] {
        let out = rnx(args, home.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn missing_config_exits_4_and_says_where_to_find_one() {
    let home = tempfile::tempdir().unwrap();
    let out = rnx(&["job", "list"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.starts_with("rnx: error: no client config found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("/var/lib/joblet/rnx-config.yml"),
        "{stderr}"
    );

    let bad = home.path().join("bad.yml");
    std::fs::write(&bad, "version: \"1\"\nnodes: {}\n").unwrap();
    let out = rnx(&["--config", bad.to_str().unwrap(), "whoami"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("no node named \"default\""), "{stderr}");
}

/// A workflow file is checked before the config is looked for: its mistake
/// is the error, as FILE:LINE:COL, with the usage exit code.
#[test]
fn workflow_format_errors_come_first_and_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("wf.yaml");
    std::fs::write(&file, "jobs:\n  a: {command: x, requires: [{b: DONE}]}\n").unwrap();
    let f = file.to_str().unwrap();
    let out = rnx(&["workflow", "validate", f], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("rnx: error: {f}:2:")),
        "{stderr}"
    );
    assert!(stderr.contains("DONE"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn rnx_config_env_is_used() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("from-env.yml");
    let out = Command::new(env!("CARGO_BIN_EXE_rnx"))
        .args(["job", "list"])
        .env_clear()
        .env("HOME", home.path())
        .env("RNX_CONFIG", &missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("from-env.yml") && stderr.contains("$RNX_CONFIG"),
        "{stderr}"
    );
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
include!("../../../build-support/elf_headers.rs");

/// build.rs links the C library into rnx: no dynamic loader runs at every
/// command's start (x86-64 GNU/Linux).
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
fn rnx_is_statically_linked() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_rnx")).unwrap();
    let types = program_header_types(&bin);
    // PT_LOAD 1, PT_DYNAMIC 2, PT_INTERP 3.
    assert!(types.contains(&1), "no loadable segment in {types:?}");
    assert!(!types.contains(&3), "rnx asks for a dynamic loader");
    assert!(!types.contains(&2), "rnx has a dynamic section");
}

/// build.rs links rnx without PIE: the loader has no relative relocations
/// to apply at every command's start (x86-64 GNU/Linux).
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
fn rnx_is_position_dependent() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_rnx")).unwrap();
    assert_eq!(elf_type(&bin), 2, "rnx is not linked with -no-pie");
}
