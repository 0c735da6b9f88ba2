//! The GPUs' readings over time (schema step 7), so the web console can
//! chart the last hour, day or week without a Prometheus server.
//!
//! Each row is one bucket of one [`Tier`] for one GPU, keyed by the GPU's
//! UUID, holding each reading's sum and count ([`crate::downsample`]). A
//! batch of samples is merged into every tier at once
//! ([`Store::record_gpu_samples`]): each bucket is summed up as samples
//! arrive, the one in progress included, so nothing has to be rolled up
//! later. The same transaction deletes the buckets a tier no longer keeps,
//! so a tier never holds more than [`Tier::max_points`] rows per GPU.

use joblet_core::UnixMillis;
use rusqlite::{params, Row, TransactionBehavior};

use crate::downsample::{downsample, GpuPoint, Mean, Readings, Tier, TIERS};
use crate::{SqlContext, Store, StoreError};

const COLUMNS: &str =
    "at_ms, util_sum, util_n, mem_sum, mem_n, temp_sum, temp_n, power_sum, power_n";

/// One batch's samples of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSamples {
    pub uuid: String,
    pub points: Vec<GpuPoint>,
}

fn mean_at(r: &Row<'_>, at: usize) -> rusqlite::Result<(f64, i64)> {
    Ok((r.get(at)?, r.get(at + 1)?))
}

fn mean(uuid: &str, (sum, n): (f64, i64)) -> Result<Mean, StoreError> {
    let n = u32::try_from(n).map_err(|_| StoreError::GpuCorrupt {
        uuid: uuid.to_owned(),
        what: format!("a history bucket counts {n} samples"),
    })?;
    Ok(Mean { sum, n })
}

type RawPoint = (i64, [(f64, i64); 4]);

fn raw_point(r: &Row<'_>) -> rusqlite::Result<RawPoint> {
    Ok((
        r.get(0)?,
        [
            mean_at(r, 1)?,
            mean_at(r, 3)?,
            mean_at(r, 5)?,
            mean_at(r, 7)?,
        ],
    ))
}

impl Store {
    /// Merges each GPU's samples into every tier of its history and drops
    /// the buckets each tier no longer keeps at `now`, in one transaction.
    /// Samples older than a tier keeps are not added to it.
    pub fn record_gpu_samples(
        &self,
        batch: &[GpuSamples],
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(path, || "begin recording GPU samples".into())?;
        for tier in TIERS {
            let oldest = oldest_kept(tier, now);
            for gpu in batch {
                let points = downsample(gpu.points.iter().copied(), tier.step_ms);
                for p in points.iter().filter(|p| p.at_ms >= oldest) {
                    upsert(&tx, tier, &gpu.uuid, p)
                        .during(path, || format!("record samples of GPU {}", gpu.uuid))?;
                }
            }
            tx.prepare_cached("DELETE FROM gpu_samples WHERE tier = ?1 AND at_ms < ?2")
                .and_then(|mut stmt| stmt.execute(params![tier.id, oldest]))
                .during(path, || format!("prune GPU history tier {}", tier.step_ms))?;
        }
        tx.commit().during(path, || "commit GPU samples".into())?;
        Ok(())
    }

    /// GPU `uuid`'s buckets of `tier` that start at or after `since_ms`,
    /// oldest first.
    pub fn gpu_samples(
        &self,
        uuid: &str,
        tier: Tier,
        since_ms: UnixMillis,
    ) -> Result<Vec<GpuPoint>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let op = || format!("read the history of GPU {uuid}");
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM gpu_samples \
                 WHERE uuid = ?1 AND tier = ?2 AND at_ms >= ?3 ORDER BY at_ms"
            ))
            .during(path, op)?;
        let rows = stmt
            .query_map(params![uuid, tier.id, since_ms], raw_point)
            .during(path, op)?;
        let mut out = Vec::new();
        for row in rows {
            let (at_ms, [u, m, t, p]) = row.during(path, op)?;
            out.push(GpuPoint {
                at_ms,
                readings: Readings {
                    utilization_pct: mean(uuid, u)?,
                    memory_used_mb: mean(uuid, m)?,
                    temperature_c: mean(uuid, t)?,
                    power_w: mean(uuid, p)?,
                },
            });
        }
        Ok(out)
    }
}

/// The start of the oldest bucket `tier` keeps at `now`.
fn oldest_kept(tier: Tier, now: UnixMillis) -> UnixMillis {
    crate::downsample::bucket_start(now - tier.keep_ms, tier.step_ms)
}

fn upsert(
    tx: &rusqlite::Transaction<'_>,
    tier: Tier,
    uuid: &str,
    p: &GpuPoint,
) -> rusqlite::Result<usize> {
    let r = &p.readings;
    tx.prepare_cached(
        "INSERT INTO gpu_samples (uuid, tier, at_ms, util_sum, util_n, mem_sum, mem_n, \
         temp_sum, temp_n, power_sum, power_n) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (uuid, tier, at_ms) DO UPDATE SET \
         util_sum = util_sum + excluded.util_sum, util_n = util_n + excluded.util_n, \
         mem_sum = mem_sum + excluded.mem_sum, mem_n = mem_n + excluded.mem_n, \
         temp_sum = temp_sum + excluded.temp_sum, temp_n = temp_n + excluded.temp_n, \
         power_sum = power_sum + excluded.power_sum, power_n = power_n + excluded.power_n",
    )?
    .execute(params![
        uuid,
        tier.id,
        p.at_ms,
        r.utilization_pct.sum,
        r.utilization_pct.n,
        r.memory_used_mb.sum,
        r.memory_used_mb.n,
        r.temperature_c.sum,
        r.temperature_c.n,
        r.power_w.sum,
        r.power_w.n
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("db"), &dir.path().join("key")).unwrap();
        (dir, s)
    }

    fn sample(at_ms: i64, util: f64) -> GpuPoint {
        GpuPoint {
            at_ms,
            readings: Readings {
                utilization_pct: Mean::of(Some(util)),
                memory_used_mb: Mean::of(Some(1024.0)),
                temperature_c: Mean::of(Some(40.0)),
                power_w: Mean::of(None),
            },
        }
    }

    fn rows(s: &Store, tier: u8) -> i64 {
        s.lock()
            .query_row(
                "SELECT COUNT(*) FROM gpu_samples WHERE tier = ?1",
                [tier],
                |r| r.get(0),
            )
            .unwrap()
    }

    // On a 15-minute boundary, so each tier's bucket count is exact.
    const T0: i64 = 1_699_999_200_000;

    #[test]
    fn batches_merge_into_every_tier_and_read_back_as_means() {
        let (_d, s) = store();
        // Two batches hitting the same second and minute.
        s.record_gpu_samples(
            &[GpuSamples {
                uuid: "GPU-a".into(),
                points: vec![sample(T0, 10.0), sample(T0 + 400, 20.0)],
            }],
            T0 + 500,
        )
        .unwrap();
        s.record_gpu_samples(
            &[GpuSamples {
                uuid: "GPU-a".into(),
                points: vec![sample(T0 + 600, 60.0), sample(T0 + 1_000, 50.0)],
            }],
            T0 + 1_100,
        )
        .unwrap();
        let secs = s.gpu_samples("GPU-a", TIERS[0], 0).unwrap();
        assert_eq!(secs.len(), 2, "{secs:?}");
        assert_eq!(secs[0].readings.utilization_pct.value(), Some(30.0));
        assert_eq!(secs[0].readings.utilization_pct.n, 3);
        assert_eq!(secs[1].readings.utilization_pct.value(), Some(50.0));
        assert_eq!(secs[0].readings.power_w.value(), None);
        let mins = s.gpu_samples("GPU-a", TIERS[1], 0).unwrap();
        assert_eq!(mins.len(), 1);
        assert_eq!(mins[0].readings.utilization_pct.value(), Some(35.0));
        assert_eq!(mins[0].readings.memory_used_mb.value(), Some(1024.0));
        assert_eq!(s.gpu_samples("GPU-a", TIERS[2], 0).unwrap().len(), 1);
        assert!(s.gpu_samples("GPU-b", TIERS[0], 0).unwrap().is_empty());
        // `since` cuts off older buckets.
        assert_eq!(s.gpu_samples("GPU-a", TIERS[0], T0 + 1).unwrap().len(), 1);
    }

    #[test]
    fn each_tier_is_pruned_to_what_it_keeps() {
        let (_d, s) = store();
        // Two hours of samples every 5 s, in 10-minute batches.
        let step = 5_000;
        let end = T0 + 2 * 3_600_000;
        let mut t = T0;
        while t < end {
            let points = (0..120).map(|i| sample(t + i * step, 50.0)).collect();
            t += 120 * step;
            s.record_gpu_samples(
                &[GpuSamples {
                    uuid: "GPU-a".into(),
                    points,
                }],
                t,
            )
            .unwrap();
        }
        // Tier 0 keeps the last hour only: 720 samples at 5 s.
        let n0 = rows(&s, 0);
        assert!(n0 <= TIERS[0].max_points(), "{n0}");
        assert!((719..=721).contains(&n0), "{n0}");
        let oldest = s.gpu_samples("GPU-a", TIERS[0], 0).unwrap()[0].at_ms;
        assert!(oldest >= end - 3_600_000 - 1_000, "{oldest}");
        // Tiers 1 and 2 still keep everything (2 h).
        assert_eq!(rows(&s, 1), 120);
        assert_eq!(rows(&s, 2), 8);
        // A day later with one more sample, tier 1 is down to a day.
        let later = end + 86_400_000;
        s.record_gpu_samples(
            &[GpuSamples {
                uuid: "GPU-a".into(),
                points: vec![sample(later, 1.0)],
            }],
            later,
        )
        .unwrap();
        assert_eq!(rows(&s, 0), 1);
        assert_eq!(rows(&s, 1), 1);
        assert_eq!(rows(&s, 2), 9);
        // Samples older than a tier keeps are not added to it.
        s.record_gpu_samples(
            &[GpuSamples {
                uuid: "GPU-a".into(),
                points: vec![sample(T0, 1.0)],
            }],
            later,
        )
        .unwrap();
        assert_eq!(rows(&s, 0), 1);
        assert_eq!(rows(&s, 1), 1);
        assert_eq!(rows(&s, 2), 9);
    }

    #[test]
    fn rows_per_gpu_stay_bounded_at_a_fast_sample_period() {
        let (_d, s) = store();
        // 200 ms samples for 90 minutes, one batch a minute, 2 GPUs.
        let mut t = T0;
        for _ in 0..90 {
            let points: Vec<GpuPoint> = (0..300).map(|i| sample(t + i * 200, 70.0)).collect();
            t += 60_000;
            let batch = ["GPU-a", "GPU-b"].map(|uuid| GpuSamples {
                uuid: uuid.into(),
                points: points.clone(),
            });
            s.record_gpu_samples(&batch, t).unwrap();
        }
        for tier in TIERS {
            let n = rows(&s, tier.id);
            assert!(n <= 2 * tier.max_points(), "tier {}: {n}", tier.id);
        }
        assert!(rows(&s, 0) >= 2 * 3_590);
        let mins = s.gpu_samples("GPU-b", TIERS[1], 0).unwrap();
        assert_eq!(mins.len(), 90);
        assert!(mins.iter().all(|p| p.readings.utilization_pct.n == 300
            && p.readings.utilization_pct.value() == Some(70.0)));
    }
}
