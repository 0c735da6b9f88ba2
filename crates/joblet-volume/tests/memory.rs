//! A real memory volume (root only): a tmpfs of 8 MiB that refuses what is past its size
//! with ENOSPC, belongs to its owner, and comes back empty after a detach and an attach.

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::MetadataExt;

use common::{root_or_skip, Fixture, MIB, OWNER_GID, OWNER_UID};
use joblet_volume::{Attach, VolumeKind};

#[test]
fn a_memory_volume_enforces_its_size_and_comes_back_empty() {
    if !root_or_skip() {
        return;
    }
    let f = Fixture::new();
    let size = 8 * MIB;
    f.host.create("scratch", VolumeKind::Memory, size).unwrap();
    let data = f.host.data_dir("scratch");
    assert_eq!(f.mounts(), vec![data.clone()]);
    let meta = fs::metadata(&data).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (OWNER_UID, OWNER_GID));
    assert_eq!(meta.mode() & 0o7777, 0o770);
    assert_eq!(f.host.usage("scratch").unwrap().size_bytes, size);

    let mut file = File::create(data.join("fill")).unwrap();
    let chunk = vec![1u8; MIB as usize];
    let mut written = 0u64;
    let err = loop {
        if let Err(e) = file.write_all(&chunk) {
            break e;
        }
        written += MIB;
        assert!(
            written <= size,
            "wrote {written} bytes into an 8 MiB volume"
        );
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(written >= 7 * MIB, "only {written} bytes fit");
    drop(file);
    assert!(f.host.usage("scratch").unwrap().used_bytes >= 7 * MIB);

    assert!(f.host.detach("scratch").unwrap());
    assert_eq!(f.mounts(), Vec::<std::path::PathBuf>::new());
    assert_eq!(
        f.host.attach("scratch", VolumeKind::Memory, size).unwrap(),
        Attach::RecreatedEmpty
    );
    assert_eq!(
        fs::read_dir(&data).unwrap().count(),
        0,
        "not empty after attach"
    );
    assert_eq!(f.host.usage("scratch").unwrap().used_bytes, 0);
    assert_eq!(
        f.host.attach("scratch", VolumeKind::Memory, size).unwrap(),
        Attach::AlreadyMounted
    );

    f.host.remove("scratch").unwrap();
    f.assert_nothing_left();
}
