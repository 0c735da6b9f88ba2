//! The discrete-event simulation of one policy: trace submissions, job
//! completions and one-minute ticks (only while jobs wait) are fed to a
//! `joblet_sched::scheduler::Scheduler`; its actions are carried out at
//! once (a preempted job stops in the same instant), and an independent
//! [`Ledger`] checks that no GPU is ever oversubscribed.
//!
//! Requests: the trace's GPU count, exclusive, training, priority 0,
//! preemptible, cross-node only when larger than a node, no memory
//! minimum. Only `backfill` is told durations: its time limit is the job's
//! true duration (an exact estimate, backfill's best case); `fifo`, `las`
//! and `gittins` get no time limit.
//!
//! Preemption is not free ([`PreemptionCosts`], told to the scheduler
//! too): a job checkpoints every `checkpoint_interval_ms` of progress; a
//! preempted job keeps its progress up to its last checkpoint and loses
//! the rest, and its next run first restores for `restore_cost_ms` (no
//! progress meanwhile; a preemption during the restore keeps nothing of
//! that run). Each job's lost work, restore time and preemptions are
//! counted.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

use joblet_sched::model::{
    Action, Event, GpuRef, JobRequest, Placement, Policy, SchedConfig, Sharing, WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;

use crate::cluster::build_nodes;
use crate::error::SimError;
use crate::ledger::Ledger;
use crate::policy_name;
use crate::trace::Trace;

/// Simulated time between ticks while jobs wait.
pub const TICK_MS: u64 = 60_000;
/// Minimum simulated time between fragmentation samples.
const FRAG_SAMPLE_MS: u64 = 60_000;
/// `cluster().verify()` after this many `handle` calls (and at the end).
const VERIFY_EVERY: u64 = 4096;
/// Ticks with nothing running and nothing else to come before the run
/// gives up on the jobs still waiting (they are reported unfinished).
const MAX_IDLE_TICKS: u32 = 1440;

/// What a preemption costs a job in the simulation (and what the
/// scheduler is told it costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionCosts {
    /// Progress between checkpoints, ms; 0 = nothing is ever lost.
    pub checkpoint_interval_ms: u64,
    /// Run time a preempted job spends restoring when it starts again, ms.
    pub restore_cost_ms: u64,
}

impl PreemptionCosts {
    /// Preemption is free (the simulator's behaviour before costs).
    pub const FREE: PreemptionCosts = PreemptionCosts {
        checkpoint_interval_ms: 0,
        restore_cost_ms: 0,
    };

    /// The scheduler's defaults (30 min checkpoints, 2 min restore).
    pub const DEFAULT: PreemptionCosts = PreemptionCosts {
        checkpoint_interval_ms: joblet_sched::model::DEFAULT_CHECKPOINT_INTERVAL_MS,
        restore_cost_ms: joblet_sched::model::DEFAULT_RESTORE_COST_MS,
    };

    /// Progress kept and run time lost when preempted `t` ms into a run
    /// that started with `restore` ms of restoring.
    pub fn split(&self, t: u64, restore: u64) -> (u64, u64) {
        if t <= restore {
            return (0, 0);
        }
        let work = t - restore;
        match self.checkpoint_interval_ms {
            0 => (work, 0),
            c => (work - work % c, work % c),
        }
    }
}

/// The simulated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterShape {
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub gpu_memory_gb: u64,
}

/// What happened to one trace job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    pub submit_ms: u64,
    pub duration_ms: u64,
    pub gpus: u32,
    pub first_start_ms: Option<u64>,
    pub end_ms: Option<u64>,
    pub rejected: Option<String>,
    pub preemptions: u32,
    /// Progress lost to preemptions (since the last checkpoint), ms of
    /// run time (× `gpus` for GPU·ms).
    pub lost_ms: u64,
    /// Most progress lost by one preemption, ms.
    pub max_lost_ms: u64,
    /// Run time spent restoring after preemptions, ms.
    pub restore_ms: u64,
}

/// The cluster at one instant, for the plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub t_ms: u64,
    pub busy_units: u64,
    pub waiting: u64,
}

/// Everything one policy's run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub policy: Policy,
    pub total_units: u64,
    pub jobs: Vec<JobOutcome>,
    pub handle_calls: u64,
    pub handle_secs: f64,
    pub wall_secs: f64,
    pub max_oversubscription: u64,
    pub busy_unit_ms: u128,
    /// Fragmentation (free units useless to the smallest waiting gang)
    /// integrated over time, sampled at least a minute apart.
    pub frag_unit_ms: u128,
    /// Time of the last event.
    pub end_ms: u64,
    pub verifies: u64,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Pending,
    Waiting,
    Running { since: u64 },
    Done,
    Rejected,
}

// Event kinds in the order they are handled at equal times: completions
// free GPUs before new jobs arrive; ticks come last.
const COMPLETE: u8 = 0;
const SUBMIT: u8 = 1;
const TICK: u8 = 2;

/// (time, kind, sequence, job index, job generation): a min-heap entry.
type Scheduled = (u64, u8, u64, usize, u32);

struct Sim<'a> {
    policy: Policy,
    trace: &'a Trace,
    shape: ClusterShape,
    sched: Scheduler,
    ledger: Ledger,
    state: Vec<JobState>,
    costs: PreemptionCosts,
    /// Work left (ms of progress), excluding restores.
    remaining: Vec<u64>,
    /// Restore the job's next (or current) run starts with.
    restore: Vec<u64>,
    generation: Vec<u32>,
    /// Units each running job holds (from its Start), for the ledger.
    held: Vec<Vec<GpuRef>>,
    out: Vec<JobOutcome>,
    index: HashMap<String, usize>,
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    handle_calls: u64,
    handle_secs: f64,
    verifies: u64,
    samples: Vec<Sample>,
    frag_t: u64,
    frag_value: u64,
    frag_area: u128,
}

/// Runs the trace through one policy.
pub fn run_policy(
    trace: &Trace,
    shape: ClusterShape,
    policy: Policy,
    costs: PreemptionCosts,
) -> Result<RunResult, SimError> {
    let wall = Instant::now();
    let config = SchedConfig {
        policy,
        checkpoint_interval_ms: costs.checkpoint_interval_ms,
        restore_cost_ms: costs.restore_cost_ms,
        ..SchedConfig::default()
    };
    let nodes = build_nodes(shape.nodes, shape.gpus_per_node, shape.gpu_memory_gb);
    let n = trace.jobs.len();
    let mut sim = Sim {
        policy,
        trace,
        shape,
        sched: Scheduler::new(config, nodes),
        ledger: Ledger::new(shape.nodes, shape.gpus_per_node),
        state: vec![JobState::Pending; n],
        costs,
        remaining: trace.jobs.iter().map(|j| j.duration_ms).collect(),
        restore: vec![0; n],
        generation: vec![0; n],
        held: vec![Vec::new(); n],
        out: trace
            .jobs
            .iter()
            .map(|j| JobOutcome {
                submit_ms: j.submit_ms,
                duration_ms: j.duration_ms,
                gpus: j.gpus,
                first_start_ms: None,
                end_ms: None,
                rejected: None,
                preemptions: 0,
                lost_ms: 0,
                max_lost_ms: 0,
                restore_ms: 0,
            })
            .collect(),
        index: trace
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.line.to_string(), i))
            .collect(),
        heap: BinaryHeap::with_capacity(2 * n + 1),
        seq: 0,
        handle_calls: 0,
        handle_secs: 0.0,
        verifies: 0,
        samples: Vec::new(),
        frag_t: 0,
        frag_value: 0,
        frag_area: 0,
    };
    for (i, job) in trace.jobs.iter().enumerate() {
        sim.push(job.submit_ms, SUBMIT, i, 0);
    }
    let end_ms = sim.run()?;
    sim.verify(end_ms)?;
    Ok(RunResult {
        policy,
        total_units: u64::from(shape.nodes) * u64::from(shape.gpus_per_node),
        handle_calls: sim.handle_calls,
        handle_secs: sim.handle_secs,
        max_oversubscription: sim.ledger.max_oversubscription(),
        busy_unit_ms: sim.ledger.busy_unit_ms(end_ms),
        frag_unit_ms: sim.frag_area,
        end_ms,
        verifies: sim.verifies,
        samples: sim.samples,
        jobs: sim.out,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

impl Sim<'_> {
    fn push(&mut self, t: u64, kind: u8, job: usize, generation: u32) {
        self.seq += 1;
        self.heap
            .push(Reverse((t, kind, self.seq, job, generation)));
    }

    fn broke(&self, at_ms: u64, detail: String) -> SimError {
        SimError::SchedulerBroke {
            policy: policy_name(self.policy),
            at_ms,
            detail,
        }
    }

    fn verify(&mut self, now: u64) -> Result<(), SimError> {
        self.verifies += 1;
        self.sched
            .cluster()
            .verify()
            .map_err(|e| self.broke(now, format!("cluster().verify(): {e}")))
    }

    fn request(&self, i: usize) -> JobRequest {
        let job = &self.trace.jobs[i];
        JobRequest {
            gpu_milli: 0,
            job: job.line.to_string(),
            owner: job.owner.clone(),
            queue: job.queue.clone(),
            gpu_count: job.gpus,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: job.gpus > self.shape.gpus_per_node,
            preemptible: true,
            time_limit_ms: (self.policy == Policy::Backfill).then_some(job.duration_ms),
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        }
    }

    /// Feeds one event and carries out every action that follows.
    fn feed(&mut self, event: Event, now: u64) -> Result<(), SimError> {
        // Events in the order they happen: victims exit in the order they
        // were preempted, after the rest of the batch was carried out.
        let mut work = VecDeque::from([event]);
        while let Some(event) = work.pop_front() {
            let started = Instant::now();
            let actions = self
                .sched
                .handle(event, i64::try_from(now).unwrap_or(i64::MAX));
            self.handle_secs += started.elapsed().as_secs_f64();
            self.handle_calls += 1;
            if self.handle_calls.is_multiple_of(VERIFY_EVERY) {
                self.verify(now)?;
            }
            for action in actions {
                if let Some(exited) = self.act(action, now)? {
                    work.push_back(Event::Exited(exited));
                }
            }
        }
        Ok(())
    }

    fn job_index(&self, key: &str, now: u64) -> Result<usize, SimError> {
        self.index
            .get(key)
            .copied()
            .ok_or_else(|| self.broke(now, format!("action for unknown job `{key}`")))
    }

    /// Carries out one action; returns a job that stopped (preempted) and
    /// must be reported `Exited`.
    fn act(&mut self, action: Action, now: u64) -> Result<Option<String>, SimError> {
        match action {
            Action::Start { placement } => {
                self.start(placement, now)?;
                Ok(None)
            }
            Action::Preempt { job, .. } => {
                let i = self.job_index(&job, now)?;
                let JobState::Running { since } = self.state[i] else {
                    return Err(
                        self.broke(now, format!("preempted job {job} is {:?}", self.state[i]))
                    );
                };
                let t = now - since;
                let restore = self.restore[i];
                let (kept, lost) = self.costs.split(t, restore);
                self.remaining[i] = self.remaining[i].saturating_sub(kept);
                self.restore[i] = self.costs.restore_cost_ms;
                let o = &mut self.out[i];
                o.lost_ms += lost;
                o.max_lost_ms = o.max_lost_ms.max(lost);
                o.restore_ms += t.min(restore);
                self.generation[i] += 1; // its completion event is void
                self.state[i] = JobState::Waiting;
                self.out[i].preemptions += 1;
                self.release(i, now)?;
                Ok(Some(job))
            }
            Action::Reject { job, reason } => {
                let i = self.job_index(&job, now)?;
                if self.state[i] != JobState::Waiting {
                    return Err(
                        self.broke(now, format!("rejected job {job} is {:?}", self.state[i]))
                    );
                }
                self.state[i] = JobState::Rejected;
                self.out[i].rejected = Some(reason);
                Ok(None)
            }
        }
    }

    fn start(&mut self, p: Placement, now: u64) -> Result<(), SimError> {
        let i = self.job_index(&p.job, now)?;
        let want = self.trace.jobs[i].gpus as usize;
        if self.state[i] != JobState::Waiting {
            return Err(self.broke(now, format!("started job {} is {:?}", p.job, self.state[i])));
        }
        let mut units = p.units.clone();
        units.sort();
        units.dedup();
        if units.len() != want || p.units.len() != want {
            return Err(self.broke(
                now,
                format!("job {} asked for {want} GPUs and got {:?}", p.job, p.units),
            ));
        }
        if want <= self.shape.gpus_per_node as usize
            && units.iter().any(|u| u.node != units[0].node)
        {
            return Err(self.broke(now, format!("job {} spans nodes: {:?}", p.job, p.units)));
        }
        if p.sharing != Sharing::Exclusive || p.class != WorkloadClass::Training {
            return Err(self.broke(
                now,
                format!("job {} placed as {:?}/{:?}", p.job, p.sharing, p.class),
            ));
        }
        self.ledger
            .take(&p.units, now)
            .map_err(|e| self.broke(now, format!("job {}: {e}", p.job)))?;
        let generation = self.generation[i];
        self.state[i] = JobState::Running { since: now };
        self.held[i] = p.units;
        self.out[i].first_start_ms.get_or_insert(now);
        self.push(
            now + self.restore[i] + self.remaining[i],
            COMPLETE,
            i,
            generation,
        );
        Ok(())
    }

    /// The ledger's release of what job `i` held (from its Start).
    fn release(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let units = std::mem::take(&mut self.held[i]);
        self.ledger
            .give(&units, now)
            .map_err(|e| self.broke(now, format!("job {}: {e}", self.trace.jobs[i].line)))
    }

    fn sample(&mut self, now: u64) {
        let waiting = self.sched.waiting() as u64;
        let s = Sample {
            t_ms: now,
            busy_units: self.ledger.busy(),
            waiting,
        };
        match self.samples.last_mut() {
            Some(last) if last.t_ms == now => *last = s,
            Some(last) if last.busy_units == s.busy_units && last.waiting == s.waiting => {}
            _ => self.samples.push(s),
        }
        let was_zero = self.frag_value == 0;
        if now >= self.frag_t + FRAG_SAMPLE_MS || (waiting == 0) != was_zero {
            self.frag_area += u128::from(self.frag_value) * u128::from(now - self.frag_t);
            self.frag_t = now;
            self.frag_value = if waiting == 0 {
                0
            } else {
                u64::from(self.sched.fragmentation())
            };
        }
    }

    /// Runs until no event is left; returns the time of the last one.
    fn run(&mut self) -> Result<u64, SimError> {
        let mut now = 0;
        let mut tick_pending = false;
        let mut idle_ticks = 0u32;
        while let Some(Reverse((t, kind, _, i, generation))) = self.heap.pop() {
            now = t;
            match kind {
                COMPLETE => {
                    if self.generation[i] != generation {
                        continue; // preempted since: stale
                    }
                    let key = self.trace.jobs[i].line.to_string();
                    self.release(i, now)?;
                    self.state[i] = JobState::Done;
                    self.remaining[i] = 0;
                    self.out[i].restore_ms += self.restore[i];
                    self.out[i].end_ms = Some(now);
                    self.feed(Event::Exited(key), now)?;
                }
                SUBMIT => {
                    self.state[i] = JobState::Waiting;
                    if let Some(reason) = self.trace.jobs[i].invalid {
                        self.state[i] = JobState::Rejected;
                        self.out[i].rejected = Some(reason.to_string());
                    } else {
                        let req = self.request(i);
                        self.feed(Event::Submit(Box::new(req)), now)?;
                    }
                }
                _ => {
                    tick_pending = false;
                    let running_before = self.sched.running();
                    self.feed(Event::Tick, now)?;
                    // The one tick was just popped: anything left is real.
                    if running_before == 0 && self.sched.running() == 0 && self.heap.is_empty() {
                        idle_ticks += 1;
                        if idle_ticks > MAX_IDLE_TICKS {
                            break; // the waiting jobs are reported unfinished
                        }
                    } else {
                        idle_ticks = 0;
                    }
                }
            }
            self.sample(now);
            if self.sched.waiting() > 0 && !tick_pending {
                self.push(now + TICK_MS, TICK, 0, 0);
                tick_pending = true;
            }
        }
        self.frag_area += u128::from(self.frag_value) * u128::from(now - self.frag_t);
        Ok(now)
    }
}
