//! What the engine observes as it goes: job starts, ends and failures by
//! reason, how long a start takes and how long jobs wait, and how long the
//! scheduler core takes per decision.
//!
//! The engine's loop records into [`engine()`], the daemon's one set of
//! these metrics: there is one engine per daemon, and a process-wide set
//! keeps the engine's constructor (and every test that builds one)
//! unchanged. Each scrape registers the same metrics (they are shared
//! handles) into its registry. Tests build their own [`EngineMetrics`].

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// The engine's counters and histograms.
#[derive(Debug, Clone)]
pub struct EngineMetrics {
    starts: Counter,
    start_failures: Counter,
    ends: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    start_latency: Histogram,
    queue_wait: Histogram,
    decision: Histogram,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        EngineMetrics {
            starts: Counter::default(),
            start_failures: Counter::default(),
            ends: Family::default(),
            failures: Family::default(),
            // 1 ms .. 10 s: a start on an idle node takes ~10 ms.
            start_latency: Histogram::new([
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            // 10 ms .. 1 h.
            queue_wait: Histogram::new([0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0]),
            // 10 µs .. 100 ms: one event through the core.
            decision: Histogram::new([
                0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                0.025, 0.1,
            ]),
        }
    }
}

static ENGINE: LazyLock<EngineMetrics> = LazyLock::new(EngineMetrics::default);

/// The daemon's engine metrics.
pub fn engine() -> &'static EngineMetrics {
    &ENGINE
}

impl EngineMetrics {
    /// One event handled by the scheduler core in `took`.
    pub fn decided(&self, took: Duration) {
        self.decision.observe(took.as_secs_f64());
    }

    /// A job the core decided to start at `decided_ms`, submitted at
    /// `created_ms`, whose start took `took` and `started` or not.
    pub fn launched(&self, created_ms: i64, decided_ms: i64, took: Duration, started: bool) {
        let waited = decided_ms.saturating_sub(created_ms).max(0) as f64 / 1000.0;
        self.queue_wait.observe(waited);
        if started {
            self.starts.inc();
            self.start_latency.observe(took.as_secs_f64());
        } else {
            // Its end (FAILED, with why) is counted by `ended`.
            self.start_failures.inc();
        }
    }

    /// A job reached its final state `state` (`COMPLETED`, `FAILED`, ...).
    pub fn ended(&self, state: &str, exit_code: Option<i32>, reason: &str) {
        self.ends
            .get_or_create(&vec![("state".into(), state.to_owned())])
            .inc();
        if state == "FAILED" {
            self.failures
                .get_or_create(&vec![(
                    "reason".into(),
                    reason_class(exit_code, reason).to_owned(),
                )])
                .inc();
        }
    }

    /// Registers these metrics (shared handles) into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "joblet_job_starts",
            "Jobs whose process started",
            self.starts.clone(),
        );
        registry.register(
            "joblet_job_start_failures",
            "Jobs the node could not start (each also ends FAILED)",
            self.start_failures.clone(),
        );
        registry.register(
            "joblet_job_ends",
            "Jobs that reached a final state, by state",
            self.ends.clone(),
        );
        registry.register(
            "joblet_job_failures",
            "Jobs that ended FAILED, by reason class",
            self.failures.clone(),
        );
        registry.register(
            "joblet_job_start_latency_seconds",
            "From the scheduler's decision to start a job to its process running",
            self.start_latency.clone(),
        );
        registry.register(
            "joblet_job_queue_wait_seconds",
            "From a job's submission to the scheduler's decision to start it",
            self.queue_wait.clone(),
        );
        registry.register(
            "joblet_scheduler_decision_seconds",
            "Time the scheduler core takes for one event",
            self.decision.clone(),
        );
    }
}

/// A bounded label for why a job failed (its reason is free text).
pub fn reason_class(exit_code: Option<i32>, reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.contains("out of memory") {
        "oom"
    } else if r.contains("gpu memory quota") {
        "gpu_memory_quota"
    } else if r.contains("gpu time") {
        "gpu_time_limit"
    } else if r.contains("timed out") || r.contains("timeout") || r.contains("time limit") {
        "timeout"
    } else if r.contains("xid") || r.contains("gpu") {
        "gpu_failure"
    } else if r.contains("lost") || r.contains("directory was removed") {
        "lost"
    } else if exit_code.is_some_and(|c| c != 0) {
        "exit_code"
    } else if r.contains("signal") || r.contains("killed") {
        "signal"
    } else {
        "other"
    }
}
