//! Applies a [`DeviceRules`] allow-list to a cgroup v1 `devices` directory
//! and reads it back, failing closed if the kernel's list differs.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::{DeviceError, DeviceRule, DeviceRules};

/// Makes the v1 devices cgroup at `devices_cgroup_dir` allow exactly
/// `rules`: writes `a` to `devices.deny` (deny everything, drop all
/// exceptions), then each rule to `devices.allow`, then reads
/// `devices.list` back and checks it holds exactly the rules.
///
/// The kernel refuses `a` in `devices.deny` while the cgroup has child
/// cgroups, so apply this to the job's leaf cgroup. Between the first and the
/// last write the cgroup allows less than asked, never more.
pub fn apply(devices_cgroup_dir: &Path, rules: &DeviceRules) -> Result<(), DeviceError> {
    write_lines(&devices_cgroup_dir.join("devices.deny"), &["a".to_owned()])?;
    let lines: Vec<String> = rules.rules().iter().map(DeviceRule::to_v1_line).collect();
    write_lines(&devices_cgroup_dir.join("devices.allow"), &lines)?;
    verify(devices_cgroup_dir, rules)?;
    tracing::debug!(
        dir = %devices_cgroup_dir.display(),
        rules = rules.rules().len(),
        "cgroup v1 device rules applied"
    );
    Ok(())
}

/// Widens a cgroup v1 `devices` directory that allows some rules by
/// `added` (each written to `devices.allow`; the kernel OR-s the access of
/// a rule it already has), then checks that `devices.list` holds exactly
/// `rules`, the result. `added` comes from [`DeviceRules::extension`], so
/// the cgroup never allows more than `rules`, before or after.
pub fn extend(
    devices_cgroup_dir: &Path,
    added: &[DeviceRule],
    rules: &DeviceRules,
) -> Result<(), DeviceError> {
    let lines: Vec<String> = added.iter().map(DeviceRule::to_v1_line).collect();
    write_lines(&devices_cgroup_dir.join("devices.allow"), &lines)?;
    verify(devices_cgroup_dir, rules)?;
    tracing::debug!(
        dir = %devices_cgroup_dir.display(),
        added = added.len(),
        "cgroup v1 device rules extended"
    );
    Ok(())
}

/// Checks that `devices.list` in `devices_cgroup_dir` holds exactly `rules`
/// (in any order).
pub fn verify(devices_cgroup_dir: &Path, rules: &DeviceRules) -> Result<(), DeviceError> {
    let list = devices_cgroup_dir.join("devices.list");
    let found = fs::read_to_string(&list).map_err(|source| DeviceError::V1Read {
        path: list.clone(),
        source,
    })?;
    let mut expected: Vec<String> = rules.rules().iter().map(DeviceRule::to_v1_line).collect();
    expected.sort();
    // Re-print what parses so formatting differences cannot cause a false
    // mismatch; a line that does not parse is kept verbatim and will differ.
    let mut got: Vec<String> = found
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| DeviceRule::parse(l).map_or_else(|_| l.to_owned(), |r| r.to_v1_line()))
        .collect();
    got.sort();
    if got != expected {
        return Err(DeviceError::V1Mismatch {
            path: list,
            expected: expected.join("\n"),
            found: found.trim_end().to_owned(),
        });
    }
    Ok(())
}

/// One rule per write(2): the kernel parses each write as one line.
/// Writes each line to `path` (opened once) with a `write(2)` of its own,
/// newline-terminated: the kernel takes one rule per write. Opening the
/// file once instead of per rule saves a path walk through cgroupfs each.
fn write_lines(path: &Path, lines: &[String]) -> Result<(), DeviceError> {
    let Some(first) = lines.first() else {
        return Ok(());
    };
    let fail = |line: &str, source| DeviceError::V1Write {
        path: path.to_path_buf(),
        line: line.to_owned(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| fail(first, e))?;
    for line in lines {
        let buf = format!("{line}\n");
        match file.write(buf.as_bytes()) {
            Ok(n) if n == buf.len() => {}
            Ok(n) => {
                let short = format!("short write: {n} of {} bytes", buf.len());
                return Err(fail(line, io::Error::new(io::ErrorKind::WriteZero, short)));
            }
            Err(e) => return Err(fail(line, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::Access;

    /// A temp dir standing in for a cgroup: regular files keep every write
    /// in order, so only the write sequence and the read-back are tested here;
    /// the real kernel is exercised in `tests/devices_isolation.rs`.
    fn fake_cgroup(list: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in ["devices.deny", "devices.allow"] {
            fs::write(dir.path().join(f), "").unwrap();
        }
        fs::write(dir.path().join("devices.list"), list).unwrap();
        dir
    }

    #[test]
    fn accepts_a_matching_list_in_any_order() {
        let dir = fake_cgroup(
            "c 136:* rw\nc 1:3 rw\nc 1:5 rw\nc 1:7 rw\nc 1:8 rw\nc 1:9 rw\nc 5:0 rw\nc 5:2 rw\n",
        );
        apply(dir.path(), &DeviceRules::minimal()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("devices.deny")).unwrap(),
            "a\n"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("devices.allow")).unwrap(),
            "c 1:3 rw\nc 1:5 rw\nc 1:7 rw\nc 1:8 rw\nc 1:9 rw\nc 5:0 rw\nc 5:2 rw\nc 136:* rw\n",
            "one write per rule, in order"
        );
    }

    #[test]
    fn fails_closed_when_the_kernel_list_differs() {
        let dir = fake_cgroup("a *:* rwm\n");
        let err = apply(dir.path(), &DeviceRules::minimal()).unwrap_err();
        match &err {
            DeviceError::V1Mismatch {
                path,
                found,
                expected,
            } => {
                assert_eq!(path, &dir.path().join("devices.list"));
                assert_eq!(found, "a *:* rwm");
                assert!(expected.contains("c 1:3 rw"));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("devices.list"), "{err}");

        let mut extra = DeviceRules::deny_all();
        extra.allow(DeviceRule::char(1, 3, Access::R));
        let dir = fake_cgroup("c 1:3 rw\n");
        assert!(matches!(
            apply(dir.path(), &extra),
            Err(DeviceError::V1Mismatch { .. })
        ));
    }

    #[test]
    fn extend_writes_only_the_added_rules_and_reads_back_the_whole_list() {
        let mut gpu = DeviceRules::minimal();
        gpu.allow(DeviceRule::char(195, 3, Access::RW));
        let dir = fake_cgroup(
            "c 136:* rw\nc 1:3 rw\nc 1:5 rw\nc 1:7 rw\nc 1:8 rw\nc 1:9 rw\nc 5:0 rw\nc 5:2 rw\nc 195:3 rw\n",
        );
        let added = DeviceRules::minimal().extension(&gpu).unwrap();
        extend(dir.path(), &added, &gpu).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("devices.deny")).unwrap(),
            "",
            "nothing denied"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("devices.allow")).unwrap(),
            "c 195:3 rw\n"
        );
        // The kernel's list lacks the GPU: fail closed.
        let dir = fake_cgroup(
            "c 136:* rw\nc 1:3 rw\nc 1:5 rw\nc 1:7 rw\nc 1:8 rw\nc 1:9 rw\nc 5:0 rw\nc 5:2 rw\n",
        );
        assert!(matches!(
            extend(dir.path(), &added, &gpu),
            Err(DeviceError::V1Mismatch { .. })
        ));
    }

    #[test]
    fn deny_all_expects_an_empty_list() {
        let dir = fake_cgroup("");
        apply(dir.path(), &DeviceRules::deny_all()).unwrap();
    }

    #[test]
    fn a_missing_interface_file_names_the_path_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let err = apply(&dir.path().join("nope"), &DeviceRules::minimal()).unwrap_err();
        match &err {
            DeviceError::V1Write { path, line, .. } => {
                assert_eq!(path, &dir.path().join("nope/devices.deny"));
                assert_eq!(line, "a");
            }
            other => panic!("{other:?}"),
        }
    }
}
