//! Model-based test of the core: random DAGs (acyclic by construction)
//! with scripted outcomes (retries included), driven through the core in
//! random interleavings — actions carried out late, reports delivered out
//! of order, time passing, daemon crashes (the snapshot restored, pending
//! actions and undelivered reports lost, the store kept), `rnx workflow
//! stop` — by a small simulated daemon, engine and store. After every step:
//!
//! - no attempt is submitted twice: never one the store has, never twice
//!   between two crashes;
//! - no job is submitted before its requirements hold, nor a retry before
//!   its backoff has passed;
//! - a final state never changes, and agrees with the store;
//! - a job is CANCELED exactly when one of its requirements can no longer
//!   hold (its reason names it), and a WAITING job whose requirements all
//!   hold does not stay waiting;
//! - while stopping, nothing waits and every job the core knows runs has
//!   been asked to stop.
//!
//! At the end every job is final, and without a stop each job's final
//! state, its number of attempts and the workflow's state are those of an
//! independent reference evaluator (`support/dag.rs`).

#[path = "support/dag.rs"]
mod dag;

use std::collections::{BTreeMap, HashSet, VecDeque};

use dag::{accepts, expected, name, Expected, Spec, BACKOFF_MS};
use joblet_core::JobId;
use joblet_workflow::{
    Action, CancelReason, EndState, Event, Final, Found, FoundState, JobPhase, Limits, Outcome,
    Problem, Workflow, WorkflowCore, WorkflowState,
};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    CarryOut,
    Deliver(usize),
    Progress(usize),
    Tick(i64),
    Crash,
    Stop,
}

fn op(crashes: bool, stops: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::CarryOut),
        5 => any::<usize>().prop_map(Op::Deliver),
        6 => any::<usize>().prop_map(Op::Progress),
        2 => (0..150i64).prop_map(Op::Tick),
        (if crashes { 1 } else { 0 }) => Just(Op::Crash),
        (if stops { 1 } else { 0 }) => Just(Op::Stop),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rec {
    Queued,
    Running,
    Ended(EndState, i64),
}

struct Attempt {
    id: JobId,
    state: Rec,
    stop_asked: bool,
}

struct Sim<'a> {
    spec: &'a Spec,
    wf: &'a Workflow,
    core: WorkflowCore,
    /// The snapshot as stored after the last `handle`.
    stored: String,
    actions: VecDeque<Action>,
    inbox: Vec<Event>,
    /// (job, attempt) → the attempt the store records.
    store: BTreeMap<(usize, u32), Attempt>,
    live: Vec<(usize, u32)>,
    now: i64,
    ids: u64,
    /// Submits asked for since the last crash.
    asked: HashSet<(usize, u32)>,
    /// StopJob asked for (any time).
    stops_asked: HashSet<JobId>,
    finals: Vec<Option<JobPhase>>,
    /// The workflow's state when Stop was first handled.
    stopped_in: Option<WorkflowState>,
    finished: u32,
    log: Vec<String>,
}

impl<'a> Sim<'a> {
    fn new(spec: &'a Spec, wf: &'a Workflow) -> Sim<'a> {
        let core = WorkflowCore::new(wf);
        Sim {
            stored: serde_json::to_string(&core.snapshot()).unwrap(),
            core,
            spec,
            wf,
            actions: VecDeque::new(),
            inbox: Vec::new(),
            store: BTreeMap::new(),
            live: Vec::new(),
            now: 1_000,
            ids: 0,
            asked: HashSet::new(),
            stops_asked: HashSet::new(),
            finals: vec![None; spec.jobs.len()],
            stopped_in: None,
            finished: 0,
            log: Vec::new(),
        }
    }

    fn fail(&self, what: String) -> TestCaseError {
        let tail: Vec<&String> = self.log.iter().rev().take(40).collect();
        TestCaseError::fail(format!("{what}\nlast steps (newest first):\n{tail:#?}"))
    }

    fn index(&self, job: &str) -> usize {
        job[1..].parse().unwrap()
    }

    fn handle(&mut self, event: Event) -> Result<(), TestCaseError> {
        self.log.push(format!("t={} {event:?}", self.now));
        if event == Event::Stop && self.stopped_in.is_none() {
            self.stopped_in = Some(self.core.state());
        }
        let actions = self.core.handle(event, self.now);
        // The daemon stores the snapshot before it carries anything out.
        self.stored = serde_json::to_string(&self.core.snapshot()).unwrap();
        for a in &actions {
            self.log.push(format!("  -> {a:?}"));
            self.asked_for(a)?;
        }
        self.actions.extend(actions);
        self.check()
    }

    /// Checks an action as the core returns it.
    fn asked_for(&mut self, a: &Action) -> Result<(), TestCaseError> {
        match a {
            Action::Submit { job, attempt } => {
                let j = self.index(job);
                let key = (j, *attempt);
                if self.store.contains_key(&key) {
                    return Err(self.fail(format!(
                        "{job} attempt {attempt} submitted again: the store has it"
                    )));
                }
                if !self.asked.insert(key) {
                    return Err(self.fail(format!("{job} attempt {attempt} submitted twice")));
                }
                if self.stopped_in.is_some() {
                    return Err(self.fail(format!("{job} submitted after the stop")));
                }
                if *attempt > 1 {
                    let prev = self.store.get(&(j, attempt - 1)).map(|a| a.state);
                    let Some(Rec::Ended(EndState::Failed, at)) = prev else {
                        return Err(self.fail(format!(
                            "{job} attempt {attempt} without attempt {} FAILED",
                            attempt - 1
                        )));
                    };
                    if *attempt > u32::from(self.spec.jobs[j].retries) + 1 {
                        return Err(
                            self.fail(format!("{job} attempt {attempt}: more than its retries"))
                        );
                    }
                    let due = at + BACKOFF_MS * (1 << (attempt - 2));
                    if self.now < due {
                        return Err(
                            self.fail(format!("{job} retried at {} before {due}", self.now))
                        );
                    }
                }
            }
            Action::StopJob { job_id, .. } => {
                self.stops_asked.insert(job_id.clone());
            }
            Action::Finished { .. } => self.finished += 1,
            Action::Cancel { .. } => {}
        }
        Ok(())
    }

    /// The invariants, after every handled event.
    fn check(&mut self) -> Result<(), TestCaseError> {
        let phases: Vec<JobPhase> = self.core.jobs().map(|(_, p)| p.clone()).collect();
        let stopping = self.core.is_stopping();
        for (j, p) in phases.iter().enumerate() {
            let job = &self.spec.jobs[j];
            match &self.finals[j] {
                Some(f) if f != p => {
                    return Err(self.fail(format!("j{j} was final {f:?}, is now {p:?}")));
                }
                None if p.final_state().is_some() => self.finals[j] = Some(p.clone()),
                _ => {}
            }
            let held = |x: usize, need| phases[x].final_state().is_some_and(|f| accepts(need, f));
            let broken =
                |x: usize, need| phases[x].final_state().is_some_and(|f| !accepts(need, f));
            match p {
                JobPhase::Waiting => {
                    if stopping {
                        return Err(self.fail(format!("j{j} waits while the workflow stops")));
                    }
                    if let Some((x, _)) = job.requires.iter().find(|&&(x, n)| broken(x, n)) {
                        return Err(self.fail(format!(
                            "j{j} waits though its requirement on j{x} can no longer hold"
                        )));
                    }
                    if self.core.state() == WorkflowState::Running
                        && job.requires.iter().all(|&(x, n)| held(x, n))
                    {
                        return Err(self.fail(format!("j{j} waits though its requirements hold")));
                    }
                }
                JobPhase::Canceled { reason } => match reason {
                    CancelReason::Unmet { requires, need, .. }
                    | CancelReason::Upstream { requires, need, .. } => {
                        let x = self.index(requires);
                        if !job.requires.contains(&(x, *need)) || !broken(x, *need) {
                            return Err(self.fail(format!(
                                "j{j} canceled for {reason:?}, which does not hold"
                            )));
                        }
                    }
                    CancelReason::Stopped | CancelReason::NeverStarted => {
                        if !stopping {
                            return Err(self.fail(format!("j{j} canceled as stopped, yet no stop")));
                        }
                    }
                },
                _ => {
                    if let Some((x, _)) = job.requires.iter().find(|&&(x, n)| !held(x, n)) {
                        return Err(self.fail(format!(
                            "j{j} is {} before its requirement on j{x} holds",
                            p.name()
                        )));
                    }
                }
            }
            match p {
                JobPhase::Submitted { attempt, job_id }
                | JobPhase::Running { attempt, job_id }
                | JobPhase::RetryWait {
                    attempt, job_id, ..
                } => {
                    if self.store.get(&(j, *attempt)).map(|a| &a.id) != Some(job_id) {
                        return Err(self.fail(format!("j{j} is {p:?}, the store disagrees")));
                    }
                    if stopping
                        && !matches!(p, JobPhase::RetryWait { .. })
                        && !self.stops_asked.contains(job_id)
                    {
                        return Err(
                            self.fail(format!("j{j} runs while stopping, not asked to stop"))
                        );
                    }
                }
                JobPhase::Ended {
                    attempt,
                    job_id,
                    state,
                    at,
                } => {
                    let a = self.store.get(&(j, *attempt));
                    if a.map(|a| (&a.id, a.state)) != Some((job_id, Rec::Ended(*state, *at))) {
                        return Err(self.fail(format!("j{j} is {p:?}, the store disagrees")));
                    }
                    if *state == EndState::Failed
                        && *attempt <= u32::from(job.retries)
                        && self.stopped_in.is_none()
                    {
                        return Err(self.fail(format!("j{j} FAILED with retries left")));
                    }
                }
                _ => {}
            }
        }
        if self.finished > 1 {
            return Err(self.fail("Finished twice".into()));
        }
        Ok(())
    }

    fn carry_out(&mut self) {
        let Some(a) = self.actions.pop_front() else {
            return;
        };
        match a {
            Action::Submit { job, attempt } => {
                let j = self.index(&job);
                self.ids += 1;
                let id =
                    JobId::parse(&format!("00000000-0000-0000-0000-{:012x}", self.ids)).unwrap();
                self.store.insert(
                    (j, attempt),
                    Attempt {
                        id: id.clone(),
                        state: Rec::Queued,
                        stop_asked: false,
                    },
                );
                self.live.push((j, attempt));
                self.inbox.push(Event::JobSubmitted {
                    job,
                    attempt,
                    job_id: id,
                });
            }
            Action::StopJob { job_id, .. } => {
                if let Some(a) = self.store.values_mut().find(|a| a.id == job_id) {
                    a.stop_asked = true;
                }
            }
            Action::Cancel { .. } | Action::Finished { .. } => {}
        }
    }

    /// The engine moves one live attempt on: queued → running → ended.
    fn progress(&mut self, k: usize) {
        if self.live.is_empty() {
            return;
        }
        let i = k % self.live.len();
        let (j, attempt) = self.live[i];
        let outcome = self.spec.jobs[j].outcomes[attempt as usize - 1];
        let now = self.now;
        let a = self.store.get_mut(&(j, attempt)).unwrap();
        let event = match (a.state, a.stop_asked) {
            (Rec::Queued, false) => {
                a.state = Rec::Running;
                Event::JobRunning {
                    job: name(j),
                    attempt,
                    job_id: a.id.clone(),
                }
            }
            (_, stop) => {
                let state = if stop { EndState::Stopped } else { outcome };
                a.state = Rec::Ended(state, now);
                self.live.swap_remove(i);
                Event::JobEnded {
                    job: name(j),
                    attempt,
                    job_id: a.id.clone(),
                    state,
                    at: now,
                }
            }
        };
        self.inbox.push(event);
    }

    /// The daemon dies and comes back: what it had not carried out and the
    /// reports it had not handled are gone; the store and the engine's
    /// jobs are not.
    fn crash(&mut self) -> Result<(), TestCaseError> {
        self.log.push(format!("t={} CRASH", self.now));
        self.actions.clear();
        self.inbox.clear();
        self.asked.clear();
        let restored = WorkflowCore::restore(self.wf, serde_json::from_str(&self.stored).unwrap())
            .map_err(|e| self.fail(format!("restore: {e}")))?;
        if restored != self.core {
            return Err(self.fail("the restored core differs from the one stored".into()));
        }
        self.core = restored;
        let mut latest: BTreeMap<usize, Found> = BTreeMap::new();
        for (&(j, attempt), a) in &self.store {
            latest.insert(
                j,
                Found {
                    job: name(j),
                    attempt,
                    job_id: a.id.clone(),
                    state: match a.state {
                        Rec::Queued => FoundState::Queued,
                        Rec::Running => FoundState::Running,
                        Rec::Ended(state, at) => FoundState::Ended { state, at },
                    },
                },
            );
        }
        self.handle(Event::Restored {
            found: latest.into_values().collect(),
        })
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        self.now += 1;
        match op {
            Op::CarryOut => self.carry_out(),
            Op::Deliver(k) => {
                if !self.inbox.is_empty() {
                    let e = self.inbox.remove(k % self.inbox.len());
                    self.handle(e)?;
                }
            }
            Op::Progress(k) => self.progress(k),
            Op::Tick(dt) => {
                self.now += dt;
                self.handle(Event::Tick)?;
            }
            Op::Crash => self.crash()?,
            Op::Stop => self.handle(Event::Stop)?,
        }
        Ok(())
    }

    /// Everything carried out, delivered and run to its end.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..100_000 {
            self.now += 1;
            if !self.actions.is_empty() {
                self.carry_out();
            } else if !self.inbox.is_empty() {
                let e = self.inbox.remove(0);
                self.handle(e)?;
            } else if !self.live.is_empty() {
                self.progress(0);
            } else if let Some(t) = self.core.next_tick() {
                self.now = self.now.max(t);
                self.handle(Event::Tick)?;
            } else {
                return Ok(());
            }
        }
        Err(self.fail("the run does not end".into()))
    }

    /// The end: every job final; without a stop, exactly the reference's
    /// result.
    fn check_end(&self, want: &Expected) -> Result<(), TestCaseError> {
        let finals: Vec<Option<Final>> = self.core.jobs().map(|(_, p)| p.final_state()).collect();
        if finals.iter().any(Option::is_none) || !self.core.state().is_final() {
            return Err(self.fail(format!("not over: {:?} {finals:?}", self.core.state())));
        }
        if self.finished != 1 {
            return Err(self.fail(format!("Finished {} times", self.finished)));
        }
        match self.stopped_in {
            Some(WorkflowState::Running) => {
                prop_assert_eq!(self.core.state(), WorkflowState::Stopped);
                prop_assert_eq!(self.core.outcome(), Some(&Outcome::Stopped));
                return Ok(());
            }
            Some(WorkflowState::Pending) => {
                prop_assert_eq!(self.core.state(), WorkflowState::Canceled);
                return Ok(());
            }
            _ => {}
        }
        let got: Vec<Final> = finals.into_iter().flatten().collect();
        if got != want.finals {
            return Err(self.fail(format!(
                "final states {got:?}, the reference says {:?}",
                want.finals
            )));
        }
        for (j, &n) in want.attempts.iter().enumerate() {
            let made = self.store.keys().filter(|&&(x, _)| x == j).count() as u32;
            prop_assert_eq!(
                made,
                n,
                "j{} ran {} attempts, the reference says {}",
                j,
                made,
                n
            );
        }
        match (want.unhandled, self.core.outcome()) {
            (None, Some(Outcome::Completed { .. })) => {
                prop_assert_eq!(self.core.state(), WorkflowState::Completed)
            }
            (Some(x), Some(Outcome::Failed { job, .. })) => {
                prop_assert_eq!(self.core.state(), WorkflowState::Failed);
                prop_assert_eq!(job, &name(x));
            }
            (want, got) => {
                return Err(self.fail(format!(
                    "outcome {got:?}, the reference's unhandled job {want:?}"
                )))
            }
        }
        Ok(())
    }
}

fn parsed(spec: &Spec) -> Option<Workflow> {
    let limits = Limits {
        max_gpus_per_node: None,
    };
    match Workflow::parse(&dag::yaml(spec), "model.yaml", &limits) {
        Ok(wf) => Some(wf),
        Err(e) => {
            // Random DAGs may hold a job that can never start; the file is
            // refused then, and nothing else (tests/reach.rs checks that).
            assert!(matches!(*e.problem, Problem::Unreachable { .. }), "{e}");
            None
        }
    }
}

fn run(spec: &Spec, ops: &[Op]) -> Result<(), TestCaseError> {
    let Some(wf) = parsed(spec) else {
        return Ok(());
    };
    let want = expected(spec);
    let mut sim = Sim::new(spec, &wf);
    sim.handle(Event::Started)?;
    for &op in ops {
        sim.step(op)?;
    }
    sim.drain()?;
    sim.check_end(&want)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any order of reports and actions: the reference's result.
    #[test]
    fn random_dags_in_random_orders_end_as_the_reference_says(
        spec in dag::spec(10),
        ops in proptest::collection::vec(op(false, false), 0..300),
    ) {
        run(&spec, &ops)?;
    }

    /// Crashes at random steps: the snapshot restores the same core, no
    /// attempt runs twice, none is lost, the result is the same.
    #[test]
    fn restarts_at_random_steps_change_nothing(
        spec in dag::spec(10),
        ops in proptest::collection::vec(op(true, false), 0..300),
    ) {
        run(&spec, &ops)?;
    }

    /// A stop at a random step (crashes too): what runs is asked to stop,
    /// nothing is submitted after, every job ends final, the run STOPPED.
    #[test]
    fn a_stop_at_a_random_step_stops_the_run(
        spec in dag::spec(10),
        ops in proptest::collection::vec(op(true, true), 0..300),
    ) {
        run(&spec, &ops)?;
    }
}

/// How often random DAGs are refused, so the properties above do test
/// runs (a guard against a generator that only makes refused files).
#[test]
fn most_random_dags_are_runnable() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = dag::spec(10);
    let refused = (0..500)
        .filter(|_| parsed(&strategy.new_tree(&mut runner).unwrap().current()).is_none())
        .count();
    assert!(refused < 150, "{refused} of 500 refused");
}
