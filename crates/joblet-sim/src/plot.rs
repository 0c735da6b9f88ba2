//! An SVG of GPU utilisation and queue length over simulated time, one
//! line per policy (time-weighted averages over 600 buckets), drawn with
//! `plotters`.

use plotters::prelude::*;

use crate::run::Sample;
use crate::SimReport;

const BUCKETS: usize = 600;

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

/// One panel: `lines[i]` is policy `names[i]`'s bucket means, drawn at the
/// buckets' middles over [0, end) in `unit`s.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y: (f64, &str),
    x: (f64, &str),
    names: &[&str],
    lines: &[Vec<f64>],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x.0.max(f64::MIN_POSITIVE), 0.0..y.0)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(x.1)
        .y_desc(y.1)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, values)) in names.iter().zip(lines).enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let n = values.len().max(1) as f64;
        let pts = values
            .iter()
            .enumerate()
            .map(|(k, v)| (x.0 * (k as f64 + 0.5) / n, v.clamp(0.0, y.0)));
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(1)))
            .map_err(|x| e(&x))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    Ok(())
}

/// The SVG document for a report: GPU utilisation (%) and queue length
/// over time, one line per policy, drawn with `plotters`.
pub fn svg(report: &SimReport) -> Result<String, String> {
    let end_ms = report
        .series
        .iter()
        .filter_map(|s| s.samples.last().map(|l| l.t_ms))
        .max()
        .unwrap_or(0);
    let end_s = end_ms as f64 / 1000.0;
    let (unit_s, unit) = if end_s > 3.0 * 86_400.0 {
        (86_400.0, "time (days)")
    } else if end_s > 3.0 * 3600.0 {
        (3600.0, "time (hours)")
    } else {
        (60.0, "time (minutes)")
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
    let names: Vec<&str> = report.series.iter().map(|s| s.policy).collect();
    let filter = report
        .filter
        .as_ref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    let title = format!(
        "{}{filter}: {} jobs on {} GPUs",
        report.trace, report.jobs, report.cluster
    );
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let root = root.titled(&title, ("sans-serif", 16)).map_err(|x| e(&x))?;
        let panels = root.split_evenly((2, 1));
        let x = (end_s / unit_s, unit);
        panel(
            &panels[0],
            "GPU utilisation",
            (100.0, "%"),
            x,
            &names,
            &util,
        )?;
        panel(
            &panels[1],
            "Queue length (waiting jobs)",
            (q_max, "jobs"),
            x,
            &names,
            &queue,
        )?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(out)
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
    fn a_line_and_legend_entry_per_policy_in_both_panels() {
        let series = |policy| crate::PolicySeries {
            policy,
            samples: vec![s(0, 2, 1), s(60_000, 4, 0)],
        };
        let report = SimReport {
            trace: "t.csv".into(),
            filter: None,
            jobs: 2,
            cluster: "1x4".into(),
            nodes: 1,
            gpus_per_node: 4,
            gpu_memory_gb: 32,
            time_limits: "",
            default_policy: "fifo",
            checkpoint_interval_ms: 0,
            restore_cost_ms: 0,
            policies: Vec::new(),
            series: vec![series("fifo"), series("las")],
        };
        let svg = svg(&report).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for i in 0..2 {
            let c = Palette99::pick(i).to_rgba();
            let stroke = format!("stroke=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            let lines = svg
                .lines()
                .filter(|l| l.starts_with("<polyline") && l.contains(&stroke))
                .count();
            // In each of the 2 panels: the line and its legend sample.
            assert_eq!(lines, 4, "policy {i}: a line per panel");
        }
        for text in [
            "fifo",
            "las",
            "GPU utilisation",
            "Queue length (waiting jobs)",
        ] {
            assert_eq!(
                svg.lines().filter(|l| l.trim() == text).count(),
                if text.len() < 5 { 2 } else { 1 },
                "{text}"
            );
        }
    }
}
