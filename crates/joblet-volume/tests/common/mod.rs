//! What the root tests share: a temporary root per test that unmounts and detaches
//! whatever is left under it when dropped (also when the test failed), and views of the
//! host's mount table and loop devices limited to that root, so tests can run in
//! parallel.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use joblet_volume::{mountinfo, Tools, VolumeHost};

pub const MIB: u64 = 1 << 20;
pub const OWNER_UID: u32 = 4242;
pub const OWNER_GID: u32 = 4343;

/// False (after saying so) unless the test runs as root.
pub fn root_or_skip() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    println!("SKIPPED: not root");
    false
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    /// Everything the test makes is under here.
    pub base: PathBuf,
    /// The volumes root, `<base>/volumes`.
    pub root: PathBuf,
    pub host: VolumeHost,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_tools(Tools::find())
    }

    pub fn with_tools(tools: Tools) -> Fixture {
        Fixture::build(tools, None)
    }

    /// The volumes root on a tmpfs of `bytes`: a disk that is nearly full.
    pub fn on_small_disk(bytes: u64, tools: Tools) -> Fixture {
        Fixture::build(tools, Some(bytes))
    }

    fn build(tools: Tools, disk_bytes: Option<u64>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = match disk_bytes {
            None => base.join("volumes"),
            Some(bytes) => {
                let disk = base.join("disk");
                std::fs::create_dir(&disk).unwrap();
                nix::mount::mount(
                    Some("joblet-volume-test"),
                    &disk,
                    Some("tmpfs"),
                    nix::mount::MsFlags::empty(),
                    Some(format!("size={bytes}").as_str()),
                )
                .unwrap();
                disk.join("volumes")
            }
        };
        let host = VolumeHost::new(root.clone(), OWNER_UID, OWNER_GID, tools);
        Fixture {
            _dir: dir,
            base,
            root,
            host,
        }
    }

    /// Mount points under [`Fixture::base`], innermost last.
    pub fn mounts(&self) -> Vec<PathBuf> {
        mounts_under(&self.base)
    }

    /// Loop devices whose backing file is under [`Fixture::base`], as `DEVICE FILE`.
    pub fn loops(&self) -> Vec<String> {
        loops_under(&self.base)
    }

    /// Waits up to 5 s for the loop devices under `base` to be gone (the kernel detaches
    /// an autoclear device after its last unmount, possibly from a work queue), and
    /// returns those left.
    pub fn loops_after_settling(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = self.loops();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What is in the volumes root (absent: nothing).
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.root)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Asserts that nothing of volumes is left under the root: no entry, no mount under
    /// the test's base (other than the fixture's own small disk), no loop device.
    pub fn assert_nothing_left(&self) {
        assert_eq!(
            self.entries(),
            Vec::<String>::new(),
            "entries left in the volumes root"
        );
        let mounts: Vec<PathBuf> = self
            .mounts()
            .into_iter()
            .filter(|m| *m != self.base.join("disk"))
            .collect();
        assert_eq!(mounts, Vec::<PathBuf>::new(), "mounts left");
        assert_eq!(
            self.loops_after_settling(),
            Vec::<String>::new(),
            "loop devices left"
        );
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Lazily, innermost first: a failed test must not leave mounts behind.
        for m in mounts_under(&self.base).iter().rev() {
            let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
        }
        for line in loops_under(&self.base) {
            if let Some(dev) = line.split(' ').next() {
                let _ = Command::new("losetup").args(["--detach", dev]).status();
            }
        }
    }
}

pub fn mounts_under(base: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo::parse(&text)
        .unwrap()
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(base))
        .collect()
}

pub fn loops_under(base: &Path) -> Vec<String> {
    let out = Command::new("losetup")
        .args([
            "--list",
            "--noheadings",
            "--raw",
            "--output",
            "NAME,BACK-FILE",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "losetup --list: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| {
            l.split_once(' ')
                .is_some_and(|(_, file)| Path::new(file).starts_with(base))
        })
        .map(str::to_owned)
        .collect()
}

/// `len` bytes of a pattern that differs with `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 31 + u64::from(seed)) as u8 ^ (i >> 20) as u8)
        .collect()
}
