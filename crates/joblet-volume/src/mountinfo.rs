//! The mount table in `/proc/self/mountinfo`'s format, parsed (pure: the text is read by
//! [`crate::Mounter::mountinfo`]).
//!
//! A line is `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
//! SUPER_OPTIONS`, with space, tab, newline and backslash in paths written as `\ooo`
//! octal escapes (proc_pid_mountinfo(5)).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Where it is mounted, unescaped.
    pub mount_point: PathBuf,
    /// The filesystem type: `ext4`, `tmpfs`, ...
    pub fstype: String,
    /// The mount source, unescaped: `/dev/loop3`, `tmpfs`, ...
    pub source: String,
}

/// Why the mount table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MountinfoError {
    #[error("could not read the mount table {path}: {source}", path = path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the mount table has a line this program cannot read (line {line}: {problem}): {text:?}"
    )]
    Malformed {
        line: usize,
        problem: &'static str,
        text: String,
    },
}

/// Parses a whole mount table. A line that does not have the fields of the format is an
/// error, not skipped: a mount that could not be read may be the one asked about.
pub fn parse(text: &str) -> Result<Vec<MountEntry>, MountinfoError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(l).map_err(|problem| malformed(i + 1, problem, l)))
        .collect()
}

fn malformed(line: usize, problem: &'static str, text: &str) -> MountinfoError {
    MountinfoError::Malformed {
        line,
        problem,
        text: text.chars().take(200).collect(),
    }
}

fn parse_line(line: &str) -> Result<MountEntry, &'static str> {
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() < 10 {
        return Err("fewer than 10 fields");
    }
    // Optional fields (`shared:1`, `master:2`, ...) run from the 7th field to the `-`.
    let sep = fields[6..]
        .iter()
        .position(|f| *f == "-")
        .map(|p| p + 6)
        .ok_or("no ' - ' separator")?;
    if fields.len() < sep + 3 {
        return Err("fewer than 3 fields after the separator");
    }
    Ok(MountEntry {
        mount_point: PathBuf::from(unescape(fields[4])?),
        fstype: fields[sep + 1].to_owned(),
        source: unescape(fields[sep + 2])?
            .into_string()
            .map_err(|_| "a source that is not UTF-8")?,
    })
}

/// Undoes the kernel's `\ooo` octal escapes.
fn unescape(field: &str) -> Result<OsString, &'static str> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let digits = bytes.get(i + 1..i + 4).ok_or("a cut-off escape")?;
            if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                return Err("an escape that is not 3 octal digits");
            }
            let v = digits
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            out.push(u8::try_from(v).map_err(|_| "an escape past 0o377")?);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(OsString::from_vec(out))
}

/// The topmost mount at exactly `path` (the last one listed: a later mount on the same
/// point hides the earlier), if any.
pub fn mount_at<'a>(table: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    table.iter().rev().find(|m| m.mount_point == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
97 22 7:3 / /var/lib/joblet/volumes/data-lake/data rw,nosuid,nodev,relatime shared:50 - ext4 /dev/loop3 rw
98 22 0:52 / /var/lib/joblet/volumes/scratch/data rw,nosuid,nodev,relatime - tmpfs joblet-volume:scratch rw,size=8192k,mode=770,uid=1000,gid=1000
99 22 0:53 / /mnt/with\\040space\\011tab\\134slash rw master:3 propagate_from:1 unbindable - tmpfs my\\040src rw
100 98 0:54 / /var/lib/joblet/volumes/scratch/data rw - tmpfs other rw
";

    #[test]
    fn parses_fields_optional_fields_and_escapes() {
        let t = parse(TABLE).unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(
            t[2],
            MountEntry {
                mount_point: "/var/lib/joblet/volumes/data-lake/data".into(),
                fstype: "ext4".into(),
                source: "/dev/loop3".into(),
            }
        );
        assert_eq!(t[4].mount_point, Path::new("/mnt/with space\ttab\\slash"));
        assert_eq!(t[4].fstype, "tmpfs");
        assert_eq!(t[4].source, "my src");
        assert_eq!(t[1].fstype, "proc");
    }

    #[test]
    fn the_mount_at_a_path_is_the_topmost_and_only_an_exact_match() {
        let t = parse(TABLE).unwrap();
        let top = mount_at(&t, Path::new("/var/lib/joblet/volumes/scratch/data")).unwrap();
        assert_eq!(top.source, "other");
        assert!(mount_at(&t, Path::new("/var/lib/joblet/volumes/scratch")).is_none());
        assert!(mount_at(&t, Path::new("/var/lib/joblet/volumes/data-lake/data/x")).is_none());
        assert!(mount_at(&t, Path::new("/mnt/with space\ttab\\slash")).is_some());
        assert!(mount_at(&t, Path::new("/mnt/with\\040space\\011tab\\134slash")).is_none());
    }

    #[test]
    fn a_line_without_its_fields_is_an_error_naming_the_line() {
        for (bad, problem) in [
            (
                "22 1 254:0 / / rw shared:1 ext4 /dev/vda rw",
                "no ' - ' separator",
            ),
            ("22 1 254:0 / /", "fewer than 10 fields"),
            (
                "22 1 254:0 / /a\\04 rw - ext4 /dev/vda rw x",
                "a cut-off escape",
            ),
            (
                "22 1 254:0 / /a\\09x rw - ext4 /dev/vda rw x",
                "not 3 octal digits",
            ),
            ("22 1 254:0 / /a\\777 rw - ext4 /dev/vda rw x", "past 0o377"),
            ("22 1 254:0 / /a rw x y z -", "fewer than 3 fields after"),
        ] {
            let text = format!("{}{bad}\n", &TABLE[..TABLE.find('\n').unwrap() + 1]);
            let err = parse(&text).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, MountinfoError::Malformed { line: 2, .. }),
                "{bad}: {msg}"
            );
            assert!(msg.contains(problem), "{bad}: {msg}");
        }
    }

    #[test]
    fn this_process_mount_table_parses_and_has_a_root() {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let t = parse(&text).unwrap();
        assert!(mount_at(&t, Path::new("/")).is_some(), "{text}");
    }
}
