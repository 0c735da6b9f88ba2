//! `--upload`: turning local files and directories into an upload manifest
//! and streaming their contents to the node.
//!
//! Directories are walked in name order, each entry named by its path
//! under the uploaded argument's own name (`--upload=dataset/` gives
//! `dataset/…` in the job's /work). Symlinks are sent as symlinks and must
//! point inside what is uploaded; device files, sockets and pipes are
//! refused before anything is sent. The node checks the same again.

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

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("--upload {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--upload {path}: cannot name it in the job's /work; give a file or directory with a name, like dataset/")]
    NoName { path: PathBuf },
    #[error("--upload {path}: it is a {kind}; only files, directories and symlinks inside the upload can be uploaded")]
    Special { path: PathBuf, kind: &'static str },
    #[error("--upload {path}: {problem}")]
    Invalid { path: PathBuf, problem: String },
    #[error("--upload {path}: the file changed size while it was being uploaded ({expected} bytes announced)")]
    Changed { path: PathBuf, expected: u64 },
}

/// What to send: the manifest and, for each FILE entry in order, its local path.
#[derive(Debug, Default)]
pub struct UploadPlan {
    pub entries: Vec<UploadEntry>,
    pub files: Vec<(PathBuf, u64)>,
    pub total: u64,
}

pub fn scan(paths: &[PathBuf]) -> Result<UploadPlan, UploadError> {
    let mut plan = UploadPlan::default();
    for p in paths {
        let name = p
            .file_name()
            .map(PathBuf::from)
            .or_else(|| {
                fs::canonicalize(p)
                    .ok()
                    .and_then(|c| c.file_name().map(PathBuf::from))
            })
            .ok_or_else(|| UploadError::NoName { path: p.clone() })?;
        let name = name
            .to_str()
            .ok_or_else(|| UploadError::Invalid {
                path: p.clone(),
                problem: "the name is not UTF-8".into(),
            })?
            .to_owned();
        add(&mut plan, p, &name)?;
    }
    // The node's rules, checked here first so mistakes are named locally.
    joblet_core::upload::check_manifest(&plan.entries, u64::MAX).map_err(|e| {
        UploadError::Invalid {
            path: PathBuf::from(e.field.clone()),
            problem: e.problem,
        }
    })?;
    Ok(plan)
}

fn add(plan: &mut UploadPlan, local: &Path, name: &str) -> Result<(), UploadError> {
    let read = |source| UploadError::Read {
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
                path: local.to_owned(),
                problem: "the symlink target is not UTF-8".into(),
            })?
            .to_owned();
        let parts: Vec<&str> = name.split('/').collect();
        if !joblet_core::upload::target_stays_inside(&parts, &target) {
            return Err(UploadError::Invalid {
                path: local.to_owned(),
                problem: format!("it is a symlink to {target}, outside what is uploaded; upload the target itself"),
            });
        }
        let e = entry(UploadKind::Symlink, 0, target);
        plan.entries.push(e);
    } else if ft.is_dir() {
        plan.entries.push(entry(UploadKind::Dir, 0, String::new()));
        let mut children: Vec<_> = fs::read_dir(local)
            .map_err(read)?
            .collect::<Result<_, _>>()
            .map_err(read)?;
        children.sort_by_key(|c| c.file_name());
        for c in children {
            let child_name = c.file_name();
            let child_name = child_name.to_str().ok_or_else(|| UploadError::Invalid {
                path: c.path(),
                problem: "the name is not UTF-8".into(),
            })?;
            add(plan, &c.path(), &format!("{name}/{child_name}"))?;
        }
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
            path: local.to_owned(),
            kind,
        });
    }
    Ok(())
}

/// The SubmitJob request stream: the job, then every file's bytes. Reading
/// happens on its own thread; a progress bar shows on a terminal for large
/// uploads. A read error ends the stream early (the node then refuses the
/// incomplete upload) and is returned by the thread's handle.
pub fn stream(
    job: pb::RunJobRequest,
    plan: UploadPlan,
) -> (
    tokio_stream::wrappers::ReceiverStream<pb::SubmitJobMessage>,
    std::thread::JoinHandle<Result<(), UploadError>>,
) {
    let (tx, rx) = mpsc::channel(8);
    let handle = std::thread::spawn(move || {
        let first = pb::SubmitJobMessage {
            msg: Some(pb::submit_job_message::Msg::Job(job)),
        };
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
        for (path, size) in &plan.files {
            let read = |source| UploadError::Read {
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
                        path: path.clone(),
                        expected: *size,
                    });
                }
                let msg = pb::SubmitJobMessage {
                    msg: Some(pb::submit_job_message::Msg::Data(pb::UploadData {
                        data: buf[..n].to_vec(),
                    })),
                };
                if tx.blocking_send(msg).is_err() {
                    return Ok(()); // the node answered (refused) already
                }
                if let Some(b) = &bar {
                    b.inc(n as u64);
                }
            }
            if sent != *size {
                return Err(UploadError::Changed {
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
