//! Reading and writing cgroup interface files: one `write(2)` per value, no
//! file creation (a missing interface file means a missing controller),
//! read-back verification and small parsers for the kernel's formats.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::error::CgroupError;

/// Writes `value` to the existing file `path` in a single `write(2)`, as
/// cgroup files require. Never creates the file.
pub(crate) fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    let fail = |source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(fail)?;
    let n = file.write(value.as_bytes()).map_err(fail)?;
    if n != value.len() {
        return Err(fail(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", value.len()),
        )));
    }
    Ok(())
}

/// Reads a whole interface file.
pub(crate) fn read(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|source| CgroupError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `value`, reads the file back and requires it to equal `value`
/// (whitespace around it ignored).
pub(crate) fn write_verified(path: &Path, value: &str) -> Result<(), CgroupError> {
    write_checked(path, value, |back| back.trim() == value.trim())
}

/// Writes `value`, reads the file back and requires `accepted(read_back)`:
/// for files whose read-back form differs from what was written (one line
/// among several, reordered keys).
pub(crate) fn write_checked(
    path: &Path,
    value: &str,
    accepted: impl Fn(&str) -> bool,
) -> Result<(), CgroupError> {
    write(path, value)?;
    let back = read(path)?;
    if !accepted(&back) {
        return Err(CgroupError::Verify {
            path: path.to_path_buf(),
            wrote: value.to_string(),
            read_back: back.trim().to_string(),
        });
    }
    Ok(())
}

/// Reads a file holding one unsigned number.
pub(crate) fn read_u64(path: &Path) -> Result<u64, CgroupError> {
    let s = read(path)?;
    s.trim().parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        content: s.clone(),
        reason: "expected one unsigned number",
    })
}

/// Finds `key value` in a flat-keyed file (`memory.events`, `cpu.stat`,
/// `memory.oom_control`). `Ok(None)` when the key is absent.
pub(crate) fn keyed_u64(path: &Path, content: &str, key: &str) -> Result<Option<u64>, CgroupError> {
    for line in content.lines() {
        let mut it = line.split_whitespace();
        if it.next() == Some(key) {
            let value = it.next().and_then(|v| v.parse().ok());
            return match value {
                Some(v) => Ok(Some(v)),
                None => Err(CgroupError::Parse {
                    path: path.to_path_buf(),
                    content: content.to_string(),
                    reason: "a key without an unsigned number after it",
                }),
            };
        }
    }
    Ok(None)
}

/// The pids in a `cgroup.procs` file; a missing file or directory counts as
/// empty (the cgroup is gone), as does a cgroup being removed (`ENODEV`
/// on a v1 hierarchy).
pub(crate) fn procs(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    let path = dir.join("cgroup.procs");
    let content = match std::fs::read_to_string(&path) {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return Ok(Vec::new()),
        Err(source) => return Err(CgroupError::Read { path, source }),
    };
    content
        .split_whitespace()
        .map(|t| {
            t.parse::<i32>().map_err(|_| CgroupError::Parse {
                path: path.clone(),
                content: content.clone(),
                reason: "expected one pid per line",
            })
        })
        .collect()
}

/// Creates `dir` (its parent must exist). `Ok(true)` when it was created,
/// `Ok(false)` when it already existed.
pub(crate) fn mkdir(dir: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
        Err(source) => Err(CgroupError::Mkdir {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Removes an (empty) cgroup directory with `rmdir(2)`, which cgroupfs
/// allows although the interface files are listed in it. A directory that
/// is already gone is fine. `EBUSY` right after the last process left is
/// retried briefly.
pub(crate) fn rmdir(dir: &Path) -> Result<(), CgroupError> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(source) => {
                return Err(CgroupError::Remove {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// One `rmdir(2)` of a cgroup directory, no retry: `Ok(false)` when the
/// kernel refuses it because processes (or child cgroups) are still in
/// it, `Ok(true)` when it is gone (or was already).
pub(crate) fn try_rmdir(dir: &Path) -> Result<bool, CgroupError> {
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(false),
        Err(source) => Err(CgroupError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// `base/rel` for a relative cgroup path written with `/`.
pub(crate) fn join_rel(base: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .filter(|c| !c.is_empty())
        .fold(base.to_path_buf(), |p, c| p.join(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_does_not_create_missing_files() {
        let tmp = tempfile::tempdir().unwrap();
        let err = write(&tmp.path().join("memory.max"), "1").unwrap_err();
        assert!(matches!(err, CgroupError::Write { .. }), "{err}");
        assert!(err.to_string().contains("memory.max"), "{err}");
        assert!(!tmp.path().join("memory.max").exists());
    }

    #[test]
    fn write_verified_reports_a_different_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::write(&p, "old").unwrap();
        write_verified(&p, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        // A directory cannot be read back as text: the error names it.
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).unwrap();
        assert!(write_verified(&d, "x").is_err());
    }

    #[test]
    fn keyed_values_are_found_or_absent() {
        let p = Path::new("memory.events");
        let c = "low 0\nhigh 3\nmax 7\noom 1\noom_kill 2\n";
        assert_eq!(keyed_u64(p, c, "oom_kill").unwrap(), Some(2));
        assert_eq!(keyed_u64(p, c, "oom").unwrap(), Some(1));
        assert_eq!(keyed_u64(p, c, "oom_group_kill").unwrap(), None);
        assert!(keyed_u64(p, "oom_kill x\n", "oom_kill").is_err());
    }

    #[test]
    fn procs_of_a_missing_dir_is_empty_and_garbage_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(procs(&tmp.path().join("gone")).unwrap().is_empty());
        std::fs::write(tmp.path().join("cgroup.procs"), "12\n34\n").unwrap();
        assert_eq!(procs(tmp.path()).unwrap(), vec![12, 34]);
        std::fs::write(tmp.path().join("cgroup.procs"), "12\nabc\n").unwrap();
        assert!(procs(tmp.path()).is_err());
    }

    #[test]
    fn mkdir_and_rmdir_are_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("job");
        assert!(mkdir(&d).unwrap());
        assert!(!mkdir(&d).unwrap());
        rmdir(&d).unwrap();
        rmdir(&d).unwrap();
        assert!(!d.exists());
        assert!(mkdir(&d).unwrap());
        assert!(try_rmdir(&d).unwrap());
        assert!(try_rmdir(&d).unwrap(), "gone already");
        assert!(!d.exists());
        assert!(mkdir(&tmp.path().join("no/parent")).is_err());
    }

    #[test]
    fn join_rel_splits_on_slashes() {
        assert_eq!(
            join_rel(Path::new("/sys/fs/cgroup/memory"), "joblet/x/job1"),
            PathBuf::from("/sys/fs/cgroup/memory/joblet/x/job1")
        );
    }
}
