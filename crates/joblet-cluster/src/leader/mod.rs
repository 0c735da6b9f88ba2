//! The scheduler leader's decision core: [`LeaderCore::handle`] takes what
//! etcd says (a full [`Snapshot`] at one revision, then watched changes,
//! then the fate of its own transactions) and returns [`Output`]s: plans,
//! each one etcd transaction, or a request to re-read everything.
//!
//! The one `joblet-sched` scheduler places every job on every live node.
//! Its decisions are optimistic: the scheduler counts a placement as made
//! when the plan carrying it is returned. One plan is in flight at a time;
//! what happens meanwhile accumulates into the next. A plan compares the
//! mod revision of every `jobs/ID` and `alloc/NODE` key it writes with the
//! revision this core last saw (the shell adds the leader key's create
//! revision: the fencing token); if any changed, the plan is rejected as a
//! whole, and the core asks for a [`Output::Resync`]: a new snapshot
//! rebuilds it, and it plans again from there.
//!
//! What the core does with each input:
//! - a new job (`jobs/ID` put, queued): the scheduler hears of it; a start
//!   writes the job's allocation on each node it touches, the node's
//!   assignment and the job's entry (assigned, with the fencing token);
//! - a node's report that its part of a job ended: once every node of the
//!   job has ended its part, the allocation goes, the assignments and
//!   reports go, the entry records the end (the first failure's reason
//!   wins); a failed part of a gang stops the rest (`stops/ID`);
//! - a node lost (`nodes/NAME` deleted: its lease expired): each of its
//!   jobs is queued again as its next attempt (restart policy
//!   `on-node-failure`) or ends FAILED naming the node; the assignments of
//!   the job on other nodes go (those nodes kill their part);
//! - a stop of a queued job: it ends STOPPED; of a placed job: the nodes
//!   running it stop it and report the end.

mod plan;
mod snapshot;
mod translate;

use std::collections::{BTreeMap, BTreeSet};

use joblet_core::{JobState, UnixMillis};
use joblet_sched::model::{Action, Event as SchedEvent, NodeId, SchedConfig};
use joblet_sched::scheduler::Scheduler;

use crate::keys::Keys;
use crate::records::{JobEntry, JobPhase, NodeAlloc, NodeRecord, NodeReport, ReportState};

pub use plan::{Compare, Op, Plan};
pub use snapshot::Snapshot;

/// What the core is built with.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub sched: SchedConfig,
    pub keys: Keys,
    /// Most compares, and most operations, in one transaction (etcd's
    /// `--max-txn-ops`, 128 by default).
    pub max_txn_ops: usize,
    /// Where a cross-node gang's rank 0 listens: this port plus a number
    /// from the job's id, below `+ master_port_span`.
    pub master_port_base: u16,
    pub master_port_span: u16,
}

impl LeaderConfig {
    pub fn new(sched: SchedConfig, keys: Keys) -> LeaderConfig {
        LeaderConfig {
            sched,
            keys,
            max_txn_ops: 128,
            master_port_base: 29_500,
            master_port_span: 500,
        }
    }
}

/// What happens to the leader.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Everything under the prefix at one revision: first, and after
    /// every [`Output::Resync`].
    Snapshot(Box<Snapshot>),
    /// `nodes/NAME` put: a node registered, or its inventory changed.
    NodeUp(Box<NodeRecord>),
    /// `nodes/NAME` deleted: its lease expired (or it left).
    NodeGone(String),
    /// `drain/NAME` put (`true`) or deleted.
    Drain { node: String, drained: bool },
    /// `jobs/ID` put by someone else (a submission), at mod revision `rev`.
    Job { entry: Box<JobEntry>, rev: i64 },
    /// `jobs/ID` deleted.
    JobDeleted(String),
    /// `reports/ID/NODE` put.
    Report {
        job: String,
        node: String,
        report: NodeReport,
    },
    /// `stops/ID` put.
    Stop { job: String },
    /// The plan committed at `revision`.
    Committed { plan: u64, revision: i64 },
    /// A compare of the plan failed: nothing of it was written.
    Rejected { plan: u64 },
    /// Time passed (rate limits, aging).
    Tick,
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "every output must be carried out"]
pub enum Output {
    /// Run this transaction (adding the fencing compare); report
    /// [`Input::Committed`] or [`Input::Rejected`].
    Commit(Plan),
    /// The view is stale: read everything and send [`Input::Snapshot`].
    Resync,
}

/// Counters for metrics and `rnx node list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaderStats {
    pub plans_committed: u64,
    pub plans_rejected: u64,
    pub placements: u64,
    pub ends: u64,
    pub lost: u64,
}

/// A node the leader knows.
#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    pub id: NodeId,
    pub record: NodeRecord,
    pub drained: bool,
    pub alloc: NodeAlloc,
    /// `alloc/NAME`'s mod revision as last seen or written (0 = absent).
    pub alloc_rev: i64,
}

/// A job the leader tracks (queued or placed; ended ones are forgotten).
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub entry: JobEntry,
    /// `jobs/ID`'s mod revision as last seen or written.
    pub rev: i64,
    /// Nodes' reports of its current attempt.
    pub reports: BTreeMap<String, NodeReport>,
    /// A stop was asked for while it ran (delete `stops/ID` at its end).
    pub stop_asked: bool,
}

/// The leader's core. Feed it inputs in order; carry out every output.
#[derive(Debug, Clone)]
pub struct LeaderCore {
    pub(crate) cfg: LeaderConfig,
    pub(crate) sched: Scheduler,
    pub(crate) fence: i64,
    pub(crate) nodes: BTreeMap<String, NodeState>,
    pub(crate) names: BTreeMap<NodeId, String>,
    pub(crate) next_id: NodeId,
    /// Drained nodes, whether or not they are up.
    pub(crate) drained: BTreeSet<String>,
    pub(crate) jobs: BTreeMap<String, Tracked>,
    /// Changes not yet in a plan.
    pub(crate) pending: plan::Pending,
    pub(crate) in_flight: Option<u64>,
    pub(crate) next_plan: u64,
    /// Waiting for a snapshot: everything else is ignored until it comes.
    pub(crate) stale: bool,
    pub(crate) stats: LeaderStats,
    pub(crate) out: Vec<Output>,
}

impl LeaderCore {
    /// A core that knows nothing: it asks for a snapshot first.
    pub fn new(cfg: LeaderConfig) -> LeaderCore {
        let sched = Scheduler::new(cfg.sched.clone(), Vec::new());
        LeaderCore {
            cfg,
            sched,
            fence: 0,
            nodes: BTreeMap::new(),
            names: BTreeMap::new(),
            next_id: 0,
            drained: BTreeSet::new(),
            jobs: BTreeMap::new(),
            pending: plan::Pending::default(),
            in_flight: None,
            next_plan: 1,
            stale: true,
            stats: LeaderStats::default(),
            out: Vec::new(),
        }
    }

    /// Handles one input at `now`; returns what must be done, in order.
    #[must_use = "every output must be carried out"]
    pub fn handle(&mut self, input: Input, now: UnixMillis) -> Vec<Output> {
        match input {
            Input::Snapshot(s) => self.rebuild(*s, now),
            _ if self.stale => {}
            Input::NodeUp(rec) => self.node_up(*rec, now),
            Input::NodeGone(name) => self.node_gone(&name, now),
            Input::Drain { node, drained } => self.drain(node, drained, now),
            Input::Job { entry, rev } => self.job_put(*entry, rev, now),
            Input::JobDeleted(id) => self.job_deleted(&id, now),
            Input::Report { job, node, report } => self.report(job, node, report, now),
            Input::Stop { job } => self.stop(&job, now),
            Input::Committed { plan, revision } => self.committed(plan, revision),
            Input::Rejected { plan } => self.rejected(plan),
            Input::Tick => {
                let actions = self.sched.handle(SchedEvent::Tick, now);
                self.on_actions(actions, now);
            }
        }
        self.flush();
        std::mem::take(&mut self.out)
    }

    /// The fencing token this core plans under.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    pub fn stats(&self) -> LeaderStats {
        self.stats
    }

    /// Jobs waiting to be placed.
    pub fn waiting(&self) -> usize {
        self.sched.waiting()
    }

    /// Jobs placed (assigned, not yet ended).
    pub fn placed(&self) -> usize {
        self.jobs
            .values()
            .filter(|t| matches!(t.entry.phase, JobPhase::Assigned { .. }))
            .count()
    }

    /// Whether a plan is in flight or changes wait for one.
    pub fn busy(&self) -> bool {
        self.in_flight.is_some() || !self.pending.is_empty()
    }

    fn node_up(&mut self, rec: NodeRecord, now: UnixMillis) {
        if let Some(n) = self.nodes.get_mut(&rec.name) {
            let id = n.id;
            let changed: Vec<_> = rec
                .health
                .iter()
                .filter(|h| !n.record.health.contains(h))
                .copied()
                .collect();
            n.record = rec;
            for (index, health) in changed {
                let actions = self.sched.handle(
                    SchedEvent::GpuChanged {
                        node: id,
                        index,
                        health,
                    },
                    now,
                );
                self.on_actions(actions, now);
            }
            return;
        }
        // Back before the record of its last life was deleted: that
        // record is overwritten (empty) instead.
        let name = rec.name.clone();
        let old = self.pending.undelete_alloc(&name);
        let id = self.add_node(rec, NodeAlloc::default(), old.unwrap_or(0));
        if old.is_some() {
            self.pending.touch_alloc(&name);
        }
        let spec = self.spec_of(id);
        // Its drain is known before it can take anything.
        let drained = self.drained.contains(&name);
        self.sched.add_node(spec, drained, now);
        let actions = self.sched.handle(SchedEvent::Tick, now);
        self.on_actions(actions, now);
        self.apply_health(id, now);
    }

    fn node_gone(&mut self, name: &str, now: UnixMillis) {
        let Some(node) = self.nodes.remove(name) else {
            return;
        };
        self.names.remove(&node.id);
        if node.alloc_rev != 0 {
            self.pending.delete_alloc(name, node.alloc_rev);
        }
        // The scheduler drops the lost jobs' placements whole (on every
        // node) and rejects them; the leader decides their fate itself.
        let lost: BTreeSet<String> = node.alloc.jobs.keys().cloned().collect();
        let actions = self.sched.handle(SchedEvent::NodeRemoved(node.id), now);
        let rest: Vec<Action> = actions
            .into_iter()
            .filter(|a| match a {
                Action::Reject { job, .. } | Action::Preempt { job, .. } => !lost.contains(job),
                Action::Start { .. } => true,
            })
            .collect();
        let reason = format!("node {name} was lost (its lease expired)");
        for job in &lost {
            self.lose(job, &reason, now);
        }
        self.on_actions(rest, now);
    }

    fn drain(&mut self, node: String, drained: bool, now: UnixMillis) {
        let changed = if drained {
            self.drained.insert(node.clone())
        } else {
            self.drained.remove(&node)
        };
        if !changed {
            return;
        }
        if let Some(n) = self.nodes.get_mut(&node) {
            n.drained = drained;
            let id = n.id;
            self.apply_health(id, now);
        }
    }

    fn job_put(&mut self, entry: JobEntry, rev: i64, now: UnixMillis) {
        let id = entry.id().to_string();
        if let Some(t) = self.jobs.get(&id) {
            // Our own write coming back, or an older one.
            if rev <= t.rev {
                return;
            }
            // Someone else rewrote a job we track: our view is stale.
            self.resync();
            return;
        }
        match entry.phase {
            JobPhase::Queued { .. } => {
                let req = entry.submission.request.clone();
                self.jobs.insert(
                    id,
                    Tracked {
                        entry,
                        rev,
                        reports: BTreeMap::new(),
                        stop_asked: false,
                    },
                );
                let actions = self.sched.handle(SchedEvent::Submit(Box::new(req)), now);
                self.on_actions(actions, now);
            }
            // Placed or ended by someone else: only a stale view explains it.
            JobPhase::Assigned { .. } => self.resync(),
            JobPhase::Ended { .. } => {}
        }
    }

    fn job_deleted(&mut self, id: &str, now: UnixMillis) {
        let Some(t) = self.jobs.get(id) else {
            return;
        };
        if matches!(t.entry.phase, JobPhase::Queued { .. }) {
            self.jobs.remove(id);
            let actions = self.sched.handle(SchedEvent::Cancel(id.to_string()), now);
            self.on_actions(actions, now);
        } else {
            // A placed job's entry must outlive its run.
            self.resync();
        }
    }

    fn report(&mut self, job: String, node: String, report: NodeReport, now: UnixMillis) {
        let Some(t) = self.jobs.get_mut(&job) else {
            // A report of a job that ended (or of a stale attempt): it goes.
            self.pending.delete_report(&job, &node);
            return;
        };
        let JobPhase::Assigned { attempt, nodes, .. } = &t.entry.phase else {
            self.pending.delete_report(&job, &node);
            return;
        };
        if report.attempt != *attempt || !nodes.contains(&node) {
            self.pending.delete_report(&job, &node);
            return;
        }
        let failed = matches!(
            &report.state,
            ReportState::Ended { state, .. } if *state != JobState::Completed
        );
        t.reports.insert(node, report);
        let all_ended = nodes.iter().all(|n| {
            t.reports
                .get(n)
                .is_some_and(|r| matches!(r.state, ReportState::Ended { .. }))
        });
        if all_ended {
            self.end_placed(&job, now);
        } else if failed && nodes.len() > 1 && !t.stop_asked {
            // One task of a gang failed: the gang ends.
            t.stop_asked = true;
            self.pending.put_stop(&job);
        }
    }

    fn stop(&mut self, job: &str, now: UnixMillis) {
        let Some(t) = self.jobs.get_mut(job) else {
            self.pending.delete_stop(job);
            return;
        };
        match t.entry.phase {
            JobPhase::Queued { attempt, .. } => {
                let actions = self.sched.handle(SchedEvent::Cancel(job.to_string()), now);
                self.on_actions(actions, now);
                self.finish(
                    job,
                    attempt,
                    Vec::new(),
                    JobState::Stopped,
                    None,
                    "stopped before it started".into(),
                    now,
                );
                self.pending.delete_stop(job);
            }
            // Its nodes stop it and report.
            JobPhase::Assigned { .. } => t.stop_asked = true,
            JobPhase::Ended { .. } => self.pending.delete_stop(job),
        }
    }

    fn committed(&mut self, plan: u64, revision: i64) {
        if self.in_flight != Some(plan) {
            return;
        }
        self.in_flight = None;
        self.stats.plans_committed += 1;
        let written = std::mem::take(&mut self.pending.in_flight_keys);
        for key in written {
            match key {
                plan::Written::Alloc(node) => {
                    if let Some(n) = self.nodes.get_mut(&node) {
                        n.alloc_rev = revision;
                    }
                }
                plan::Written::Job(id) => {
                    if let Some(t) = self.jobs.get_mut(&id) {
                        t.rev = revision;
                    }
                }
            }
        }
    }

    fn rejected(&mut self, plan: u64) {
        if self.in_flight != Some(plan) {
            return;
        }
        self.in_flight = None;
        self.stats.plans_rejected += 1;
        self.resync();
    }

    /// Forget everything and ask for a snapshot.
    pub(crate) fn resync(&mut self) {
        if !self.stale {
            self.stale = true;
            self.out.push(Output::Resync);
        }
    }

    /// Applies the scheduler's decisions.
    pub(crate) fn on_actions(&mut self, actions: Vec<Action>, now: UnixMillis) {
        for a in actions {
            match a {
                Action::Start { placement } => self.place(placement, now),
                Action::Reject { job, reason } => {
                    let attempt = self.jobs.get(&job).map_or(1, |t| t.entry.attempt());
                    self.finish(
                        &job,
                        attempt,
                        Vec::new(),
                        JobState::Failed,
                        None,
                        reason,
                        now,
                    );
                }
                Action::Preempt { job, reason } => {
                    // Cluster requests are never preemptible; should one be,
                    // its nodes stop it like any stop.
                    tracing::warn!(%job, %reason, "preemption asked for in cluster mode: stopping the job");
                    if let Some(t) = self.jobs.get_mut(&job) {
                        t.stop_asked = true;
                    }
                    self.pending.put_stop(&job);
                }
            }
        }
    }

    /// Every node of a placed job reported its part ended.
    fn end_placed(&mut self, job: &str, now: UnixMillis) {
        let Some(t) = self.jobs.get(job) else {
            return;
        };
        let JobPhase::Assigned { attempt, nodes, .. } = t.entry.phase.clone() else {
            return;
        };
        // The first failure's word wins; else the first node's.
        let mut ends: Vec<(&String, &ReportState)> = nodes
            .iter()
            .filter_map(|n| t.reports.get(n).map(|r| (n, &r.state)))
            .collect();
        ends.sort_by_key(|(_, s)| match s {
            ReportState::Ended { state, at, .. } => (*state == JobState::Completed, *at),
            ReportState::Running { at } => (true, *at),
        });
        let (state, exit_code, reason, at) = match ends.first().map(|(_, s)| (*s).clone()) {
            Some(ReportState::Ended {
                state,
                exit_code,
                reason,
                at,
            }) => (state, exit_code, reason, at),
            _ => (JobState::Failed, None, "no report".into(), now),
        };
        let stop = t.stop_asked;
        self.release(job, &nodes);
        let actions = self.sched.handle(SchedEvent::Exited(job.to_string()), now);
        self.stats.ends += 1;
        self.finish(job, attempt, nodes, state, exit_code, reason, at);
        if stop {
            self.pending.delete_stop(job);
        }
        self.on_actions(actions, now);
    }

    /// A placed job's node was lost: queue it again or end it.
    fn lose(&mut self, job: &str, reason: &str, now: UnixMillis) {
        let Some(t) = self.jobs.get(job) else {
            return;
        };
        let JobPhase::Assigned { attempt, nodes, .. } = t.entry.phase.clone() else {
            return;
        };
        let requeue =
            t.entry.restart == crate::records::RestartPolicy::OnNodeFailure && !t.stop_asked;
        self.stats.lost += 1;
        self.release(job, &nodes);
        let actions = self.sched.handle(SchedEvent::Exited(job.to_string()), now);
        self.on_actions(actions, now);
        if requeue {
            let t = self.jobs.get_mut(job).expect("tracked");
            t.entry.phase = JobPhase::Queued {
                attempt: attempt + 1,
                reason: Some(reason.to_string()),
            };
            t.reports.clear();
            let req = t.entry.submission.request.clone();
            self.pending.put_job(job);
            let actions = self.sched.handle(SchedEvent::Submit(Box::new(req)), now);
            self.on_actions(actions, now);
        } else {
            let stop = self.jobs.get(job).is_some_and(|t| t.stop_asked);
            self.finish(
                job,
                attempt,
                nodes,
                JobState::Failed,
                None,
                format!("lost: {reason}"),
                now,
            );
            if stop {
                self.pending.delete_stop(job);
            }
        }
    }

    /// Takes a placed job's allocation off its nodes and deletes its
    /// assignments and reports.
    fn release(&mut self, job: &str, nodes: &[String]) {
        for name in nodes {
            if let Some(n) = self.nodes.get_mut(name) {
                if n.alloc.jobs.remove(job).is_some() {
                    self.pending.touch_alloc(name);
                }
            }
            self.pending.delete_assign(name, job);
            self.pending.delete_report(job, name);
        }
    }

    /// Records a job's end in its entry and forgets it.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        job: &str,
        attempt: u32,
        nodes: Vec<String>,
        state: JobState,
        exit_code: Option<i32>,
        reason: String,
        at: UnixMillis,
    ) {
        let Some(mut t) = self.jobs.remove(job) else {
            return;
        };
        t.entry.phase = JobPhase::Ended {
            attempt,
            nodes,
            state,
            exit_code,
            reason,
            at,
        };
        self.pending.put_ended(job, t.entry, t.rev);
    }

    /// Turns pending changes into a plan when none is in flight.
    fn flush(&mut self) {
        if self.stale || self.in_flight.is_some() || self.pending.is_empty() {
            return;
        }
        let id = self.next_plan;
        self.next_plan += 1;
        let plan = self.build_plan(id);
        if plan.ops.is_empty() {
            return;
        }
        self.in_flight = Some(id);
        self.out.push(Output::Commit(plan));
    }
}
