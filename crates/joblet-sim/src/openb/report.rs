//! The openb results: per strategy, the allocated GPU share and the
//! unallocated GPUs at each arrived-workload level (inflation) or the
//! allocated share over time (replay), as a table (text or markdown),
//! JSON with stable field names, and an SVG drawn with `plotters` (one
//! line per strategy).

use std::fmt::Write;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use super::inflate::StrategyRun;
use super::replay::ReplayRun;
use super::trace::{OpenbNode, Pod};
use super::{OpenbMode, OpenbOptions};
use crate::error::SimError;

/// Everything one `simulate_openb` measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenbReport {
    pub pods_file: String,
    pub nodes_file: String,
    pub pods: usize,
    pub nodes: usize,
    pub cluster_gpus: u64,
    /// `inflate` or `replay`.
    pub mode: &'static str,
    /// Inflation only.
    pub seed: Option<u64>,
    pub target_pct: Option<u32>,
    pub step_pct: Option<u32>,
    pub inflation: Vec<StrategyRun>,
    pub replay: Vec<ReplayRun>,
}

impl OpenbReport {
    pub(super) fn new(opts: &OpenbOptions, pods: &[Pod], nodes: &[OpenbNode]) -> OpenbReport {
        let (mode, seed, target, step) = match opts.mode {
            OpenbMode::Inflate(o) => (
                "inflate",
                Some(o.seed),
                Some(o.target_pct),
                Some(o.step_pct),
            ),
            OpenbMode::Replay => ("replay", None, None, None),
        };
        OpenbReport {
            pods_file: opts.pods.display().to_string(),
            nodes_file: opts.nodes.display().to_string(),
            pods: pods.len(),
            nodes: nodes.len(),
            cluster_gpus: nodes.iter().map(|n| u64::from(n.gpus)).sum(),
            mode,
            seed,
            target_pct: target,
            step_pct: step,
            inflation: Vec::new(),
            replay: Vec::new(),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// How many fewer GPUs `a` leaves unallocated than `b` at 100%
    /// arrived workload, as a fraction of `b`'s (e.g. 0.3 = 30% fewer).
    pub fn fewer_unallocated(&self, a: &str, b: &str) -> Option<f64> {
        let at = |s: &str| {
            self.inflation
                .iter()
                .find(|r| r.strategy == s)
                .map(|r| r.at_100)
        };
        let (a, b) = (at(a)?, at(b)?);
        (b.unallocated_gpus > 0.0).then(|| 1.0 - a.unallocated_gpus / b.unallocated_gpus)
    }

    fn rows(&self) -> (Vec<String>, Vec<Vec<String>>, Vec<String>) {
        let mut notes = vec![format!(
            "{} pods from {} on {} nodes with {} GPUs ({})",
            self.pods, self.pods_file, self.nodes, self.cluster_gpus, self.nodes_file
        )];
        if self.mode == "replay" {
            let head = [
                "strategy",
                "pods",
                "failed",
                "mean allocated GPU share",
                "peak",
                "handle calls",
                "wall s",
            ]
            .map(String::from)
            .to_vec();
            let rows = self
                .replay
                .iter()
                .map(|r| {
                    vec![
                        r.strategy.to_string(),
                        r.pods.to_string(),
                        r.failed_pods.to_string(),
                        format!("{:.1}%", 100.0 * r.mean_allocated_gpu_share),
                        format!("{:.1}%", 100.0 * r.peak_allocated_gpu_share),
                        r.handle_calls.to_string(),
                        format!("{:.2}", r.wall_secs),
                    ]
                })
                .collect();
            return (head, rows, notes);
        }
        notes.push(format!(
            "workload inflation to {}% of GPU capacity, seed {}: allocated GPU share per arrived workload (sum of GPU requests of arrived pods / cluster GPUs)",
            self.target_pct.unwrap_or(0),
            self.seed.unwrap_or(0)
        ));
        let mut head = vec!["arrived".to_string()];
        head.extend(self.inflation.iter().map(|r| r.strategy.to_string()));
        let mut rows = Vec::new();
        let n = self
            .inflation
            .iter()
            .map(|r| r.levels.len())
            .max()
            .unwrap_or(0);
        for i in 0..n {
            let pct = self
                .inflation
                .iter()
                .find_map(|r| r.levels.get(i))
                .map_or(0.0, |l| l.arrived_pct);
            let mut row = vec![format!("{pct:.0}%")];
            row.extend(self.inflation.iter().map(|r| {
                r.levels.get(i).map_or("-".to_string(), |l| {
                    format!("{:.1}%", 100.0 * l.allocated_gpu_share)
                })
            }));
            rows.push(row);
        }
        let mut unalloc = vec!["unallocated GPUs at 100%".to_string()];
        unalloc.extend(self.inflation.iter().map(|r| {
            format!(
                "{:.1} ({:.2}%)",
                r.at_100.unallocated_gpus, r.at_100.unallocated_pct
            )
        }));
        rows.push(unalloc);
        let mut failed = vec!["failed pods at 100%".to_string()];
        failed.extend(
            self.inflation
                .iter()
                .map(|r| format!("{}/{}", r.at_100.failed_pods, r.at_100.pods)),
        );
        rows.push(failed);
        let mut wall = vec!["run time (s)".to_string()];
        wall.extend(self.inflation.iter().map(|r| format!("{:.2}", r.wall_secs)));
        rows.push(wall);
        if let Some(m) = self.fewer_unallocated("fgd", "best-fit") {
            notes.push(format!(
                "fgd leaves {:.1}% fewer GPUs unallocated than best-fit at 100% arrived workload",
                100.0 * m
            ));
        }
        (head, rows, notes)
    }

    /// A plain-text table.
    pub fn to_text(&self) -> String {
        let (head, rows, notes) = self.rows();
        let mut width = vec![0; head.len()];
        for r in std::iter::once(&head).chain(&rows) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        for n in &notes[..1.min(notes.len())] {
            let _ = writeln!(out, "{n}");
        }
        for n in notes.iter().skip(1).take(1) {
            let _ = writeln!(out, "{n}");
        }
        let line = |r: &Vec<String>| {
            r.iter()
                .zip(&width)
                .map(|(c, w)| format!("{c:>w$}", w = *w))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let _ = writeln!(out, "{}", line(&head));
        for r in &rows {
            let _ = writeln!(out, "{}", line(r));
        }
        for n in notes.iter().skip(2) {
            let _ = writeln!(out, "{n}");
        }
        out
    }

    /// A markdown table.
    pub fn to_markdown(&self) -> String {
        let (head, rows, notes) = self.rows();
        let mut out = String::new();
        for n in &notes[..2.min(notes.len())] {
            let _ = writeln!(out, "{n}\n");
        }
        let _ = writeln!(out, "| {} |", head.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(head.len()));
        for r in &rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        for n in notes.iter().skip(2) {
            let _ = writeln!(out, "\n{n}");
        }
        out
    }

    /// The SVG: allocated GPU share against arrived workload (inflation)
    /// or time (replay), one line per strategy.
    pub fn svg(&self) -> Result<String, String> {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = if self.mode == "replay" {
            self.replay
                .iter()
                .map(|r| {
                    (
                        r.strategy,
                        r.samples
                            .iter()
                            .map(|(t, s)| (*t as f64 / 3600.0, 100.0 * s))
                            .collect(),
                    )
                })
                .collect()
        } else {
            self.inflation
                .iter()
                .map(|r| {
                    let mut pts = vec![(0.0, 0.0)];
                    pts.extend(
                        r.levels
                            .iter()
                            .map(|l| (l.arrived_pct, 100.0 * l.allocated_gpu_share)),
                    );
                    (r.strategy, pts)
                })
                .collect()
        };
        let x_max = lines
            .iter()
            .flat_map(|(_, p)| p.iter().map(|p| p.0))
            .fold(1.0, f64::max);
        let (x_desc, title) = if self.mode == "replay" {
            (
                "time (hours)",
                "openb replay: allocated GPU share over time",
            )
        } else {
            (
                "arrived workload (% of GPU capacity)",
                "openb workload inflation: allocated GPU share",
            )
        };
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (960, 540)).into_drawing_area();
            let e = |e: &dyn std::fmt::Display| e.to_string();
            root.fill(&WHITE).map_err(|x| e(&x))?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(20)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_max, 0.0..100.0)
                .map_err(|x| e(&x))?;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc("allocated GPU share (%)")
                .draw()
                .map_err(|x| e(&x))?;
            for (i, (name, pts)) in lines.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|x| e(&x))?;
            root.present().map_err(|x| e(&x))?;
        }
        Ok(out)
    }
}

/// Draws [`OpenbReport::svg`] into `path`.
pub fn write_plot(report: &OpenbReport, path: &Path) -> Result<(), SimError> {
    let svg = report.svg().map_err(|message| SimError::Draw {
        path: path.to_path_buf(),
        message,
    })?;
    std::fs::write(path, svg).map_err(|source| SimError::Plot {
        path: path.to_path_buf(),
        source,
    })
}
