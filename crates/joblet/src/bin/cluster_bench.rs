//! `joblet-cluster-bench`: placements per second through etcd.
//!
//! Registers `--nodes` simulated nodes (8 GPUs each by default) under a
//! fresh key prefix, starts the real scheduler leader (the daemon's
//! `cluster::leader` on `joblet_cluster`'s core), then submits `--jobs`
//! job entries as fast as etcd takes them, `--batch` per transaction, and
//! measures from the first submission to the last job's assignment (every
//! placement is a fenced transaction that writes the allocation, the
//! assignment and the entry). Prints one JSON line. Used by
//! `bench/cluster-placement.sh`, which starts the etcd members.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use etcd_client::{Client, EventType, GetOptions, Txn, TxnOp, WatchOptions};
use joblet::cluster::leader::{self, LeaderCounters};
use joblet::cluster::lease;
use joblet_cluster::records::{decode, encode, JobEntry, JobPhase, NodeRecord};
use joblet_cluster::{Keys, RestartPolicy};
use joblet_core::JobId;
use joblet_engine::{JobRules, Submission};
use joblet_sched::model::{GpuSpec, NodeSpec, SchedConfig};

#[derive(Parser)]
#[command(about = "Placements per second through etcd with simulated nodes (prints one JSON line)")]
struct Args {
    /// etcd client endpoints
    #[arg(long, value_delimiter = ',', required = true)]
    etcd: Vec<String>,
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// Jobs to place (each node runs at most 64 at once, a daemon's
    /// default `jobs.max_running`)
    #[arg(long, default_value_t = 6_000)]
    jobs: usize,
    /// GPUs per job; with more jobs than GPUs, set 0 (CPU-only placements)
    #[arg(long, default_value_t = 0)]
    gpus_per_job: u32,
    /// Job entries per submission transaction
    #[arg(long, default_value_t = 100)]
    batch: usize,
    #[arg(long, default_value = "/joblet-bench")]
    prefix: String,
}

fn node(i: usize, gpus: u32) -> NodeRecord {
    NodeRecord {
        name: format!("sim-{i:03}"),
        address: format!("10.1.{}.{}:50051", i / 250, i % 250 + 1),
        spec: NodeSpec {
            id: 0,
            gpus: (0..gpus)
                .map(|g| GpuSpec {
                    index: g,
                    uuid: format!("GPU-sim-{i:03}-{g}"),
                    memory_mb: 81_920,
                    numa: g / 4,
                    socket: g / 4,
                    nvlink_group: Some(0),
                    compute_capability: (9, 0),
                    mig: Vec::new(),
                })
                .collect(),
            // A daemon's default `jobs.max_running`.
            capacity: joblet_sched::model::NodeCapacity {
                max_jobs: Some(64),
                ..Default::default()
            },
        },
        health: Vec::new(),
        labels: BTreeMap::new(),
        scheduler: i == 0,
        gpu_models: vec!["NVIDIA H100 80GB HBM3 (simulated)".into(); gpus as usize],
        started_at: 0,
    }
}

fn entry(n: usize, gpus: u32) -> anyhow::Result<JobEntry> {
    let id = JobId::parse(&format!("00000000-0000-4000-8000-{n:012}"))?;
    let (mut spec, _) = joblet_core::JobRequest {
        command: "true".into(),
        ..Default::default()
    }
    .validate()?;
    spec.resources.gpu_count = gpus;
    Ok(JobEntry {
        owner: "bench".into(),
        submission: Submission::of(id, "bench", &spec, &JobRules::default()),
        spec,
        submitted_at: 0,
        via: "bench".into(),
        restart: RestartPolicy::Never,
        phase: JobPhase::Queued {
            attempt: 1,
            reason: None,
        },
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let keys = Keys::new(&a.prefix);
    let mut client = Client::connect(&a.etcd, None)
        .await
        .context("connecting to etcd")?;
    client
        .delete(
            format!("{}/", a.prefix),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await?;
    for i in 1..a.nodes {
        let r = node(i, a.gpus_per_node);
        client.put(keys.node(&r.name), encode(&r), None).await?;
    }
    // The leader's own node, on a lease like a daemon's.
    let fence = std::env::temp_dir().join(format!("joblet-bench-fence-{}", std::process::id()));
    let pool = joblet::cluster::EtcdPool::with_endpoints(&a.etcd).await?;
    let membership = lease::start(
        pool.clone(),
        keys.clone(),
        node(0, a.gpus_per_node),
        Duration::from_secs(10),
        fence.clone(),
        std::sync::Arc::new(Vec::new),
    );
    let counters = Arc::new(LeaderCounters::default());
    let sched = SchedConfig {
        policy: joblet_sched::model::Policy::Fifo,
        ..SchedConfig::default()
    };
    leader::start(
        pool,
        keys.clone(),
        "sim-000".into(),
        membership,
        sched,
        counters.clone(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.terms.load(Ordering::Relaxed) == 0 {
        if Instant::now() > deadline {
            bail!("no leader after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every job becomes assigned: counted from the watch.
    let rev = client
        .get(
            keys.jobs(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await?
        .header()
        .map_or(0, |h| h.revision());
    let mut watch = client
        .watch(
            keys.jobs(),
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(rev + 1),
            ),
        )
        .await?;
    let total = a.jobs;
    let waiter = tokio::spawn(async move {
        let mut assigned = 0usize;
        while assigned < total {
            let Ok(Some(resp)) = watch.message().await else {
                break;
            };
            for ev in resp.events() {
                if ev.event_type() != EventType::Put {
                    continue;
                }
                let Some(kv) = ev.kv() else { continue };
                if let Ok(e) = decode::<JobEntry>("job entry", "", kv.value()) {
                    if matches!(e.phase, JobPhase::Assigned { .. }) {
                        assigned += 1;
                    }
                }
            }
        }
        (assigned, Instant::now())
    });
    let entries: Vec<JobEntry> = (0..a.jobs)
        .map(|n| entry(n, a.gpus_per_job))
        .collect::<Result<_, _>>()?;
    let start = Instant::now();
    for chunk in entries.chunks(a.batch.max(1)) {
        let ops: Vec<TxnOp> = chunk
            .iter()
            .map(|e| TxnOp::put(keys.job(e.id()), encode(e), None))
            .collect();
        client.txn(Txn::new().and_then(ops)).await?;
    }
    let submitted = start.elapsed();
    let (assigned, done) = tokio::time::timeout(Duration::from_secs(600), waiter)
        .await
        .context("placements did not finish in 10 minutes")??;
    let secs = done.duration_since(start).as_secs_f64();
    let plans = counters.plans.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "nodes": a.nodes,
            "gpus_per_node": a.gpus_per_node,
            "jobs": a.jobs,
            "gpus_per_job": a.gpus_per_job,
            "assigned": assigned,
            "submit_s": submitted.as_secs_f64(),
            "total_s": secs,
            "placements_per_s": assigned as f64 / secs,
            "plans": plans,
            "jobs_per_plan": assigned as f64 / plans.max(1) as f64,
            "rejected_plans": counters.rejected.load(Ordering::Relaxed),
        })
    );
    client
        .delete(
            format!("{}/", a.prefix),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await?;
    let _ = std::fs::remove_file(fence);
    std::process::exit(0);
}
