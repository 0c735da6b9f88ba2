//! What a client may upload into a job's `/work`, decided before a byte is
//! written: relative paths without `..`, files, directories and symlinks
//! whose target stays inside `/work`, nothing else, and no more in total
//! than the node allows.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::spec::FieldError;
use crate::text::clip;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UploadKind {
    File,
    Dir,
    Symlink,
    /// A kind this node does not know (from a newer client); always refused.
    Unknown,
}

/// One entry of an upload manifest. Files' contents follow the manifest,
/// in manifest order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UploadEntry {
    /// Relative to `/work`, `/`-separated (`dataset/train/0001.csv`).
    pub path: String,
    pub kind: UploadKind,
    /// Permission bits (`0o644`); setuid/setgid/sticky are refused.
    pub mode: u32,
    /// Bytes of a file (0 for directories and symlinks).
    pub size: u64,
    /// A symlink's target: relative, and resolving inside `/work`.
    pub target: String,
}

pub const PATH_FORM: &str = "a relative path inside the job's /work such as data/train.csv (no leading '/', no '..', no empty or '.' parts)";

/// Splits a manifest path into its parts, refusing anything that could
/// leave `/work`.
pub fn path_parts(path: &str) -> Result<Vec<&str>, String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.len() > 4096 {
        return Err(format!(
            "invalid path {:?}: expected {PATH_FORM}",
            clip(path)
        ));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == ".." || p.len() > 255)
    {
        return Err(format!(
            "invalid path {:?}: expected {PATH_FORM}",
            clip(path)
        ));
    }
    Ok(parts)
}

/// Whether a symlink at `link` (its parts) pointing to `target` stays
/// inside the upload root, resolving purely lexically (the target's own
/// components are all uploaded entries or inside the root).
pub fn target_stays_inside(link: &[&str], target: &str) -> bool {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return false;
    }
    let mut depth: Vec<&str> = link[..link.len() - 1].to_vec();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            p => depth.push(p),
        }
    }
    true
}

/// Checks a whole manifest: every path, kind, mode and target, no entry
/// given twice, parents before children, and the total size within
/// `max_total_bytes`. Errors name the field (`uploads[3].path`).
pub fn check_manifest(entries: &[UploadEntry], max_total_bytes: u64) -> Result<u64, FieldError> {
    let mut seen_dirs: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut total: u64 = 0;
    for (i, e) in entries.iter().enumerate() {
        let field = |f: &str| format!("uploads[{i}].{f}");
        let parts = path_parts(&e.path).map_err(|m| FieldError::new(field("path"), m))?;
        if !seen.insert(e.path.as_str()) {
            return Err(FieldError::new(
                field("path"),
                format!("{:?} is given twice", clip(&e.path)),
            ));
        }
        if parts.len() > 1 {
            let parent = parts[..parts.len() - 1].join("/");
            if !seen_dirs.contains(&parent) {
                return Err(FieldError::new(field("path"), format!("{:?} comes before its directory {:?}: list directories before what they hold", clip(&e.path), clip(&parent))));
            }
        }
        if e.mode & !0o777 != 0 {
            return Err(FieldError::new(
                field("mode"),
                format!(
                    "{:o} has special bits; expected permission bits only (0 to 0777)",
                    e.mode
                ),
            ));
        }
        match e.kind {
            UploadKind::Unknown => {
                return Err(FieldError::new(field("kind"), "unknown entry kind: expected FILE, DIR or SYMLINK (device files, sockets and pipes cannot be uploaded)"));
            }
            UploadKind::Dir => {
                if e.size != 0 || !e.target.is_empty() {
                    return Err(FieldError::new(
                        field("size"),
                        "a directory has no size or target",
                    ));
                }
                seen_dirs.insert(e.path.clone());
            }
            UploadKind::File => {
                if !e.target.is_empty() {
                    return Err(FieldError::new(field("target"), "a file has no target"));
                }
                total = total.saturating_add(e.size);
            }
            UploadKind::Symlink => {
                if e.size != 0 {
                    return Err(FieldError::new(field("size"), "a symlink has no size"));
                }
                if !target_stays_inside(&parts, &e.target) {
                    return Err(FieldError::new(field("target"), format!("symlink {:?} -> {:?} points outside the job's /work; only relative targets inside the upload are allowed", clip(&e.path), clip(&e.target))));
                }
            }
        }
    }
    if total > max_total_bytes {
        return Err(FieldError::new("uploads", format!("{total} bytes in total is more than this node accepts ({max_total_bytes} bytes, jobs.max_upload_mb)")));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(path: &str, size: u64) -> UploadEntry {
        UploadEntry {
            path: path.into(),
            kind: UploadKind::File,
            mode: 0o644,
            size,
            target: String::new(),
        }
    }
    fn dir(path: &str) -> UploadEntry {
        UploadEntry {
            path: path.into(),
            kind: UploadKind::Dir,
            mode: 0o755,
            size: 0,
            target: String::new(),
        }
    }
    fn link(path: &str, target: &str) -> UploadEntry {
        UploadEntry {
            path: path.into(),
            kind: UploadKind::Symlink,
            mode: 0o777,
            size: 0,
            target: target.into(),
        }
    }

    #[test]
    fn a_normal_tree_is_accepted() {
        let m = [
            file("model.py", 10),
            dir("dataset"),
            dir("dataset/a"),
            file("dataset/a/x.csv", 5),
            link("dataset/latest", "a/x.csv"),
        ];
        assert_eq!(check_manifest(&m, 100).unwrap(), 15);
    }

    #[test]
    fn escapes_are_refused_by_field() {
        let cases: Vec<(Vec<UploadEntry>, &str, &str)> = vec![
            (vec![file("/etc/x", 1)], "uploads[0].path", "relative path"),
            (vec![file("../../etc/x", 1)], "uploads[0].path", "no '..'"),
            (
                vec![dir("a"), file("a/../../x", 1)],
                "uploads[1].path",
                "no '..'",
            ),
            (vec![file("a//b", 1)], "uploads[0].path", "empty"),
            (vec![file("", 1)], "uploads[0].path", "relative path"),
            (
                vec![link("shadow", "/etc/shadow")],
                "uploads[0].target",
                "outside",
            ),
            (vec![link("up", "../x")], "uploads[0].target", "outside"),
            (
                vec![dir("d"), link("d/up", "../../etc")],
                "uploads[1].target",
                "outside",
            ),
            (
                vec![file("a/b", 1)],
                "uploads[0].path",
                "before its directory",
            ),
            (vec![file("x", 1), file("x", 1)], "uploads[1].path", "twice"),
            (
                vec![UploadEntry {
                    mode: 0o4755,
                    ..file("suid", 1)
                }],
                "uploads[0].mode",
                "special bits",
            ),
            (
                vec![file("big", 101)],
                "uploads",
                "more than this node accepts",
            ),
            (
                vec![UploadEntry {
                    kind: UploadKind::Unknown,
                    ..file("dev", 0)
                }],
                "uploads[0].kind",
                "FILE, DIR or SYMLINK",
            ),
        ];
        for (m, field, needle) in cases {
            let e = check_manifest(&m, 100).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    proptest! {
        /// Whatever path a client sends, an accepted one never has a part
        /// that could climb out.
        #[test]
        fn accepted_paths_stay_inside(path in "[a-z./]{1,12}") {
            if let Ok(parts) = path_parts(&path) {
                prop_assert!(parts.iter().all(|p| !p.is_empty() && *p != "." && *p != ".."));
                prop_assert!(!path.starts_with('/'));
            }
        }

        #[test]
        fn accepted_targets_resolve_inside(link_path in "[a-c]{1,2}(/[a-c]{1,2}){0,2}", target in "(\\.\\.|[a-c]|\\.)(/(\\.\\.|[a-c]|\\.)){0,4}") {
            let parts: Vec<&str> = link_path.split('/').collect();
            if target_stays_inside(&parts, &target) {
                let mut depth = parts.len() as i64 - 1;
                for p in target.split('/') {
                    match p { ".." => depth -= 1, "." | "" => {}, _ => depth += 1 }
                    prop_assert!(depth >= 0);
                }
            }
        }
    }
}
