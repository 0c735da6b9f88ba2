//! The scheduler's event loop: `handle(event, now) -> actions`, with the
//! running and waiting jobs, the cluster state, and restore from the ledger.
//!
//! Every event is applied, then one decision pass of the configured policy
//! runs (see [`crate::policy`]). Semantics worth knowing:
//! - `Start` actions are already allocated in [`Scheduler::cluster`].
//! - One scheduler places every job. A CPU-only request (`gpu_count` 0)
//!   waits in the same queue as GPU requests, under the same policy,
//!   priorities and aging, and starts on a node with a free job slot and
//!   room for its `cpu_millis` and `host_memory_mb` (chosen by the
//!   strategy, see [`crate::place`]); its placement has no units, names
//!   its node, and is in the cluster state's ledger like any other. Every
//!   job, with GPUs or not, takes a job slot and its CPU and memory on each
//!   node it runs on, and no node's tracked capacity
//!   ([`crate::model::NodeCapacity`]) is ever exceeded.
//! - Under [`crate::model::Policy::Fifo`] that includes order: a CPU-only
//!   job behind a waiting GPU job waits too, even when a node has room for
//!   it (backfill lets it pass when it cannot delay the head).
//! - Quotas and the rate limit are about GPU units: CPU-only jobs count
//!   nothing against a quota and take no token (see [`crate::limits`]).
//!   Under LAS a CPU-only job attains no service (it counts GPU units ×
//!   time), so it stays in the top LAS queue.
//! - `Submit` of a request whose `gpu_milli` does not fit the rest of it
//!   (a fraction of more than one GPU, of an exclusive or MIG request, or
//!   above 1000), or that could never be placed on the cluster as
//!   built (too many GPUs, more CPU or memory than the largest node, no
//!   node that runs jobs, or no node with all it asks together; over a
//!   quota) gets `Reject` with the [`crate::model::Unplaceable`] reason at
//!   once, never a place in the queue.
//! - Every accepted `Submit` adds its shape to the workload mix
//!   ([`crate::place::workload`]) that `Fgd` measures fragmentation
//!   against.
//! - A second `Submit` of a job key that waits or runs is ignored (a
//!   `Reject` would fail the job already known under that key).
//! - `Cancel` of a waiting job removes it (no action); of a running job it
//!   does nothing until its `Exited` (and a preempted job that is cancelled
//!   is not requeued).
//! - A job's units, CPU, memory and job slots are freed when its `Exited`
//!   arrives (a preempted job holds them while it stops).
//! - GPU health: `GpuChanged` updates the cluster; a GPU that does not
//!   accept new jobs (DEGRADED, RESETTING, OFFLINE, DRAINING) or is paused
//!   gets no new job. Jobs already on it are **not** preempted by the
//!   scheduler: the daemon's GPU health policy ends them, and their
//!   `Exited` frees the units.
//! - `NodeRemoved`: the allocations of the jobs placed on the node (GPU
//!   and CPU-only jobs; whole, even for jobs spanning other nodes) are
//!   dropped. A preemptible job gets `Preempt` ("node N removed") and is
//!   requeued, keeping its attained service, when its `Exited` arrives;
//!   any other job gets `Reject` ("node N removed").
//!   Waiting jobs are not re-checked against the smaller cluster: they wait
//!   for the capacity to come back. `NodeAdded` for a known node id acts as
//!   removal then addition.
//! - Restore: every running job comes back with its placement (CPU-only
//!   ones too); CPU, memory and job slots are charged as recorded even
//!   where a node's capacity was lowered across the restart (that node
//!   then takes no new job until enough has ended). The ledger has
//!   placements and start times but not the
//!   service earned in runs before the current one, so after a restart LAS
//!   counts a job's attained service from its current run's start, waiting
//!   jobs start again in the top LAS queue, buckets are full, and a job
//!   preempted but not yet exited counts as running (it may be preempted
//!   again).

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use joblet_core::UnixMillis;

use crate::cluster::{AllocError, ClusterState, HostLoad};
use crate::limits::Limits;
use crate::model::{
    Action, Event, GpuHealth, GpuRef, JobKey, JobRequest, NodeId, NodeSpec, Placement, Policy,
    SchedConfig,
};
use crate::place::workload::Workload;
use crate::policy::backfill::Reservation;
use crate::policy::reserve::WalkBuf;
use crate::policy::Misfits;
use crate::queue::{shape_of, Candidates, Peek, WaitQueue, Waiting};
use crate::sizes::SizeModel;

mod claims;
mod keyed;
mod running;

pub(crate) use keyed::ByJob;
pub(crate) use running::{Candidate, Running};

/// The scheduler: one per cluster, fed events in order.
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub(crate) config: SchedConfig,
    pub(crate) cluster: ClusterState,
    pub(crate) nodes: BTreeMap<NodeId, NodeSpec>,
    /// GPUs that take no new jobs (health or thermal pause).
    pub(crate) closed: HashSet<(NodeId, u32)>,
    pub(crate) queue: WaitQueue,
    pub(crate) running: HashMap<JobKey, Running>,
    /// Running jobs that hold an allocation, are preemptible and not
    /// stopping, by (priority, job): victims are searched lowest priority
    /// first.
    pub(crate) preemptible: BTreeMap<ByJob<i32>, Candidate>,
    /// Running jobs holding an allocation with a known end (start + time
    /// limit; the preemption time for stopping jobs), by end: backfill's
    /// reservation walks it in order.
    pub(crate) by_end: BTreeSet<ByJob<UnixMillis>>,
    /// How many running jobs hold each unit (units not listed: none).
    pub(crate) unit_jobs: HashMap<GpuRef, u32>,
    pub(crate) limits: Limits,
    /// Bumped whenever capacity may have grown (release, health, node).
    pub(crate) epoch: u64,
    /// Bumped whenever running jobs' expected ends may have changed in a
    /// way a backfill reservation depends on.
    pub(crate) res_version: u64,
    pub(crate) reservation: Option<Reservation>,
    pub(crate) walk_buf: WalkBuf,
    pub(crate) actions: Vec<Action>,
    /// GPUs held for a job whose victims are still stopping.
    pub(crate) claims: BTreeMap<(NodeId, u32), claims::Claim>,
    /// CPU, memory and job slots held the same way: (beneficiary, node,
    /// what is held there).
    pub(crate) host_claims: Vec<(JobKey, NodeId, HostLoad)>,
    /// A beneficiary whose last victim just exited: offered the room first.
    pub(crate) first: Option<JobKey>,
    /// Reused by passes (waiting keys looked at).
    pub(crate) scratch: Vec<Peek>,
    /// Reused by passes (where the walk over the window stands).
    pub(crate) candidates: Candidates,
    pub(crate) misfits: Misfits,
    /// The mix of request shapes submitted (what `Fgd` measures
    /// fragmentation against).
    pub(crate) workload: Workload,
    /// No preemption search before this (after a failed one).
    pub(crate) search_gap_until: UnixMillis,
    /// Job sizes learned from completed jobs (the Gittins policy's).
    pub(crate) sizes: SizeModel,
}

impl Scheduler {
    pub fn new(config: SchedConfig, nodes: Vec<NodeSpec>) -> Scheduler {
        let limits = Limits::new(&config);
        let config_min_samples = config.gittins_min_samples;
        let config_quantum = config.checkpoint_interval_ms;
        let cluster = ClusterState::new(nodes.clone());
        Scheduler {
            config,
            cluster,
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            closed: HashSet::default(),
            queue: WaitQueue::default(),
            running: HashMap::default(),
            preemptible: BTreeMap::new(),
            by_end: BTreeSet::new(),
            unit_jobs: HashMap::default(),
            limits,
            epoch: 0,
            res_version: 0,
            reservation: None,
            walk_buf: WalkBuf::default(),
            actions: Vec::new(),
            claims: BTreeMap::new(),
            host_claims: Vec::new(),
            first: None,
            scratch: Vec::new(),
            candidates: Candidates::default(),
            search_gap_until: UnixMillis::MIN,
            misfits: Misfits::default(),
            sizes: SizeModel::new(config_min_samples, config_quantum),
            workload: Workload::default(),
        }
    }

    /// Rebuild after a restart from the ledger: running jobs with their
    /// placements (CPU-only ones too) and start times, waiting jobs with
    /// submit times. Same allocations as before; CPU, memory and job slots
    /// are charged as recorded even where a node's capacity was lowered
    /// since ([`ClusterState::adopt`]).
    pub fn restore(
        config: SchedConfig,
        nodes: Vec<NodeSpec>,
        running: Vec<(JobRequest, Placement, UnixMillis)>,
        waiting: Vec<(JobRequest, UnixMillis)>,
    ) -> Result<Scheduler, AllocError> {
        let mut s = Scheduler::new(config, nodes);
        for (req, placement, started) in running {
            s.cluster.adopt(placement.clone())?;
            s.limits.hold(&req);
            s.insert_running(req, started, started, 0, 0, placement);
        }
        for (req, submitted) in waiting {
            if !s.running.contains_key(&req.job) {
                s.enqueue(req, submitted, submitted, 0, 0);
            }
        }
        Ok(s)
    }

    pub fn handle(&mut self, event: Event, now: UnixMillis) -> Vec<Action> {
        match event {
            Event::Submit(req) => self.on_submit(*req, now),
            Event::Cancel(job) => self.on_cancel(&job),
            Event::Exited(job) => self.on_exited(&job, now),
            Event::GpuChanged {
                node,
                index,
                health,
            } => self.on_gpu_changed(node, index, health),
            Event::NodeAdded(spec) => self.on_node_added(spec, now),
            Event::NodeDrained { node, drained } => self.set_drained(node, drained),
            Event::NodeRemoved(id) => self.on_node_removed(id, now),
            Event::Tick => {}
        }
        self.settle_claims();
        if let Some(job) = self.first.take() {
            if let Some(key) = self.queue.key_of(&job) {
                self.try_start(key, now);
            }
        }
        self.pass(now);
        std::mem::take(&mut self.actions)
    }

    /// Starts `req` on exactly `placement`, decided elsewhere (a cluster
    /// leader placed it on this node), if that is free now; nothing
    /// changes on error. The job never waits in this scheduler's queue.
    pub fn pin(
        &mut self,
        req: JobRequest,
        placement: Placement,
        now: UnixMillis,
    ) -> Result<(), AllocError> {
        if self.running.contains_key(&req.job) || self.queue.contains(&req.job) {
            return Err(AllocError::DuplicateJob { job: req.job });
        }
        self.cluster.allocate(placement.clone())?;
        self.limits.hold(&req);
        self.insert_running(req, now, now, 0, 0, placement);
        Ok(())
    }

    /// Adds a node, drained or not, without deciding anything yet (the
    /// next event's pass may place on it; see [`Event::NodeAdded`]).
    pub fn add_node(&mut self, spec: NodeSpec, drained: bool, now: UnixMillis) {
        let id = spec.id;
        self.on_node_added(spec, now);
        self.cluster.set_drained(id, drained);
        // Whatever `on_node_added` decided for jobs of a replaced node is
        // the caller's to hear with the next event's actions.
    }

    /// Drains or undrains a node without deciding anything yet (a
    /// restore sets every node's drain before the first pass; see
    /// [`Event::NodeDrained`]).
    pub fn set_drained(&mut self, node: NodeId, drained: bool) {
        self.cluster.set_drained(node, drained);
        self.capacity_changed();
    }

    /// Replaces the mix of request shapes (`Fgd`'s measure) with one
    /// seeded from elsewhere (a trace); submissions keep adding to it.
    pub fn seed_workload(&mut self, workload: Workload) {
        self.workload = workload;
    }

    /// The mix of request shapes observed so far (plus any seed).
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }

    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Free units that cannot serve the smallest waiting gang; 0 when
    /// nothing waits.
    pub fn fragmentation(&self) -> u32 {
        self.queue
            .smallest_gang()
            .map_or(0, |g| self.cluster.fragmentation(g))
    }

    /// The waiting jobs in decision order.
    pub fn waiting_jobs(&self) -> impl Iterator<Item = &JobRequest> {
        self.queue.iter().map(|w| &w.req)
    }

    /// A job's attained service (units × ms) at `now`, waiting or running.
    pub fn attained_gpu_ms(&self, job: &str, now: UnixMillis) -> Option<u64> {
        if let Some(r) = self.running.get(job) {
            return Some(r.attained_at(now));
        }
        let key = self.queue.key_of(job)?;
        self.queue.get(key).map(|w| w.attained_gpu_ms)
    }

    fn on_submit(&mut self, req: JobRequest, now: UnixMillis) {
        if self.running.contains_key(&req.job) || self.queue.contains(&req.job) {
            return;
        }
        // The cluster remembers these answers per request shape.
        let never = req
            .gpu_milli_error()
            .or_else(|| self.cluster.check_ever_placeable(&req).err())
            .or_else(|| self.limits.never_fits(&req));
        if let Some(why) = never {
            self.actions.push(Action::Reject {
                job: req.job,
                reason: why.to_string(),
            });
            return;
        }
        self.workload.observe(&req);
        self.enqueue(req, now, now, 0, 0);
    }

    fn on_cancel(&mut self, job: &str) {
        if self.queue.remove(job).is_some() {
            return;
        }
        if let Some(r) = self.running.get_mut(job) {
            r.cancelled = true;
        }
    }

    fn on_exited(&mut self, job: &str, now: UnixMillis) {
        let Some(held) = self.running.get(job).map(Running::held) else {
            return;
        };
        let mut freed = None;
        if held {
            freed = self.cluster.release(job);
            self.unhold(job, now);
            self.capacity_changed();
        }
        let Some(r) = self.running.remove(job) else {
            return;
        };
        if let Some(b) = &r.beneficiary {
            let left = self
                .queue
                .key_of(b)
                .and_then(|k| self.queue.get_mut(k))
                .map(|w| {
                    w.awaiting_victims = w.awaiting_victims.saturating_sub(1);
                    w.awaiting_victims
                });
            match left {
                Some(0) => {
                    // The last victim is gone: the room is the beneficiary's.
                    self.unclaim(b);
                    self.first = Some(b.clone());
                }
                Some(_) => {
                    if let Some(p) = &freed {
                        self.claim_freed(b, p);
                    }
                }
                None => {}
            }
        }
        let attained = r.attained_at(now);
        if r.stopping && !r.cancelled {
            self.enqueue(r.req, r.submitted, now, attained, r.preemptions + 1);
        } else if !r.stopping && !r.cancelled && r.req.gpu_count > 0 {
            // It ended on its own: its size teaches the Gittins policy.
            let epoch = self.sizes.epoch;
            self.sizes.observe(r.slot, attained);
            if self.sizes.epoch != epoch && self.config.policy == Policy::Gittins {
                self.relevel_waiting();
            }
        }
    }

    fn on_gpu_changed(&mut self, node: NodeId, index: u32, health: GpuHealth) {
        let known = self
            .nodes
            .get(&node)
            .is_some_and(|n| n.gpus.iter().any(|g| g.index == index));
        if !known {
            return;
        }
        if !self.claimed_health(node, index, health) {
            self.cluster.set_health(node, index, health);
        }
        if health.state.accepts_new_jobs() && !health.paused {
            self.closed.remove(&(node, index));
        } else {
            self.closed.insert((node, index));
        }
        self.capacity_changed();
    }

    fn on_node_added(&mut self, spec: NodeSpec, now: UnixMillis) {
        if self.nodes.contains_key(&spec.id) {
            self.on_node_removed(spec.id, now);
        }
        self.cluster.add_node(spec.clone());
        self.nodes.insert(spec.id, spec);
        self.capacity_changed();
    }

    fn on_node_removed(&mut self, id: NodeId, now: UnixMillis) {
        if self.nodes.remove(&id).is_none() {
            return;
        }
        self.claims.retain(|(n, _), _| *n != id);
        self.host_claims.retain(|(_, n, _)| *n != id);
        self.closed.retain(|(n, _)| *n != id);
        let mut lost = self.cluster.remove_node(id);
        lost.sort();
        lost.dedup();
        let reason = format!("node {id} removed");
        for job in lost {
            self.unhold(&job, now);
            let Some(r) = self.running.get_mut(&job) else {
                continue;
            };
            if r.stopping {
                continue;
            }
            if r.req.preemptible && !r.cancelled {
                r.stopping = true;
                self.actions.push(Action::Preempt {
                    job,
                    reason: reason.clone(),
                });
            } else {
                self.running.remove(&job);
                self.actions.push(Action::Reject {
                    job,
                    reason: reason.clone(),
                });
            }
        }
        self.capacity_changed();
    }

    /// Capacity may have grown: failed placements may now fit, and a
    /// backfill reservation must be recomputed.
    pub(crate) fn capacity_changed(&mut self) {
        self.epoch += 1;
        self.res_version += 1;
    }

    pub(crate) fn enqueue(
        &mut self,
        req: JobRequest,
        submitted: UnixMillis,
        enqueued: UnixMillis,
        attained_gpu_ms: u64,
        preemptions: u32,
    ) {
        let slot = self.sizes.slot(&req.queue);
        let level = self.level_of(slot, req.gpu_count, attained_gpu_ms);
        // Under Gittins a job keeps its seniority across preemptions.
        let enqueued = if self.config.policy == Policy::Gittins {
            submitted
        } else {
            enqueued
        };
        let w = Waiting {
            shape: shape_of(&req),
            req,
            submitted,
            enqueued,
            attained_gpu_ms,
            level,
            failed_epoch: None,
            refused_at: None,
            awaiting_victims: 0,
            preempt_retry_at: UnixMillis::MIN,
            preemptions,
        };
        self.queue.push(w, self.aging_ms());
    }
}
