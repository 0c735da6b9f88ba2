//! [`VolumeHost`]'s steps, their order and their undoing, against a fake mounter and
//! stand-in programs: no root needed.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::fake::FakeMounter;
use crate::{Attach, Step, Tools, VolumeError, VolumeHost, VolumeKind};

const MIB: u64 = 1 << 20;

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
    fake: FakeMounter,
    host: VolumeHost,
}

/// A `losetup` that logs its arguments and prints `/dev/loop42` for `--find`; it fails
/// with `--detach` when `fail_detach` is set.
fn losetup_script(bin: &Path, fail_detach: bool) -> PathBuf {
    let path = bin.join("losetup");
    let detach = if fail_detach {
        "echo 'losetup: /dev/loop42: detach failed: No such device' >&2; exit 1"
    } else {
        ":"
    };
    fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$1\" in\n--find) echo /dev/loop42 ;;\n--detach) {detach} ;;\nesac\n",
            log = bin.join("losetup.log").display()
        ),
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

impl Env {
    fn new() -> Env {
        Env::with(false)
    }

    fn with(fail_detach: bool) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let bin = base.join("bin");
        fs::create_dir(&bin).unwrap();
        let tools = Tools {
            mkfs_ext4: "/bin/true".into(),
            losetup: losetup_script(&bin, fail_detach),
        };
        let root = base.join("state/volumes");
        let fake = FakeMounter::default();
        let host =
            VolumeHost::with_mounter(root.clone(), 1000, 1001, tools, Box::new(fake.clone()));
        Env {
            _dir: dir,
            root,
            bin,
            fake,
            host,
        }
    }

    fn calls(&self) -> Vec<String> {
        self.fake.state().calls.clone()
    }

    fn losetup_log(&self) -> Vec<String> {
        fs::read_to_string(self.bin.join("losetup.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.root)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

#[test]
fn a_memory_volume_is_a_tmpfs_of_its_size_mode_and_owner() {
    let env = Env::new();
    let created = env
        .host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap();
    let data = env.root.join("scratch/data");
    assert_eq!(created.data_dir, data);
    assert_eq!(created.image, None);
    assert_eq!(
        env.calls(),
        [format!(
            "mount joblet-volume:scratch {} tmpfs size=8388608,mode=0770,uid=1000,gid=1001",
            data.display()
        )]
    );
    assert!(env.host.is_mounted("scratch").unwrap());
    assert_eq!(
        env.host
            .mounted_data_dir("scratch", VolumeKind::Memory)
            .unwrap(),
        data
    );
    // The mount is not the filesystem volume a job may have asked for.
    assert!(matches!(
        env.host.mounted_data_dir("scratch", VolumeKind::Filesystem),
        Err(VolumeError::ForeignMount { .. })
    ));
    for dir in [env.root.clone(), env.root.join("scratch"), data] {
        let m = fs::metadata(&dir).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700, "{}", dir.display());
    }
}

#[test]
fn a_filesystem_volume_is_reserved_made_looped_mounted_and_set_to_autoclear_in_order() {
    let env = Env::new();
    let created = env
        .host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    let image = env.root.join("data-lake/volume.img");
    let data = env.root.join("data-lake/data");
    assert_eq!(created.image.as_deref(), Some(image.as_path()));
    assert_eq!(
        created.loop_device.as_deref(),
        Some(Path::new("/dev/loop42"))
    );
    let m = fs::metadata(&image).unwrap();
    assert_eq!(m.len(), 4 * MIB);
    assert!(
        m.blocks() * 512 >= 4 * MIB,
        "not reserved: {} blocks",
        m.blocks()
    );
    assert_eq!(m.mode() & 0o777, 0o600);
    assert_eq!(
        env.losetup_log(),
        [
            format!("--find --show --nooverlap {}", image.display()),
            "--detach /dev/loop42".to_owned()
        ]
    );
    assert_eq!(
        env.calls(),
        [format!("mount /dev/loop42 {} ext4 -", data.display())]
    );
    assert!(env.host.is_mounted("data-lake").unwrap());
}

#[test]
fn a_failed_mount_detaches_the_loop_device_and_removes_everything() {
    let env = Env::new();
    env.fake.state().fail_mount = Some(libc::EINVAL);
    let err = env
        .host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    assert_eq!(err.step(), Some(Step::Mount), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "volume data-lake: could not mount the volume: ext4 /dev/loop42 at {}: Invalid argument",
            env.root.join("data-lake/data").display()
        )),
        "{msg}"
    );
    assert_eq!(env.losetup_log()[1..], ["--detach /dev/loop42".to_owned()]);
    assert_eq!(env.entries(), Vec::<String>::new());
    assert!(env.fake.state().mounts.is_empty());
}

#[test]
fn a_failed_memory_mount_removes_its_directories() {
    let env = Env::new();
    env.fake.state().fail_mount = Some(libc::ENOMEM);
    let err = env
        .host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap_err();
    assert_eq!(err.step(), Some(Step::Mount), "{err}");
    assert_eq!(env.entries(), Vec::<String>::new());
}

#[test]
fn a_failed_autoclear_unmounts_and_detaches_and_a_failed_undo_is_reported() {
    let env = Env::with(true);
    let err = env
        .host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    // The undo's own detach fails too (this losetup fails every detach): the error says
    // so and what is left, after the step that failed.
    let msg = err.to_string();
    assert!(
        matches!(&err, VolumeError::CleanupFailed { cause, left }
            if cause.step() == Some(Step::SetAutoclear) && left.len() == 1 && left[0].starts_with("loop device /dev/loop42")),
        "{msg}"
    );
    assert!(
        msg.contains("could not set the loop device to detach when unmounted"),
        "{msg}"
    );
    assert!(
        msg.contains("left behind: loop device /dev/loop42"),
        "{msg}"
    );
    let data = env.root.join("data-lake/data");
    assert_eq!(
        env.calls(),
        [
            format!("mount /dev/loop42 {} ext4 -", data.display()),
            format!("unmount {}", data.display())
        ]
    );
    assert_eq!(env.entries(), Vec::<String>::new());
}

#[test]
fn a_failed_mkfs_or_loop_removes_the_image_and_directories() {
    for (mkfs, losetup, step) in [
        ("/bin/false", None, Step::MakeFilesystem),
        ("/bin/true", Some("/bin/false"), Step::AttachLoop),
        ("/nonexistent/mkfs.ext4", None, Step::MakeFilesystem),
    ] {
        let mut env = Env::new();
        env.host.tools.mkfs_ext4 = mkfs.into();
        if let Some(l) = losetup {
            env.host.tools.losetup = l.into();
        }
        let err = env
            .host
            .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
            .unwrap_err();
        assert_eq!(err.step(), Some(step), "{err}");
        assert_eq!(env.entries(), Vec::<String>::new(), "{err}");
        assert!(env.calls().is_empty());
    }
}

#[test]
fn an_existing_name_is_refused_and_left_as_it_was() {
    let env = Env::new();
    env.host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap();
    let err = env
        .host
        .create("scratch", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    assert!(matches!(err, VolumeError::AlreadyExists { .. }), "{err}");
    assert!(
        err.to_string().starts_with("volume scratch already exists"),
        "{err}"
    );
    assert_eq!(env.calls().len(), 1);
    assert!(env.host.is_mounted("scratch").unwrap());
}

#[test]
fn bad_input_is_refused_before_anything_is_made() {
    let env = Env::new();
    for (name, kind, size) in [
        ("../etc", VolumeKind::Memory, 8 * MIB),
        ("..", VolumeKind::Filesystem, 4 * MIB),
        ("ok", VolumeKind::Filesystem, MIB),
        ("ok", VolumeKind::Memory, 0),
    ] {
        assert!(env.host.create(name, kind, size).is_err());
        assert!(env.host.attach(name, kind, size).is_err());
    }
    assert!(env.host.remove("../etc").is_err());
    assert!(!env.root.exists());
    assert!(env.calls().is_empty());
}

#[test]
fn attach_does_nothing_when_mounted_and_mounts_again_when_not() {
    let env = Env::new();
    env.host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    env.host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap();
    assert_eq!(
        env.host
            .attach("data-lake", VolumeKind::Filesystem, 4 * MIB)
            .unwrap(),
        Attach::AlreadyMounted
    );
    assert_eq!(
        env.host
            .attach("scratch", VolumeKind::Memory, 8 * MIB)
            .unwrap(),
        Attach::AlreadyMounted
    );
    assert_eq!(env.calls().len(), 2);
    // As after a reboot: nothing mounted.
    env.fake.state().mounts.clear();
    assert_eq!(
        env.host
            .attach("data-lake", VolumeKind::Filesystem, 4 * MIB)
            .unwrap(),
        Attach::Mounted {
            loop_device: "/dev/loop42".into()
        }
    );
    assert_eq!(
        env.host
            .attach("scratch", VolumeKind::Memory, 8 * MIB)
            .unwrap(),
        Attach::RecreatedEmpty
    );
    assert_eq!(env.calls().len(), 4);
    assert!(env.host.is_mounted("data-lake").unwrap() && env.host.is_mounted("scratch").unwrap());
}

#[test]
fn attach_refuses_a_missing_or_resized_image_and_a_wrong_kind() {
    let env = Env::new();
    env.host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    let err = env
        .host
        .attach("data-lake", VolumeKind::Memory, 4 * MIB)
        .unwrap_err();
    assert!(matches!(err, VolumeError::ForeignMount { .. }), "{err}");
    env.fake.state().mounts.clear();
    let err = env
        .host
        .attach("data-lake", VolumeKind::Filesystem, 8 * MIB)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is 4194304 bytes, but the volume was created with 8388608"),
        "{err}"
    );
    fs::remove_file(env.root.join("data-lake/volume.img")).unwrap();
    let err = env
        .host
        .attach("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    assert!(matches!(err, VolumeError::ImageMissing { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("volume.img is missing, so its data is gone"),
        "{err}"
    );
    let err = env
        .host
        .attach("never", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    assert!(matches!(err, VolumeError::ImageMissing { .. }), "{err}");
    // Nothing was mounted by the failures, and a missing volume got no directory.
    assert!(env.fake.state().mounts.is_empty());
    assert!(!env.root.join("never").exists());
}

#[test]
fn a_foreign_mount_at_data_is_never_touched() {
    let env = Env::new();
    env.host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap();
    let data = env.root.join("scratch/data");
    env.fake.add(&data, "nfs", "server:/export");
    for err in [
        env.host.detach("scratch").unwrap_err(),
        env.host.remove("scratch").unwrap_err(),
        env.host.usage("scratch").unwrap_err(),
        env.host
            .attach("scratch", VolumeKind::Memory, 8 * MIB)
            .unwrap_err(),
    ] {
        assert!(matches!(err, VolumeError::ForeignMount { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("has a nfs mount of server:/export, not the volume"),
            "{err}"
        );
    }
    assert_eq!(env.calls().len(), 1);
    assert!(data.is_dir());
}

#[test]
fn remove_of_a_busy_volume_changes_nothing_and_then_removes_everything() {
    let env = Env::new();
    env.host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    env.fake.state().busy = true;
    let err = env.host.remove("data-lake").unwrap_err();
    assert!(matches!(err, VolumeError::InUse { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("volume data-lake is still in use"),
        "{err}"
    );
    assert!(env.root.join("data-lake/volume.img").exists());
    assert!(env.host.is_mounted("data-lake").unwrap());
    env.fake.state().busy = false;
    env.host.remove("data-lake").unwrap();
    assert_eq!(env.entries(), Vec::<String>::new());
    assert!(env.fake.state().mounts.is_empty());
    let err = env.host.remove("data-lake").unwrap_err();
    assert!(matches!(err, VolumeError::NotFound { .. }), "{err}");
}

#[test]
fn a_stacked_mount_left_after_unmounting_keeps_everything() {
    let env = Env::new();
    env.host
        .create("data-lake", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    let data = env.root.join("data-lake/data");
    // Two mounts of ours on the same point: unmounting takes the top one only.
    env.fake.add(&data, "ext4", "/dev/loop43");
    let err = env.host.remove("data-lake").unwrap_err();
    assert!(matches!(err, VolumeError::StillMounted { .. }), "{err}");
    assert!(env.root.join("data-lake/volume.img").exists());
}

#[test]
fn detach_says_whether_it_unmounted_and_usage_needs_a_mount() {
    let env = Env::new();
    env.host
        .create("scratch", VolumeKind::Memory, 8 * MIB)
        .unwrap();
    assert!(env.host.detach("scratch").unwrap());
    assert!(!env.host.detach("scratch").unwrap());
    assert!(!env.host.is_mounted("scratch").unwrap());
    let err = env.host.usage("scratch").unwrap_err();
    assert!(matches!(err, VolumeError::NotMounted { .. }), "{err}");
    let err = env
        .host
        .mounted_data_dir("scratch", VolumeKind::Memory)
        .unwrap_err();
    assert!(err.to_string().contains("is not mounted"), "{err}");
    // The directory below the mount is still there (the next attach mounts on it).
    assert!(env.root.join("scratch/data").is_dir());
}
