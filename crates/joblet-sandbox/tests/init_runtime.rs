//! A job whose root comes from a runtime's tree (`InitConfig::root`) and
//! that mounts volumes (writable binds), seen from inside a real sandboxed
//! job: the runtime's `/usr` replaces the host's, it cannot be written, a
//! setuid-root program in it does not raise privileges, and a volume is
//! writable unless bound read-only.

mod init_common;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use init_common::*;
use joblet_sandbox::init::Bind;
use tempfile::TempDir;

/// A probe linked statically, so it runs in a tree with no libraries: it
/// prints its real and effective uid, then tries each path argument
/// (`w:PATH` creates a file, `r:PATH` stats it) and prints the errno or 0.
const PROBE_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    printf("uid=%d euid=%d\n", (int)getuid(), (int)geteuid());
    for (int i = 1; i < argc; i++) {
        const char *p = argv[i] + 2;
        int r;
        if (argv[i][0] == 'w') {
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            r = fd < 0 ? errno : 0;
            if (fd >= 0) { if (write(fd, "hello", 5) != 5) r = errno; close(fd); }
        } else {
            struct stat st;
            r = stat(p, &st) < 0 ? errno : 0;
        }
        printf("%s=%s\n", argv[i], r ? strerror(r) : "ok");
    }
    return 0;
}
"#;

/// A runtime-like tree under `/var/tmp`: `usr/bin/probe` (static, owned
/// by root, mode 4755), `bin -> usr/bin`, `etc/marker`.
fn runtime_tree() -> TempDir {
    let tree = tempfile::Builder::new()
        .prefix("joblet-runtime-test-")
        .tempdir_in("/var/tmp")
        .unwrap();
    fs::set_permissions(tree.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let bin = tree.path().join("usr/bin");
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(tree.path().join("etc")).unwrap();
    fs::write(tree.path().join("etc/marker"), "runtime").unwrap();
    symlink("usr/bin", tree.path().join("bin")).unwrap();
    let src = tree.path().join("probe.c");
    fs::write(&src, PROBE_C).unwrap();
    let out = Command::new("cc")
        .args(["-static", "-O1", "-o"])
        .arg(bin.join("probe"))
        .arg(&src)
        .output()
        .expect("cc (gcc) is needed to build the static probe");
    assert!(
        out.status.success(),
        "cc -static failed (glibc's static libraries, libc6-dev): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::remove_file(&src).unwrap();
    // Setuid root: honoured, it would run with euid 0.
    fs::set_permissions(bin.join("probe"), fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(fs::metadata(bin.join("probe")).unwrap().uid(), 0);
    for d in [tree.path().join("usr"), bin, tree.path().join("etc")] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    tree
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[test]
fn a_runtime_root_replaces_the_hosts_tree_read_only_and_ignores_setuid() {
    let tree = runtime_tree();
    let work = work_dir();
    let mut cfg = config(
        work.path(),
        "/usr/bin/probe",
        &[
            "w:/usr/bin/new",
            "w:/etc/new",
            "r:/etc/marker",
            "r:/bin/probe",
            // The host has these; the runtime does not.
            "r:/usr/bin/env",
            "r:/etc/hostname",
            "w:/work/out",
        ],
    );
    cfg.ro_mounts = vec![
        PathBuf::from("/bin"),
        PathBuf::from("/usr"),
        PathBuf::from("/etc"),
    ];
    cfg.root = Some(tree.path().to_path_buf());
    cfg.env.insert("PATH".into(), "/usr/bin".into());
    let ended = run(&cfg);
    assert_eq!(ended.code(), Some(0), "stderr: {}", ended.logs.stderr());
    let out = ended.logs.stdout();
    assert!(Path::new("/usr/bin/env").exists() && Path::new("/etc/hostname").exists());
    assert_eq!(
        lines(&out),
        vec![
            "uid=65534 euid=65534",
            "w:/usr/bin/new=Read-only file system",
            "w:/etc/new=Read-only file system",
            "r:/etc/marker=ok",
            "r:/bin/probe=ok",
            "r:/usr/bin/env=No such file or directory",
            "r:/etc/hostname=No such file or directory",
            "w:/work/out=ok",
        ],
        "{out}"
    );
    assert!(!tree.path().join("usr/bin/new").exists());
}

#[test]
fn a_missing_runtime_tree_fails_the_start() {
    let work = work_dir();
    let mut cfg = config(work.path(), "/usr/bin/true", &[]);
    cfg.root = Some(PathBuf::from("/var/tmp/no-such-joblet-runtime-tree"));
    let (r, logs) = start(&cfg);
    let e = match r {
        Ok(pid) => {
            let status = wait(pid);
            panic!(
                "started without its tree (status {status:#x}): {}",
                logs.stderr()
            )
        }
        Err(e) => e.to_string(),
    };
    assert!(e.contains("no-such-joblet-runtime-tree"), "{e}");
}

#[test]
fn a_volume_bind_is_writable_unless_read_only() {
    let tree = runtime_tree();
    let vol = tempfile::Builder::new()
        .prefix("joblet-volume-test-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::os::unix::fs::chown(vol.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    fs::write(vol.path().join("seed"), "s").unwrap();
    let work = work_dir();
    for writable in [false, true] {
        let mut cfg = config(
            work.path(),
            "/usr/bin/probe",
            &["w:/volumes/data/out", "r:/volumes/data/seed"],
        );
        cfg.ro_mounts = vec![PathBuf::from("/usr")];
        cfg.root = Some(tree.path().to_path_buf());
        cfg.binds = vec![Bind {
            source: vol.path().to_path_buf(),
            target: "/volumes/data".into(),
            writable,
        }];
        let ended = run(&cfg);
        assert_eq!(ended.code(), Some(0), "stderr: {}", ended.logs.stderr());
        let out = ended.logs.stdout();
        let want = if writable {
            "w:/volumes/data/out=ok"
        } else {
            "w:/volumes/data/out=Read-only file system"
        };
        assert_eq!(lines(&out)[1], want, "{out}");
        assert_eq!(lines(&out)[2], "r:/volumes/data/seed=ok", "{out}");
        assert_eq!(vol.path().join("out").exists(), writable);
    }
    assert_eq!(fs::read_to_string(vol.path().join("out")).unwrap(), "hello");
}
