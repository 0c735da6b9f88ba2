//! A real filesystem volume (root only): an ext4 image of 16 MiB on a loop device holds
//! 10 MiB, refuses what is past its size with ENOSPC, belongs to its owner, and keeps its
//! data across a detach and an attach (as across a reboot).

mod common;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;

use common::{pattern, root_or_skip, Fixture, MIB, OWNER_GID, OWNER_UID};
use joblet_volume::{Attach, VolumeKind};

#[test]
fn a_filesystem_volume_holds_its_size_belongs_to_its_owner_and_survives_detach_and_attach() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::new();
    let size = 16 * MIB;
    let created = f.host.create("lake", VolumeKind::Filesystem, size).unwrap();
    let data = f.host.data_dir("lake");
    assert_eq!(created.data_dir, data);
    assert!(f.host.is_mounted("lake").unwrap());
    assert_eq!(f.mounts(), vec![data.clone()]);
    assert_eq!(f.loops().len(), 1, "{:?}", f.loops());

    // The space is taken from the disk up front, and kept after mkfs (no discard).
    let image = fs::metadata(f.host.image_path("lake")).unwrap();
    assert_eq!(image.len(), size);
    assert!(
        image.blocks() * 512 >= size,
        "image not reserved: {} blocks",
        image.blocks()
    );
    assert_eq!(image.mode() & 0o777, 0o600);

    // The volume's root belongs to its owner, who may write in it.
    let meta = fs::metadata(&data).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (OWNER_UID, OWNER_GID));
    assert_eq!(meta.mode() & 0o700, 0o700, "mode {:o}", meta.mode());

    // 10 MiB fit and read back.
    let ten = pattern(10 * MIB as usize, 7);
    let mut file = File::create(data.join("ten")).unwrap();
    file.write_all(&ten).unwrap();
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(fs::read(data.join("ten")).unwrap(), ten);
    let usage = f.host.usage("lake").unwrap();
    assert!(
        usage.size_bytes <= size && usage.size_bytes > 12 * MIB,
        "{usage:?}"
    );
    assert!(
        usage.used_bytes >= 10 * MIB && usage.used_bytes < usage.size_bytes,
        "{usage:?}"
    );

    // Past the volume's size, a write fails with ENOSPC.
    let mut over = File::create(data.join("over")).unwrap();
    let chunk = vec![0x5au8; MIB as usize];
    let mut written = 0u64;
    let err = loop {
        if let Err(e) = over.write_all(&chunk).and_then(|()| over.sync_all()) {
            break e;
        }
        written += MIB;
        assert!(
            written <= 16 * MIB,
            "wrote {written} bytes past 10 MiB into a 16 MiB volume"
        );
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(written < 6 * MIB, "{written}");
    drop(over);
    fs::remove_file(data.join("over")).unwrap();

    // Detach (as at a reboot), then attach: the same data, mounted again.
    assert!(f.host.detach("lake").unwrap());
    assert!(!f.host.is_mounted("lake").unwrap());
    assert_eq!(f.mounts(), Vec::<std::path::PathBuf>::new());
    assert_eq!(
        f.loops_after_settling(),
        Vec::<String>::new(),
        "the loop device outlived its unmount"
    );
    assert!(
        !data.join("ten").exists(),
        "the file is visible without the mount"
    );
    let attached = f.host.attach("lake", VolumeKind::Filesystem, size).unwrap();
    assert!(matches!(attached, Attach::Mounted { .. }), "{attached:?}");
    let mut back = Vec::new();
    File::open(data.join("ten"))
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert!(back == ten, "the data changed across detach and attach");
    assert_eq!(
        f.host.attach("lake", VolumeKind::Filesystem, size).unwrap(),
        Attach::AlreadyMounted
    );
    assert_eq!(f.mounts(), vec![data.clone()]);
    let meta = fs::metadata(&data).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (OWNER_UID, OWNER_GID));

    f.host.remove("lake").unwrap();
    f.assert_nothing_left();
}

#[test]
fn a_second_create_of_a_name_leaves_the_first_volume_as_it_was() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::new();
    f.host
        .create("twice", VolumeKind::Filesystem, 4 * MIB)
        .unwrap();
    fs::write(f.host.data_dir("twice").join("keep"), b"kept").unwrap();
    let err = f
        .host
        .create("twice", VolumeKind::Filesystem, 4 * MIB)
        .unwrap_err();
    assert!(
        err.to_string().starts_with("volume twice already exists"),
        "{err}"
    );
    assert_eq!(
        fs::read(f.host.data_dir("twice").join("keep")).unwrap(),
        b"kept"
    );
    assert_eq!(f.loops().len(), 1);
    f.host.remove("twice").unwrap();
    f.assert_nothing_left();
}
