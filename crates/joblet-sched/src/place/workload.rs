//! The workload's mix of request shapes, as [`super::fgd`] needs it: how
//! popular each (GPUs, per-GPU compute share, CPU, host memory) shape is.
//!
//! The scheduler learns it online from submitted requests: a window of the
//! last [`WINDOW`] submissions (older ones fall out, so the mix follows the
//! workload), plus an optional fixed prior (the simulator seeds it from a
//! trace). Counts are integers and the order of shapes is their sort
//! order: the same submissions give the same mix, bit for bit.

use std::collections::{BTreeMap, VecDeque};

use crate::model::{JobRequest, GPU_MILLI_WHOLE};

/// Submissions remembered by the online window.
pub const WINDOW: usize = 10_000;

/// One request shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// GPUs asked (0 = CPU-only).
    pub gpu_count: u32,
    /// Compute share per GPU in milli: 1000 for whole GPUs, 1..=999 for a
    /// fraction, 0 for CPU-only.
    pub gpu_milli: u32,
    pub cpu_millis: u64,
    pub memory_mb: u64,
}

impl Shape {
    /// The shape of a request.
    pub fn of(req: &JobRequest) -> Shape {
        let gpu_milli = if req.gpu_count == 0 {
            0
        } else if req.is_fractional() {
            req.gpu_milli
        } else {
            GPU_MILLI_WHOLE
        };
        Shape {
            gpu_count: req.gpu_count,
            gpu_milli,
            cpu_millis: req.cpu_millis,
            memory_mb: req.host_memory_mb,
        }
    }
}

/// Shapes of one GPU demand (same `gpu_count` and `gpu_milli`), with
/// their weights: [`super::fgd`] decides GPU fit once per class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Class {
    pub gpu_count: u32,
    pub gpu_milli: u32,
    /// (CPU millicores, host memory MiB, weight), in shape order.
    /// Weights are never 0 (a shape without weight is removed).
    pub hosts: Vec<(u64, u64, u64)>,
}

/// The observed mix of request shapes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// Fixed weights (a seed from a trace); never decays.
    prior: BTreeMap<Shape, u64>,
    /// The last [`WINDOW`] observed shapes, oldest first.
    window: VecDeque<Shape>,
    /// Counts of `window`.
    counts: BTreeMap<Shape, u64>,
    /// `prior` + `counts`, grouped by GPU demand, sorted by shape (kept
    /// up to date one submission at a time).
    classes: Vec<Class>,
    total: u64,
}

impl Workload {
    /// A mix with a fixed prior (e.g. every task of a trace, once each).
    pub fn seeded(shapes: impl IntoIterator<Item = Shape>) -> Workload {
        let mut w = Workload::default();
        for s in shapes {
            *w.prior.entry(s).or_default() += 1;
        }
        w.rebuild();
        w
    }

    /// Records one submission: it enters the window, the oldest leaves
    /// once the window is full.
    pub fn observe(&mut self, req: &JobRequest) {
        let s = Shape::of(req);
        self.window.push_back(s);
        *self.counts.entry(s).or_default() += 1;
        self.adjust(s, true);
        if self.window.len() > WINDOW {
            if let Some(old) = self.window.pop_front() {
                if let Some(c) = self.counts.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.counts.remove(&old);
                    }
                }
                self.adjust(old, false);
            }
        }
    }

    /// Adds one to (or takes one from) a shape's weight in `classes`, in
    /// O(log shapes) plus the shift of an insertion.
    fn adjust(&mut self, s: Shape, add: bool) {
        let key = (s.gpu_count, s.gpu_milli);
        let ci = match self
            .classes
            .binary_search_by_key(&key, |c| (c.gpu_count, c.gpu_milli))
        {
            Ok(i) => i,
            Err(i) if add => {
                self.classes.insert(
                    i,
                    Class {
                        gpu_count: s.gpu_count,
                        gpu_milli: s.gpu_milli,
                        hosts: Vec::new(),
                    },
                );
                i
            }
            Err(_) => return,
        };
        let hosts = &mut self.classes[ci].hosts;
        let host = (s.cpu_millis, s.memory_mb);
        match hosts.binary_search_by_key(&host, |h| (h.0, h.1)) {
            Ok(i) if add => hosts[i].2 += 1,
            Ok(i) => {
                hosts[i].2 -= 1;
                if hosts[i].2 == 0 {
                    hosts.remove(i);
                }
            }
            Err(i) if add => hosts.insert(i, (host.0, host.1, 1)),
            Err(_) => return,
        }
        if hosts.is_empty() {
            self.classes.remove(ci);
        }
        if add {
            self.total += 1;
        } else {
            self.total -= 1;
        }
    }

    /// Weight of each shape (prior plus window), in shape order.
    pub fn shapes(&self) -> Vec<(Shape, u64)> {
        let mut all = self.prior.clone();
        for (s, c) in &self.counts {
            *all.entry(*s).or_default() += c;
        }
        all.into_iter().collect()
    }

    /// Sum of all weights (0: nothing observed, no prior).
    pub fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn classes(&self) -> &[Class] {
        &self.classes
    }

    fn rebuild(&mut self) {
        let shapes = self.shapes();
        self.total = shapes.iter().map(|(_, w)| w).sum();
        let mut classes: Vec<Class> = Vec::new();
        // Shapes sort by (gpu_count, gpu_milli) first: one class each run.
        for (s, w) in shapes {
            match classes.last_mut() {
                Some(c) if c.gpu_count == s.gpu_count && c.gpu_milli == s.gpu_milli => {
                    c.hosts.push((s.cpu_millis, s.memory_mb, w));
                }
                _ => classes.push(Class {
                    gpu_count: s.gpu_count,
                    gpu_milli: s.gpu_milli,
                    hosts: vec![(s.cpu_millis, s.memory_mb, w)],
                }),
            }
        }
        self.classes = classes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(gpus: u32, milli: u32, cpu: u64) -> Shape {
        Shape {
            gpu_count: gpus,
            gpu_milli: milli,
            cpu_millis: cpu,
            memory_mb: 0,
        }
    }

    #[test]
    fn classes_group_shapes_by_gpu_demand() {
        let w = Workload::seeded([
            shape(1, 500, 4_000),
            shape(1, 500, 2_000),
            shape(0, 0, 1_000),
            shape(1, 500, 4_000),
            shape(2, 1000, 8_000),
        ]);
        assert_eq!(w.total(), 5);
        let c = w.classes();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].gpu_count, c[0].gpu_milli), (0, 0));
        assert_eq!((c[1].gpu_count, c[1].gpu_milli), (1, 500));
        assert_eq!(c[1].hosts, [(2_000, 0, 1), (4_000, 0, 2)]);
        assert_eq!((c[2].gpu_count, c[2].gpu_milli), (2, 1000));
    }

    #[test]
    fn the_window_forgets_the_oldest_but_not_the_prior() {
        let mut w = Workload::seeded([shape(1, 1000, 0)]);
        let mut req = JobRequest {
            job: "j".into(),
            owner: String::new(),
            queue: String::new(),
            gpu_count: 1,
            gpu_memory_mb: 0,
            sharing: crate::model::Sharing::Shared,
            mig_profile: None,
            min_compute_capability: None,
            class: crate::model::WorkloadClass::Inference,
            priority: 0,
            allow_cross_numa: false,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
            gpu_milli: 250,
            checkpoint_interval_ms: None,
        };
        w.observe(&req);
        assert_eq!(w.shapes(), [(shape(1, 250, 0), 1), (shape(1, 1000, 0), 1)]);
        req.gpu_milli = 750;
        for _ in 0..WINDOW {
            w.observe(&req);
        }
        assert_eq!(
            w.shapes(),
            [(shape(1, 750, 0), WINDOW as u64), (shape(1, 1000, 0), 1)]
        );
        assert_eq!(w.total(), WINDOW as u64 + 1);
        // Kept one submission at a time, the classes equal a rebuild.
        let mut fresh = w.clone();
        fresh.rebuild();
        assert_eq!(fresh.classes(), w.classes());
        assert_eq!(fresh.total(), w.total());
    }
}
