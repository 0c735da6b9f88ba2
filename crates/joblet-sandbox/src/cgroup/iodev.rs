//! Which block device backs a path: `stat` gives `st_dev`, sysfs
//! (`<sysfs>/dev/block/MAJ:MIN`) says whether that is a block device and,
//! for a partition, which whole disk it belongs to (IO throttling applies
//! to whole disks).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::error::CgroupError;
use super::files;

/// A block device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockDevice {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for BlockDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The whole-disk block device holding the filesystem `path` is on. A
/// filesystem without a block device (tmpfs, overlay, btrfs subvolumes,
/// NFS: their `st_dev` is an anonymous `0:N`) is
/// [`CgroupError::NoBlockDevice`].
pub fn block_device_for(path: &Path, sysfs: &Path) -> Result<BlockDevice, CgroupError> {
    let meta = std::fs::metadata(path).map_err(|source| CgroupError::Stat {
        path: path.to_path_buf(),
        source,
    })?;
    let dev = meta.dev();
    let st_dev = BlockDevice {
        major: nix::sys::stat::major(dev) as u32,
        minor: nix::sys::stat::minor(dev) as u32,
    };
    whole_disk(path, st_dev, sysfs)
}

/// The whole disk for device `dev` (found through `path`, which only names
/// it in errors): `dev` itself, or the parent disk when sysfs marks it as a
/// partition.
pub fn whole_disk(path: &Path, dev: BlockDevice, sysfs: &Path) -> Result<BlockDevice, CgroupError> {
    let entry = sysfs.join("dev/block").join(dev.to_string());
    if !entry.exists() {
        return Err(CgroupError::NoBlockDevice {
            path: path.to_path_buf(),
            major: dev.major,
            minor: dev.minor,
            sysfs_entry: entry,
        });
    }
    if !entry.join("partition").exists() {
        return Ok(dev);
    }
    // `<entry>` links to `.../block/sda/sda1`; `..` through the link is
    // the disk's directory, whose `dev` file holds `MAJ:MIN`.
    let parent_dev = entry.join("..").join("dev");
    let text = files::read(&parent_dev)?;
    parse_dev(&text).ok_or_else(|| CgroupError::Parse {
        path: parent_dev,
        content: text.clone(),
        reason: "expected MAJ:MIN",
    })
}

fn parse_dev(s: &str) -> Option<BlockDevice> {
    let (a, b) = s.trim().split_once(':')?;
    Some(BlockDevice {
        major: a.parse().ok()?,
        minor: b.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fake sysfs with disk `sda` (8:0) and partition `sda1` (8:1), linked
    /// from `dev/block` as the kernel does.
    fn fake_sysfs() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let disk = tmp.path().join("devices/pci0/block/sda");
        std::fs::create_dir_all(disk.join("sda1")).unwrap();
        std::fs::write(disk.join("dev"), "8:0\n").unwrap();
        std::fs::write(disk.join("sda1/dev"), "8:1\n").unwrap();
        std::fs::write(disk.join("sda1/partition"), "1\n").unwrap();
        let db = tmp.path().join("dev/block");
        std::fs::create_dir_all(&db).unwrap();
        std::os::unix::fs::symlink("../../devices/pci0/block/sda", db.join("8:0")).unwrap();
        std::os::unix::fs::symlink("../../devices/pci0/block/sda/sda1", db.join("8:1")).unwrap();
        tmp
    }

    #[test]
    fn a_partition_maps_to_its_disk_and_a_disk_to_itself() {
        let s = fake_sysfs();
        let p = Path::new("/work");
        let part = BlockDevice { major: 8, minor: 1 };
        let disk = BlockDevice { major: 8, minor: 0 };
        assert_eq!(whole_disk(p, part, s.path()).unwrap(), disk);
        assert_eq!(whole_disk(p, disk, s.path()).unwrap(), disk);
    }

    #[test]
    fn no_block_device_is_an_error_naming_the_path() {
        let s = fake_sysfs();
        let err = whole_disk(
            Path::new("/work/job1"),
            BlockDevice {
                major: 0,
                minor: 45,
            },
            s.path(),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/work/job1") && msg.contains("0:45"), "{msg}");
        assert!(matches!(err, CgroupError::NoBlockDevice { .. }));
    }

    #[test]
    fn block_device_for_stats_the_path() {
        // Whatever device the temp dir is on, a fake sysfs that has it as a
        // partition of disk 8:0 maps it there.
        let tmp = tempfile::tempdir().unwrap();
        let dev = std::fs::metadata(tmp.path()).unwrap().dev();
        let name = format!(
            "{}:{}",
            nix::sys::stat::major(dev),
            nix::sys::stat::minor(dev)
        );
        let s = fake_sysfs();
        let disk = s.path().join("devices/pci0/block/sda");
        std::fs::create_dir_all(disk.join("sdx")).unwrap();
        std::fs::write(disk.join("sdx/partition"), "2\n").unwrap();
        let link = s.path().join("dev/block").join(&name);
        if !link.exists() {
            std::os::unix::fs::symlink("../../devices/pci0/block/sda/sdx", &link).unwrap();
        }
        assert_eq!(
            block_device_for(tmp.path(), s.path()).unwrap(),
            BlockDevice { major: 8, minor: 0 }
        );
        let err = block_device_for(&PathBuf::from("/nonexistent/x"), s.path()).unwrap_err();
        assert!(matches!(err, CgroupError::Stat { .. }));
    }

    #[test]
    fn the_real_root_filesystem_if_it_has_a_block_device() {
        // On any Linux host: either a device sysfs knows, or the error.
        match block_device_for(Path::new("/"), Path::new("/sys")) {
            Ok(d) => assert!(Path::new("/sys/dev/block").join(d.to_string()).exists()),
            Err(e) => assert!(matches!(e, CgroupError::NoBlockDevice { .. }), "{e}"),
        }
    }
}
