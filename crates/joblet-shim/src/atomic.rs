//! Replacing a file atomically: write a temporary sibling, then rename.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `data` to `path` so readers see the old file or the whole new one.
///
/// Not fsynced: the shim's files follow the store's durability model (WAL
/// with `synchronous=NORMAL`, see `joblet_store`): they survive the daemon
/// crashing or being killed, which is what recovery needs; a power loss
/// may lose the last of them, and the daemon then treats the job like any
/// other it finds without a record (its processes died with the host).
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    write_pending(path, data)?;
    publish(path)
}

/// The first half of [`write_atomic`]: `data` in the temporary sibling only,
/// for [`publish`] to put in place later.
///
/// The sibling is overwritten from the start and cut to `data`'s length
/// only when it was longer, not opened with `O_TRUNC`: ext4 (its default
/// `auto_da_alloc`) starts writing back, on close, any file that was
/// truncated to zero, which for the empty file [`prepare_atomic`] made is
/// disk I/O set off on a job's start and end for nothing.
pub(crate) fn write_pending(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(tmp_path(path))?;
    f.write_all(data)?;
    let len = data.len() as u64;
    if f.metadata()?.len() > len {
        f.set_len(len)?;
    }
    Ok(())
}

/// The second half of [`write_atomic`]: renames the temporary sibling to
/// `path`.
pub(crate) fn publish(path: &Path) -> io::Result<()> {
    std::fs::rename(tmp_path(path), path)
}

/// Creates the temporary sibling [`write_atomic`] will write for `path`,
/// empty, so that the write reuses its inode. Creating a file is the slow
/// part of the write on a busy ext4 (about 0.2 ms on the machine of
/// BENCHMARKS.md: the allocator steps over recently freed inodes); done
/// ahead, it is off the job's path.
///
/// With `reserve` bytes written into it, the sibling owns the disk space a
/// record of up to that size needs: a later [`write_atomic`] of such a
/// record overwrites those bytes and cuts the rest, and needs no new space
/// even when the disk has filled up since.
pub(crate) fn prepare_atomic(path: &Path, reserve: usize) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(tmp_path(path))?;
    if reserve > 0 {
        f.write_all(&vec![b' '; reserve])?;
    }
    Ok(())
}

/// The temporary sibling [`write_atomic`] writes before renaming it to
/// `path`.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".tmp");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("exit.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("exit.json")]);
    }

    #[test]
    fn a_pending_write_is_invisible_until_published() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("job.pid");
        write_pending(&p, b"early").unwrap();
        assert!(!p.exists());
        write_pending(&p, b"late").unwrap();
        publish(&p).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"late");
        assert!(!tmp_path(&p).exists());
        assert!(publish(&p).is_err(), "nothing pending any more");
    }

    #[test]
    fn a_longer_leftover_temporary_file_is_cut_to_the_new_data() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("exit.json");
        std::fs::write(tmp_path(&p), b"a much longer record from before").unwrap();
        write_atomic(&p, b"short").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"short");
    }

    #[test]
    fn a_prepared_temporary_file_is_the_one_written() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("exit.json");
        prepare_atomic(&p, 0).unwrap();
        let ino = std::fs::metadata(tmp_path(&p)).unwrap().ino();
        write_atomic(&p, b"done").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"done");
        assert_eq!(std::fs::metadata(&p).unwrap().ino(), ino);
        assert!(!tmp_path(&p).exists());
    }

    /// A reserved sibling owns its space: the record that replaces it is
    /// exactly the record.
    #[test]
    fn a_reserved_sibling_is_cut_to_the_record() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("exit.json");
        prepare_atomic(&p, 16 * 1024).unwrap();
        assert_eq!(std::fs::metadata(tmp_path(&p)).unwrap().len(), 16 * 1024);
        write_atomic(&p, b"{\"outcome\":\"Exited\"}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"outcome\":\"Exited\"}");
        assert!(!tmp_path(&p).exists());
    }
}
