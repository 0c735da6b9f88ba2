//! Shared by the topology and procfs tests: fixture paths and the POWER9
//! snapshot unpacked into a temp dir.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// hwloc's `nvidiagpunumanodes` test fsroot (POWER9 with 6 V100 whose
/// memory is exposed as NUMA nodes 250-255), unpacked. Returns the temp
/// dir (keep it alive) and the fsroot inside it (holding `proc/`, `sys/`).
pub fn power9_fsroot() -> (tempfile::TempDir, PathBuf) {
    let archive = fixtures().join("sysfs/hwloc__power9-v100-gpunumanodes.fsroot.tar.bz2");
    let file = std::fs::File::open(&archive).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Archive::new(bzip2::read::BzDecoder::new(file));
    tar.unpack(dir.path()).unwrap();
    let root = dir.path().join("nvidiagpunumanodes");
    assert!(root.join("sys").is_dir(), "unexpected archive layout");
    (dir, root)
}
