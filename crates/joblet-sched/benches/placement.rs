//! Placement speed: place + allocate + release decisions on 1,000 DGX-like
//! nodes (2 NUMA × 4 GPUs, one NVLink group) kept at ~70% load by mixed
//! 1/2/4/8-GPU jobs, and on 1 node × 8 GPUs. Criterion measures the mean;
//! a separate timed run prints the median / p99 decision latency.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use joblet_sched::cluster::ClusterState;
use joblet_sched::model::{GpuSpec, JobRequest, NodeSpec, Sharing, Strategy, WorkloadClass};
use joblet_sched::place::place;

fn dgx(nodes: u32) -> Vec<NodeSpec> {
    (0..nodes)
        .map(|id| NodeSpec {
            id,
            capacity: Default::default(),
            gpus: (0..8)
                .map(|index| GpuSpec {
                    index,
                    uuid: format!("GPU-{id}-{index}"),
                    memory_mb: 81_920,
                    numa: index / 4,
                    socket: index / 4,
                    nvlink_group: Some(0),
                    compute_capability: (9, 0),
                    mig: Vec::new(),
                })
                .collect(),
        })
        .collect()
}

/// A steady stream of jobs holding the cluster at a target load.
struct Churn {
    state: ClusterState,
    running: VecDeque<String>,
    target: u32,
    seq: u64,
    rng: u64,
    sharing: Sharing,
    strategy: Strategy,
}

impl Churn {
    fn new(nodes: u32, load: f64, sharing: Sharing, strategy: Strategy) -> Churn {
        let state = ClusterState::new(dgx(nodes));
        let target = (f64::from(state.total_units()) * load) as u32;
        let mut c = Churn {
            state,
            running: VecDeque::new(),
            target,
            seq: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
            sharing,
            strategy,
        };
        for _ in 0..(nodes as usize * 40) {
            c.step();
        }
        c
    }

    fn used(&self) -> u32 {
        self.state.total_units() - self.state.free_units()
    }

    /// 1 GPU 40%, 2 GPUs 25%, 4 GPUs 20%, 8 GPUs 15% (these may cross NUMA).
    fn next_request(&mut self) -> JobRequest {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let n = match self.rng % 100 {
            0..40 => 1,
            40..65 => 2,
            65..85 => 4,
            _ => 8,
        };
        self.seq += 1;
        JobRequest {
            gpu_milli: 0,
            job: format!("job-{}", self.seq),
            owner: "bench".into(),
            queue: "default".into(),
            gpu_count: n,
            gpu_memory_mb: if self.sharing == Sharing::Shared {
                20_000
            } else {
                0
            },
            sharing: self.sharing,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: n > 4,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        }
    }

    /// One decision: release the oldest job when at the target load, then
    /// place (and allocate) a new one.
    fn step(&mut self) -> bool {
        if self.used() >= self.target {
            if let Some(j) = self.running.pop_front() {
                self.state.release(&j);
            }
        }
        let req = self.next_request();
        match place(&self.state, &req, self.strategy) {
            Some(p) => {
                let job = p.job.clone();
                self.state.allocate(p).expect("placement is accepted");
                self.running.push_back(job);
                true
            }
            None => false,
        }
    }
}

fn percentiles(label: &str, mut c: Churn, steps: usize) {
    let mut lat: Vec<Duration> = Vec::with_capacity(steps);
    let mut placed = 0;
    let start = Instant::now();
    for _ in 0..steps {
        let t = Instant::now();
        placed += usize::from(black_box(c.step()));
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    c.state.verify().expect("invariants hold after the run");
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "{label}: {steps} decisions ({placed} placed), load {:.0}%, {:.0} decisions/s, \
         median {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        100.0 * f64::from(c.used()) / f64::from(c.state.total_units()),
        steps as f64 / total.as_secs_f64(),
        q(0.5),
        q(0.99),
        q(0.999),
        lat[lat.len() - 1],
    );
}

fn criterion_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("placement");
    g.throughput(Throughput::Elements(1));
    for (name, nodes) in [("1000x8", 1000), ("1x8", 1)] {
        let mut churn = Churn::new(nodes, 0.7, Sharing::Exclusive, Strategy::Topology);
        g.bench_function(format!("decision/{name}/topology"), |b| {
            b.iter(|| black_box(churn.step()))
        });
    }
    for st in [Strategy::Pack, Strategy::Spread, Strategy::BestFit] {
        let mut churn = Churn::new(1000, 0.7, Sharing::Exclusive, st);
        g.bench_function(format!("decision/1000x8/{st:?}"), |b| {
            b.iter(|| black_box(churn.step()))
        });
    }
    let mut churn = Churn::new(1000, 0.7, Sharing::Shared, Strategy::Topology);
    g.bench_function("decision/1000x8/shared-scan", |b| {
        b.iter(|| black_box(churn.step()))
    });
    g.finish();
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test --benches` run briefly.
    let full = std::env::args().any(|a| a == "--bench");
    let steps = if full { 200_000 } else { 1_000 };
    let quick = if full { 20_000 } else { 200 };
    percentiles(
        "1000x8 topology",
        Churn::new(1000, 0.7, Sharing::Exclusive, Strategy::Topology),
        steps,
    );
    for st in [Strategy::Pack, Strategy::Spread, Strategy::BestFit] {
        percentiles(
            &format!("1000x8 {st:?}"),
            Churn::new(1000, 0.7, Sharing::Exclusive, st),
            steps,
        );
    }
    percentiles(
        "1x8 topology",
        Churn::new(1, 0.7, Sharing::Exclusive, Strategy::Topology),
        steps,
    );
    percentiles(
        "1000x8 shared (scan path)",
        Churn::new(1000, 0.7, Sharing::Shared, Strategy::Topology),
        quick,
    );
    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
}
