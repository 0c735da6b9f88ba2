//! GPU-seconds per owner from the GPU audit log, kept up to date without
//! reading the whole log at every scrape: closed records are summed once,
//! and each scrape reads only the open records and those closed since a
//! little before the newest end already counted (records can be committed
//! slightly out of order). Open records count up to now. The totals never
//! go down (they are counters).

use std::collections::BTreeMap;

use joblet_core::record::AuditRecord;
use joblet_core::UnixMillis;

/// Late commits this far behind the newest counted end are still seen.
pub const MARGIN_MS: UnixMillis = 10 * 60 * 1000;

/// The running totals.
#[derive(Debug, Default)]
pub struct AuditTotals {
    closed: BTreeMap<String, f64>,
    /// Closed records already counted whose end is within the margin of
    /// the newest: `(job id, start)` → end.
    counted: BTreeMap<(String, UnixMillis), UnixMillis>,
    newest_end: Option<UnixMillis>,
    reported: BTreeMap<String, f64>,
}

fn gpu_seconds(r: &AuditRecord, end: UnixMillis) -> f64 {
    let ms = end.saturating_sub(r.start_ms).max(0);
    ms as f64 / 1000.0 * r.gpu_uuids.len() as f64
}

impl AuditTotals {
    /// Where the next read starts (`None`: the whole log).
    pub fn since(&self) -> Option<UnixMillis> {
        self.newest_end.map(|e| e.saturating_sub(MARGIN_MS))
    }

    /// Adds what `records` (read from [`AuditTotals::since`]) say; returns
    /// each owner's total at `now`.
    pub fn update(&mut self, records: &[AuditRecord], now: UnixMillis) -> BTreeMap<String, f64> {
        let mut open: BTreeMap<&str, f64> = BTreeMap::new();
        for r in records {
            match r.end_ms {
                None => *open.entry(&r.owner).or_default() += gpu_seconds(r, now),
                Some(end) => {
                    let key = (r.job_id.clone(), r.start_ms);
                    if self.counted.contains_key(&key) || self.since().is_some_and(|s| end < s) {
                        continue;
                    }
                    *self.closed.entry(r.owner.clone()).or_default() += gpu_seconds(r, end);
                    self.counted.insert(key, end);
                    self.newest_end = Some(self.newest_end.map_or(end, |n| n.max(end)));
                }
            }
        }
        if let Some(from) = self.since() {
            self.counted.retain(|_, end| *end >= from);
        }
        let mut totals: BTreeMap<String, f64> = self.closed.clone();
        for (owner, secs) in open {
            *totals.entry(owner.to_owned()).or_default() += secs;
        }
        for (owner, total) in totals.iter_mut() {
            let last = self.reported.entry(owner.clone()).or_default();
            *total = total.max(*last);
            *last = *total;
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(job: &str, owner: &str, gpus: usize, start: i64, end: Option<i64>) -> AuditRecord {
        AuditRecord {
            job_id: job.into(),
            owner: owner.into(),
            gpu_uuids: (0..gpus).map(|i| format!("GPU-{i}")).collect(),
            gpu_indices: (0..gpus as u32).collect(),
            memory_mb_per_gpu: None,
            sharing: "exclusive".into(),
            start_ms: start,
            end_ms: end,
            peak_memory_mb: None,
            ended: end.map(|_| "COMPLETED".into()),
            reason: None,
        }
    }

    #[test]
    fn closed_records_count_once_and_open_ones_up_to_now() {
        let mut t = AuditTotals::default();
        assert_eq!(t.since(), None);
        let first = [
            rec("a", "alice", 2, 0, Some(10_000)),
            rec("b", "bob", 1, 5_000, None),
        ];
        let got = t.update(&first, 20_000);
        assert_eq!(got["alice"], 20.0);
        assert_eq!(got["bob"], 15.0);
        // Read again from the margin: "a" comes back and is not counted twice.
        assert_eq!(t.since(), Some(10_000 - MARGIN_MS));
        let second = [
            rec("a", "alice", 2, 0, Some(10_000)),
            rec("b", "bob", 1, 5_000, Some(25_000)),
        ];
        let got = t.update(&second, 30_000);
        assert_eq!(got["alice"], 20.0);
        assert_eq!(got["bob"], 20.0);
    }

    #[test]
    fn a_late_commit_within_the_margin_counts_and_totals_never_drop() {
        let mut t = AuditTotals::default();
        t.update(&[rec("a", "alice", 1, 0, Some(100_000))], 100_000);
        // Ended before the newest end, committed after it.
        let got = t.update(
            &[
                rec("a", "alice", 1, 0, Some(100_000)),
                rec("c", "alice", 1, 50_000, Some(90_000)),
            ],
            110_000,
        );
        assert_eq!(got["alice"], 140.0);
        // An open record seen at 200 s, then closed earlier than that.
        let mut t = AuditTotals::default();
        assert_eq!(
            t.update(&[rec("d", "dan", 1, 0, None)], 200_000)["dan"],
            200.0
        );
        assert_eq!(
            t.update(&[rec("d", "dan", 1, 0, Some(150_000))], 210_000)["dan"],
            200.0
        );
    }
}
