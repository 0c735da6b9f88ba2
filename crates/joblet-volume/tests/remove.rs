//! Removing a real volume (root only): refused while a process works in it, complete once
//! it is gone.

mod common;

use std::process::Command;

use common::{root_or_skip, Fixture, MIB};
use joblet_volume::{VolumeError, VolumeKind};

#[test]
fn remove_is_refused_while_a_process_works_in_the_volume_then_leaves_nothing() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::new();
    for (name, kind) in [
        ("busy-fs", VolumeKind::Filesystem),
        ("busy-mem", VolumeKind::Memory),
    ] {
        f.host.create(name, kind, 4 * MIB).unwrap();
        let data = f.host.data_dir(name);
        std::fs::write(data.join("open"), b"x").unwrap();
        // One process with its working directory in the volume, one with a file open.
        let mut cwd = Command::new("sleep")
            .arg("60")
            .current_dir(&data)
            .spawn()
            .unwrap();
        let err = f.host.remove(name).unwrap_err();
        assert!(matches!(err, VolumeError::InUse { .. }), "{name}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("volume {name} is still in use")),
            "{err}"
        );
        assert!(f.host.is_mounted(name).unwrap(), "{name}");
        assert!(
            data.join("open").exists(),
            "{name}: refused remove deleted the data"
        );
        cwd.kill().unwrap();
        cwd.wait().unwrap();

        let mut open = Command::new("sh")
            .args(["-c", "exec 3<open; exec sleep 60"])
            .current_dir(&data)
            .spawn()
            .unwrap();
        // `sh` has left the directory only once it runs `sleep` with the file open.
        wait_for_exec(open.id());
        let err = f.host.detach(name).unwrap_err();
        assert!(matches!(err, VolumeError::InUse { .. }), "{name}: {err}");
        open.kill().unwrap();
        open.wait().unwrap();

        f.host.remove(name).unwrap();
    }
    f.assert_nothing_left();
}

fn wait_for_exec(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n" {
        assert!(std::time::Instant::now() < deadline, "sleep never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
