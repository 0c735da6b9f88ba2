//! Job sizes learned from completed jobs, for the Gittins policy: per
//! queue, a log-bucketed histogram of total service (GPUs × run time,
//! GPU·ms), and from it the Gittins index and the expected remaining
//! service of a job that has attained a given service.
//!
//! Buckets are half an octave wide from 1 GPU·minute ([`BUCKETS`] of them,
//! up to ~4·10^5 GPU·hours; bucket 0 holds everything below 1 GPU·minute).
//! Each keeps a weight and the sum of its sizes; when the weights pass
//! [`MAX_WEIGHT`] they are halved, so memory is fixed and recent jobs
//! count more. The index of bucket i is computed at its lower edge b_i:
//!
//! G(i) = max over j ≥ i of P(S < b_{j+1} | S ≥ b_i) / E[min(S, b_{j+1}) − b_i | S ≥ b_i]
//!
//! (a job's chance to finish per unit of service it is given, for the
//! best quantum). Tables are recomputed after a completion once the
//! weight added since the last recomputation reaches 1/64 of the total
//! (so after each of the first 64),
//! so a recomputation (O(gang classes × buckets²)) runs at most every few
//! completions. Quanta are at least the checkpoint interval × the gang's
//! GPUs (one table per gang class of 1, 2, 4, … 128 GPUs): a started job
//! is not stopped sooner. Beyond the largest size observed, a job's
//! remaining service is taken to be as large as its attained one (index
//! 1 / attained, or the lowest index seen if lower).
//! A queue with fewer than the configured minimum of samples uses the
//! model of all queues together; with fewer than that overall there is
//! no model (the policy falls back to FIFO order).

use rustc_hash::FxHashMap as HashMap;

/// Histogram buckets.
pub const BUCKETS: usize = 48;
/// Lower edge of bucket 1, GPU·ms (one GPU·minute).
const BASE_GPU_MS: f64 = 60_000.0;
/// Weights are halved above this total.
pub const MAX_WEIGHT: f64 = 10_000.0;
/// Queues with a model of their own; later queues use the overall one.
pub const MAX_QUEUES: usize = 256;
/// Classes a Gittins index is discretised into.
pub const LEVELS: u32 = 8;
/// Index tables kept per gang size class: 1, 2, 4, … 128+ GPUs.
pub const GANGS: usize = 8;

/// The table of a gang of `gpus`: ⌊log2 gpus⌋, at most `GANGS − 1`.
pub fn gang_of(gpus: u32) -> usize {
    (gpus.max(1).ilog2() as usize).min(GANGS - 1)
}

/// The bucket of a service of `gpu_ms`.
pub fn bucket_of(gpu_ms: u64) -> usize {
    let v = gpu_ms as f64;
    if v < BASE_GPU_MS {
        return 0;
    }
    let k = (2.0 * (v / BASE_GPU_MS).log2()).floor() as usize + 1;
    k.min(BUCKETS - 1)
}

/// Lower edge of bucket `i`, GPU·ms.
pub fn edge(i: usize) -> f64 {
    if i == 0 {
        0.0
    } else {
        BASE_GPU_MS * 2f64.powf((i - 1) as f64 / 2.0)
    }
}

/// One queue's histogram and the tables derived from it.
#[derive(Debug, Clone)]
pub struct SizeDist {
    weight: [f64; BUCKETS],
    sum: [f64; BUCKETS],
    total: f64,
    /// Samples ever seen (not decayed).
    pub samples: u64,
    since_recompute: f64,
    /// Service between decisions for one GPU (the checkpoint interval,
    /// GPU·ms): a gang of g GPUs gets quanta of at least g times it.
    min_quantum: f64,
    /// Gittins index per gang class and bucket (1 / GPU·ms).
    index: [[f64; BUCKETS]; GANGS],
    /// Per gang class and bucket, the best quantum's chance to finish and
    /// expected service (GPU·ms): the index is their ratio.
    quantum: [[(f64, f64); BUCKETS]; GANGS],
    /// Expected remaining service per bucket, GPU·ms.
    residual: [f64; BUCKETS],
}

impl SizeDist {
    /// An empty histogram; decisions come every `min_quantum_ms` of a
    /// GPU's run time (0: at any time).
    pub fn new(min_quantum_ms: u64) -> SizeDist {
        SizeDist {
            min_quantum: min_quantum_ms as f64,
            weight: [0.0; BUCKETS],
            sum: [0.0; BUCKETS],
            total: 0.0,
            samples: 0,
            since_recompute: 0.0,
            index: [[0.0; BUCKETS]; GANGS],
            quantum: [[(0.0, 1.0); BUCKETS]; GANGS],
            residual: [0.0; BUCKETS],
        }
    }

    /// A job of this total service completed.
    pub fn observe(&mut self, gpu_ms: u64) {
        let b = bucket_of(gpu_ms);
        self.weight[b] += 1.0;
        self.sum[b] += gpu_ms as f64;
        self.total += 1.0;
        self.samples += 1;
        self.since_recompute += 1.0;
        if self.total > MAX_WEIGHT {
            for i in 0..BUCKETS {
                self.weight[i] *= 0.5;
                self.sum[i] *= 0.5;
            }
            self.total *= 0.5;
        }
        if self.since_recompute * 64.0 >= self.total {
            self.recompute();
        }
    }

    /// Recomputes the index and residual tables from the histogram.
    pub fn recompute(&mut self) {
        self.since_recompute = 0.0;
        for g in 0..GANGS {
            let min = self.min_quantum * f64::from(1u32 << g);
            self.recompute_gang(g, min);
        }
    }

    fn recompute_gang(&mut self, g: usize, min_quantum: f64) {
        let mut lowest: Option<f64> = None;
        for i in 0..BUCKETS {
            let b = edge(i);
            // Mass and size sum at or above bucket i.
            let mut mass = 0.0;
            let mut sum = 0.0;
            for k in i..BUCKETS {
                mass += self.weight[k];
                sum += self.sum[k];
            }
            if mass <= 0.0 {
                // Beyond every observation: a remaining service as large
                // as the attained one (a heavy tail), and never an index
                // above the lowest seen.
                let e = b.max(BASE_GPU_MS);
                self.index[g][i] = lowest.map_or(1.0 / e, |l| l.min(1.0 / e));
                self.quantum[g][i] = (1.0, e.max(1.0 / self.index[g][i]));
                self.residual[i] = e;
                continue;
            }
            self.residual[i] = ((sum - mass * b) / mass).max(0.0);
            let mut best = 0.0f64;
            let mut quantum = (0.0, 1.0);
            let (mut done, mut spent) = (0.0, 0.0);
            let mut above = mass;
            for j in i..BUCKETS {
                let w = self.weight[j];
                done += w;
                spent += self.sum[j] - w * b;
                above -= w;
                let step = edge(j + 1) - b;
                if step < min_quantum && j + 1 < BUCKETS {
                    continue;
                }
                let den = spent + above.max(0.0) * step;
                if done > 0.0 && den > 0.0 && done / den > best {
                    best = done / den;
                    quantum = (done / mass, den / mass);
                }
            }
            self.index[g][i] = best;
            self.quantum[g][i] = quantum;
            lowest = Some(lowest.map_or(best, |l| l.min(best)));
        }
    }

    /// Gittins index of a job of `gpus` that has attained `gpu_ms`.
    pub fn index(&self, gpus: u32, gpu_ms: u64) -> f64 {
        self.index[gang_of(gpus)][bucket_of(gpu_ms)]
    }

    /// The index of a job that has attained `gpu_ms` when starting it
    /// costs `extra_gpu_ms` more service first (a victim's lost work and
    /// restore): its best quantum's chance to finish over that quantum's
    /// expected service plus the extra (a lower bound of the true index
    /// with the extra).
    pub fn index_with_cost(&self, gpus: u32, gpu_ms: u64, extra_gpu_ms: f64) -> f64 {
        let (p, e) = self.quantum[gang_of(gpus)][bucket_of(gpu_ms)];
        if e + extra_gpu_ms <= 0.0 {
            return 0.0;
        }
        p / (e + extra_gpu_ms)
    }

    /// Expected remaining service of a job that has attained `gpu_ms`.
    pub fn residual(&self, gpu_ms: u64) -> f64 {
        self.residual[bucket_of(gpu_ms)]
    }
}

/// The class of a Gittins index: 0 for an index of at least one per
/// GPU·minute, one more per factor of 4 below, at most `LEVELS − 1`.
pub fn level_of_index(index: f64) -> u32 {
    if index <= 0.0 {
        return LEVELS - 1;
    }
    let expected = 1.0 / (index * BASE_GPU_MS);
    if expected <= 1.0 {
        return 0;
    }
    let l = (expected.log2() / 2.0).floor() as u32;
    l.min(LEVELS - 1)
}

/// The size models of every queue and of all queues together.
#[derive(Debug, Clone)]
pub struct SizeModel {
    min_samples: u64,
    min_quantum_ms: u64,
    slots: HashMap<String, u32>,
    /// Slot 0: all queues; then one per queue.
    dists: Vec<SizeDist>,
    /// Bumped whenever a model becomes usable (the overall one, or a
    /// queue's own): waiting jobs' classes may have changed.
    pub epoch: u64,
}

impl SizeModel {
    /// Models that need `min_samples` completions, for decisions every
    /// `min_quantum_ms` of run time (the checkpoint interval).
    pub fn new(min_samples: u32, min_quantum_ms: u64) -> SizeModel {
        SizeModel {
            min_samples: u64::from(min_samples.max(1)),
            min_quantum_ms,
            slots: HashMap::default(),
            dists: vec![SizeDist::new(min_quantum_ms)],
            epoch: 0,
        }
    }

    /// The queue's slot (0 = the overall model, for queues past
    /// [`MAX_QUEUES`]); assigns one to a new queue.
    pub fn slot(&mut self, queue: &str) -> u32 {
        if let Some(&s) = self.slots.get(queue) {
            return s;
        }
        if self.dists.len() > MAX_QUEUES {
            return 0;
        }
        let s = u32::try_from(self.dists.len()).unwrap_or(0);
        self.dists.push(SizeDist::new(self.min_quantum_ms));
        self.slots.insert(queue.to_string(), s);
        s
    }

    /// A job of the queue in `slot` completed with this total service.
    pub fn observe(&mut self, slot: u32, gpu_ms: u64) {
        self.dists[0].observe(gpu_ms);
        if self.dists[0].samples == self.min_samples {
            self.epoch += 1;
        }
        if slot != 0 {
            if let Some(d) = self.dists.get_mut(slot as usize) {
                d.observe(gpu_ms);
                if d.samples == self.min_samples {
                    self.epoch += 1;
                }
            }
        }
    }

    /// The model a job of `slot` is judged by, if there is one yet.
    pub fn model(&self, slot: u32) -> Option<&SizeDist> {
        let own = self.dists.get(slot as usize).filter(|_| slot != 0);
        match own {
            Some(d) if d.samples >= self.min_samples => Some(d),
            _ => Some(&self.dists[0]).filter(|d| d.samples >= self.min_samples),
        }
    }

    /// The class of a job of `slot` and `gpus` with this service (0
    /// without a model).
    pub fn level(&self, slot: u32, gpus: u32, gpu_ms: u64) -> u32 {
        self.model(slot)
            .map_or(0, |d| level_of_index(d.index(gpus, gpu_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_half_octaves() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(59_999), 0);
        assert_eq!(bucket_of(60_000), 1);
        assert_eq!(bucket_of(84_000), 1);
        assert_eq!(bucket_of(85_000), 2);
        assert_eq!(bucket_of(120_000), 3);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for i in 1..BUCKETS - 1 {
            assert_eq!(bucket_of(edge(i).ceil() as u64), i);
        }
    }

    #[test]
    fn equal_sizes_give_an_index_that_grows_with_service() {
        // Every job 10 GPU·hours: increasing hazard, no preemption.
        let mut d = SizeDist::new(0);
        for _ in 0..100 {
            d.observe(36_000_000);
        }
        d.recompute();
        let mut last = 0.0;
        for a in [0u64, 60_000, 3_600_000, 20_000_000, 35_000_000] {
            let g = d.index(1, a);
            assert!(g >= last, "index fell at {a}: {g} < {last}");
            last = g;
        }
        assert!(level_of_index(d.index(1, 0)) >= level_of_index(d.index(1, 30_000_000)));
    }

    #[test]
    fn heavy_tail_favours_new_jobs() {
        // 90 % of jobs take 1 GPU·minute, 10 % take 1,000 GPU·hours.
        let mut d = SizeDist::new(0);
        for i in 0..1000 {
            d.observe(if i % 10 == 0 { 3_600_000_000 } else { 60_000 });
        }
        d.recompute();
        assert!(d.index(1, 0) > 100.0 * d.index(1, 600_000));
        assert!(level_of_index(d.index(1, 0)) < level_of_index(d.index(1, 600_000)));
        assert!(d.residual(600_000) > d.residual(0));
    }

    #[test]
    fn no_model_before_enough_samples() {
        let mut m = SizeModel::new(3, 0);
        let q = m.slot("q");
        assert_eq!(m.slot("q"), q);
        m.observe(q, 1_000_000);
        m.observe(q, 1_000_000);
        assert!(m.model(q).is_none());
        assert_eq!(m.level(q, 1, 0), 0);
        let other = m.slot("other");
        m.observe(other, 1_000_000);
        // The queue has 2 of its own, the overall model 3.
        assert!(m.model(q).is_some());
        assert_eq!(m.model(q).map(|d| d.samples), Some(3));
    }

    #[test]
    fn a_cost_lowers_the_index_and_longer_quanta_too() {
        let mut d = SizeDist::new(0);
        let mut q = SizeDist::new(600_000);
        for i in 0..100 {
            let s = if i % 10 == 0 { 60_000 } else { 3_600_000 };
            d.observe(s);
            q.observe(s);
        }
        d.recompute();
        q.recompute();
        assert!(d.index_with_cost(1, 0, 0.0) >= d.index(1, 0) * 0.999);
        assert!(d.index_with_cost(1, 0, 600_000.0) < d.index(1, 0));
        // With quanta of 10 minutes the 1-minute jobs no longer make a
        // new job look short.
        assert!(q.index(1, 0) < d.index(1, 0));
        // Beyond the largest size seen the index keeps falling.
        assert!(d.index(1, 40_000_000) < d.index(1, 2_000_000));
    }

    #[test]
    fn weights_stay_bounded() {
        let mut d = SizeDist::new(0);
        for i in 0..100_000u64 {
            d.observe(60_000 + i);
        }
        assert!(d.total <= MAX_WEIGHT);
        assert_eq!(d.samples, 100_000);
    }
}
