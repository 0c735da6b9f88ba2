//! A job's block IO from its cgroup: v2 `io.stat` (`rbytes=`, `wbytes=`
//! per device) or v1 `blkio.throttle.io_service_bytes` (`MAJ:MIN Read N`
//! lines), summed over devices. Parsing is pure; [`read`] takes the job's
//! cgroup directories, so tests point it at a temp dir.

use std::path::Path;

/// Bytes read and written, summed over devices.
pub fn parse_io_stat(text: &str) -> (u64, u64) {
    let (mut read, mut written) = (0u64, 0u64);
    for field in text.split_whitespace() {
        if let Some(v) = field.strip_prefix("rbytes=") {
            read = read.saturating_add(v.parse().unwrap_or(0));
        } else if let Some(v) = field.strip_prefix("wbytes=") {
            written = written.saturating_add(v.parse().unwrap_or(0));
        }
    }
    (read, written)
}

/// Bytes read and written from v1 `blkio.throttle.io_service_bytes`.
pub fn parse_blkio(text: &str) -> (u64, u64) {
    let (mut read, mut written) = (0u64, 0u64);
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(_dev), Some(op), Some(n)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let n: u64 = n.parse().unwrap_or(0);
        match op {
            "Read" => read = read.saturating_add(n),
            "Write" => written = written.saturating_add(n),
            _ => {}
        }
    }
    (read, written)
}

/// The job's IO from the first of `dirs` that has an IO file.
pub fn read<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Option<(u64, u64)> {
    for dir in dirs {
        if let Ok(text) = std::fs::read_to_string(dir.join("io.stat")) {
            return Some(parse_io_stat(&text));
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("blkio.throttle.io_service_bytes")) {
            return Some(parse_blkio(&text));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_and_v1_files_sum_over_devices() {
        let v2 =
            "8:0 rbytes=4096 wbytes=100 rios=1 wios=1 dbytes=0 dios=0\n259:0 rbytes=1 wbytes=2\n";
        assert_eq!(parse_io_stat(v2), (4097, 102));
        let v1 =
            "8:0 Read 4096\n8:0 Write 100\n8:0 Sync 0\n8:0 Total 4196\n8:16 Read 4\nTotal 4200\n";
        assert_eq!(parse_blkio(v1), (4100, 100));
    }

    #[test]
    fn the_first_directory_with_an_io_file_answers() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        assert_eq!(read([a.as_path(), b.as_path()]), None);
        std::fs::write(b.join("blkio.throttle.io_service_bytes"), "8:0 Read 7\n").unwrap();
        assert_eq!(read([a.as_path(), b.as_path()]), Some((7, 0)));
    }
}
