//! The openb trace through the scheduler core: reading errors name file,
//! line and column; inflation is deterministic, never oversubscribes, and
//! FGD leaves fewer GPUs unallocated than best-fit.

use std::path::{Path, PathBuf};

use joblet_sched::model::Strategy;
use joblet_sim::openb::inflate::inflate;
use joblet_sim::openb::trace::{read_nodes, read_pods};
use joblet_sim::openb::{simulate_openb, InflateOptions, OpenbMode, OpenbOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces/alibaba-openb")
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

const POD_HEADER: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

#[test]
fn bad_rows_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "pods.csv",
        &format!(
            "{POD_HEADER}a,1000,10,1,500,,LS,Running,0,5,0\nb,1000,10,2,500,,LS,Running,0,5,0\n"
        ),
    );
    let e = read_pods(&p).unwrap_err().to_string();
    assert!(
        e.contains("pods.csv:3") && e.contains("`gpu_milli`") && e.contains("`500`"),
        "{e}"
    );
    let p = write(
        dir.path(),
        "pods2.csv",
        &format!("{POD_HEADER}a,x,10,1,500,,LS,Running,0,5,0\n"),
    );
    let e = read_pods(&p).unwrap_err().to_string();
    assert!(
        e.contains("pods2.csv:2") && e.contains("`cpu_milli`"),
        "{e}"
    );
    let n = write(
        dir.path(),
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu\nn0,1000,10,2\n",
    );
    let e = read_nodes(&n).unwrap_err().to_string();
    assert!(
        e.contains("nodes.csv") && e.contains("no model column"),
        "{e}"
    );
    let p = write(
        dir.path(),
        "spec.csv",
        &format!("{POD_HEADER}a,1000,10,1,500,V100M16|V100M32,LS,Running,0,5,0\n"),
    );
    let n = write(
        dir.path(),
        "nodes2.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn0,1000,10,2,T4\n",
    );
    let opts = OpenbOptions {
        pods: p,
        nodes: n,
        strategies: vec![Strategy::Fgd],
        mode: OpenbMode::Replay,
        plot: None,
    };
    let e = simulate_openb(&opts).unwrap_err().to_string();
    assert!(
        e.contains("spec.csv:2") && e.contains("gpu_spec") && e.contains("V100M16|V100M32"),
        "{e}"
    );
}

/// A deterministic subsample of the real trace: every 4th pod, every 4th
/// node (fast in debug builds).
#[test]
fn fgd_leaves_fewer_gpus_unallocated_than_best_fit() {
    let dir = fixtures();
    let pods = read_pods(&dir.join("openb_pod_list_default.csv")).unwrap();
    let nodes = read_nodes(&dir.join("openb_node_list_gpu_node.csv")).unwrap();
    let pods: Vec<_> = pods.into_iter().step_by(4).collect();
    let nodes: Vec<_> = nodes.into_iter().step_by(4).collect();
    let opts = InflateOptions {
        target_pct: 110,
        ..InflateOptions::default()
    };
    let fgd = inflate(&pods, &nodes, Strategy::Fgd, opts).unwrap();
    let best = inflate(&pods, &nodes, Strategy::BestFit, opts).unwrap();
    let again = inflate(&pods, &nodes, Strategy::Fgd, opts).unwrap();
    assert_eq!(
        (&again.levels, again.at_100),
        (&fgd.levels, fgd.at_100),
        "same seed, same run"
    );
    let (f, b) = (fgd.at_100.unallocated_gpus, best.at_100.unallocated_gpus);
    assert!(f < b, "fgd leaves {f} GPUs unallocated, best-fit {b}");
    // Levels rise with the arrived workload and never pass 100%.
    for run in [&fgd, &best] {
        assert_eq!(run.levels.len(), 22, "{}", run.strategy);
        for w in run.levels.windows(2) {
            assert!(w[0].allocated_gpu_share <= w[1].allocated_gpu_share);
            assert!(w[1].allocated_gpu_share <= 1.0);
        }
    }
}

#[test]
fn replay_and_plot_cover_every_strategy() {
    let tmp = tempfile::tempdir().unwrap();
    let pods = write(tmp.path(), "pods.csv", &format!(
        "{POD_HEADER}a,1000,10,1,500,,LS,Running,0,50,0\nb,1000,10,1,600,,LS,Running,10,40,0\nc,1000,10,2,1000,,LS,Running,20,30,0\nd,500,10,0,0,,LS,Running,25,35,0\n"
    ));
    let nodes = write(
        tmp.path(),
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn0,4000,100,2,T4\nn1,4000,100,1,T4\n",
    );
    let svg = tmp.path().join("plot.svg");
    let all = joblet_sim::openb::ALL_STRATEGIES.to_vec();
    let opts = OpenbOptions {
        pods,
        nodes,
        strategies: all.clone(),
        mode: OpenbMode::Replay,
        plot: Some(svg.clone()),
    };
    let r = simulate_openb(&opts).unwrap();
    assert_eq!(r.replay.len(), 5);
    for run in &r.replay {
        assert_eq!(run.pods, 4);
        assert!(run.peak_allocated_gpu_share <= 1.0);
    }
    let body = std::fs::read_to_string(&svg).unwrap();
    for s in ["fgd", "best-fit", "pack", "spread", "topology"] {
        // plotters writes each text on its own line inside <text>.
        assert!(
            body.lines().any(|l| l.trim() == s),
            "no legend entry for {s}"
        );
    }
    assert!(
        body.matches("<polyline").count() >= 5,
        "a line per strategy"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["mode"], "replay");
    assert!(json["replay"][0]["mean_allocated_gpu_share"].is_number());
}
