//! Finished jobs' host work directories (`<state_dir>/jobs/<id>/work`:
//! their uploads, and what they wrote to `/work` on a node whose
//! `filesystem.work_size_mb` is 0) are removed `jobs.work_retention` after
//! the job ended; the job's log, exit record and store record stay until
//! `rnx job delete`. A restarted daemon finds when each job ended from its
//! exit record.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use joblet_core::JobId;
use joblet_shim::JobDir;

use crate::state_dir::StateDir;

/// Work directories waiting for their removal.
#[derive(Debug, Default)]
pub(crate) struct WorkRetention {
    keep: Option<Duration>,
    due: BinaryHeap<Reverse<(Instant, JobId)>>,
}

impl WorkRetention {
    /// `keep`: how long after its end a job's work directory stays (`None`:
    /// until the job is deleted).
    pub(crate) fn new(keep: Option<Duration>) -> WorkRetention {
        WorkRetention {
            keep: keep.filter(|d| !d.is_zero()),
            due: BinaryHeap::new(),
        }
    }

    /// Job `id` ended at `at`.
    pub(crate) fn ended(&mut self, id: &JobId, at: Instant) {
        if let Some(keep) = self.keep {
            self.due.push(Reverse((at + keep, id.clone())));
        }
    }

    /// When the next removal is due.
    pub(crate) fn next_due(&self) -> Option<tokio::time::Instant> {
        self.due
            .peek()
            .map(|Reverse((at, _))| tokio::time::Instant::from_std(*at))
    }

    /// Removes the work directories due by `now`.
    pub(crate) fn sweep(&mut self, dirs: &StateDir, now: Instant) {
        while let Some(Reverse((at, _))) = self.due.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, id))) = self.due.pop() else {
                break;
            };
            remove_work(&JobDir::new(dirs.job(&id)));
        }
    }

    /// After a restart: the jobs under `jobs_dir` that ended (they have an
    /// exit record) get their removal scheduled from when they ended; those
    /// past the retention lose their work directory now.
    pub(crate) fn recover(&mut self, jobs_dir: &Path, now: Instant) {
        let Some(keep) = self.keep else { return };
        let Ok(entries) = std::fs::read_dir(jobs_dir) else {
            return;
        };
        let wall_now = SystemTime::now();
        for entry in entries.flatten() {
            let Ok(id) = JobId::parse(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            let dir = JobDir::new(entry.path());
            if !dir.work_path().exists() {
                continue;
            }
            let Ok(ended) = std::fs::metadata(dir.exit_path()).and_then(|m| m.modified()) else {
                continue;
            };
            let age = wall_now.duration_since(ended).unwrap_or_default();
            match keep.checked_sub(age) {
                Some(left) if !left.is_zero() => self.due.push(Reverse((now + left, id))),
                _ => remove_work(&dir),
            }
        }
    }
}

fn remove_work(dir: &JobDir) {
    let work = dir.work_path();
    match std::fs::remove_dir_all(&work) {
        Ok(()) => {
            tracing::debug!(dir = %work.display(), "finished job's work directory removed (jobs.work_retention)")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %work.display(), error = %e, "cannot remove a finished job's work directory")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> JobId {
        JobId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02}")).unwrap()
    }

    #[test]
    fn work_dirs_go_after_the_retention_and_logs_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = StateDir::new(tmp.path());
        let job = JobDir::new(dirs.job(&id(1)));
        std::fs::create_dir_all(job.work_path()).unwrap();
        std::fs::write(job.work_path().join("upload.bin"), b"x").unwrap();
        std::fs::write(job.output_log_path(), b"log").unwrap();
        let mut r = WorkRetention::new(Some(Duration::from_secs(60)));
        let t0 = Instant::now();
        r.ended(&id(1), t0);
        r.sweep(&dirs, t0 + Duration::from_secs(59));
        assert!(job.work_path().exists(), "kept within the retention");
        r.sweep(&dirs, t0 + Duration::from_secs(60));
        assert!(!job.work_path().exists());
        assert!(job.output_log_path().exists(), "the log stays");
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn a_restart_removes_what_is_past_due_and_schedules_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = StateDir::new(tmp.path());
        let job = JobDir::new(dirs.job(&id(2)));
        std::fs::create_dir_all(job.work_path()).unwrap();
        std::fs::write(job.exit_path(), b"{}").unwrap();
        let mut r = WorkRetention::new(Some(Duration::from_secs(3600)));
        r.recover(&dirs.jobs(), Instant::now());
        assert!(job.work_path().exists(), "ended just now");
        assert!(r.next_due().is_some());
        let mut now_due = WorkRetention::new(Some(Duration::from_nanos(1)));
        std::thread::sleep(Duration::from_millis(5));
        now_due.recover(&dirs.jobs(), Instant::now());
        assert!(!job.work_path().exists(), "past the retention");
        // No retention: nothing is ever removed.
        let mut keep = WorkRetention::new(None);
        keep.ended(&id(2), Instant::now());
        assert_eq!(keep.next_due(), None);
    }
}
