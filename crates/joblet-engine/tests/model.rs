//! Model-based test of the engine core: random sequences of operations
//! (submit, stop, kill, delete, job exits, signals delivered, release checks,
//! GPU health changes, jobs ended by the node, daemon restarts) against the
//! core and a small simulated node — a store of job states, the allocation
//! ledger, the shims — that carries out the core's effects the way the
//! daemon does. After every step it checks:
//!
//! - every job ends exactly once, along an edge of the state machine, with
//!   the node's reason when the node ended it;
//! - every start the core decides is launched exactly once, on GPUs no
//!   other live or unreleased job holds;
//! - no GPU, CPU, memory or job slot is oversubscribed;
//! - nothing is held without a live job: every allocation belongs to a job
//!   that is starting, running or being released, and every live shim to
//!   a RUNNING job;
//! - every request is answered at most once, and (at the end) exactly once.
//!
//! At the end every shim exits, every check passes and every GPU is healthy
//! again: then every job has ended, the ledger is empty and the core tracks
//! nothing.

mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use joblet_core::gpu::GpuState;
use joblet_core::{JobId, JobState};
use joblet_engine::{
    DirtyGpu, Effect, EngineCore, Event, Exit, Final, PhaseView, RecoveredJob, Recovery, ShimFact,
    StopHow, Submission, Ticket,
};
use joblet_sched::model::{GpuHealth, JobRequest, Placement, Policy, Sharing};
use proptest::prelude::*;
use support::*;

const GPUS: u32 = 4;
const SLOTS: u32 = 5;

#[derive(Debug, Clone)]
enum Op {
    Submit {
        gpus: u32,
        cpu_millis: u64,
        memory_mb: u64,
        shared_mb: Option<u64>,
        fail_start: bool,
        exit_code: i32,
    },
    Stop(usize),
    Kill(usize),
    Delete(usize),
    Exit(usize),
    Deliver,
    Check(usize, bool),
    Health(u32, u8),
    EndJobsOn(u32, bool),
    Restart {
        exits: usize,
        vanish: usize,
        never: usize,
    },
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop_oneof![3 => Just(0u32), 2 => 1..=2u32, 1 => 3..=GPUS],
            prop_oneof![Just(0u64), Just(500), Just(1500), Just(3000)],
            prop_oneof![Just(0u64), Just(1024), Just(4096)],
            prop_oneof![4 => Just(None), 1 => (1..=3u64).prop_map(|g| Some(g * 10_240))],
            prop::bool::weighted(0.1),
            0..3i32,
        )
            .prop_map(|(gpus, cpu_millis, memory_mb, shared_mb, fail_start, exit_code)| Op::Submit {
                gpus,
                cpu_millis,
                memory_mb,
                shared_mb,
                fail_start,
                exit_code,
            }),
        1 => any::<usize>().prop_map(Op::Stop),
        1 => any::<usize>().prop_map(Op::Kill),
        1 => any::<usize>().prop_map(Op::Delete),
        4 => any::<usize>().prop_map(Op::Exit),
        2 => Just(Op::Deliver),
        3 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, d)| Op::Check(k, d)),
        1 => (0..GPUS, 0..4u8).prop_map(|(g, s)| Op::Health(g, s)),
        1 => (0..GPUS, any::<bool>()).prop_map(|(g, f)| Op::EndJobsOn(g, f)),
        1 => (0..3usize, 0..2usize, 0..2usize)
            .prop_map(|(exits, vanish, never)| Op::Restart { exits, vanish, never }),
        1 => Just(Op::Tick),
    ]
}

#[derive(Debug)]
struct ModelJob {
    sub: Submission,
    state: JobState,
    fin: Option<(Final, i64)>,
    submitted_at: i64,
    fail_start: bool,
    exit_code: i32,
    launches: u32,
    /// Times it went back to the queue after a restart found it had never
    /// run.
    requeues: u32,
    finishes: u32,
    /// The node ended it while it was starting or running: its recorded
    /// reason must be this one.
    ended_by_node: Option<String>,
    deleted: bool,
}

#[derive(Debug, Clone)]
enum Shim {
    Alive,
    Exited(Exit),
    /// The daemon died before handing the job to its shim.
    NeverGiven,
}

struct World {
    core: EngineCore,
    now: i64,
    next_id: u32,
    next_ticket: u64,
    jobs: BTreeMap<JobId, ModelJob>,
    order: Vec<JobId>,
    ledger: BTreeMap<String, (JobRequest, Placement, i64)>,
    shims: BTreeMap<JobId, Shim>,
    signals: VecDeque<(JobId, StopHow)>,
    checks: Vec<JobId>,
    tickets: BTreeSet<u64>,
    health: Vec<GpuState>,
}

fn health(state: GpuState) -> GpuHealth {
    GpuHealth {
        state,
        paused: false,
        temperature_c: None,
    }
}

impl World {
    fn new(policy: Policy) -> World {
        World {
            core: core(policy, node(GPUS, SLOTS)),
            now: 1_000,
            next_id: 1,
            next_ticket: 1,
            jobs: BTreeMap::new(),
            order: Vec::new(),
            ledger: BTreeMap::new(),
            shims: BTreeMap::new(),
            signals: VecDeque::new(),
            checks: Vec::new(),
            tickets: BTreeSet::new(),
            health: vec![GpuState::Available; GPUS as usize],
        }
    }

    /// Handles `event` and carries out its effects, and those of the events
    /// they lead to, the way the daemon's loop does.
    fn feed(&mut self, event: Event) {
        let mut events = VecDeque::from([event]);
        while let Some(ev) = events.pop_front() {
            self.now += 1;
            let effects = self.core.handle(ev, self.now);
            for effect in effects {
                if let Some(next) = self.carry_out(effect) {
                    events.push_back(next);
                }
            }
        }
    }

    fn job(&mut self, id: &JobId) -> &mut ModelJob {
        self.jobs.get_mut(id).expect("the model knows every job")
    }

    fn answer(&mut self, ticket: Ticket) {
        assert!(
            self.tickets.remove(&ticket.0),
            "ticket {ticket:?} answered twice or never asked"
        );
    }

    fn carry_out(&mut self, effect: Effect) -> Option<Event> {
        match effect {
            Effect::Requeue { job, .. } => {
                let never = matches!(self.shims.get(&job), Some(Shim::NeverGiven));
                let j = self.job(&job);
                match j.state {
                    JobState::Pending | JobState::Preempted => {}
                    JobState::Running => {
                        assert!(never, "job {job} re-queued while it may have run");
                        j.requeues += 1;
                    }
                    s => panic!("job {job} re-queued from {s}"),
                }
                j.state = JobState::Queued;
                self.shims.remove(&job);
                None
            }
            Effect::Launch(order) => {
                let id = order.job.clone();
                let j = self.jobs.get(&id).expect("launch of a known job");
                assert_eq!(
                    j.state,
                    JobState::Queued,
                    "launch of a job that is not queued"
                );
                assert_eq!(j.launches, j.requeues, "job {id} launched twice");
                assert!(!j.deleted);
                // No unit is held by another job that has not released it.
                for (other, (_, p, _)) in &self.ledger {
                    for u in &order.placement.units {
                        if p.units.contains(u) {
                            assert!(
                                p.sharing == Sharing::Shared
                                    && order.placement.sharing == Sharing::Shared,
                                "job {id} placed on {u:?}, held exclusively by {other}"
                            );
                        }
                    }
                }
                let (fail, exit_code) = (j.fail_start, j.exit_code);
                self.job(&id).launches += 1;
                let refused = order
                    .placement
                    .units
                    .iter()
                    .any(|u| !self.health[u.index as usize].accepts_new_jobs());
                if refused {
                    // The node's pool refuses GPUs it no longer offers:
                    // nothing was recorded.
                    return Some(Event::StartFailed {
                        job: id,
                        reason: "GPU not placeable".into(),
                        recorded: false,
                    });
                }
                let _ = exit_code;
                assert!(
                    self.ledger
                        .insert(
                            id.to_string(),
                            (order.request.clone(), order.placement.clone(), order.at)
                        )
                        .is_none(),
                    "job {id} allocated twice"
                );
                self.job(&id).state = JobState::Running;
                if fail {
                    // Recorded, then the shim could not start.
                    return Some(Event::StartFailed {
                        job: id,
                        reason: "could not start the job's shim".into(),
                        recorded: true,
                    });
                }
                self.shims.insert(id.clone(), Shim::Alive);
                Some(Event::Started { job: id })
            }
            Effect::Signal { job, how, ticket } => {
                if let Some(t) = ticket {
                    self.answer(t);
                }
                if matches!(self.shims.get(&job), Some(Shim::Alive)) {
                    self.signals.push_back((job, how));
                }
                None
            }
            Effect::Finish {
                job,
                fin,
                at,
                release,
            } => {
                let j = self.job(&job);
                j.finishes += 1;
                assert_eq!(j.finishes, 1, "job {job} ended twice: {fin:?}");
                assert!(
                    j.state.can_go_to(fin.state),
                    "job {job}: {} -> {} is not an edge",
                    j.state,
                    fin.state
                );
                if j.launches == 0 || j.state != JobState::Running {
                    assert_ne!(
                        fin.state,
                        JobState::Completed,
                        "job {job} completed without running"
                    );
                }
                if let Some(why) = &j.ended_by_node {
                    if j.state == JobState::Running {
                        assert_eq!(&fin.reason, why, "job {job} ended by the node");
                    }
                }
                j.state = fin.state;
                j.fin = Some((fin, at));
                if release.is_some() {
                    self.ledger.remove(job.as_str());
                }
                None
            }
            Effect::CheckRelease { job, placement, .. } => {
                assert!(!placement.units.is_empty());
                assert!(!self.checks.contains(&job), "two release checks for {job}");
                self.checks.push(job);
                None
            }
            Effect::Release {
                job,
                dirty,
                placement,
                ..
            } => {
                let held = self.ledger.remove(job.as_str());
                assert!(
                    held.is_some(),
                    "release of {job}, which holds nothing: {placement:?}"
                );
                for d in dirty {
                    self.health[d.index as usize] = GpuState::Degraded;
                }
                None
            }
            Effect::ReapLost { job } => {
                self.shims.remove(&job);
                None
            }
            Effect::Delete { job, ticket } => {
                let j = self.job(&job);
                assert!(
                    j.state.is_terminal(),
                    "delete of {job}, which is {}",
                    j.state
                );
                j.deleted = true;
                self.answer(ticket);
                None
            }
            Effect::Answer { ticket, .. } => {
                self.answer(ticket);
                None
            }
        }
    }

    /// The `k`-th job (of those not deleted), if any.
    fn pick(&self, k: usize) -> Option<JobId> {
        let live: Vec<&JobId> = self
            .order
            .iter()
            .filter(|id| !self.jobs[*id].deleted)
            .collect();
        (!live.is_empty()).then(|| live[k % live.len()].clone())
    }

    fn alive(&self) -> Vec<JobId> {
        self.shims
            .iter()
            .filter(|(_, s)| matches!(s, Shim::Alive))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn exit_of(&self, id: &JobId) -> Exit {
        exited(self.jobs[id].exit_code)
    }

    fn request(&mut self, id: JobId, how: Option<StopHow>) {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.tickets.insert(ticket.0);
        let stored = self.jobs[&id].state;
        let event = match how {
            Some(how) => Event::Stop {
                job: id,
                how,
                stored,
                ticket,
            },
            None => Event::Delete {
                job: id,
                stored,
                ticket,
            },
        };
        self.feed(event);
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Submit {
                gpus,
                cpu_millis,
                memory_mb,
                shared_mb,
                fail_start,
                exit_code,
            } => {
                let n = self.next_id;
                self.next_id += 1;
                let mut sub = submission(
                    n,
                    Ask {
                        gpus,
                        cpu_millis,
                        memory_mb,
                        time_limit_ms: None,
                    },
                );
                if let (Some(mb), true) = (shared_mb, gpus > 0) {
                    sub.request.sharing = Sharing::Shared;
                    sub.request.gpu_memory_mb = mb;
                }
                // Admission: what could never run is refused unrecorded.
                if self.core.never_placeable(&sub.request).is_some() {
                    return;
                }
                let id = sub.job.clone();
                self.jobs.insert(
                    id.clone(),
                    ModelJob {
                        sub: sub.clone(),
                        state: JobState::Queued,
                        fin: None,
                        submitted_at: self.now,
                        fail_start,
                        exit_code,
                        launches: 0,
                        requeues: 0,
                        finishes: 0,
                        ended_by_node: None,
                        deleted: false,
                    },
                );
                self.order.push(id);
                self.feed(Event::Submitted(Box::new(sub)));
            }
            Op::Stop(k) => {
                if let Some(id) = self.pick(k) {
                    self.request(id, Some(StopHow::Stop { grace_ms: 1 }));
                }
            }
            Op::Kill(k) => {
                if let Some(id) = self.pick(k) {
                    self.request(id, Some(StopHow::Kill));
                }
            }
            Op::Delete(k) => {
                if let Some(id) = self.pick(k) {
                    self.request(id, None);
                }
            }
            Op::Exit(k) => {
                let alive = self.alive();
                if alive.is_empty() {
                    return;
                }
                let id = alive[k % alive.len()].clone();
                let exit = self.exit_of(&id);
                self.shims.insert(id.clone(), Shim::Exited(exit.clone()));
                self.feed(Event::Exited { job: id, exit });
            }
            Op::Deliver => {
                let Some((id, how)) = self.signals.pop_front() else {
                    return;
                };
                if !matches!(self.shims.get(&id), Some(Shim::Alive)) {
                    return;
                }
                let code = if how == StopHow::Kill { 137 } else { 143 };
                let exit = Exit::of(Final {
                    state: JobState::Stopped,
                    exit_code: Some(code),
                    reason: "stopped".into(),
                });
                self.shims.insert(id.clone(), Shim::Exited(exit.clone()));
                self.feed(Event::Exited { job: id, exit });
            }
            Op::Check(k, dirty) => {
                if self.checks.is_empty() {
                    return;
                }
                let id = self.checks.remove(k % self.checks.len());
                let dirty = match (dirty, self.ledger.get(id.as_str())) {
                    (true, Some((_, p, _))) => p
                        .units
                        .first()
                        .map(|u| DirtyGpu {
                            index: u.index,
                            uuid: format!("GPU-{:04}", u.index),
                            why: "memory in use".into(),
                        })
                        .into_iter()
                        .collect(),
                    _ => Vec::new(),
                };
                self.feed(Event::ReleaseChecked { job: id, dirty });
            }
            Op::Health(g, s) => {
                let state = [
                    GpuState::Available,
                    GpuState::Degraded,
                    GpuState::Draining,
                    GpuState::Offline,
                ][s as usize];
                self.health[g as usize] = state;
                self.feed(Event::GpuChanged {
                    index: g,
                    health: health(state),
                });
            }
            Op::EndJobsOn(g, failed) => {
                let jobs: Vec<JobId> = self
                    .ledger
                    .values()
                    .filter(|(_, p, _)| p.units.iter().any(|u| u.index == g))
                    .filter_map(|(_, p, _)| JobId::parse(&p.job).ok())
                    .filter(|id| self.jobs[id].state == JobState::Running)
                    .collect();
                if jobs.is_empty() {
                    return;
                }
                // A job the node already ends for another reason keeps that
                // first reason, as the engine does.
                let reason = format!("GPU {g} failed");
                for id in &jobs {
                    let j = self.job(id);
                    j.ended_by_node.get_or_insert_with(|| reason.clone());
                }
                self.feed(Event::EndJobs {
                    jobs,
                    reason,
                    failed,
                });
            }
            Op::Restart {
                exits,
                vanish,
                never,
            } => self.restart(exits, vanish, never),
            Op::Tick => self.feed(Event::Tick),
        }
    }

    /// The daemon dies and starts again: what it had in flight is lost
    /// (signals not sent, checks not done, callers not answered), some
    /// shims end meanwhile, some vanish.
    fn restart(&mut self, exits: usize, vanish: usize, never: usize) {
        self.signals.clear();
        self.checks.clear();
        self.tickets.clear();
        // The core does not remember why the node was ending a job: the
        // node agent says it again from its GPU pool after a restart (a job
        // still on a failed GPU), which this model does not simulate.
        for j in self.jobs.values_mut() {
            j.ended_by_node = None;
        }
        let alive = self.alive();
        for id in alive.iter().take(exits) {
            let exit = self.exit_of(id);
            self.shims.insert(id.clone(), Shim::Exited(exit));
        }
        for id in alive.iter().skip(exits).take(vanish) {
            self.shims.remove(id);
        }
        // The daemon died while starting these: recorded RUNNING, their
        // shims never got them (a job that had printed or exited is not
        // one of these: only jobs no other operation touched since).
        for id in alive.iter().skip(exits + vanish).take(never) {
            self.shims.insert(id.clone(), Shim::NeverGiven);
        }
        let mut r = Recovery {
            ledger: self.ledger.values().cloned().collect(),
            gpus: self
                .health
                .iter()
                .enumerate()
                .map(|(i, s)| (i as u32, health(*s)))
                .collect(),
            ..Recovery::default()
        };
        for id in &self.order {
            let j = &self.jobs[id];
            if j.deleted || (j.state.is_terminal() && !self.ledger.contains_key(id.as_str())) {
                continue;
            }
            let shim = match (j.state, self.shims.get(id)) {
                (JobState::Running, Some(Shim::Alive)) => ShimFact::Alive,
                (JobState::Running, Some(Shim::Exited(e))) => ShimFact::Exited(e.clone()),
                (JobState::Running, Some(Shim::NeverGiven)) => ShimFact::NeverStarted,
                (JobState::Running, None) => ShimFact::Gone,
                _ => ShimFact::NotStarted,
            };
            r.jobs.push(RecoveredJob {
                submission: j.sub.clone(),
                state: j.state,
                submitted_at: j.submitted_at,
                ended: j.fin.clone(),
                shim,
            });
        }
        // Shims that ended are no longer anyone's: forget them once read.
        self.shims
            .retain(|_, s| matches!(s, Shim::Alive | Shim::NeverGiven));
        self.core = EngineCore::new(self.core.config().clone());
        self.feed(Event::Recovered(Box::new(r)));
    }

    fn check(&self) {
        let cluster = self.core.scheduler().cluster();
        cluster
            .verify()
            .expect("the scheduler's cluster state is consistent");
        let placements: Vec<&Placement> = cluster.placements().collect();
        let cap = self.core.config().node.capacity;
        let cpu: u64 = placements.iter().map(|p| p.cpu_millis).sum();
        let mem: u64 = placements.iter().map(|p| p.host_memory_mb).sum();
        assert!(cpu <= cap.cpu_millis.unwrap(), "CPU oversubscribed: {cpu}");
        assert!(
            mem <= cap.memory_mb.unwrap(),
            "memory oversubscribed: {mem}"
        );
        assert!(
            placements.len() as u32 <= cap.max_jobs.unwrap(),
            "{} jobs on {} slots",
            placements.len(),
            cap.max_jobs.unwrap()
        );
        // Every placement belongs to a job starting, running or releasing,
        // and every such job has one.
        let held: BTreeSet<&str> = placements.iter().map(|p| p.job.as_str()).collect();
        for (id, phase) in self.core.jobs() {
            let holds = !matches!(phase, PhaseView::Queued);
            assert_eq!(held.contains(id.as_str()), holds, "job {id} is {phase:?}");
        }
        for p in &placements {
            let id = JobId::parse(&p.job).unwrap();
            assert!(
                self.core.phase(&id).is_some(),
                "{} holds a placement, untracked",
                p.job
            );
        }
        // The durable ledger: a live job's, or one being released.
        for key in self.ledger.keys() {
            let id = JobId::parse(key).unwrap();
            let j = &self.jobs[&id];
            let releasing = matches!(self.core.phase(&id), Some(PhaseView::Releasing(_)));
            assert!(
                j.state == JobState::Running || releasing,
                "job {id} is {} and still holds its allocation",
                j.state
            );
        }
        for (id, s) in &self.shims {
            if matches!(s, Shim::Alive) {
                assert_eq!(self.jobs[id].state, JobState::Running, "shim of {id} alive");
            }
        }
    }

    /// Lets everything finish: GPUs healthy, signals delivered, shims exit,
    /// checks pass.
    fn drain(&mut self) {
        for g in 0..GPUS {
            if self.health[g as usize] != GpuState::Available {
                self.apply(Op::Health(g, 0));
            }
        }
        for _ in 0..10_000 {
            self.check();
            if !self.signals.is_empty() {
                self.apply(Op::Deliver);
            } else if !self.alive().is_empty() {
                self.apply(Op::Exit(0));
            } else if !self.checks.is_empty() {
                self.apply(Op::Check(0, false));
            } else {
                break;
            }
        }
        self.check();
        for id in &self.order {
            let j = &self.jobs[id];
            assert!(j.state.is_terminal(), "job {id} never ended: {}", j.state);
            assert_eq!(j.finishes, 1, "job {id} ended {} times", j.finishes);
        }
        assert!(
            self.ledger.is_empty(),
            "left allocated: {:?}",
            self.ledger.keys()
        );
        assert_eq!(self.core.jobs().count(), 0, "the core still tracks jobs");
        assert!(self.tickets.is_empty(), "unanswered: {:?}", self.tickets);
    }
}

fn run_model(policy: Policy, ops: Vec<Op>) {
    let mut w = World::new(policy);
    for op in ops {
        w.apply(op);
        w.check();
    }
    w.drain();
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fifo_holds_every_invariant(ops in prop::collection::vec(op(), 1..80)) {
        run_model(Policy::Fifo, ops);
    }

    #[test]
    fn backfill_holds_every_invariant(ops in prop::collection::vec(op(), 1..80)) {
        run_model(Policy::Backfill, ops);
    }

    #[test]
    fn las_holds_every_invariant(ops in prop::collection::vec(op(), 1..80)) {
        run_model(Policy::Las, ops);
    }
}

/// The reproductions as fixed sequences.
#[test]
fn stop_and_kill_of_a_queued_gpu_job_never_strand_the_job_behind_it() {
    let gpu = |gpus, exit_code| Op::Submit {
        gpus,
        cpu_millis: 0,
        memory_mb: 0,
        shared_mb: None,
        fail_start: false,
        exit_code,
    };
    for kill in [false, true] {
        let mut w = World::new(Policy::Fifo);
        w.apply(gpu(3, 0));
        w.apply(gpu(4, 0));
        w.apply(gpu(1, 0));
        w.apply(if kill { Op::Kill(1) } else { Op::Stop(1) });
        w.check();
        let c = w.order[2].clone();
        assert!(
            matches!(w.core.phase(&c), Some(PhaseView::Running(_))),
            "the job behind the stopped one runs: {:?}",
            w.core.phase(&c)
        );
        w.drain();
        assert_eq!(w.jobs[&c].state, JobState::Completed);
    }
}
