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
//!
//! Beside the order the queue keeps, for the decision passes, the keys of
//! each group of jobs placement answers alike up to their gang size
//! (request shape, exclusive, gang size), so a pass can skip whole groups
//! that cannot start, and the key at one position (the end of a pass's
//! window), kept exact on every enqueue and dequeue.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Bound;

use joblet_core::UnixMillis;

use crate::model::{JobKey, JobRequest, Sharing};

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
    /// Its time in the order: when it (re)entered the queue (under
    /// Gittins, its first submission, kept across preemptions).
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
    /// Times it was preempted (or lost its node): its next run restores.
    pub preemptions: u32,
}

/// A hash of what placement looks at in a request besides its gang size
/// (sharing, memory, MIG profile, compute capability, class, NUMA and
/// node spanning, CPU and host memory): requests with equal shapes fit
/// monotonically in size.
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
    // Most requests ask for no CPU or memory: they hash as few words.
    if req.cpu_millis != 0 || req.host_memory_mb != 0 {
        (req.cpu_millis, req.host_memory_mb).hash(&mut h);
    }
    if req.gpu_milli != 0 {
        req.gpu_milli.hash(&mut h);
    }
    h.finish()
}

/// What a decision pass reads of a waiting job, copied out by one ordered
/// sweep so that the pass does not look the job up again to learn that
/// it cannot start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    pub key: QKey,
    pub gpu_count: u32,
    pub exclusive: bool,
    pub shape: u64,
    pub failed_epoch: Option<u64>,
    pub awaiting_victims: u32,
    pub preempt_retry_at: UnixMillis,
}

impl Peek {
    fn of(key: QKey, w: &Waiting) -> Peek {
        Peek {
            key,
            gpu_count: w.req.gpu_count,
            exclusive: w.req.sharing == Sharing::Exclusive,
            shape: w.shape,
            failed_epoch: w.failed_epoch,
            awaiting_victims: w.awaiting_victims,
            preempt_retry_at: w.preempt_retry_at,
        }
    }
}

/// Waiting jobs that placement answers alike, up to their gang size:
/// (request shape, exclusive, gang size).
pub type Group = (u64, bool, u32);

fn group_of(w: &Waiting) -> Group {
    (
        w.shape,
        w.req.sharing == Sharing::Exclusive,
        w.req.gpu_count,
    )
}

/// Up to this many groups, [`WaitQueue::next_candidate`] merges the
/// groups' ordered keys; beyond, it walks the queue.
const MERGE_GROUPS: usize = 16;

/// Where a walk over a window of the queue stands
/// ([`WaitQueue::candidates`], [`WaitQueue::next_candidate`]).
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    /// The last key returned (or the key the walk starts after).
    cursor: Option<QKey>,
    /// The window's last key (`None`: no bound).
    end: Option<QKey>,
    /// Each group with its next key after `cursor` (as of its last look).
    heads: Vec<(Group, Option<QKey>)>,
    /// Too many groups to merge: walk the queue.
    walk: bool,
}

impl Candidates {
    fn done(&self) -> bool {
        matches!((self.cursor, self.end), (Some(c), Some(e)) if c >= e)
    }

    /// The range after the cursor up to the end (not [`Self::done`]).
    fn bounds(&self) -> (Bound<QKey>, Bound<QKey>) {
        (
            self.cursor.map_or(Bound::Unbounded, Bound::Excluded),
            self.end.map_or(Bound::Unbounded, Bound::Included),
        )
    }
}

/// The waiting jobs, ordered, with an index by job key, a count of gang
/// sizes (for the fragmentation metric), the keys of each [`Group`] in
/// order (so a pass can skip whole groups that cannot start), and the
/// key at one position remembered (the end of a pass's window).
#[derive(Debug, Clone, Default)]
pub struct WaitQueue {
    order: BTreeMap<QKey, Waiting>,
    index: HashMap<JobKey, QKey>,
    gangs: BTreeMap<u32, usize>,
    groups: BTreeMap<Group, BTreeSet<QKey>>,
    /// (n, the key at position n), kept exact by `push` and `take`.
    nth: Cell<Option<(usize, QKey)>>,
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
        self.groups.entry(group_of(&w)).or_default().insert(key);
        self.index.insert(w.req.job.clone(), key);
        self.order.insert(key, w);
        if let Some((n, at)) = self.nth.get() {
            if key < at {
                // The key before `at` (maybe `key`) moves to position n.
                let before = self.order.range(..at).next_back().map(|(k, _)| *k);
                self.nth.set(before.map(|k| (n, k)));
            }
        }
        Some(key)
    }

    /// Removes a job by key.
    pub fn take(&mut self, key: QKey) -> Option<Waiting> {
        let w = self.order.remove(&key)?;
        self.index.remove(&w.req.job);
        let g = group_of(&w);
        if let Some(keys) = self.groups.get_mut(&g) {
            keys.remove(&key);
            if keys.is_empty() {
                self.groups.remove(&g);
            }
        }
        if let Some((n, at)) = self.nth.get() {
            if key <= at {
                // The key after `at` moves to position n (none: too few).
                let after = self
                    .order
                    .range((Bound::Excluded(at), Bound::Unbounded))
                    .next()
                    .map(|(k, _)| *k);
                self.nth.set(after.map(|k| (n, k)));
            }
        }
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

    /// The job's bookkeeping, to update; its request (and `shape`,
    /// `level`, `enqueued`) must not change: the order and the group
    /// index are keyed by them.
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

    /// The key at position `n` in decision order (0: the head), `None`
    /// when no more than `n` jobs wait. Remembered for one `n` at a time
    /// and kept up to date by `push` and `take`, so asking again for the
    /// same `n` costs nothing.
    pub fn nth_key(&self, n: usize) -> Option<QKey> {
        if self.order.len() <= n {
            return None;
        }
        if let Some((m, at)) = self.nth.get() {
            if m == n {
                return Some(at);
            }
        }
        let at = *self.order.keys().nth(n)?;
        self.nth.set(Some((n, at)));
        Some(at)
    }

    /// Appends to `out` the (up to) `n` jobs after `after` (from the head
    /// when `None`) and up to `end` (inclusive; `None`: no bound), in
    /// order: one ordered sweep instead of a lookup per job.
    pub fn peek(&self, after: Option<QKey>, n: usize, end: Option<QKey>, out: &mut Vec<Peek>) {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let stop = end.map_or(Bound::Unbounded, Bound::Included);
        if matches!((after, end), (Some(a), Some(e)) if a >= e) {
            return;
        }
        out.extend(
            self.order
                .range((start, stop))
                .take(n)
                .map(|(k, w)| Peek::of(*k, w)),
        );
    }

    /// Starts `c` on the waiting jobs after `after` (from the head when
    /// `None`) and up to `end` (inclusive; `None`: no bound), for
    /// [`WaitQueue::next_candidate`].
    pub fn candidates(&self, after: Option<QKey>, end: Option<QKey>, c: &mut Candidates) {
        c.cursor = after;
        c.end = end;
        c.heads.clear();
        c.walk = self.groups.len() > MERGE_GROUPS;
        if c.walk || c.done() {
            return;
        }
        let (start, stop) = c.bounds();
        for (&g, keys) in &self.groups {
            c.heads.push((g, keys.range((start, stop)).next().copied()));
        }
    }

    /// The next waiting job of `c`, in order, whose group is not
    /// `blocked(shape, exclusive, gang size)`; `c` moves past it. Between
    /// calls the queue may lose the jobs returned, and nothing else may
    /// change. With few groups, each group's next key is remembered (one
    /// lookup per job returned); with many, a walk of the queue.
    pub fn next_candidate(
        &self,
        c: &mut Candidates,
        blocked: impl Fn(Group) -> bool,
    ) -> Option<QKey> {
        if c.done() {
            return None;
        }
        let (start, stop) = c.bounds();
        if c.walk {
            let k = self
                .order
                .range((start, stop))
                .find(|(_, w)| !blocked(group_of(w)))
                .map(|(k, _)| *k)?;
            c.cursor = Some(k);
            return Some(k);
        }
        let mut best: Option<(usize, QKey)> = None;
        for (i, (g, head)) in c.heads.iter_mut().enumerate() {
            if blocked(*g) {
                continue;
            }
            // A head left behind (its group was blocked a while): seek.
            if let (Some(h), Some(cursor)) = (*head, c.cursor) {
                if h <= cursor {
                    *head = self
                        .groups
                        .get(g)
                        .and_then(|keys| keys.range((start, stop)).next().copied());
                }
            }
            if let Some(h) = *head {
                if best.is_none_or(|(_, b)| h < b) {
                    best = Some((i, h));
                }
            }
        }
        let (i, k) = best?;
        let (g, head) = &mut c.heads[i];
        *head = self
            .groups
            .get(g)
            .and_then(|keys| keys.range((Bound::Excluded(k), stop)).next().copied());
        c.cursor = Some(k);
        Some(k)
    }

    /// The waiting jobs' keys in decision order.
    pub fn keys(&self) -> Vec<QKey> {
        self.order.keys().copied().collect()
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

    fn waiting(job: u32, priority: i32, gang: u32, shared: bool, memory_mb: u64) -> Waiting {
        let req = JobRequest {
            gpu_milli: 0,
            job: format!("j{job}"),
            owner: "o".into(),
            queue: "q".into(),
            gpu_count: gang,
            gpu_memory_mb: memory_mb,
            sharing: if shared {
                Sharing::Shared
            } else {
                Sharing::Exclusive
            },
            mig_profile: None,
            min_compute_capability: None,
            class: crate::model::WorkloadClass::Training,
            priority,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        };
        Waiting {
            shape: shape_of(&req),
            req,
            submitted: 0,
            enqueued: i64::from(job % 7),
            attained_gpu_ms: 0,
            level: 0,
            failed_epoch: None,
            refused_at: None,
            awaiting_victims: 0,
            preempt_retry_at: 0,
            preemptions: 0,
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// `nth_key` and `next_candidate` (merging few groups or walking
        /// many) answer what a plain scan of the order answers, through
        /// any sequence of pushes and takes.
        #[test]
        fn window_end_and_candidates_match_a_scan(
            ops in proptest::collection::vec(
                (0u8..4, -1i32..2, 0u32..5, proptest::bool::ANY, 0u64..5, 0usize..64, 0u64..u64::MAX),
                1..160,
            ),
        ) {
            let mut q = WaitQueue::default();
            for (i, &(op, priority, gang, shared, mem, pick, seed)) in ops.iter().enumerate() {
                let keys: Vec<QKey> = q.order.keys().copied().collect();
                if op == 0 && !keys.is_empty() {
                    q.take(keys[pick % keys.len()]);
                } else {
                    q.push(waiting(i as u32, priority, gang, shared, mem * 1000), 0);
                }
                let keys: Vec<QKey> = q.order.keys().copied().collect();
                let n = pick % 40;
                proptest::prop_assert_eq!(q.nth_key(n), keys.get(n).copied());
                let after = (seed % 3 != 0 && !keys.is_empty()).then(|| keys[(seed as usize / 3) % keys.len()]);
                let end = if seed % 5 == 0 { None } else { q.nth_key((seed as usize / 7) % 48) };
                let blocked = |g: Group| (g.0 ^ u64::from(g.2) ^ u64::from(g.1)).wrapping_mul(seed | 1).is_multiple_of(3);
                let want = q
                    .order
                    .iter()
                    .filter(|(k, _)| after.is_none_or(|a| **k > a) && end.is_none_or(|e| **k <= e))
                    .find(|(_, w)| !blocked(group_of(w)))
                    .map(|(k, _)| *k);
                let mut c = Candidates::default();
                q.candidates(after, end, &mut c);
                proptest::prop_assert_eq!(q.next_candidate(&mut c, blocked), want);
                // Walking on, taking some of the jobs returned, blocking
                // more groups as it goes (or unblocking them).
                let mut cursor = want;
                let mut left: Vec<QKey> = keys.clone();
                while let Some(k) = cursor {
                    if k.seq % 2 == 0 {
                        q.take(k);
                        left.retain(|x| *x != k);
                    }
                    let step = k.seq;
                    let blocked = |g: Group| {
                        (g.0 ^ u64::from(g.2) ^ u64::from(g.1) ^ step)
                            .wrapping_mul(seed | 1)
                            .is_multiple_of(4)
                    };
                    let want = left
                        .iter()
                        .filter(|x| **x > k && end.is_none_or(|e| **x <= e))
                        .find(|x| !blocked(group_of(&q.order[x])))
                        .copied();
                    let got = q.next_candidate(&mut c, blocked);
                    proptest::prop_assert_eq!(got, want);
                    cursor = got;
                }
            }
        }
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
