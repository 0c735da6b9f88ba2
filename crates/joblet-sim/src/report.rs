//! The comparison table of a [`SimReport`]: markdown, aligned plain text,
//! and JSON.

use crate::SimReport;

/// Seconds in a readable unit (s, min, h, d).
pub fn fmt_duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} d", s / 86_400.0)
    }
}

fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} M", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.0} k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

const HEADER: [&str; 21] = [
    "policy",
    "jobs",
    "done",
    "rejected",
    "unfinished",
    "avg JCT",
    "JCT vs fifo",
    "p50 JCT",
    "p99 JCT",
    "avg wait",
    "p50 wait",
    "p99 wait",
    "makespan",
    "GPU util",
    "avg frag (GPUs)",
    "max oversub",
    "preemptions",
    "preempt/job (mean/max)",
    "lost GPU·h",
    "restore GPU·h",
    "decisions/s",
];

impl SimReport {
    fn rows(&self) -> Vec<Vec<String>> {
        let fifo = self
            .policies
            .iter()
            .find(|m| m.policy == "fifo")
            .map(|m| m.jct.avg_s);
        self.policies
            .iter()
            .map(|m| {
                vec![
                    m.policy.to_string(),
                    m.jobs_total.to_string(),
                    m.completed.to_string(),
                    m.rejected.to_string(),
                    m.unfinished.to_string(),
                    fmt_duration(m.jct.avg_s),
                    match fifo {
                        Some(f) if f > 0.0 => format!("{:.2}×", m.jct.avg_s / f),
                        _ => "-".to_string(),
                    },
                    fmt_duration(m.jct.p50_s),
                    fmt_duration(m.jct.p99_s),
                    fmt_duration(m.queueing_delay.avg_s),
                    fmt_duration(m.queueing_delay.p50_s),
                    fmt_duration(m.queueing_delay.p99_s),
                    fmt_duration(m.makespan_s),
                    format!("{:.1} %", m.utilisation * 100.0),
                    format!("{:.1}", m.avg_fragmentation_gpus),
                    m.max_oversubscription.to_string(),
                    m.preemptions.to_string(),
                    format!(
                        "{:.2} / {}",
                        m.preemptions_per_job_mean, m.preemptions_per_job_max
                    ),
                    format!("{:.1}", m.lost_gpu_hours),
                    format!("{:.1}", m.restore_gpu_hours),
                    fmt_rate(m.decisions_per_s),
                ]
            })
            .collect()
    }

    fn title(&self) -> String {
        let filter = self
            .filter
            .as_ref()
            .map(|f| format!(" (owner/queue {f})"))
            .unwrap_or_default();
        format!(
            "{}{}: {} jobs on {} GPUs ({} GiB each)",
            self.trace, filter, self.jobs, self.cluster, self.gpu_memory_gb
        )
    }

    fn notes(&self) -> Vec<String> {
        let costs = if self.checkpoint_interval_ms == 0 && self.restore_cost_ms == 0 {
            "off (a preempted job loses nothing and restores at once)".to_string()
        } else {
            format!(
                "on: a job checkpoints every {} of progress, loses what it did since when preempted, and restores for {} when it starts again",
                fmt_duration(self.checkpoint_interval_ms as f64 / 1000.0),
                fmt_duration(self.restore_cost_ms as f64 / 1000.0)
            )
        };
        let mut notes = vec![
            format!("Time limits: {}.", self.time_limits),
            format!("Preemption costs {costs}."),
            format!(
                "Policy `default` (the daemon's default) is {}.",
                self.default_policy
            ),
        ];
        for m in &self.policies {
            for r in &m.rejected_reasons {
                notes.push(format!(
                    "{} rejected {} job(s): {}",
                    m.policy, r.jobs, r.reason
                ));
            }
            notes.push(format!(
                "{}: {} preemptions, {} decisions in {:.2} s, run {:.2} s, {} cluster verifications passed",
                m.policy, m.preemptions, m.decisions, m.decision_secs, m.wall_secs, m.verifies
            ));
        }
        notes
    }

    /// The comparison as a markdown table with notes.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("**{}**\n\n| {} |\n|", self.title(), HEADER.join(" | "));
        for (i, _) in HEADER.iter().enumerate() {
            out.push_str(if i == 0 { "---|" } else { "---:|" });
        }
        out.push('\n');
        for row in self.rows() {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out.push('\n');
        for note in self.notes() {
            out.push_str(&format!("- {note}\n"));
        }
        out
    }

    /// The comparison as aligned plain text.
    pub fn to_text(&self) -> String {
        let rows = self.rows();
        let widths: Vec<usize> = (0..HEADER.len())
            .map(|c| {
                rows.iter()
                    .map(|r| r[c].chars().count())
                    .chain([HEADER[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| -> String {
            let mut s = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let pad = widths[c] - cell.chars().count();
                if c == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.push('\n');
            s
        };
        let mut out = format!("{}\n\n", self.title());
        out.push_str(&line(HEADER.to_vec()));
        for row in &rows {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        out.push('\n');
        for note in self.notes() {
            out.push_str(&format!("{note}\n"));
        }
        out
    }

    /// The report as pretty JSON (without the plot's time series).
    pub fn to_json(&self) -> String {
        // A struct of strings and numbers always serialises.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(fmt_duration(59.4), "59 s");
        assert_eq!(fmt_duration(150.0), "2.5 min");
        assert_eq!(fmt_duration(5400.0), "90.0 min");
        assert_eq!(fmt_duration(7200.0), "2.0 h");
        assert_eq!(fmt_duration(3.0 * 86_400.0), "3.0 d");
    }

    #[test]
    fn rates() {
        assert_eq!(fmt_rate(512.3), "512");
        assert_eq!(fmt_rate(123_456.0), "123 k");
        assert_eq!(fmt_rate(2_500_000.0), "2.50 M");
    }
}
