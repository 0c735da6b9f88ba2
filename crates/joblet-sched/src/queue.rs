//! The waiting jobs in decision order, kept as an incremental index.
//!
//! Order: a job's *class* is `level − priority` (lower goes first; `level`
//! is its LAS queue, always 0 under FIFO and backfill), then the time it
//! was (re)queued, then arrival order. With aging (`aging_ms` = A > 0) the
//! key is `enqueued + class·A`: a job that has waited A ms longer counts as
//! one priority level higher (or one LAS queue higher), so every waiting
//! job eventually comes first and nothing starves. Because every waiting
//! job ages at the same rate, this key does not change while a job waits:
//! the order is a `BTreeMap` updated only on enqueue and dequeue, with no
//! per-event re-sorting. With A = 0 the order is lexicographic (class,
//! enqueue time, arrival), i.e. strict priority and FIFO within one.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Bound;

use joblet_core::UnixMillis;

use crate::model::{JobKey, JobRequest};

/// A waiting job's place in the order (smaller first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QKey {
    primary: i128,
    enqueued: UnixMillis,
    seq: u64,
}

impl QKey {
    /// The key of a job with this priority, LAS level and enqueue time.
    pub fn new(priority: i32, level: u32, enqueued: UnixMillis, seq: u64, aging_ms: u64) -> QKey {
        let class = i128::from(level) - i128::from(priority);
        let primary = if aging_ms == 0 {
            class
        } else {
            i128::from(enqueued) + class * i128::from(aging_ms)
        };
        QKey {
            primary,
            enqueued,
            seq,
        }
    }
}

/// A job that waits, with what the scheduler remembers about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub req: JobRequest,
    /// First submission (kept across preemptions).
    pub submitted: UnixMillis,
    /// When it (re)entered the queue.
    pub enqueued: UnixMillis,
    /// Units × ms of service received in earlier runs (LAS).
    pub attained_gpu_ms: u64,
    /// LAS queue (0 = least attained service); 0 for other policies.
    pub level: u32,
    /// [`shape_of`] its request.
    pub shape: u64,
    /// Placement failed at this capacity epoch: no retry until capacity
    /// is freed (starts only take capacity away).
    pub failed_epoch: Option<u64>,
    /// Backfill refused it at this (capacity epoch, reservation version).
    pub refused_at: Option<(u64, u64)>,
    /// Preempted jobs that are stopping to make room for this one.
    pub awaiting_victims: u32,
    /// No new preemption search for this job before this time.
    pub preempt_retry_at: UnixMillis,
}

/// A hash of what placement looks at in a request besides its gang size
/// (sharing, memory, MIG profile, compute capability, class, NUMA and
/// node spanning): requests with equal shapes fit monotonically in size.
/// (A hash collision could only make a job wait for the next release.)
pub fn shape_of(req: &JobRequest) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (
        req.sharing,
        req.gpu_memory_mb,
        &req.mig_profile,
        req.min_compute_capability,
        req.class,
        req.allow_cross_numa,
        req.allow_cross_node,
    )
        .hash(&mut h);
    h.finish()
}

/// The waiting jobs, ordered, with an index by job key and a count of
/// gang sizes (for the fragmentation metric).
#[derive(Debug, Clone, Default)]
pub struct WaitQueue {
    order: BTreeMap<QKey, Waiting>,
    index: HashMap<JobKey, QKey>,
    gangs: BTreeMap<u32, usize>,
    next_seq: u64,
}

impl WaitQueue {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn contains(&self, job: &str) -> bool {
        self.index.contains_key(job)
    }

    /// Adds a job; returns its key, or `None` if the job key already waits.
    pub fn push(&mut self, w: Waiting, aging_ms: u64) -> Option<QKey> {
        if self.index.contains_key(&w.req.job) {
            return None;
        }
        let key = QKey::new(w.req.priority, w.level, w.enqueued, self.next_seq, aging_ms);
        self.next_seq += 1;
        *self.gangs.entry(w.req.gpu_count).or_insert(0) += 1;
        self.index.insert(w.req.job.clone(), key);
        self.order.insert(key, w);
        Some(key)
    }

    /// Removes a job by key.
    pub fn take(&mut self, key: QKey) -> Option<Waiting> {
        let w = self.order.remove(&key)?;
        self.index.remove(&w.req.job);
        if let Some(n) = self.gangs.get_mut(&w.req.gpu_count) {
            *n -= 1;
            if *n == 0 {
                self.gangs.remove(&w.req.gpu_count);
            }
        }
        Some(w)
    }

    /// Removes a job by job key.
    pub fn remove(&mut self, job: &str) -> Option<Waiting> {
        let key = *self.index.get(job)?;
        self.take(key)
    }

    pub fn key_of(&self, job: &str) -> Option<QKey> {
        self.index.get(job).copied()
    }

    pub fn get(&self, key: QKey) -> Option<&Waiting> {
        self.order.get(&key)
    }

    pub fn get_mut(&mut self, key: QKey) -> Option<&mut Waiting> {
        self.order.get_mut(&key)
    }

    /// The first key after `after` (the head when `None`).
    pub fn next_after(&self, after: Option<QKey>) -> Option<QKey> {
        match after {
            None => self.order.keys().next().copied(),
            Some(k) => self
                .order
                .range((Bound::Excluded(k), Bound::Unbounded))
                .next()
                .map(|(k, _)| *k),
        }
    }

    /// Appends to `out` the (up to) `n` keys after `after` (from the head
    /// when `None`), each with what `no_fit` and `searchable` say of the
    /// job: one ordered sweep instead of a lookup per job.
    pub fn sweep(
        &self,
        after: Option<QKey>,
        n: usize,
        out: &mut Vec<(QKey, bool, bool)>,
        no_fit: impl Fn(&Waiting) -> bool,
        searchable: impl Fn(&Waiting) -> bool,
    ) {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        out.extend(
            self.order
                .range((start, Bound::Unbounded))
                .take(n)
                .map(|(k, w)| (*k, no_fit(w), searchable(w))),
        );
    }

    /// The waiting jobs in decision order.
    pub fn iter(&self) -> impl Iterator<Item = &Waiting> {
        self.order.values()
    }

    /// The smallest gang (GPU count > 0) that waits.
    pub fn smallest_gang(&self) -> Option<u32> {
        self.gangs.range(1..).next().map(|(g, _)| *g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_fifo_without_aging() {
        let a = QKey::new(0, 0, 100, 0, 0);
        let b = QKey::new(0, 0, 200, 1, 0);
        let c = QKey::new(5, 0, 300, 2, 0);
        assert!(c < a && a < b);
    }

    #[test]
    fn aging_one_level_per_period() {
        // A priority-0 job that waited 2 periods longer passes a priority-1 job.
        let old = QKey::new(0, 0, 0, 0, 1000);
        let newer = QKey::new(1, 0, 1500, 1, 1000);
        let newest = QKey::new(1, 0, 500, 2, 1000);
        assert!(old < newer);
        assert!(newest < old);
    }
}
