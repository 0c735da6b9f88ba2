//! The history page's aggregates as pure functions of store rows and a
//! time window: GPU-hours by owner or by day (from the GPU audit log),
//! queue waits by day and failures by reason (from the job records).
//! Days are UTC calendar days.

use std::collections::BTreeMap;

use joblet_core::record::AuditRecord;
use joblet_core::UnixMillis;
use joblet_store::{JobFailure, JobWait};

const HOUR_MS: f64 = 3_600_000.0;
pub const DAY_MS: i64 = 86_400_000;

/// How GPU-hours are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Owner,
    Day,
}

/// GPU-hours of one owner or one day.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuHoursRow {
    /// The owner, or the day (`YYYY-MM-DD`, UTC).
    pub key: String,
    /// GPUs (MIG slices count as one each) × hours held, within the window.
    pub gpu_hours: f64,
    /// Allocations that held GPUs during the window (a job that ran twice
    /// counts twice).
    pub allocations: u32,
}

/// Queue waits (submission to start) of the jobs that started on one day.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueWaitDay {
    /// `YYYY-MM-DD`, UTC, of the starts.
    pub day: String,
    pub jobs: u32,
    /// Those that asked for GPUs.
    pub gpu_jobs: u32,
    pub mean_ms: i64,
    pub p50_ms: i64,
    pub p95_ms: i64,
    pub max_ms: i64,
}

/// Failed jobs with one kind of reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    /// The reason with its particulars left out (numbers, ids, what follows
    /// the first `:` or `;`), or `exit code N` for a job that failed by its
    /// own exit code.
    pub reason: String,
    pub jobs: u32,
    /// When the latest of them ended.
    pub last_ms: UnixMillis,
    /// That latest one's full reason.
    pub example: String,
}

/// The UTC calendar day of `ms`, `YYYY-MM-DD`.
pub fn day_of(ms: UnixMillis) -> String {
    // Howard Hinnant's days_from_civil inverse.
    let z = ms.div_euclid(DAY_MS) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// GPU-hours in `[from, to)`: each record's hold (still open: until `to`)
/// clipped to the window, times its GPUs; by day, split at UTC midnights.
/// Owners by GPU-hours, most first; days in order.
pub fn gpu_hours(
    records: &[AuditRecord],
    by: GroupBy,
    from: UnixMillis,
    to: UnixMillis,
) -> Vec<GpuHoursRow> {
    let mut groups: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for r in records {
        let start = r.start_ms.max(from);
        let end = r.end_ms.unwrap_or(to).min(to);
        if end <= start {
            continue;
        }
        let gpus = r.gpu_uuids.len() as f64;
        match by {
            GroupBy::Owner => {
                let g = groups.entry(r.owner.clone()).or_default();
                g.0 += gpus * (end - start) as f64 / HOUR_MS;
                g.1 += 1;
            }
            GroupBy::Day => {
                let mut at = start;
                while at < end {
                    let midnight = (at.div_euclid(DAY_MS) + 1) * DAY_MS;
                    let upto = midnight.min(end);
                    let g = groups.entry(day_of(at)).or_default();
                    g.0 += gpus * (upto - at) as f64 / HOUR_MS;
                    g.1 += 1;
                    at = upto;
                }
            }
        }
    }
    let mut rows: Vec<GpuHoursRow> = groups
        .into_iter()
        .map(|(key, (gpu_hours, allocations))| GpuHoursRow {
            key,
            gpu_hours,
            allocations,
        })
        .collect();
    if by == GroupBy::Owner {
        rows.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours));
    }
    rows
}

/// Queue waits by the day jobs started, days in order. A clock that
/// stepped back counts as no wait.
pub fn queue_waits(waits: &[JobWait]) -> Vec<QueueWaitDay> {
    let mut days: BTreeMap<String, (Vec<i64>, u32)> = BTreeMap::new();
    for w in waits {
        let d = days.entry(day_of(w.started_ms)).or_default();
        d.0.push((w.started_ms - w.created_ms).max(0));
        d.1 += u32::from(w.gpus > 0);
    }
    days.into_iter()
        .map(|(day, (mut ms, gpu_jobs))| {
            ms.sort_unstable();
            let n = ms.len();
            QueueWaitDay {
                day,
                jobs: n as u32,
                gpu_jobs,
                mean_ms: ms.iter().sum::<i64>() / n as i64,
                p50_ms: percentile(&ms, 50),
                p95_ms: percentile(&ms, 95),
                max_ms: ms[n - 1],
            }
        })
        .collect()
}

/// The nearest-rank `p`th percentile of sorted, non-empty `v`.
fn percentile(v: &[i64], p: usize) -> i64 {
    let rank = (p * v.len()).div_ceil(100).max(1);
    v[rank - 1]
}

/// Failures grouped by [`reason_class`], most frequent first (then the
/// most recent).
pub fn failures(rows: &[JobFailure]) -> Vec<FailureGroup> {
    let mut groups: BTreeMap<String, FailureGroup> = BTreeMap::new();
    for f in rows {
        let class = reason_class(&f.reason, f.exit_code);
        let g = groups.entry(class.clone()).or_insert_with(|| FailureGroup {
            reason: class,
            jobs: 0,
            last_ms: f.ended_ms,
            example: String::new(),
        });
        g.jobs += 1;
        if f.ended_ms >= g.last_ms || g.example.is_empty() {
            g.last_ms = f.ended_ms;
            g.example = if f.reason.is_empty() {
                g.reason.clone()
            } else {
                f.reason.clone()
            };
        }
    }
    let mut out: Vec<FailureGroup> = groups.into_values().collect();
    out.sort_by(|a, b| b.jobs.cmp(&a.jobs).then(b.last_ms.cmp(&a.last_ms)));
    out
}

/// What kind of failure a reason tells: its text up to the first `:` or
/// `;`, without parenthesised parts, digit runs as `N`, so "GPU 3 (GPU-…)
/// failed: XID 79" and "GPU 5 (GPU-…) failed: XID 48" are one kind. A job
/// that failed by its own exit code (no reason, or the shim's "exited with
/// code 2") is `exit code 2`: which code is the kind.
pub fn reason_class(reason: &str, exit_code: Option<i32>) -> String {
    let head = reason.split([':', ';']).next().unwrap_or("").trim();
    if let Some(c) = exit_code {
        if head.is_empty() || head == format!("exited with code {c}") {
            return format!("exit code {c}");
        }
    }
    if head.is_empty() {
        return "no reason recorded".to_owned();
    }
    let mut out = String::with_capacity(head.len());
    let mut depth = 0u32;
    let mut in_digits = false;
    for c in head.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            d if d.is_ascii_digit() => {
                if !in_digits {
                    out.push('N');
                }
                in_digits = true;
                continue;
            }
            c => out.push(c),
        }
        in_digits = false;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(owner: &str, gpus: usize, start: i64, end: Option<i64>) -> AuditRecord {
        AuditRecord {
            job_id: "j".into(),
            owner: owner.into(),
            gpu_uuids: vec!["GPU-x".into(); gpus],
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

    const H: i64 = 3_600_000;

    #[test]
    fn days_are_utc_calendar_days() {
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(DAY_MS - 1), "1970-01-01");
        assert_eq!(day_of(951_782_400_000), "2000-02-29");
        assert_eq!(day_of(1_767_225_599_999), "2025-12-31");
        assert_eq!(day_of(-1), "1969-12-31");
    }

    #[test]
    fn gpu_hours_by_owner_are_clipped_to_the_window_and_open_records_run_to_now() {
        let day = 20_000 * DAY_MS;
        let recs = [
            audit("alice", 2, day + H, Some(day + 3 * H)), // 4 GPU-h
            audit("bob", 1, day - 2 * H, Some(day + H)),   // 1 GPU-h inside
            audit("bob", 4, day + 10 * H, None),           // open: 4 × 2 h to `to`
            audit("carol", 8, day - 5 * H, Some(day - H)), // before the window
        ];
        let rows = gpu_hours(&recs, GroupBy::Owner, day, day + 12 * H);
        assert_eq!(
            rows,
            [
                GpuHoursRow {
                    key: "bob".into(),
                    gpu_hours: 9.0,
                    allocations: 2
                },
                GpuHoursRow {
                    key: "alice".into(),
                    gpu_hours: 4.0,
                    allocations: 1
                },
            ]
        );
    }

    #[test]
    fn gpu_hours_by_day_split_at_midnight() {
        let day = 20_000 * DAY_MS;
        let recs = [audit("alice", 2, day - 3 * H, Some(day + H))];
        let rows = gpu_hours(&recs, GroupBy::Day, day - DAY_MS, day + DAY_MS);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key, day_of(day - 1));
        assert_eq!(rows[0].gpu_hours, 6.0);
        assert_eq!(rows[1].key, day_of(day));
        assert_eq!(rows[1].gpu_hours, 2.0);
    }

    #[test]
    fn queue_waits_have_percentiles_per_day() {
        let day = 20_000 * DAY_MS;
        let waits: Vec<JobWait> = (1..=20)
            .map(|i| JobWait {
                owner: "a".into(),
                created_ms: day + 1_000,
                started_ms: day + 1_000 + i * 100,
                gpus: u32::from(i % 2 == 0),
            })
            .chain([JobWait {
                owner: "a".into(),
                created_ms: day + DAY_MS + 500,
                started_ms: day + DAY_MS, // clock stepped back
                gpus: 0,
            }])
            .collect();
        let days = queue_waits(&waits);
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].jobs, 20);
        assert_eq!(days[0].gpu_jobs, 10);
        assert_eq!(days[0].p50_ms, 1_000);
        assert_eq!(days[0].p95_ms, 1_900);
        assert_eq!(days[0].max_ms, 2_000);
        assert_eq!(days[0].mean_ms, 1_050);
        assert_eq!(days[1].max_ms, 0);
    }

    #[test]
    fn reasons_are_grouped_by_kind() {
        assert_eq!(
            reason_class(
                "GPU 3 (GPU-1234-5678) failed: XID 79 (fallen off the bus)",
                None
            ),
            "GPU N failed"
        );
        assert_eq!(
            reason_class("timed out after 30s; killed by signal 15 (SIGTERM)", None),
            "timed out after Ns"
        );
        assert_eq!(
            reason_class("GPU memory quota exceeded: used 2048 MB of 1024 MB", None),
            "GPU memory quota exceeded"
        );
        assert_eq!(reason_class("", Some(2)), "exit code 2");
        assert_eq!(reason_class("exited with code 3", Some(3)), "exit code 3");
        assert_eq!(
            reason_class("timed out after 1s; exited with code 3", Some(3)),
            "timed out after Ns"
        );
        assert_eq!(reason_class("", None), "no reason recorded");
        let f = |reason: &str, code, at| JobFailure {
            owner: "a".into(),
            ended_ms: at,
            reason: reason.into(),
            exit_code: code,
        };
        let groups = failures(&[
            f("timed out after 1s; killed", None, 5),
            f("", Some(1), 7),
            f("timed out after 2s; killed", None, 9),
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].reason, "timed out after Ns");
        assert_eq!(groups[0].jobs, 2);
        assert_eq!(groups[0].last_ms, 9);
        assert_eq!(groups[0].example, "timed out after 2s; killed");
        assert_eq!(groups[1].example, "exit code 1");
    }
}
