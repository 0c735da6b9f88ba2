//! What `rnx workflow run` uploads: the union of the jobs' `uploads:` when
//! every job lists some, else the workflow file's whole directory. Either
//! way entries are named by their path relative to that directory, so each
//! job's /work mirrors it.

use std::path::{Path, PathBuf};

use joblet_workflow::Workflow;

use crate::upload::{self, UploadError, UploadPlan};

/// Where a workflow's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sources {
    /// Every job lists `uploads:`: these paths (relative to the workflow
    /// file's directory), each once, in the order jobs first name them.
    Union(Vec<String>),
    /// Some job lists none: the whole directory, recursively.
    Directory,
}

/// Decides what to upload for `workflow`.
pub fn sources(workflow: &Workflow) -> Sources {
    let jobs = workflow.jobs();
    if jobs.is_empty() || jobs.iter().any(|j| j.uploads.is_empty()) {
        return Sources::Directory;
    }
    let mut union: Vec<String> = Vec::new();
    for path in jobs.iter().flat_map(|j| &j.uploads) {
        if !union.contains(path) {
            union.push(path.clone());
        }
    }
    Sources::Union(union)
}

/// The directory a workflow file's paths are relative to: the file's own
/// (`.` for a bare file name).
pub fn base_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Scans what `sources` names under `base` into the manifest to send.
pub fn plan(sources: &Sources, base: &Path) -> Result<UploadPlan, UploadError> {
    match sources {
        Sources::Union(paths) => upload::scan_under(base, paths),
        Sources::Directory => upload::scan_under(base, &[String::new()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_workflow::Limits;

    fn parse(text: &str) -> Workflow {
        Workflow::parse(
            text,
            "wf.yaml",
            &Limits {
                max_gpus_per_node: None,
            },
        )
        .unwrap()
    }

    fn names(plan: &UploadPlan) -> Vec<&str> {
        plan.entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn every_job_listing_uploads_sends_their_union() {
        let wf = parse(
            "jobs:\n  a: {command: x, uploads: [prep.py, data/]}\n  b: {command: x, uploads: [data/, scripts/train.py]}\n",
        );
        assert_eq!(
            sources(&wf),
            Sources::Union(vec![
                "prep.py".into(),
                "data/".into(),
                "scripts/train.py".into()
            ])
        );
    }

    #[test]
    fn a_job_without_uploads_sends_the_whole_directory() {
        let wf = parse("jobs:\n  a: {command: x, uploads: [prep.py]}\n  b: {command: x}\n");
        assert_eq!(sources(&wf), Sources::Directory);
        let wf = parse("jobs:\n  a: {command: x}\n");
        assert_eq!(sources(&wf), Sources::Directory);
    }

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("wf.yaml"), "jobs: {a: {command: x}}\n").unwrap();
        std::fs::write(d.join("prep.py"), "p").unwrap();
        std::fs::create_dir_all(d.join("scripts/lib")).unwrap();
        std::fs::write(d.join("scripts/train.py"), "tt").unwrap();
        std::fs::write(d.join("scripts/lib/util.py"), "uuu").unwrap();
        std::fs::create_dir(d.join(".hidden")).unwrap();
        std::fs::write(d.join(".hidden/x"), "").unwrap();
        tmp
    }

    #[test]
    fn the_directory_is_sent_relative_to_itself_skipping_nothing() {
        let tmp = tree();
        let plan = plan(&Sources::Directory, tmp.path()).unwrap();
        assert_eq!(
            names(&plan),
            [
                ".hidden",
                ".hidden/x",
                "prep.py",
                "scripts",
                "scripts/lib",
                "scripts/lib/util.py",
                "scripts/train.py",
                "wf.yaml"
            ]
        );
        assert_eq!(plan.total, 1 + 2 + 3 + 24);
    }

    #[test]
    fn the_union_keeps_paths_relative_with_their_directories_first() {
        let tmp = tree();
        let union = Sources::Union(vec![
            "scripts/lib/util.py".into(),
            "./prep.py".into(),
            "scripts/".into(),
            "prep.py".into(),
        ]);
        let plan = plan(&union, tmp.path()).unwrap();
        // scripts/ holds util.py: sent once, as part of scripts/.
        assert_eq!(
            names(&plan),
            [
                "prep.py",
                "scripts",
                "scripts/lib",
                "scripts/lib/util.py",
                "scripts/train.py"
            ]
        );

        let nested = Sources::Union(vec!["scripts/lib/util.py".into()]);
        let plan = plan_of(&nested, tmp.path());
        assert_eq!(
            names(&plan),
            ["scripts", "scripts/lib", "scripts/lib/util.py"]
        );
        assert_eq!(plan.files.len(), 1);
    }

    fn plan_of(s: &Sources, base: &Path) -> UploadPlan {
        plan(s, base).unwrap()
    }

    #[test]
    fn paths_leaving_the_directory_or_missing_are_refused() {
        let tmp = tree();
        for bad in ["../etc/passwd", "/etc/passwd", "scripts/../../x"] {
            let e = plan(&Sources::Union(vec![bad.into()]), tmp.path())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("workflow upload {bad}: expected a path inside")),
                "{e}"
            );
        }
        let e = plan(&Sources::Union(vec!["nope.py".into()]), tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope.py") && e.contains("No such file"), "{e}");
    }

    #[test]
    fn base_dir_of_a_bare_name_is_the_current_directory() {
        assert_eq!(base_dir(Path::new("wf.yaml")), PathBuf::from("."));
        assert_eq!(base_dir(Path::new("a/b/wf.yaml")), PathBuf::from("a/b"));
        assert_eq!(base_dir(Path::new("/wf.yaml")), PathBuf::from("/"));
    }
}
