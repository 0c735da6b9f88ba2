//! joblet's own series from a [`Snapshot`] and the engine's metrics
//! (pure), all named `joblet_*` and clean under `promtool check metrics`
//! (base units in names, `_total` on counters only, snake_case labels).
//!
//! - `joblet_jobs{state}`, `joblet_queue_length{policy,owner}`;
//! - per GPU: `joblet_gpu_state{gpu,uuid,state}` (1 for its state, 0 for
//!   the others), `joblet_gpu_placements_paused`, `joblet_gpu_jobs`;
//! - per running job (`job_id`, `owner`): CPU seconds, memory and IO bytes
//!   from its cgroups, and per GPU (`gpu`, `uuid`) the memory, SM
//!   utilisation and number of its own processes there, attributed per
//!   process (on a shared GPU each job sees only its own);
//! - `joblet_owner_gpu_seconds_total{owner}` from the GPU audit log;
//! - in cluster mode, what this node did as the scheduler leader:
//!   `joblet_cluster_leader_terms_total`, `joblet_cluster_plans_total`,
//!   `joblet_cluster_plans_rejected_total`,
//!   `joblet_cluster_placements_total`;
//! - the engine's counters and histograms ([`super::engine`]).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use joblet_core::gpu::GpuState;
use joblet_core::JobState;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::engine::EngineMetrics;
use super::snapshot::{LeaderCounts, Snapshot};

type Labels = Vec<(String, String)>;
type FloatGauge = Family<Labels, Gauge<f64, AtomicU64>>;
type IntGauge = Family<Labels, Gauge>;
type FloatCounter = Family<Labels, Counter<f64, AtomicU64>>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The registry of joblet's own series for `snap`.
pub fn registry(snap: &Snapshot, engine: &EngineMetrics) -> Registry {
    let mut r = Registry::default();
    jobs(snap, &mut r);
    gpus(snap, &mut r);
    job_usage(snap, &mut r);
    let owners = FloatCounter::default();
    for (owner, secs) in &snap.gpu_seconds_by_owner {
        owners
            .get_or_create(&labels(&[("owner", owner)]))
            .inc_by(*secs);
    }
    r.register(
        "joblet_owner_gpu_seconds",
        "GPU-seconds held by each owner's jobs, from the GPU audit log (a shared GPU counts whole)",
        owners,
    );
    if let Some(c) = snap.cluster {
        cluster(c, &mut r);
    }
    engine.register(&mut r);
    r
}

/// The scheduler-leader counters (cluster mode).
fn cluster(c: LeaderCounts, r: &mut Registry) {
    for (name, help, value) in [
        (
            "joblet_cluster_leader_terms",
            "Terms this node led the cluster's scheduler",
            c.terms,
        ),
        (
            "joblet_cluster_plans",
            "Placement plans this node committed to etcd as the scheduler leader (fenced transactions)",
            c.plans,
        ),
        (
            "joblet_cluster_plans_rejected",
            "Plans etcd rejected (a compare failed: another writer or a lost term); each is followed by a full re-read",
            c.rejected,
        ),
        (
            "joblet_cluster_placements",
            "Jobs this node placed as the scheduler leader",
            c.placements,
        ),
    ] {
        let counter: Counter = Counter::default();
        counter.inc_by(value);
        r.register(name, help, counter);
    }
}

/// Appends joblet's own series to `out` (Prometheus text format 0.0.4).
pub fn encode(snap: &Snapshot, engine: &EngineMetrics, out: &mut String) -> std::fmt::Result {
    prometheus_text::encode(out, &registry(snap, engine))
}

fn jobs(snap: &Snapshot, r: &mut Registry) {
    let by_state = IntGauge::default();
    for state in JobState::ALL.into_iter().filter(|s| !s.is_terminal()) {
        let n = snap
            .jobs
            .iter()
            .filter(|j| j.state == state.as_str())
            .count();
        by_state
            .get_or_create(&labels(&[("state", state.as_str())]))
            .set(n as i64);
    }
    r.register("joblet_jobs", "Jobs not yet finished, by state", by_state);
    let mut queued: BTreeMap<&str, i64> = BTreeMap::new();
    for j in snap
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Queued.as_str())
    {
        *queued.entry(&j.owner).or_default() += 1;
    }
    let queue = IntGauge::default();
    for (owner, n) in queued {
        queue
            .get_or_create(&labels(&[("policy", &snap.policy), ("owner", owner)]))
            .set(n);
    }
    r.register(
        "joblet_queue_length",
        "Jobs waiting to start, by the node's scheduling policy and owner",
        queue,
    );
}

fn gpus(snap: &Snapshot, r: &mut Registry) {
    let state = IntGauge::default();
    let paused = IntGauge::default();
    let held = IntGauge::default();
    for g in &snap.gpus {
        let index = g.info.index.to_string();
        let gpu = [("gpu", index.as_str()), ("uuid", g.info.uuid.as_str())];
        if let Some(current) = &g.state {
            for s in GpuState::ALL {
                let mut l = labels(&gpu);
                l.push(("state".into(), s.as_str().into()));
                state
                    .get_or_create(&l)
                    .set(i64::from(s.as_str() == current));
            }
        }
        paused.get_or_create(&labels(&gpu)).set(i64::from(g.paused));
        held.get_or_create(&labels(&gpu)).set(g.jobs.len() as i64);
    }
    r.register(
        "joblet_gpu_state",
        "1 for the GPU's state in the pool, 0 for the other states",
        state,
    );
    r.register(
        "joblet_gpu_placements_paused",
        "1 while new placements on the GPU are paused (temperature)",
        paused,
    );
    r.register(
        "joblet_gpu_jobs",
        "Jobs holding the GPU or one of its MIG slices",
        held,
    );
}

fn job_usage(snap: &Snapshot, r: &mut Registry) {
    let cpu = FloatCounter::default();
    let memory = IntGauge::default();
    let read = FloatCounter::default();
    let written = FloatCounter::default();
    let gpu_memory = IntGauge::default();
    let gpu_sm = FloatGauge::default();
    let gpu_procs = IntGauge::default();
    for j in &snap.jobs {
        let job = [("job_id", j.id.as_str()), ("owner", j.owner.as_str())];
        if let Some(u) = &j.usage {
            if let Some(s) = u.cpu_seconds {
                cpu.get_or_create(&labels(&job)).inc_by(s);
            }
            if let Some(b) = u.memory_bytes {
                memory
                    .get_or_create(&labels(&job))
                    .set(i64::try_from(b).unwrap_or(i64::MAX));
            }
            if let Some(b) = u.io_read_bytes {
                read.get_or_create(&labels(&job)).inc_by(b as f64);
            }
            if let Some(b) = u.io_write_bytes {
                written.get_or_create(&labels(&job)).inc_by(b as f64);
            }
        }
        for g in &j.gpus {
            let index = g.index.to_string();
            let mut l = labels(&job);
            l.push(("gpu".into(), index));
            l.push(("uuid".into(), g.uuid.clone()));
            gpu_memory
                .get_or_create(&l)
                .set(i64::try_from(g.memory_bytes).unwrap_or(i64::MAX));
            gpu_procs.get_or_create(&l).set(i64::from(g.processes));
            if let Some(pct) = g.sm_pct {
                gpu_sm.get_or_create(&l).set(f64::from(pct) / 100.0);
            }
        }
    }
    r.register(
        "joblet_job_cpu_seconds",
        "CPU time used by the job's processes (cgroup)",
        cpu,
    );
    r.register(
        "joblet_job_memory_bytes",
        "Memory the job's cgroup uses now",
        memory,
    );
    r.register(
        "joblet_job_io_read_bytes",
        "Bytes the job's processes read from block devices (cgroup)",
        read,
    );
    r.register(
        "joblet_job_io_written_bytes",
        "Bytes the job's processes wrote to block devices (cgroup)",
        written,
    );
    r.register(
        "joblet_job_gpu_memory_bytes",
        "GPU memory used by the job's own processes on the GPU (per process, from NVML)",
        gpu_memory,
    );
    r.register(
        "joblet_job_gpu_sm_utilization_ratio",
        "SM utilisation of the job's own processes on the GPU, 0 to 1 per GPU (per process, from NVML)",
        gpu_sm,
    );
    r.register(
        "joblet_job_gpu_processes",
        "The job's processes NVML lists on the GPU",
        gpu_procs,
    );
}
