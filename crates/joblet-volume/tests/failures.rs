//! Creates that fail at each step (root only) say which step and leave nothing: no
//! directory, no image, no mount, no loop device.

mod common;

use common::{root_or_skip, Fixture, MIB};
use joblet_volume::{Step, Tools, VolumeError, VolumeKind};

fn tools(mkfs: &str, losetup: Option<&str>) -> Tools {
    let found = Tools::find();
    Tools {
        mkfs_ext4: mkfs.into(),
        losetup: losetup.map_or(found.losetup, Into::into),
    }
}

fn failed_create(f: &Fixture, kind: VolumeKind, size: u64) -> VolumeError {
    let err = f.host.create("doomed", kind, size).unwrap_err();
    println!("{err}");
    f.assert_nothing_left();
    err
}

#[test]
fn a_failing_mkfs_fails_the_create_and_leaves_nothing() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::with_tools(tools("/bin/false", None));
    let err = failed_create(&f, VolumeKind::Filesystem, 16 * MIB);
    assert_eq!(err.step(), Some(Step::MakeFilesystem));
    assert!(
        err.to_string().starts_with(
            "volume doomed: could not make the ext4 filesystem (mkfs.ext4): /bin/false exited with status 1"
        ),
        "{err}"
    );
}

#[test]
fn a_failing_loop_device_fails_the_create_and_leaves_nothing() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::with_tools(tools(
        &Tools::find().mkfs_ext4.to_string_lossy(),
        Some("/bin/false"),
    ));
    let err = failed_create(&f, VolumeKind::Filesystem, 16 * MIB);
    assert_eq!(err.step(), Some(Step::AttachLoop));
    assert!(
        err.to_string()
            .contains("could not attach the image to a loop device (losetup): /bin/false"),
        "{err}"
    );
}

/// `mkfs.ext4` "succeeds" without writing a filesystem: the loop device is attached, the
/// mount fails, and the device must be detached again.
#[test]
fn a_failing_mount_detaches_the_loop_device_and_leaves_nothing() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::with_tools(tools("/bin/true", None));
    let err = failed_create(&f, VolumeKind::Filesystem, 16 * MIB);
    assert_eq!(err.step(), Some(Step::Mount));
    let msg = err.to_string();
    assert!(
        msg.starts_with("volume doomed: could not mount the volume: ext4 /dev/loop"),
        "{msg}"
    );
    assert!(
        msg.ends_with(
            "(the image holds no ext4 filesystem the kernel can mount; the kernel log says more)"
        ),
        "{msg}"
    );
}

#[test]
fn a_disk_without_room_fails_the_reservation_and_leaves_nothing() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::on_small_disk(4 * MIB, Tools::find());
    let err = failed_create(&f, VolumeKind::Filesystem, 16 * MIB);
    assert_eq!(err.step(), Some(Step::ReserveImage));
    assert!(
        matches!(&err, VolumeError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("could not reserve the image's space (fallocate)"),
        "{err}"
    );
    // The small disk's space came back.
    let st = nix::sys::statvfs::statvfs(&f.base.join("disk")).unwrap();
    assert_eq!(st.blocks_free(), st.blocks());
}
