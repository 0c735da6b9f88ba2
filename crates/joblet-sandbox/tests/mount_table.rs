//! The warm sandbox's mount-table watch against the real kernel: a mount
//! made in the watched namespace is seen, nothing else is. Needs root
//! (`unshare -m`); the mount lives and dies in the child's own namespace.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use joblet_sandbox::mount_table::MountTable;

#[test]
fn a_mount_in_the_watched_namespace_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    // A shell in a private mount namespace that mounts a tmpfs when told.
    let mut child = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "echo ready; read x; mount -t tmpfs joblet-test {}; echo mounted; read y || true",
            dir.path().display()
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");

    let path = format!("/proc/{}/mountinfo", child.id());
    let table = MountTable::read(Path::new(&path)).unwrap();
    assert!(!table.changed(), "nothing mounted yet");
    assert!(!table.changed(), "still nothing");

    writeln!(stdin, "go").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "mounted");
    assert!(table.changed(), "the tmpfs is seen");
    assert!(table.changed(), "and stays a change against the table read");

    drop(stdin);
    assert!(child.wait().unwrap().success());
}
