//! Uploads: turning local files and directories into an upload manifest
//! and streaming their contents to the node.
//!
//! `rnx job run --upload` ([`scan`]) names each entry by its path under the
//! uploaded argument's own name (`--upload=dataset/` gives `dataset/…` in
//! the job's /work). `rnx workflow run` ([`scan_under`]) names each entry
//! by its path relative to the workflow file's directory, so /work mirrors
//! that directory. Directories are walked in name order. Symlinks are sent
//! as symlinks and must point inside /work; device files, sockets and pipes
//! are refused before anything is sent. The node checks the same again.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::IsTerminal;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use joblet_core::{UploadEntry, UploadKind};
use joblet_proto::pb;
use tokio::sync::mpsc;

/// Bytes per data message.
const CHUNK: usize = 256 * 1024;
/// Uploads smaller than this get no progress bar.
const PROGRESS_MIN: u64 = 4 * 1024 * 1024;

/// What an [`UploadError`] names the upload by: `--upload` for `rnx job
/// run`, [`WORKFLOW`] for a workflow's files.
pub const FLAG: &str = "--upload";
pub const WORKFLOW: &str = "workflow upload";

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("{what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path}: cannot name it in the job's /work; give a file or directory with a name, like dataset/")]
    NoName { what: &'static str, path: PathBuf },
    #[error("{what} {path}: it is a {kind}; only files, directories and symlinks inside the upload can be uploaded")]
    Special {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
    },
    #[error("{what} {path}: {problem}")]
    Invalid {
        what: &'static str,
        path: PathBuf,
        problem: String,
    },
    #[error("{what} {path}: the file changed size while it was being uploaded ({expected} bytes announced)")]
    Changed {
        what: &'static str,
        path: PathBuf,
        expected: u64,
    },
}

/// What to send: the manifest and, for each FILE entry in order, its local path.
#[derive(Debug)]
pub struct UploadPlan {
    pub entries: Vec<UploadEntry>,
    pub files: Vec<(PathBuf, u64)>,
    pub total: u64,
    /// What errors name the upload by ([`FLAG`] or [`WORKFLOW`]).
    pub what: &'static str,
}

impl UploadPlan {
    /// Nothing to send.
    pub fn empty(what: &'static str) -> UploadPlan {
        UploadPlan {
            entries: Vec::new(),
            files: Vec::new(),
            total: 0,
            what,
        }
    }
}

/// `--upload` paths, each named in /work by its own name.
pub fn scan(paths: &[PathBuf]) -> Result<UploadPlan, UploadError> {
    let mut plan = UploadPlan::empty(FLAG);
    for p in paths {
        let name = p
            .file_name()
            .map(PathBuf::from)
            .or_else(|| {
                fs::canonicalize(p)
                    .ok()
                    .and_then(|c| c.file_name().map(PathBuf::from))
            })
            .ok_or_else(|| UploadError::NoName {
                what: FLAG,
                path: p.clone(),
            })?;
        let name = name
            .to_str()
            .ok_or_else(|| UploadError::Invalid {
                what: FLAG,
                path: p.clone(),
                problem: "the name is not UTF-8".into(),
            })?
            .to_owned();
        add(&mut plan, p, &name)?;
    }
    check(plan)
}

/// The node's rules, checked here first so mistakes are named locally.
fn check(plan: UploadPlan) -> Result<UploadPlan, UploadError> {
    joblet_core::upload::check_manifest(&plan.entries, u64::MAX).map_err(|e| {
        UploadError::Invalid {
            what: plan.what,
            path: PathBuf::from(e.field.clone()),
            problem: e.problem,
        }
    })?;
    Ok(plan)
}

/// Paths relative to `base` (`/`-separated, as a workflow's `uploads:`
/// lists them), each named in /work by that relative path, with the
/// directories above it before it. An empty path, `.` or `./` is `base`'s
/// whole contents. Paths inside another one given are sent once; a path
/// that leaves `base` (absolute, or with `..`) is refused.
pub fn scan_under(base: &Path, paths: &[String]) -> Result<UploadPlan, UploadError> {
    let mut plan = UploadPlan::empty(WORKFLOW);
    let mut wanted: Vec<Vec<&str>> = Vec::new();
    for p in paths {
        let parts: Vec<&str> = p
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if p.starts_with('/') || parts.contains(&"..") {
            return Err(UploadError::Invalid {
                what: WORKFLOW,
                path: PathBuf::from(p),
                problem: format!(
                    "expected a path inside {}, the workflow file's directory, like scripts/ or data/train.csv (no leading / and no ..)",
                    base.display()
                ),
            });
        }
        wanted.push(parts);
    }
    // Sorted, a path comes right after the paths it is inside.
    wanted.sort();
    wanted.dedup();
    let mut kept: Vec<Vec<&str>> = Vec::new();
    for w in wanted {
        if !kept.iter().any(|k| w.starts_with(k)) {
            kept.push(w);
        }
    }
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for parts in kept {
        if parts.is_empty() {
            add_children(&mut plan, base, None)?;
            continue;
        }
        for depth in 1..parts.len() {
            let name = parts[..depth].join("/");
            if dirs.insert(name.clone()) {
                let local = base.join(&name);
                let meta = fs::metadata(&local).map_err(|source| UploadError::Read {
                    what: WORKFLOW,
                    path: local.clone(),
                    source,
                })?;
                plan.entries.push(UploadEntry {
                    path: name,
                    kind: UploadKind::Dir,
                    mode: meta.permissions().mode() & 0o777,
                    size: 0,
                    target: String::new(),
                });
            }
        }
        let name = parts.join("/");
        add(&mut plan, &base.join(&name), &name)?;
    }
    check(plan)
}

/// `dir`'s entries in name order, each named `{prefix}/{its name}` (just
/// its name without a prefix).
fn add_children(
    plan: &mut UploadPlan,
    dir: &Path,
    prefix: Option<&str>,
) -> Result<(), UploadError> {
    let what = plan.what;
    let read = |source| UploadError::Read {
        what,
        path: dir.to_owned(),
        source,
    };
    let mut children: Vec<_> = fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    children.sort_by_key(|c| c.file_name());
    for c in children {
        let child_name = c.file_name();
        let child_name = child_name.to_str().ok_or_else(|| UploadError::Invalid {
            what,
            path: c.path(),
            problem: "the name is not UTF-8".into(),
        })?;
        let name = match prefix {
            Some(p) => format!("{p}/{child_name}"),
            None => child_name.to_owned(),
        };
        add(plan, &c.path(), &name)?;
    }
    Ok(())
}

fn add(plan: &mut UploadPlan, local: &Path, name: &str) -> Result<(), UploadError> {
    let what = plan.what;
    let read = |source| UploadError::Read {
        what,
        path: local.to_owned(),
        source,
    };
    let meta = fs::symlink_metadata(local).map_err(read)?;
    let ft = meta.file_type();
    let mode = meta.permissions().mode() & 0o777;
    let entry = |kind, size, target: String| UploadEntry {
        path: name.to_owned(),
        kind,
        mode,
        size,
        target,
    };
    if ft.is_symlink() {
        let target = fs::read_link(local).map_err(read)?;
        let target = target
            .to_str()
            .ok_or_else(|| UploadError::Invalid {
                what,
                path: local.to_owned(),
                problem: "the symlink target is not UTF-8".into(),
            })?
            .to_owned();
        let parts: Vec<&str> = name.split('/').collect();
        if !joblet_core::upload::target_stays_inside(&parts, &target) {
            return Err(UploadError::Invalid {
                what,
                path: local.to_owned(),
                problem: format!("it is a symlink to {target}, outside what is uploaded; upload the target itself"),
            });
        }
        let e = entry(UploadKind::Symlink, 0, target);
        plan.entries.push(e);
    } else if ft.is_dir() {
        plan.entries.push(entry(UploadKind::Dir, 0, String::new()));
        add_children(plan, local, Some(name))?;
    } else if ft.is_file() {
        plan.entries
            .push(entry(UploadKind::File, meta.len(), String::new()));
        plan.files.push((local.to_owned(), meta.len()));
        plan.total += meta.len();
    } else {
        let kind = if ft.is_block_device() || ft.is_char_device() {
            "device file"
        } else if ft.is_socket() {
            "socket"
        } else {
            "named pipe"
        };
        return Err(UploadError::Special {
            what,
            path: local.to_owned(),
            kind,
        });
    }
    Ok(())
}

/// A request stream and the thread that fills it.
pub type Streaming<M> = (
    tokio_stream::wrappers::ReceiverStream<M>,
    std::thread::JoinHandle<Result<(), UploadError>>,
);

/// The SubmitJob request stream: the job, then every file's bytes. Reading
/// happens on its own thread; a progress bar shows on a terminal for large
/// uploads. A read error ends the stream early (the node then refuses the
/// incomplete upload) and is returned by the thread's handle.
pub fn stream(job: pb::RunJobRequest, plan: UploadPlan) -> Streaming<pb::SubmitJobMessage> {
    let first = pb::SubmitJobMessage {
        msg: Some(pb::submit_job_message::Msg::Job(job)),
    };
    stream_messages(first, plan, |data| pb::SubmitJobMessage {
        msg: Some(pb::submit_job_message::Msg::Data(data)),
    })
}

/// The RunWorkflow request stream, as [`stream`]: the request, then every
/// file's bytes.
pub fn stream_workflow(
    request: pb::RunWorkflowRequest,
    plan: UploadPlan,
) -> Streaming<pb::RunWorkflowMessage> {
    let first = pb::RunWorkflowMessage {
        msg: Some(pb::run_workflow_message::Msg::Workflow(request)),
    };
    stream_messages(first, plan, |data| pb::RunWorkflowMessage {
        msg: Some(pb::run_workflow_message::Msg::Data(data)),
    })
}

/// `first`, then the plan's file bytes, each chunk wrapped by `data`.
fn stream_messages<M: Send + 'static>(
    first: M,
    plan: UploadPlan,
    data: fn(pb::UploadData) -> M,
) -> Streaming<M> {
    let (tx, rx) = mpsc::channel(8);
    let handle = std::thread::spawn(move || {
        if tx.blocking_send(first).is_err() {
            return Ok(());
        }
        let bar = (plan.total >= PROGRESS_MIN && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(plan.total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "uploading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, {eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar
        });
        let what = plan.what;
        for (path, size) in &plan.files {
            let read = |source| UploadError::Read {
                what,
                path: path.clone(),
                source,
            };
            let mut file = File::open(path).map_err(read)?;
            let mut sent = 0u64;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = file.read(&mut buf).map_err(read)?;
                if n == 0 {
                    break;
                }
                sent += n as u64;
                if sent > *size {
                    return Err(UploadError::Changed {
                        what,
                        path: path.clone(),
                        expected: *size,
                    });
                }
                let msg = data(pb::UploadData {
                    data: buf[..n].to_vec(),
                });
                if tx.blocking_send(msg).is_err() {
                    return Ok(()); // the node answered (refused) already
                }
                if let Some(b) = &bar {
                    b.inc(n as u64);
                }
            }
            if sent != *size {
                return Err(UploadError::Changed {
                    what,
                    path: path.clone(),
                    expected: *size,
                });
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Ok(())
    });
    (tokio_stream::wrappers::ReceiverStream::new(rx), handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_becomes_an_ordered_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("dataset");
        fs::create_dir_all(d.join("b")).unwrap();
        fs::write(d.join("a.csv"), "12345").unwrap();
        fs::write(d.join("b/c.csv"), "xy").unwrap();
        std::os::unix::fs::symlink("a.csv", d.join("latest")).unwrap();
        fs::write(tmp.path().join("model.py"), "print(1)").unwrap();
        let plan = scan(&[tmp.path().join("model.py"), d.clone()]).unwrap();
        let names: Vec<&str> = plan.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "model.py",
                "dataset",
                "dataset/a.csv",
                "dataset/b",
                "dataset/b/c.csv",
                "dataset/latest"
            ]
        );
        assert_eq!(plan.total, 8 + 5 + 2);
        assert_eq!(plan.files.len(), 3);
    }

    #[test]
    fn escaping_symlinks_and_devices_are_refused_locally() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("d");
        fs::create_dir(&d).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", d.join("shadow")).unwrap();
        let e = scan(std::slice::from_ref(&d)).unwrap_err().to_string();
        assert!(
            e.contains("symlink to /etc/shadow") && e.contains("outside"),
            "{e}"
        );

        let e2 = tmp.path().join("e");
        fs::create_dir(&e2).unwrap();
        std::os::unix::fs::symlink("../../x", e2.join("up")).unwrap();
        assert!(scan(&[e2]).unwrap_err().to_string().contains("outside"));

        let e = scan(&[PathBuf::from("/dev/null")]).unwrap_err().to_string();
        assert!(e.contains("device file"), "{e}");
        let e = scan(&[tmp.path().join("missing")]).unwrap_err().to_string();
        assert!(e.contains("missing") && e.contains("No such file"), "{e}");
    }
}
