//! A hand-written SVG of GPU utilisation and queue length over simulated
//! time, one line per policy (time-weighted averages over 600 buckets).

use std::fmt::Write;

use crate::run::Sample;
use crate::SimReport;

const BUCKETS: usize = 600;
const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 130.0;
const PANEL_H: f64 = 220.0;
const TOP: f64 = 50.0;
const GAP: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Time-weighted averages of a piecewise-constant signal (each sample's
/// value holds until the next sample, the last until `end_ms`) over
/// `buckets` equal slices of [0, end_ms].
pub fn bucket_means(
    samples: &[Sample],
    end_ms: u64,
    buckets: usize,
    value: impl Fn(&Sample) -> f64,
) -> Vec<f64> {
    let mut area = vec![0.0; buckets];
    if end_ms == 0 || buckets == 0 {
        return area;
    }
    let width = end_ms as f64 / buckets as f64;
    for (k, s) in samples.iter().enumerate() {
        let from = s.t_ms as f64;
        let to = samples
            .get(k + 1)
            .map_or(end_ms as f64, |n| n.t_ms as f64)
            .min(end_ms as f64);
        if to <= from {
            continue;
        }
        let v = value(s);
        let first = ((from / width) as usize).min(buckets - 1);
        let last = ((to / width) as usize).min(buckets - 1);
        for (b, a) in area.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = from.max(b as f64 * width);
            let hi = to.min((b + 1) as f64 * width);
            if hi > lo {
                *a += v * (hi - lo);
            }
        }
    }
    area.iter().map(|a| a / width).collect()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum ≥ v.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&m| m >= v)
        .unwrap_or(10.0 * mag)
}

struct Panel<'a> {
    top: f64,
    title: &'a str,
    y_max: f64,
    y_unit: &'a str,
}

fn axes(svg: &mut String, p: &Panel, end_s: f64, unit_s: f64, unit: &str) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let bottom = p.top + PANEL_H;
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        p.top - 8.0,
        escape(p.title)
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#444"/>"##,
        p.top
    );
    for i in 0..=4 {
        let v = p.y_max * f64::from(i) / 4.0;
        let y = bottom - PANEL_H * f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            trim(v),
            p.y_unit
        );
    }
    for i in 0..=6 {
        let x = LEFT + plot_w * f64::from(i) / 6.0;
        let t = end_s * f64::from(i) / 6.0 / unit_s;
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{} {unit}</text>"#,
            bottom + 16.0,
            trim(t)
        );
    }
}

fn trim(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn polyline(svg: &mut String, p: &Panel, values: &[f64], color: &str) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let bottom = p.top + PANEL_H;
    let n = values.len().max(1) as f64;
    let mut points = String::new();
    for (i, v) in values.iter().enumerate() {
        let x = LEFT + plot_w * (i as f64 + 0.5) / n;
        let y = bottom - PANEL_H * (v / p.y_max).clamp(0.0, 1.0);
        let _ = write!(points, "{x:.1},{y:.1} ");
    }
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1.4" points="{}"/>"#,
        points.trim_end()
    );
}

/// The SVG document for a report.
pub fn svg(report: &SimReport) -> String {
    let end_ms = report
        .series
        .iter()
        .filter_map(|s| s.samples.last().map(|l| l.t_ms))
        .max()
        .unwrap_or(0);
    let end_s = end_ms as f64 / 1000.0;
    let (unit_s, unit) = if end_s > 3.0 * 86_400.0 {
        (86_400.0, "d")
    } else if end_s > 3.0 * 3600.0 {
        (3600.0, "h")
    } else {
        (60.0, "min")
    };
    let units = f64::from(report.nodes) * f64::from(report.gpus_per_node);
    let util: Vec<Vec<f64>> = report
        .series
        .iter()
        .map(|s| {
            bucket_means(&s.samples, end_ms, BUCKETS, |x| {
                100.0 * x.busy_units as f64 / units.max(1.0)
            })
        })
        .collect();
    let queue: Vec<Vec<f64>> = report
        .series
        .iter()
        .map(|s| bucket_means(&s.samples, end_ms, BUCKETS, |x| x.waiting as f64))
        .collect();
    let q_max = nice_max(queue.iter().flatten().copied().fold(0.0, f64::max));
    let height = TOP + 2.0 * PANEL_H + GAP + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let filter = report
        .filter
        .as_ref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="22" font-size="16">{}</text>"#,
        escape(&format!(
            "{}{filter}: {} jobs on {} GPUs",
            report.trace, report.jobs, report.cluster
        ))
    );
    let panels = [
        Panel {
            top: TOP,
            title: "GPU utilisation",
            y_max: 100.0,
            y_unit: " %",
        },
        Panel {
            top: TOP + PANEL_H + GAP,
            title: "Queue length (waiting jobs)",
            y_max: q_max,
            y_unit: "",
        },
    ];
    for (panel, data) in panels.iter().zip([&util, &queue]) {
        axes(&mut svg, panel, end_s, unit_s, unit);
        for (i, values) in data.iter().enumerate() {
            polyline(&mut svg, panel, values, COLORS[i % COLORS.len()]);
        }
    }
    for (i, s) in report.series.iter().enumerate() {
        let y = TOP + 20.0 * i as f64 + 10.0;
        let x = WIDTH - RIGHT + 15.0;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}" font-size="12">{}</text>"#,
            x + 20.0,
            x + 26.0,
            y + 4.0,
            escape(s.policy)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_ms: u64, busy_units: u64, waiting: u64) -> Sample {
        Sample {
            t_ms,
            busy_units,
            waiting,
        }
    }

    #[test]
    fn buckets_are_time_weighted() {
        // 2 busy on [0, 50), 4 on [50, 100): two buckets of 50.
        let v = bucket_means(&[s(0, 2, 0), s(50, 4, 0)], 100, 2, |x| x.busy_units as f64);
        assert_eq!(v, [2.0, 4.0]);
        // One bucket: the average.
        let v = bucket_means(&[s(0, 2, 0), s(25, 4, 0)], 100, 1, |x| x.busy_units as f64);
        assert_eq!(v, [3.5]);
        assert_eq!(bucket_means(&[], 0, 3, |_| 1.0), [0.0; 3]);
    }

    #[test]
    fn nice_axis() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(2100.0), 2500.0);
    }

    #[test]
    fn escapes_text() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
