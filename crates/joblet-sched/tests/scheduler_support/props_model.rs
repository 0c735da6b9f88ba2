//! The property test's own model of what must hold: it drives a scheduler
//! with one operation at a time and checks every action against rules it
//! tracks itself (units held, classes, memory, each node's CPU, memory and
//! jobs, quotas, token buckets).

use std::collections::{BTreeMap, BTreeSet};

use joblet_core::gpu::GpuState;
use joblet_sched::model::{
    Action, Event, GpuHealth, GpuRef, JobRequest, NodeSpec, Placement, SchedConfig, Sharing,
    WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;

use super::{request, Op};

struct Run {
    /// None: its node was removed.
    placement: Option<Placement>,
    started: i64,
    stopping: bool,
    cancelled: bool,
}

struct Hold {
    job: String,
    reserve_mb: u64,
    exclusive: bool,
    class: WorkloadClass,
}

pub struct Model {
    pub now: i64,
    config: SchedConfig,
    s: Scheduler,
    specs: BTreeMap<u32, NodeSpec>,
    present: BTreeSet<u32>,
    health: BTreeMap<(u32, u32), GpuHealth>,
    reqs: BTreeMap<String, JobRequest>,
    waiting: BTreeMap<String, i64>,
    running: BTreeMap<String, Run>,
    holders: BTreeMap<GpuRef, Vec<Hold>>,
    /// Per node: (millicores, MiB, jobs) the running placements charge.
    host: BTreeMap<u32, (u64, u64, u32)>,
    owner_held: BTreeMap<String, u32>,
    queue_held: BTreeMap<String, u32>,
    buckets: BTreeMap<String, (f64, i64)>,
    next_job: u64,
}

impl Model {
    pub fn new(config: SchedConfig, nodes: Vec<NodeSpec>) -> Model {
        Model {
            now: 0,
            s: Scheduler::new(config.clone(), nodes.clone()),
            config,
            present: nodes.iter().map(|n| n.id).collect(),
            specs: nodes.into_iter().map(|n| (n.id, n)).collect(),
            health: BTreeMap::new(),
            reqs: BTreeMap::new(),
            waiting: BTreeMap::new(),
            running: BTreeMap::new(),
            holders: BTreeMap::new(),
            host: BTreeMap::new(),
            owner_held: BTreeMap::new(),
            queue_held: BTreeMap::new(),
            buckets: BTreeMap::new(),
            next_job: 0,
        }
    }

    pub fn apply(&mut self, op: Op, step: usize) {
        let now = self.now;
        let mut removed_node = None;
        let event = match op {
            Op::Submit(sub) => {
                let r = request(format!("j{}", self.next_job), &sub);
                self.next_job += 1;
                self.waiting.insert(r.job.clone(), now);
                self.reqs.insert(r.job.clone(), r.clone());
                Event::Submit(Box::new(r))
            }
            Op::Cancel(sel) => {
                let all: Vec<String> = self
                    .waiting
                    .keys()
                    .chain(self.running.keys())
                    .cloned()
                    .collect();
                if all.is_empty() {
                    Event::Tick
                } else {
                    let job = all[usize::from(sel) % all.len()].clone();
                    if self.waiting.remove(&job).is_none() {
                        if let Some(r) = self.running.get_mut(&job) {
                            r.cancelled = true;
                        }
                    }
                    Event::Cancel(job)
                }
            }
            Op::Exit(sel) => {
                let all: Vec<String> = self.running.keys().cloned().collect();
                if all.is_empty() {
                    Event::Tick
                } else {
                    let job = all[usize::from(sel) % all.len()].clone();
                    let r = self.running.remove(&job).expect("running");
                    self.release(&job, r.placement.as_ref());
                    if r.stopping && !r.cancelled {
                        self.waiting.insert(job.clone(), now);
                    }
                    Event::Exited(job)
                }
            }
            Op::Health(n, g, st, paused) => {
                let node = u32::from(n) % self.specs.len() as u32;
                let gpus = self.specs[&node].gpus.len() as u32;
                if gpus == 0 {
                    return self.apply(Op::Tick, step);
                }
                let index = u32::from(g) % gpus;
                let health = GpuHealth {
                    state: GpuState::ALL
                        .get(usize::from(st))
                        .copied()
                        .unwrap_or(GpuState::Available),
                    paused,
                    temperature_c: Some(u32::from(g)),
                };
                if self.present.contains(&node) {
                    self.health.insert((node, index), health);
                }
                Event::GpuChanged {
                    node,
                    index,
                    health,
                }
            }
            Op::RemoveNode(n) => {
                let node = u32::from(n) % self.specs.len() as u32;
                if self.present.remove(&node) {
                    self.health.retain(|(nd, _), _| *nd != node);
                    removed_node = Some(node);
                }
                Event::NodeRemoved(node)
            }
            Op::AddNode(n) => {
                let node = u32::from(n) % self.specs.len() as u32;
                if self.present.contains(&node) {
                    Event::Tick
                } else {
                    self.present.insert(node);
                    Event::NodeAdded(self.specs[&node].clone())
                }
            }
            Op::Tick => Event::Tick,
            Op::Restore => {
                self.check_restore();
                Event::Tick
            }
        };
        // Jobs that lose their units with the node, as the model sees it.
        let mut lost = BTreeSet::new();
        if let Some(node) = removed_node {
            let on_node: Vec<String> = self
                .running
                .iter()
                .filter(|(_, r)| {
                    r.placement
                        .as_ref()
                        .is_some_and(|p| p.nodes().any(|n| n == node))
                })
                .map(|(j, _)| j.clone())
                .collect();
            for job in on_node {
                let p = self.running.get_mut(&job).and_then(|r| r.placement.take());
                self.release(&job, p.as_ref());
                if !self.running[&job].stopping {
                    lost.insert(job);
                }
            }
        }
        let submitted = match &event {
            Event::Submit(r) => Some(r.job.clone()),
            _ => None,
        };
        let actions = self.s.handle(event, now);
        for a in actions {
            self.check_action(a, submitted.as_deref(), &mut lost, removed_node);
        }
        assert!(
            lost.is_empty(),
            "step {step}: no action for jobs of a removed node: {lost:?}"
        );
        if let Err(e) = self.s.cluster().verify() {
            panic!("step {step}: cluster does not verify: {e}");
        }
        assert_eq!(self.s.waiting(), self.waiting.len(), "step {step}: waiting");
        assert_eq!(self.s.running(), self.running.len(), "step {step}: running");
        for (node, &(cpu, mem, jobs)) in &self.host {
            let cap = self.specs[node].capacity;
            assert!(
                cap.cpu_millis.is_none_or(|c| cpu <= c)
                    && cap.memory_mb.is_none_or(|c| mem <= c)
                    && cap.max_jobs.is_none_or(|c| jobs <= c),
                "step {step}: node {node} oversubscribed: {cpu} millicores, {mem} MiB, {jobs} jobs of {cap:?}"
            );
        }
    }

    /// Every node comes back with every GPU healthy, and running jobs keep
    /// exiting (time passing for rate limits and minimum run times): every
    /// waiting job must start.
    pub fn drain(&mut self, step: usize) {
        for id in self.specs.keys().copied().collect::<Vec<_>>() {
            if !self.present.contains(&id) {
                self.apply(Op::AddNode(id as u8), step);
            }
            for g in 0..self.specs[&id].gpus.len() {
                self.apply(Op::Health(id as u8, g as u8, u8::MAX, false), step);
            }
        }
        for _ in 0..=self.reqs.len() {
            if self.waiting.is_empty() {
                break;
            }
            while !self.running.is_empty() {
                self.apply(Op::Exit(0), step);
            }
            self.now += 600_000;
            self.apply(Op::Tick, step);
        }
        assert!(
            self.waiting.is_empty(),
            "jobs wait forever on an idle, healthy cluster: {:?}",
            self.waiting.keys().collect::<Vec<_>>()
        );
    }

    fn check_action(
        &mut self,
        a: Action,
        submitted: Option<&str>,
        lost: &mut BTreeSet<String>,
        removed_node: Option<u32>,
    ) {
        match a {
            Action::Start { placement } => self.check_start(placement),
            Action::Preempt { job, reason } => {
                assert!(!reason.starts_with("internal"), "{job}: {reason}");
                let req = &self.reqs[&job];
                let r = self.running.get_mut(&job).expect("preempted job runs");
                assert!(req.preemptible && !r.stopping, "{job} preempted: {reason}");
                if lost.remove(&job) {
                    assert_eq!(reason, format!("node {} removed", removed_node.unwrap()));
                } else {
                    assert!(self.now - r.started >= 60_000, "{job} preempted too soon");
                }
                r.stopping = true;
            }
            Action::Reject { job, reason } => {
                if submitted == Some(job.as_str()) {
                    assert!(self.waiting.remove(&job).is_some());
                } else {
                    assert!(lost.remove(&job), "{job} rejected: {reason}");
                    let r = self.running.remove(&job).expect("rejected job ran");
                    assert!(!self.reqs[&job].preemptible || r.cancelled);
                    assert_eq!(reason, format!("node {} removed", removed_node.unwrap()));
                }
            }
        }
    }

    fn check_start(&mut self, p: Placement) {
        let job = p.job.clone();
        assert!(
            self.waiting.remove(&job).is_some(),
            "{job} started but does not wait"
        );
        let req = self.reqs[&job].clone();
        let g = req.gpu_count;
        assert_eq!(p.units.len() as u32, g, "{job}: gang of {g}");
        assert_eq!((p.sharing, p.class), (req.sharing, req.class));
        assert_eq!(
            (p.cpu_millis, p.host_memory_mb),
            (req.cpu_millis, req.host_memory_mb),
            "{job}: CPU and memory charged"
        );
        assert_eq!(p.node, p.units.first().map_or(p.node, |u| u.node));
        for n in p.nodes() {
            assert!(self.present.contains(&n), "{job} on removed node {n}");
            let h = self.host.entry(n).or_default();
            h.0 += p.cpu_millis;
            h.1 += p.host_memory_mb;
            h.2 += 1;
        }
        if g > 0 {
            self.check_limits(&req);
        }
        let distinct: BTreeSet<&GpuRef> = p.units.iter().collect();
        assert_eq!(distinct.len(), p.units.len(), "{job}: a unit twice");
        let nodes: BTreeSet<u32> = p.units.iter().map(|u| u.node).collect();
        assert!(
            req.allow_cross_node || nodes.len() <= 1,
            "{job} spans nodes"
        );
        for u in &p.units {
            assert!(self.present.contains(&u.node), "{job} on a removed node");
            let spec = self.specs[&u.node]
                .gpus
                .iter()
                .find(|s| s.index == u.index)
                .expect("gpu");
            let h = self.health.get(&(u.node, u.index));
            assert!(
                h.is_none_or(|h| h.state.accepts_new_jobs() && !h.paused),
                "{job} started on a closed GPU {u:?}: {h:?}"
            );
            let unit_mb = match (&req.mig_profile, u.mig) {
                (Some(pf), Some(id)) => {
                    let s = spec.mig.iter().find(|s| s.id == id).expect("slice");
                    assert_eq!(&s.profile, pf);
                    s.memory_mb
                }
                (None, None) => {
                    assert!(spec.mig.is_empty(), "{job}: whole GPU of a MIG GPU");
                    spec.memory_mb
                }
                other => panic!("{job}: unit {other:?} does not match the request"),
            };
            assert!(unit_mb >= req.gpu_memory_mb);
            assert!(req
                .min_compute_capability
                .is_none_or(|c| spec.compute_capability >= c));
            if !req.allow_cross_numa && !req.allow_cross_node {
                let numa: BTreeSet<u32> = p
                    .units
                    .iter()
                    .map(|v| {
                        self.specs[&v.node]
                            .gpus
                            .iter()
                            .find(|s| s.index == v.index)
                            .unwrap()
                            .numa
                    })
                    .collect();
                assert_eq!(numa.len(), 1, "{job} crosses NUMA nodes");
            }
            let exclusive = req.sharing == Sharing::Exclusive;
            let reserve_mb = if exclusive || req.gpu_memory_mb == 0 {
                unit_mb
            } else {
                req.gpu_memory_mb
            };
            let hs = self.holders.entry(u.clone()).or_default();
            for h in hs.iter() {
                assert!(
                    !exclusive && !h.exclusive,
                    "{job} shares {u:?} with {} exclusively",
                    h.job
                );
                assert!(
                    !matches!(
                        (h.class, req.class),
                        (WorkloadClass::Training, WorkloadClass::Inference)
                            | (WorkloadClass::Inference, WorkloadClass::Training)
                    ),
                    "{job} ({:?}) co-located with {} ({:?}) on {u:?}",
                    req.class,
                    h.job,
                    h.class
                );
            }
            let used: u64 = hs.iter().map(|h| h.reserve_mb).sum();
            assert!(
                used + reserve_mb <= unit_mb,
                "{job} oversubscribes {u:?} memory"
            );
            hs.push(Hold {
                job: job.clone(),
                reserve_mb,
                exclusive,
                class: req.class,
            });
        }
        self.running.insert(
            job,
            Run {
                placement: Some(p),
                started: self.now,
                stopping: false,
                cancelled: false,
            },
        );
    }

    fn check_limits(&mut self, req: &JobRequest) {
        let g = req.gpu_count;
        let oh = self.owner_held.entry(req.owner.clone()).or_default();
        *oh += g;
        for (name, q) in &self.config.owner_quotas {
            assert!(
                name != &req.owner || *oh <= q.max_gpus,
                "owner {name} over quota: {oh}"
            );
        }
        let qh = self.queue_held.entry(req.queue.clone()).or_default();
        *qh += g;
        for (name, q) in &self.config.queue_quotas {
            assert!(
                name != &req.queue || *qh <= q.max_gpus,
                "queue {name} over quota: {qh}"
            );
        }
        if let Some(rate) = self.config.owner_rate {
            let now = self.now;
            let b = self
                .buckets
                .entry(req.owner.clone())
                .or_insert((f64::from(rate.burst), now));
            let tokens =
                (b.0 + rate.per_second * (now - b.1) as f64 / 1000.0).min(f64::from(rate.burst));
            assert!(
                tokens >= 1.0 - 1e-9,
                "owner {} started a job without a token",
                req.owner
            );
            *b = (tokens - 1.0, now);
        }
    }

    fn release(&mut self, job: &str, p: Option<&Placement>) {
        let Some(p) = p else { return };
        for u in &p.units {
            if let Some(hs) = self.holders.get_mut(u) {
                hs.retain(|h| h.job != job);
            }
        }
        for n in p.nodes() {
            let h = self.host.get_mut(&n).expect("charged");
            h.0 -= p.cpu_millis;
            h.1 -= p.host_memory_mb;
            h.2 -= 1;
        }
        let req = &self.reqs[job];
        if req.gpu_count == 0 {
            return;
        }
        *self.owner_held.get_mut(&req.owner).expect("held") -= req.gpu_count;
        *self.queue_held.get_mut(&req.queue).expect("held") -= req.gpu_count;
    }

    fn check_restore(&self) {
        let running: Vec<(JobRequest, Placement, i64)> = self
            .running
            .iter()
            .filter_map(|(job, r)| {
                let p = r.placement.clone()?;
                Some((self.reqs[job].clone(), p, r.started))
            })
            .collect();
        let waiting: Vec<(JobRequest, i64)> = self
            .waiting
            .iter()
            .map(|(j, t)| (self.reqs[j].clone(), *t))
            .collect();
        let nodes: Vec<NodeSpec> = self.present.iter().map(|n| self.specs[n].clone()).collect();
        let n_running = running.len();
        let restored = Scheduler::restore(self.config.clone(), nodes, running, waiting)
            .expect("the ledger restores");
        restored
            .cluster()
            .verify()
            .expect("restored cluster verifies");
        let mut a: Vec<&Placement> = self.s.cluster().placements().collect();
        let mut b: Vec<&Placement> = restored.cluster().placements().collect();
        a.sort_by(|x, y| x.job.cmp(&y.job));
        b.sort_by(|x, y| x.job.cmp(&y.job));
        assert_eq!(a, b, "restore gives the same allocations");
        assert_eq!(restored.running(), n_running);
        assert_eq!(restored.waiting(), self.s.waiting());
    }
}
