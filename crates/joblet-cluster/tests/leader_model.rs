//! Model-based test of the scheduler leader's core: random sequences of
//! operations (jobs submitted by nodes, nodes joining and lost, nodes
//! reporting ends, stops, a competing writer that makes the next plan's
//! compares fail, full re-reads, a new leader taking over) against the core
//! and a small in-memory etcd that applies its plans the way etcd does (all
//! compares hold, or nothing is written). After every step it checks, by
//! replaying the etcd history ([`joblet_cluster::history`]):
//!
//! - no GPU held by two jobs at one revision;
//! - every job's entry ends at most once and never changes after;
//! - every assignment in etcd belongs to an assigned entry of that
//!   attempt, on a live node whose allocation record holds the job.
//!
//! At the end every node reports its jobs ended: every job has ended, and
//! nothing is held.

use std::collections::BTreeMap;

use joblet_cluster::history::{Change, History};
use joblet_cluster::leader::{Compare, Input, LeaderConfig, LeaderCore, Op, Output, Snapshot};
use joblet_cluster::records::{decode, encode};
use joblet_cluster::{
    Assignment, JobEntry, JobPhase, Keys, NodeAlloc, NodeRecord, NodeReport, ReportState,
    RestartPolicy,
};
use joblet_core::{JobId, JobState};
use joblet_engine::{JobRules, Submission};
use joblet_sched::model::{GpuSpec, NodeSpec, SchedConfig};
use proptest::prelude::*;

const NODES: usize = 4;
const GPUS: u32 = 4;

#[derive(Debug, Clone)]
enum Step {
    Submit {
        gpus: u32,
        restart: bool,
        cross: bool,
    },
    NodeUp(usize),
    NodeGone(usize),
    End {
        pick: usize,
        ok: bool,
    },
    Stop(usize),
    /// Someone else writes an allocation record: the next plan's compare
    /// on it fails.
    Interfere(usize),
    NewLeader,
    Tick,
    /// `rnx node drain` / `undrain`.
    Drain(usize, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..=6u32, any::<bool>(), any::<bool>()).prop_map(|(gpus, restart, cross)| Step::Submit { gpus, restart, cross }),
        2 => (0..NODES).prop_map(Step::NodeUp),
        1 => (0..NODES).prop_map(Step::NodeGone),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, ok)| Step::End { pick, ok }),
        1 => any::<usize>().prop_map(Step::Stop),
        1 => (0..NODES).prop_map(Step::Interfere),
        1 => Just(Step::NewLeader),
        1 => Just(Step::Tick),
        1 => (0..NODES, any::<bool>()).prop_map(|(i, d)| Step::Drain(i, d)),
    ]
}

/// The etcd model: keys with mod revisions, and every change in order.
struct Etcd {
    keys: Keys,
    kv: BTreeMap<String, (Vec<u8>, i64)>,
    rev: i64,
    history: Vec<Change>,
}

impl Etcd {
    fn put(&mut self, key: String, value: Vec<u8>) -> i64 {
        self.rev += 1;
        self.kv.insert(key.clone(), (value.clone(), self.rev));
        self.history.push(Change {
            revision: self.rev,
            key,
            value: Some(value),
        });
        self.rev
    }

    fn delete(&mut self, key: &str) {
        if self.kv.remove(key).is_some() {
            self.rev += 1;
            self.history.push(Change {
                revision: self.rev,
                key: key.to_string(),
                value: None,
            });
        }
    }

    fn mod_rev(&self, key: &str) -> i64 {
        self.kv.get(key).map_or(0, |(_, r)| *r)
    }

    /// A plan as etcd runs a transaction: one revision for all of it.
    fn txn(&mut self, compares: &[Compare], ops: &[Op]) -> Option<i64> {
        for c in compares {
            let Compare::ModRevision { key, rev } = c;
            if self.mod_rev(key) != *rev {
                return None;
            }
        }
        let mut keys: Vec<&str> = ops
            .iter()
            .map(|o| match o {
                Op::Put { key, .. } | Op::Delete { key } => key.as_str(),
            })
            .collect();
        keys.sort();
        let n = keys.len();
        keys.dedup();
        assert_eq!(n, keys.len(), "a transaction names a key twice: {ops:?}");
        self.rev += 1;
        let rev = self.rev;
        for o in ops {
            match o {
                Op::Put { key, value } => {
                    self.kv.insert(key.clone(), (value.clone(), rev));
                    self.history.push(Change {
                        revision: rev,
                        key: key.clone(),
                        value: Some(value.clone()),
                    });
                }
                Op::Delete { key } => {
                    if self.kv.remove(key).is_some() {
                        self.history.push(Change {
                            revision: rev,
                            key: key.clone(),
                            value: None,
                        });
                    }
                }
            }
        }
        Some(rev)
    }

    fn under(&self, prefix: &str) -> Vec<(&str, &[u8], i64)> {
        self.kv
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, r))| (k.as_str(), v.as_slice(), *r))
            .collect()
    }

    fn snapshot(&self, fence: i64) -> Snapshot {
        let k = &self.keys;
        let mut s = Snapshot {
            revision: self.rev,
            fence,
            ..Default::default()
        };
        for (key, v, _) in self.under(&k.nodes()) {
            s.nodes.push(decode("node", key, v).unwrap());
        }
        for (key, _, _) in self.under(&k.drains()) {
            s.drained.push(key.rsplit('/').next().unwrap().to_string());
        }
        for (key, v, r) in self.under(&k.jobs()) {
            s.jobs.push((decode("job", key, v).unwrap(), r));
        }
        for (key, v, r) in self.under(&k.allocs()) {
            s.allocs.push((
                key.rsplit('/').next().unwrap().to_string(),
                decode("alloc", key, v).unwrap(),
                r,
            ));
        }
        for (key, v, _) in self.under(&k.assigns()) {
            let a: Assignment = decode("assign", key, v).unwrap();
            let node = key.split('/').nth_back(1).unwrap().to_string();
            s.assigns.push((node, a.job, a.attempt));
        }
        for (key, v, _) in self.under(&k.reports()) {
            let mut parts = key.rsplit('/');
            let node = parts.next().unwrap().to_string();
            let job = parts.next().unwrap().to_string();
            s.reports
                .push((job, node, decode("report", key, v).unwrap()));
        }
        for (key, _, _) in self.under(&k.stops()) {
            s.stops.push(key.rsplit('/').next().unwrap().to_string());
        }
        s
    }
}

fn node_record(i: usize) -> NodeRecord {
    NodeRecord {
        name: format!("n{i}"),
        address: format!("10.0.0.{}:7000", i + 1),
        spec: NodeSpec {
            id: 0,
            gpus: (0..GPUS)
                .map(|g| GpuSpec {
                    index: g,
                    uuid: format!("GPU-{i}-{g}"),
                    memory_mb: 40_000,
                    numa: 0,
                    socket: 0,
                    nvlink_group: None,
                    compute_capability: (8, 0),
                    mig: Vec::new(),
                })
                .collect(),
            capacity: Default::default(),
        },
        health: Vec::new(),
        labels: Default::default(),
        scheduler: true,
        gpu_models: Vec::new(),
        started_at: 0,
    }
}

fn job_id(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn entry(n: u32, gpus: u32, restart: bool, cross: bool) -> JobEntry {
    let id = JobId::parse(&job_id(n)).unwrap();
    let (mut spec, _) = joblet_core::JobRequest {
        command: "true".into(),
        ..Default::default()
    }
    .validate()
    .unwrap();
    spec.resources.gpu_count = gpus;
    let mut submission = Submission::of(id, "alice", &spec, &JobRules::default());
    submission.request.allow_cross_node = cross;
    JobEntry {
        owner: "alice".into(),
        spec,
        submission,
        submitted_at: i64::from(n),
        via: "n0".into(),
        restart: if restart {
            RestartPolicy::OnNodeFailure
        } else {
            RestartPolicy::Never
        },
        phase: JobPhase::Queued {
            attempt: 1,
            reason: None,
        },
    }
}

struct World {
    etcd: Etcd,
    core: LeaderCore,
    fence: i64,
    up: [bool; NODES],
    /// Drained nodes, with the jobs assigned there when they were drained.
    drained: BTreeMap<String, Vec<String>>,
    submitted: u32,
    now: i64,
}

impl World {
    fn new() -> World {
        let keys = Keys::new("/j");
        let mut w = World {
            etcd: Etcd {
                keys: keys.clone(),
                kv: BTreeMap::new(),
                rev: 0,
                history: Vec::new(),
            },
            core: LeaderCore::new(LeaderConfig {
                max_txn_ops: 16,
                ..LeaderConfig::new(SchedConfig::default(), keys)
            }),
            fence: 0,
            up: [false; NODES],
            drained: BTreeMap::new(),
            submitted: 0,
            now: 1_000,
        };
        w.fence = w.etcd.put("/j/leader/a".into(), b"leader".to_vec());
        w.feed(Input::Snapshot(Box::new(w.etcd.snapshot(w.fence))));
        w
    }

    /// Feeds one input and carries out everything it leads to.
    fn feed(&mut self, input: Input) {
        self.now += 10;
        let mut queue = vec![input];
        while let Some(i) = queue.pop() {
            for out in self.core.handle(i, self.now) {
                match out {
                    Output::Commit(plan) => {
                        let mut compares = plan.compares.clone();
                        compares.push(Compare::ModRevision {
                            key: "/j/leader/a".into(),
                            rev: self.fence,
                        });
                        // The fence is the key's create revision; here the
                        // key is never rewritten, so its mod revision is it.
                        match self.etcd.txn(&compares, &plan.ops) {
                            Some(revision) => queue.push(Input::Committed {
                                plan: plan.id,
                                revision,
                            }),
                            None => queue.push(Input::Rejected { plan: plan.id }),
                        }
                    }
                    Output::Resync => {
                        queue.push(Input::Snapshot(Box::new(self.etcd.snapshot(self.fence))))
                    }
                }
            }
        }
    }

    fn assigned(&self) -> Vec<(String, Vec<String>, u32)> {
        self.etcd
            .under(&self.etcd.keys.jobs())
            .into_iter()
            .filter_map(|(k, v, _)| {
                let e: JobEntry = decode("job", k, v).unwrap();
                let id = e.id().to_string();
                match e.phase {
                    JobPhase::Assigned { nodes, attempt, .. } => Some((id, nodes, attempt)),
                    _ => None,
                }
            })
            .collect()
    }

    /// A node reports its part of a job ended (as the daemon does: only
    /// while its assignment is there).
    fn report_end(&mut self, job: &str, node: &str, attempt: u32, ok: bool) {
        let assign = self.etcd.keys.assign(node, job);
        if self.etcd.mod_rev(&assign) == 0 {
            return;
        }
        let report = NodeReport {
            attempt,
            state: ReportState::Ended {
                state: if ok {
                    JobState::Completed
                } else {
                    JobState::Failed
                },
                exit_code: Some(if ok { 0 } else { 1 }),
                reason: String::new(),
                at: self.now,
            },
        };
        let key = self.etcd.keys.report(job, node);
        self.etcd.put(key, encode(&report));
        self.feed(Input::Report {
            job: job.into(),
            node: node.into(),
            report,
        });
    }

    fn apply(&mut self, s: Step) {
        match s {
            Step::Submit {
                gpus,
                restart,
                cross,
            } => {
                self.submitted += 1;
                let e = entry(self.submitted, gpus, restart, cross);
                let rev = self.etcd.put(self.etcd.keys.job(e.id()), encode(&e));
                self.feed(Input::Job {
                    entry: Box::new(e),
                    rev,
                });
            }
            Step::NodeUp(i) => {
                let rec = node_record(i);
                self.etcd.put(self.etcd.keys.node(&rec.name), encode(&rec));
                self.up[i] = true;
                self.feed(Input::NodeUp(Box::new(rec)));
            }
            Step::NodeGone(i) => {
                if !self.up[i] {
                    return;
                }
                let name = format!("n{i}");
                self.etcd.delete(&self.etcd.keys.node(&name));
                self.up[i] = false;
                self.feed(Input::NodeGone(name));
            }
            Step::End { pick, ok } => {
                let jobs = self.assigned();
                if jobs.is_empty() {
                    return;
                }
                let (job, nodes, attempt) = jobs[pick % jobs.len()].clone();
                let node = nodes[pick % nodes.len()].clone();
                self.report_end(&job, &node, attempt, ok);
            }
            Step::Stop(pick) => {
                if self.submitted == 0 {
                    return;
                }
                let job = job_id((pick as u32 % self.submitted) + 1);
                self.etcd.put(self.etcd.keys.stop(&job), b"stop".to_vec());
                self.feed(Input::Stop { job });
            }
            Step::Interfere(i) => {
                let key = self.etcd.keys.alloc(&format!("n{i}"));
                if let Some((v, _)) = self.etcd.kv.get(&key).cloned() {
                    self.etcd.put(key, v);
                }
            }
            Step::NewLeader => {
                // The old key goes with its lease; the new one's create
                // revision is the new fence.
                self.etcd.delete("/j/leader/a");
                self.fence = self.etcd.put("/j/leader/a".into(), b"leader".to_vec());
                self.core = LeaderCore::new(LeaderConfig {
                    max_txn_ops: 16,
                    ..LeaderConfig::new(SchedConfig::default(), self.etcd.keys.clone())
                });
                self.feed(Input::Snapshot(Box::new(self.etcd.snapshot(self.fence))));
            }
            Step::Tick => self.feed(Input::Tick),
            Step::Drain(i, drained) => {
                let node = format!("n{i}");
                let key = self.etcd.keys.drain(&node);
                if drained {
                    self.drained.insert(node.clone(), self.assigned_on(&node));
                    self.etcd.put(key, Vec::new());
                } else {
                    self.drained.remove(&node);
                    self.etcd.delete(&key);
                }
                self.feed(Input::Drain { node, drained });
            }
        }
    }

    /// Jobs with an assignment on `node`.
    fn assigned_on(&self, node: &str) -> Vec<String> {
        self.etcd
            .under(&self.etcd.keys.assigns_of(node))
            .into_iter()
            .map(|(k, _, _)| k.rsplit('/').next().unwrap().to_string())
            .collect()
    }

    fn check(&self) {
        // A drained node takes no new job.
        for (node, before) in &self.drained {
            for job in self.assigned_on(node) {
                assert!(
                    before.contains(&job),
                    "job {job} placed on drained node {node}"
                );
            }
        }
        let mut h = History::new(self.etcd.keys.clone());
        h.replay(&self.etcd.history);
        assert!(h.violations.is_empty(), "{:?}", h.violations);
        let k = &self.etcd.keys;
        for (key, v, _) in self.etcd.under(&k.assigns()) {
            let a: Assignment = decode("assign", key, v).unwrap();
            let node = key.split('/').nth_back(1).unwrap();
            assert!(
                self.etcd.mod_rev(&k.node(node)) != 0,
                "{key}: assigned to a node that is gone"
            );
            let e: JobEntry = decode("job", "", &self.etcd.kv[&k.job(&a.job)].0).unwrap();
            match &e.phase {
                JobPhase::Assigned { attempt, nodes, .. } => {
                    assert_eq!(*attempt, a.attempt, "{key}");
                    assert!(nodes.iter().any(|n| n == node), "{key}");
                }
                other => panic!("{key}: its job is {other:?}"),
            }
            let alloc: NodeAlloc = decode("alloc", "", &self.etcd.kv[&k.alloc(node)].0).unwrap();
            assert_eq!(
                alloc.jobs.get(&a.job).map(|e| e.attempt),
                Some(a.attempt),
                "{key}: not in {node}'s allocation"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn the_leader_never_gives_a_gpu_twice_and_every_job_ends_once(
        steps in proptest::collection::vec(step(), 1..80)
    ) {
        let mut w = World::new();
        for i in 0..2 {
            w.apply(Step::NodeUp(i));
        }
        for s in steps {
            w.apply(s);
            w.check();
        }
        // Everything ends: nodes come back undrained, report every part ended.
        for i in 0..NODES {
            if !w.up[i] {
                w.apply(Step::NodeUp(i));
            }
            w.apply(Step::Drain(i, false));
        }
        for _ in 0..200 {
            let jobs = w.assigned();
            if jobs.is_empty() {
                break;
            }
            for (job, nodes, attempt) in jobs {
                for n in nodes {
                    w.report_end(&job, &n, attempt, true);
                }
            }
            w.check();
        }
        let mut h = History::new(w.etcd.keys.clone());
        h.replay(&w.etcd.history);
        prop_assert!(h.violations.is_empty(), "{:?}", h.violations);
        // Jobs larger than the whole cluster (or than one node, without
        // cross-node) end FAILED at submission; every other one ran.
        prop_assert_eq!(h.unfinished(), Vec::<String>::new(), "waiting: {}", w.core.waiting());
        for (key, v, _) in w.etcd.under(&w.etcd.keys.allocs()) {
            let a: NodeAlloc = decode("alloc", key, v).unwrap();
            prop_assert!(a.jobs.is_empty(), "{} still holds {:?}", key, a.jobs);
        }
        prop_assert!(w.etcd.under(&w.etcd.keys.assigns()).is_empty());
    }
}

fn entry_of(w: &World, n: u32) -> JobEntry {
    let key = w.etcd.keys.job(&job_id(n));
    decode("job", &key, &w.etcd.kv[&key].0).unwrap()
}

#[test]
fn a_lost_node_s_jobs_end_or_run_again_elsewhere_as_their_next_attempt() {
    let mut w = World::new();
    for i in 0..3 {
        w.apply(Step::NodeUp(i));
    }
    // A 6-GPU gang across n0 and n1, then a 3-GPU job on n2 that may run
    // again and a 1-GPU one on n2 that may not.
    w.apply(Step::Submit {
        gpus: 6,
        restart: false,
        cross: true,
    });
    w.apply(Step::Submit {
        gpus: 3,
        restart: true,
        cross: false,
    });
    w.apply(Step::Submit {
        gpus: 1,
        restart: false,
        cross: false,
    });
    let nodes = |w: &World, n| entry_of(w, n).nodes().to_vec();
    assert_eq!(nodes(&w, 1), vec!["n0", "n1"]);
    assert_eq!(nodes(&w, 2), vec!["n2"]);
    assert_eq!(nodes(&w, 3), vec!["n2"]);
    w.apply(Step::NodeGone(2));
    w.check();
    match entry_of(&w, 3).phase {
        JobPhase::Ended { state, reason, .. } => {
            assert_eq!(state, JobState::Failed);
            assert_eq!(reason, "lost: node n2 was lost (its lease expired)");
        }
        other => panic!("{other:?}"),
    }
    // No room for the 3-GPU job until the gang ends: queued as attempt 2.
    assert_eq!(
        entry_of(&w, 2).phase,
        JobPhase::Queued {
            attempt: 2,
            reason: Some("node n2 was lost (its lease expired)".into())
        }
    );
    // One task of the gang fails: the rest is stopped; the end is the failure's.
    w.report_end(&job_id(1), "n1", 1, false);
    assert!(w.etcd.kv.contains_key(&w.etcd.keys.stop(&job_id(1))));
    w.report_end(&job_id(1), "n0", 1, true);
    assert!(matches!(
        entry_of(&w, 1).phase,
        JobPhase::Ended {
            state: JobState::Failed,
            ..
        }
    ));
    assert!(!w.etcd.kv.contains_key(&w.etcd.keys.stop(&job_id(1))));
    let e = entry_of(&w, 2);
    assert_eq!(e.attempt(), 2);
    assert!(
        matches!(e.phase, JobPhase::Assigned { .. }),
        "{:?}",
        e.phase
    );
    w.check();
}

#[test]
fn a_drained_node_gets_no_new_job() {
    let mut w = World::new();
    for i in 0..2 {
        w.apply(Step::NodeUp(i));
    }
    w.apply(Step::Drain(0, true));
    for _ in 0..3 {
        w.apply(Step::Submit {
            gpus: 2,
            restart: false,
            cross: false,
        });
    }
    // n1's 4 GPUs hold two; the third waits rather than go to n0.
    assert!(matches!(entry_of(&w, 3).phase, JobPhase::Queued { .. }));
    for n in 1..=2 {
        assert_eq!(
            entry_of(&w, n).nodes(),
            ["n1"],
            "job {n}: {:?}",
            entry_of(&w, n).phase
        );
    }
    w.check();
}
