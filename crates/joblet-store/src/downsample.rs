//! Downsampling GPU readings into fixed-width time buckets: the pure part
//! of the GPU history ([`crate::gpu_history`]).
//!
//! A bucket keeps, for each reading, the **sum and count** of the samples
//! that fell into it ([`Mean`]), not their average: merging two buckets
//! adds both, so a bucket's mean is exactly the mean of the samples in it,
//! whichever tier it is read from and however the samples were batched
//! before they got there. That is what lets the store merge a new batch
//! into a stored bucket with one `UPSERT`.
//!
//! The history keeps three tiers ([`TIERS`]): 1-second points for the last
//! hour (the monitor's sample period, `gpu.health_interval`, default 1 s;
//! a shorter period is averaged per second), 1-minute points for the last
//! day and 15-minute points for the last 7 days. A tier never holds more
//! than [`Tier::max_points`] buckets per GPU.

use std::collections::BTreeMap;

use joblet_core::UnixMillis;

/// The sum and number of the samples of one reading in a bucket; `n == 0`
/// when no sample in it had that reading (e.g. power on a GPU that does not
/// report it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean {
    pub sum: f64,
    pub n: u32,
}

impl Mean {
    /// One sample, or nothing when the reading is unknown.
    pub fn of(v: Option<f64>) -> Mean {
        match v {
            Some(v) if v.is_finite() => Mean { sum: v, n: 1 },
            _ => Mean::default(),
        }
    }

    /// Adds `other`'s samples to these.
    pub fn merge(&mut self, other: Mean) {
        self.sum += other.sum;
        self.n = self.n.saturating_add(other.n);
    }

    /// The mean, `None` without samples.
    pub fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n))
    }
}

/// The readings the history keeps for a GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Readings {
    /// GPU utilisation, percent.
    pub utilization_pct: Mean,
    /// Memory in use, MiB.
    pub memory_used_mb: Mean,
    /// Temperature, °C.
    pub temperature_c: Mean,
    /// Power draw, W.
    pub power_w: Mean,
}

impl Readings {
    /// Adds `other`'s samples to these, reading by reading.
    pub fn merge(&mut self, other: &Readings) {
        self.utilization_pct.merge(other.utilization_pct);
        self.memory_used_mb.merge(other.memory_used_mb);
        self.temperature_c.merge(other.temperature_c);
        self.power_w.merge(other.power_w);
    }
}

/// The readings of one GPU over one bucket starting at `at_ms` (or one
/// sample taken at `at_ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuPoint {
    pub at_ms: UnixMillis,
    pub readings: Readings,
}

/// One resolution of the history: buckets `step_ms` wide, kept for
/// `keep_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// Stored with each row (`gpu_samples.tier`).
    pub id: u8,
    pub step_ms: i64,
    pub keep_ms: i64,
}

impl Tier {
    /// The most buckets per GPU the tier holds after pruning: those
    /// starting in the last `keep_ms`, the one in progress included.
    pub const fn max_points(&self) -> i64 {
        self.keep_ms / self.step_ms + 1
    }
}

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// The tiers, finest first.
pub const TIERS: [Tier; 3] = [
    Tier {
        id: 0,
        step_ms: SECOND,
        keep_ms: HOUR,
    },
    Tier {
        id: 1,
        step_ms: MINUTE,
        keep_ms: DAY,
    },
    Tier {
        id: 2,
        step_ms: 15 * MINUTE,
        keep_ms: 7 * DAY,
    },
];

/// The start of the `step_ms` bucket holding `at_ms` (buckets are aligned
/// to the Unix epoch, so every GPU's buckets line up).
pub fn bucket_start(at_ms: UnixMillis, step_ms: i64) -> UnixMillis {
    at_ms.div_euclid(step_ms) * step_ms
}

/// Merges `points` into `step_ms` buckets, oldest first: one point per
/// bucket that any point falls into, at the bucket's start, with the sums
/// and counts of every point in it. `step_ms` must be positive.
pub fn downsample(points: impl IntoIterator<Item = GpuPoint>, step_ms: i64) -> Vec<GpuPoint> {
    assert!(
        step_ms > 0,
        "a bucket width must be positive, not {step_ms}"
    );
    let mut buckets: BTreeMap<UnixMillis, Readings> = BTreeMap::new();
    for p in points {
        buckets
            .entry(bucket_start(p.at_ms, step_ms))
            .or_default()
            .merge(&p.readings);
    }
    buckets
        .into_iter()
        .map(|(at_ms, readings)| GpuPoint { at_ms, readings })
        .collect()
}

/// The finest tier that keeps `window_ms`: the tier to read a chart of the
/// last `window_ms` from. `None` when no tier keeps that long.
pub fn tier_for(window_ms: i64) -> Option<Tier> {
    TIERS.into_iter().find(|t| t.keep_ms >= window_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn point(at_ms: i64, util: Option<f64>, mem: Option<f64>) -> GpuPoint {
        GpuPoint {
            at_ms,
            readings: Readings {
                utilization_pct: Mean::of(util),
                memory_used_mb: Mean::of(mem),
                ..Readings::default()
            },
        }
    }

    #[test]
    fn buckets_are_aligned_and_hold_the_mean_of_their_samples() {
        let out = downsample(
            [
                point(59_999, Some(10.0), Some(100.0)),
                point(60_000, Some(20.0), None),
                point(119_999, Some(40.0), Some(300.0)),
                point(120_000, None, None),
            ],
            MINUTE,
        );
        assert_eq!(
            out.iter().map(|p| p.at_ms).collect::<Vec<_>>(),
            [0, 60_000, 120_000]
        );
        assert_eq!(out[0].readings.utilization_pct.value(), Some(10.0));
        assert_eq!(out[1].readings.utilization_pct.value(), Some(30.0));
        assert_eq!(out[1].readings.memory_used_mb.value(), Some(300.0));
        assert_eq!(out[1].readings.memory_used_mb.n, 1);
        // A bucket whose samples lacked a reading has none, not a zero.
        assert_eq!(out[2].readings.utilization_pct.value(), None);
        assert_eq!(out[2].readings.power_w.value(), None);
    }

    #[test]
    fn negative_times_fall_into_the_bucket_below() {
        assert_eq!(bucket_start(-1, MINUTE), -MINUTE);
        assert_eq!(bucket_start(0, MINUTE), 0);
    }

    #[test]
    fn not_a_number_is_no_sample() {
        assert_eq!(Mean::of(Some(f64::NAN)), Mean::default());
        assert_eq!(Mean::of(Some(f64::INFINITY)), Mean::default());
    }

    #[test]
    fn a_chart_window_reads_the_finest_tier_that_covers_it() {
        assert_eq!(tier_for(HOUR), Some(TIERS[0]));
        assert_eq!(tier_for(DAY), Some(TIERS[1]));
        assert_eq!(tier_for(2 * DAY), Some(TIERS[2]));
        assert_eq!(tier_for(30 * DAY), None);
        assert_eq!(TIERS[0].max_points(), 3601);
        assert_eq!(TIERS[1].max_points(), 1441);
        assert_eq!(TIERS[2].max_points(), 673);
    }

    fn points() -> impl Strategy<Value = Vec<GpuPoint>> {
        prop::collection::vec(
            (
                0i64..3 * DAY,
                prop::option::of(0u32..=100),
                prop::option::of(0u32..81_920),
            ),
            0..300,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(at, u, m)| point(at, u.map(f64::from), m.map(f64::from)))
                .collect()
        })
    }

    fn total(points: &[GpuPoint]) -> Readings {
        let mut r = Readings::default();
        for p in points {
            r.merge(&p.readings);
        }
        r
    }

    proptest! {
        #[test]
        fn downsampling_is_bounded_and_keeps_every_sample(pts in points(), tier in 0usize..3) {
            let step = TIERS[tier].step_ms;
            let out = downsample(pts.clone(), step);
            // Bounded: no more points than inputs, nor than buckets in their span.
            prop_assert!(out.len() <= pts.len());
            if let (Some(lo), Some(hi)) = (pts.iter().map(|p| p.at_ms).min(), pts.iter().map(|p| p.at_ms).max()) {
                prop_assert!(out.len() as i64 <= (bucket_start(hi, step) - bucket_start(lo, step)) / step + 1);
            }
            // Aligned, strictly increasing.
            for w in out.windows(2) {
                prop_assert!(w[0].at_ms < w[1].at_ms);
            }
            for p in &out {
                prop_assert_eq!(p.at_ms % step, 0);
            }
            // Averages preserved: the counts are equal and the sums equal
            // up to rounding (integers below 2^53 sum exactly).
            let (a, b) = (total(&pts), total(&out));
            prop_assert_eq!(a, b);
        }

        #[test]
        fn downsampling_in_two_steps_is_downsampling_once(pts in points()) {
            let once = downsample(pts.clone(), TIERS[2].step_ms);
            let twice = downsample(downsample(pts, TIERS[0].step_ms), TIERS[2].step_ms);
            prop_assert_eq!(once, twice);
        }
    }
}
