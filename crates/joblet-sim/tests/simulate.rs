//! End-to-end simulations on the fixtures with every policy: every job
//! completes or is rejected with a reason, no GPU is ever oversubscribed,
//! and the metrics agree with each other and with the trace.

use std::path::{Path, PathBuf};

use joblet_sched::model::Policy;
use joblet_sim::run::{run_policy, ClusterShape, PreemptionCosts, RunResult};
use joblet_sim::trace::{read_trace, Trace, TraceFilter};
use joblet_sim::{metrics::metrics, simulate, SimOptions, ALL_POLICIES};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/traces")
        .join(name)
}

fn shape(nodes: u32, gpus_per_node: u32) -> ClusterShape {
    ClusterShape {
        nodes,
        gpus_per_node,
        gpu_memory_gb: 32,
    }
}

/// Checks one run against its trace; returns the metrics.
fn check(trace: &Trace, run: &RunResult) -> joblet_sim::PolicyMetrics {
    let m = metrics(run);
    let name = m.policy;
    assert_eq!(
        m.unfinished, 0,
        "{name}: jobs neither completed nor rejected"
    );
    assert_eq!(m.completed + m.rejected, trace.jobs.len(), "{name}");
    assert_eq!(m.max_oversubscription, 0, "{name}");
    assert!(m.verifies >= 1, "{name}");
    let mut work: u128 = 0;
    for (job, out) in trace.jobs.iter().zip(&run.jobs) {
        if let Some(reason) = &out.rejected {
            assert!(
                !reason.is_empty(),
                "{name}: line {} rejected without reason",
                job.line
            );
            assert!(out.end_ms.is_none(), "{name}: line {}", job.line);
            continue;
        }
        let (Some(start), Some(end)) = (out.first_start_ms, out.end_ms) else {
            panic!("{name}: line {} has no start/end: {out:?}", job.line);
        };
        assert!(
            start >= job.submit_ms,
            "{name}: line {} started before submission",
            job.line
        );
        assert!(
            end - job.submit_ms >= job.duration_ms,
            "{name}: line {} JCT < duration",
            job.line
        );
        if out.preemptions == 0 {
            assert_eq!(end - start, job.duration_ms, "{name}: line {}", job.line);
        }
        work += u128::from(job.gpus) * u128::from(job.duration_ms + out.lost_ms + out.restore_ms);
    }
    // Busy GPU·time is exactly the work done plus what preemptions cost
    // (work lost since the last checkpoint, restores): preempted jobs
    // resume from their checkpoint, and nothing else runs twice.
    assert_eq!(run.busy_unit_ms, work, "{name}: busy GPU·ms vs trace work");
    assert!(
        m.utilisation > 0.0 && m.utilisation <= 1.0,
        "{name}: {}",
        m.utilisation
    );
    assert!(m.jct.avg_s >= m.queueing_delay.avg_s, "{name}");
    assert!(
        m.jct.p50_s <= m.jct.p99_s && m.queueing_delay.p50_s <= m.queueing_delay.p99_s,
        "{name}"
    );
    let last_submit = trace.jobs.last().map_or(0, |j| j.submit_ms);
    assert!(m.makespan_s * 1000.0 >= last_submit as f64, "{name}");
    assert!(m.decisions >= (m.completed + m.rejected) as u64, "{name}");
    m
}

#[test]
fn tiresias_60_jobs_on_4x4_all_policies() {
    let trace = read_trace(&fixture("tiresias/60_job.csv"), &TraceFilter::default()).unwrap();
    let mut avg = Vec::new();
    for policy in ALL_POLICIES {
        let run = run_policy(&trace, shape(4, 4), policy, PreemptionCosts::DEFAULT).unwrap();
        let m = check(&trace, &run);
        // 8-GPU jobs span two 4-GPU nodes; nothing is too large for 16.
        assert_eq!(m.rejected, 0, "{policy:?}: {:?}", m.rejected_reasons);
        avg.push(m.jct.avg_s);
    }
    // The cluster is loaded (26,624 GPU·s of work in a 30-minute trace on
    // 16 GPUs), so jobs wait.
    assert!(avg.iter().all(|&a| a > 0.0));
}

#[test]
fn jobs_larger_than_the_cluster_are_rejected_with_the_reason() {
    let trace = read_trace(&fixture("tiresias/60_job.csv"), &TraceFilter::default()).unwrap();
    for policy in ALL_POLICIES {
        let run = run_policy(&trace, shape(1, 4), policy, PreemptionCosts::DEFAULT).unwrap();
        let m = check(&trace, &run);
        assert_eq!(m.rejected, 10, "{policy:?}: the ten 8-GPU jobs");
        assert_eq!(m.rejected_reasons.len(), 1, "{:?}", m.rejected_reasons);
        assert_eq!(m.rejected_reasons[0].jobs, 10);
        assert!(
            m.rejected_reasons[0].reason.contains('8'),
            "{:?}",
            m.rejected_reasons
        );
    }
}

#[test]
fn philly_slice_all_policies_and_deterministic() {
    let filter = TraceFilter {
        owner_or_queue: Some("b436b2".into()),
        limit: Some(300),
    };
    let trace = read_trace(&fixture("philly.csv"), &filter).unwrap();
    for policy in ALL_POLICIES {
        let a = run_policy(&trace, shape(16, 8), policy, PreemptionCosts::DEFAULT).unwrap();
        check(&trace, &a);
        let b = run_policy(&trace, shape(16, 8), policy, PreemptionCosts::DEFAULT).unwrap();
        assert_eq!(a.jobs, b.jobs, "{policy:?}: same trace, same outcome");
        assert_eq!(a.handle_calls, b.handle_calls);
    }
}

#[test]
fn simulate_reports_tables_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("p.svg");
    let opts = SimOptions {
        trace: fixture("tiresias/60_job.csv"),
        nodes: 2,
        gpus_per_node: 8,
        gpu_memory_gb: 32,
        policies: vec![Policy::Las, Policy::Fifo],
        filter: None,
        limit: Some(40),
        plot: Some(plot.clone()),
        costs: PreemptionCosts::DEFAULT,
    };
    let report = simulate(&opts).unwrap();
    assert_eq!(report.jobs, 40);
    assert_eq!(report.cluster, "2x8");
    let names: Vec<&str> = report.policies.iter().map(|m| m.policy).collect();
    assert_eq!(names, ["las", "fifo"]);
    let md = report.to_markdown();
    assert!(md.contains("| policy | jobs | done |"), "{md}");
    assert!(md.contains("| las | 40 | 40 | 0 | 0 |"), "{md}");
    assert!(
        md.contains("| fifo | 40 | 40 | 0 | 0 |") && md.contains("1.00×"),
        "{md}"
    );
    let text = report.to_text();
    assert!(text.lines().any(|l| l.starts_with("las ")), "{text}");
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["policies"][0]["policy"], "las");
    assert_eq!(json["policies"][1]["max_oversubscription"], 0);
    assert_eq!(json["jobs"], 40);
    assert!(json.get("series").is_none());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // plotters writes each label on its own line: a legend entry per
    // policy in each of the 2 panels.
    for policy in ["las", "fifo"] {
        assert_eq!(
            svg.lines().filter(|l| l.trim() == policy).count(),
            2,
            "{policy}"
        );
    }
    for panel in ["GPU utilisation", "Queue length (waiting jobs)"] {
        assert!(svg.lines().any(|l| l.trim() == panel), "{panel}");
    }
}

#[test]
fn simulate_refuses_bad_options() {
    let base = SimOptions {
        trace: fixture("tiresias/60_job.csv"),
        nodes: 1,
        gpus_per_node: 8,
        gpu_memory_gb: 32,
        policies: vec![Policy::Fifo],
        filter: None,
        limit: None,
        plot: None,
        costs: PreemptionCosts::DEFAULT,
    };
    let e = simulate(&SimOptions {
        policies: vec![],
        ..base.clone()
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("accepted: fifo, backfill, las"),
        "{e}"
    );
    let e = simulate(&SimOptions {
        nodes: 0,
        ..base.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("nodes must be at least 1"), "{e}");
    let e = simulate(&SimOptions {
        gpu_memory_gb: 0,
        ..base.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("--gpu-memory-gb"), "{e}");
    let e = simulate(&SimOptions {
        filter: Some("x".into()),
        ..base
    })
    .unwrap_err();
    assert!(e.to_string().contains("needs an owner/queue column"), "{e}");
}
