//! The pool of warm sandboxes (`sandbox.warm_pool`): shims started ahead
//! of their jobs, each for a job id chosen in advance, that have built the
//! sandbox as far as it goes without the job (namespaces, the read-only
//! tree, the cgroup with the node's defaults and a CPU job's device filter,
//! pid 1 waiting; see `joblet_sandbox::runner`).
//!
//! A submitted job takes an idle warm shim's id ([`WarmPool::reserve`]), so
//! its job directory and cgroup are the ones already built, and hands the
//! shim its spec when it starts ([`WarmPool::claim`]). A job that ends
//! without starting gives its shim back to be discarded
//! ([`WarmPool::forget`]). Discarding is closing the shim's stdin: the shim
//! tears its sandbox down and removes its files itself, which also covers
//! a daemon that dies — every warm shim of a dead daemon goes away.
//!
//! The pool only holds handles; launching a shim (a fork and exec) runs on
//! the blocking pool, not on the engine's loop, and the result comes back
//! through [`super::Msg::Warm`].

use std::collections::{HashMap, VecDeque};

use joblet_core::JobId;
use joblet_shim::{JobDir, ShimError, ShimHandle, WarmShim, WarmSpec};

use super::{Engine, Msg};

/// The warm shims of one daemon.
pub(crate) struct WarmPool {
    /// How many idle warm shims to keep.
    target: usize,
    /// Ready and not yet given to a job.
    idle: VecDeque<(JobId, WarmShim)>,
    /// Given to a job that has not started yet.
    reserved: HashMap<JobId, WarmShim>,
    /// Launches under way.
    launching: usize,
}

impl WarmPool {
    pub(crate) fn new(target: usize) -> Self {
        WarmPool {
            target,
            idle: VecDeque::new(),
            reserved: HashMap::new(),
            launching: 0,
        }
    }

    /// The id for a new job: an idle warm shim's, reserved for it, when
    /// there is one (`true`), else `None`. Jobs that wait in the queue
    /// hold at most `target` warm shims between them, so a long queue does
    /// not pin a sandbox per job.
    pub(crate) fn reserve(&mut self) -> Option<JobId> {
        if self.reserved.len() >= self.target {
            return None;
        }
        let (id, shim) = self.idle.pop_front()?;
        self.reserved.insert(id.clone(), shim);
        Some(id)
    }

    /// The warm shim reserved for job `id`, to start it in.
    pub(crate) fn claim(&mut self, id: &JobId) -> Option<WarmShim> {
        self.reserved.remove(id)
    }

    /// Job `id` ended without starting, or its submission failed: its warm
    /// shim, if it had one, is discarded. Returns the shim's handle, to
    /// reap it.
    pub(crate) fn forget(&mut self, id: &JobId) -> Option<ShimHandle> {
        self.reserved.remove(id).map(WarmShim::discard)
    }

    /// Whether an idle warm shim (or one being launched) is there for the
    /// next job.
    pub(crate) fn has_idle(&self) -> bool {
        !self.idle.is_empty() || self.launching > 0
    }

    /// How many launches to begin now to get back to `target` idle shims.
    pub(crate) fn wanted(&self) -> usize {
        self.target.saturating_sub(self.idle.len() + self.launching)
    }

    /// Records that a launch began.
    pub(crate) fn launching(&mut self) {
        self.launching += 1;
    }

    /// A launch ended: with a shim, it joins the idle ones (or is returned
    /// for discarding when the pool is already full).
    pub(crate) fn landed(&mut self, shim: Option<(JobId, WarmShim)>) -> Option<ShimHandle> {
        self.launching = self.launching.saturating_sub(1);
        let (id, shim) = shim?;
        if self.idle.len() >= self.target {
            return Some(shim.discard());
        }
        self.idle.push_back((id, shim));
        None
    }

    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.len()
    }
}

impl Engine {
    /// Undoes a submission that failed before the job was recorded: its
    /// uploads go, and its warm shim (if it had one) is discarded, which
    /// removes the shim's own files and then the directory.
    pub(super) fn abandon_submit(&mut self, id: &JobId) {
        let dir = self.dirs.job(id);
        match self.warm.forget(id) {
            Some(shim) => {
                let _ = std::fs::remove_dir_all(JobDir::new(dir).work_path());
                reap(shim);
            }
            None => {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    /// Starts launches of warm shims until the pool has (or will have) its
    /// target; each runs on the blocking pool and reports back through
    /// [`Msg::Warm`].
    pub(super) fn refill_warm(&mut self) {
        let Some(sb) = &self.cfg.sandbox else {
            return;
        };
        for _ in 0..self.warm.wanted() {
            let Ok(id) = JobId::parse(&uuid::Uuid::new_v4().to_string()) else {
                return;
            };
            let dir = self.dirs.job(&id);
            let gpu_part = match &self.gpu {
                Some(g) => crate::gpu::setup::cpu_job(&g.settings),
                None => Default::default(),
            };
            let job_dir = JobDir::new(dir.clone());
            let settings = sb.warm(&id, &job_dir.work_path(), gpu_part);
            let runner = match serde_json::to_value(&settings) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(error = %e, "cannot encode a warm sandbox's settings; no warm sandboxes");
                    return;
                }
            };
            let warm = WarmSpec {
                job_id: id.to_string(),
                runner: Some(runner),
            };
            let program = self.cfg.shim_program.clone();
            let mut args = self.cfg.shim_args.clone();
            args.push(dir.clone().into_os_string());
            let tx = self.tx.clone();
            self.warm.launching();
            tokio::task::spawn_blocking(move || {
                // Made now, off the job's path (creating a directory can take
                // a while on a busy ext4); an empty one goes with the shim.
                if let Err(e) = std::fs::create_dir_all(job_dir.work_path()) {
                    tracing::warn!(dir = %job_dir.work_path().display(), error = %e, "cannot make a warm shim's work directory; its job will");
                }
                let landed = match joblet_shim::launch_warm(&program, &args, &job_dir, &warm) {
                    Ok(shim) => Some((id, shim)),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot launch a warm shim");
                        None
                    }
                };
                if let Err(e) = tx.blocking_send(Msg::Warm(landed)) {
                    // The engine is gone: dropping the shim discards it.
                    drop(e);
                }
            });
        }
    }
}

/// Reaps a discarded warm shim once it has torn its sandbox down.
pub(super) fn reap(shim: ShimHandle) {
    tokio::spawn(async move {
        let pid = shim.pid();
        // A discarded shim leaves no exit record: "lost" is its normal end.
        if let Err(e @ ShimError::Wait { .. }) = shim.wait().await {
            tracing::warn!(pid, error = %e, "cannot reap a discarded warm shim");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_pool_wants_its_target_and_reserves_nothing() {
        let mut pool = WarmPool::new(2);
        assert_eq!(pool.wanted(), 2);
        pool.launching();
        assert_eq!(pool.wanted(), 1);
        assert_eq!(pool.reserve(), None);
        assert!(pool.landed(None).is_none());
        assert_eq!(pool.wanted(), 2);
        assert_eq!(pool.idle(), 0);
    }

    #[test]
    fn a_pool_of_zero_never_launches() {
        let mut pool = WarmPool::new(0);
        assert_eq!(pool.wanted(), 0);
        assert_eq!(pool.reserve(), None);
    }
}
