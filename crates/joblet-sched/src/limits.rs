//! Admission limits: per-owner and per-queue GPU quotas (units held at
//! once) and the per-owner allocation token bucket (seed 000). Both are
//! about GPUs: a CPU-only job (`gpu_count` 0) counts nothing against a
//! quota and takes no token, so neither ever holds it back (its CPU,
//! memory and job slot are limited by the nodes' capacity instead).
//!
//! - A quota counts the units (whole GPUs and MIG slices) a running job
//!   holds, from its `Start` until its `Exited` (a preempted job still holds
//!   its units while it stops). A job larger than its owner's or queue's
//!   quota can never run and is rejected with [`Unplaceable::OverQuota`] /
//!   [`Unplaceable::OverQueueQuota`]; otherwise it waits until it fits.
//! - The token bucket holds up to `burst` tokens and refills at
//!   `per_second` continuously, computed from the `now` of each event (no
//!   clock). Every start of a job with GPUs takes one token. An owner with
//!   no token has its jobs with GPUs skipped; other owners' jobs go on. A
//!   restart begins with full buckets.
//! - Over-quota and token-less jobs never block the queue, even under
//!   strict FIFO: only a job that is allowed to start but does not fit is a
//!   blocking head.

use rustc_hash::FxHashMap as HashMap;

use joblet_core::UnixMillis;

use crate::model::{JobRequest, RateLimit, SchedConfig, Unplaceable};

/// One owner's token bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    /// When `tokens` was last brought up to date.
    pub at: UnixMillis,
}

impl Bucket {
    /// A full bucket.
    pub fn full(rate: &RateLimit, now: UnixMillis) -> Bucket {
        Bucket {
            tokens: f64::from(rate.burst),
            at: now,
        }
    }

    /// Tokens at `now` (time going backwards refills nothing).
    pub fn tokens_at(&self, rate: &RateLimit, now: UnixMillis) -> f64 {
        let elapsed_ms = now.saturating_sub(self.at).max(0) as f64;
        (self.tokens + rate.per_second * elapsed_ms / 1000.0).min(f64::from(rate.burst))
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, rate: &RateLimit, now: UnixMillis) -> bool {
        let tokens = self.tokens_at(rate, now);
        self.at = self.at.max(now);
        if tokens >= 1.0 {
            self.tokens = tokens - 1.0;
            true
        } else {
            self.tokens = tokens;
            false
        }
    }
}

/// Quotas, what each owner and queue holds now, and the owners' buckets.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    owner_quota: HashMap<String, u32>,
    queue_quota: HashMap<String, u32>,
    owner_used: HashMap<String, u32>,
    queue_used: HashMap<String, u32>,
    rate: Option<RateLimit>,
    buckets: HashMap<String, Bucket>,
}

impl Limits {
    pub fn new(config: &SchedConfig) -> Limits {
        Limits {
            owner_quota: config
                .owner_quotas
                .iter()
                .map(|(o, q)| (o.clone(), q.max_gpus))
                .collect(),
            queue_quota: config
                .queue_quotas
                .iter()
                .map(|(o, q)| (o.clone(), q.max_gpus))
                .collect(),
            rate: config.owner_rate,
            ..Limits::default()
        }
    }

    /// Why the request could never run under the quotas (it is larger
    /// than its owner's or its queue's quota).
    pub fn never_fits(&self, req: &JobRequest) -> Option<Unplaceable> {
        if let Some(&quota) = self.owner_quota.get(&req.owner) {
            if req.gpu_count > quota {
                return Some(Unplaceable::OverQuota {
                    asked: req.gpu_count,
                    quota,
                });
            }
        }
        if let Some(&quota) = self.queue_quota.get(&req.queue) {
            if req.gpu_count > quota {
                return Some(Unplaceable::OverQueueQuota {
                    queue: req.queue.clone(),
                    asked: req.gpu_count,
                    quota,
                });
            }
        }
        None
    }

    /// Whether the job may start now: its units fit under both quotas and
    /// its owner has a token (always, for a CPU-only job).
    pub fn may_start(&self, req: &JobRequest, now: UnixMillis) -> bool {
        req.gpu_count == 0 || (self.within_quota(req) && self.has_token(&req.owner, now))
    }

    fn within_quota(&self, req: &JobRequest) -> bool {
        let fits = |quotas: &HashMap<String, u32>, used: &HashMap<String, u32>, name: &str| {
            quotas.get(name).is_none_or(|&q| {
                used.get(name)
                    .copied()
                    .unwrap_or(0)
                    .saturating_add(req.gpu_count)
                    <= q
            })
        };
        (self.owner_quota.is_empty() || fits(&self.owner_quota, &self.owner_used, &req.owner))
            && (self.queue_quota.is_empty()
                || fits(&self.queue_quota, &self.queue_used, &req.queue))
    }

    fn has_token(&self, owner: &str, now: UnixMillis) -> bool {
        let Some(rate) = &self.rate else {
            return true;
        };
        self.buckets
            .get(owner)
            .is_none_or(|b| b.tokens_at(rate, now) >= 1.0)
    }

    /// Records a start: the units are held, a token is taken (nothing for
    /// a CPU-only job).
    pub fn on_start(&mut self, req: &JobRequest, now: UnixMillis) {
        if req.gpu_count == 0 {
            return;
        }
        self.hold(req);
        if let Some(rate) = &self.rate {
            self.buckets
                .entry(req.owner.clone())
                .or_insert_with(|| Bucket::full(rate, now))
                .take(rate, now);
        }
    }

    /// Records units held without taking a token (restore).
    pub fn hold(&mut self, req: &JobRequest) {
        if req.gpu_count == 0 {
            return;
        }
        add_used(&mut self.owner_used, &req.owner, req.gpu_count);
        add_used(&mut self.queue_used, &req.queue, req.gpu_count);
    }

    /// Records that a job's units were given back.
    pub fn release(&mut self, req: &JobRequest) {
        if req.gpu_count == 0 {
            return;
        }
        for (used, name) in [
            (&mut self.owner_used, &req.owner),
            (&mut self.queue_used, &req.queue),
        ] {
            if let Some(n) = used.get_mut(name) {
                *n = n.saturating_sub(req.gpu_count);
                if *n == 0 {
                    used.remove(name);
                }
            }
        }
    }

    /// Units an owner holds now.
    pub fn owner_used(&self, owner: &str) -> u32 {
        self.owner_used.get(owner).copied().unwrap_or(0)
    }

    /// Units a queue holds now.
    pub fn queue_used(&self, queue: &str) -> u32 {
        self.queue_used.get(queue).copied().unwrap_or(0)
    }
}

/// Adds `n` units to `name`'s count (the key is copied only when new).
fn add_used(used: &mut HashMap<String, u32>, name: &str, n: u32) {
    match used.get_mut(name) {
        Some(held) => *held += n,
        None => {
            used.insert(name.to_string(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_refills_continuously_up_to_burst() {
        let rate = RateLimit {
            per_second: 2.0,
            burst: 3,
        };
        let mut b = Bucket::full(&rate, 0);
        assert!(b.take(&rate, 0) && b.take(&rate, 0) && b.take(&rate, 0));
        assert!(!b.take(&rate, 0));
        assert!(!b.take(&rate, 490));
        assert!(b.take(&rate, 510));
        assert!((b.tokens_at(&rate, 100_000) - 3.0).abs() < 1e-9);
    }
}
