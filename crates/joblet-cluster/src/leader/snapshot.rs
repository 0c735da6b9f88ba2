//! Rebuilding the leader from a full read of etcd at one revision.

use std::collections::{BTreeMap, BTreeSet};

use joblet_core::UnixMillis;
use joblet_sched::cluster::ClusterState;
use joblet_sched::model::{JobRequest, Placement, SchedConfig};
use joblet_sched::scheduler::Scheduler;

use super::translate::placement_of;
use super::{plan::Pending, LeaderCore, Tracked};
use crate::records::{JobEntry, JobPhase, NodeAlloc, NodeRecord, NodeReport};

/// Everything under the cluster's prefix at one revision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The revision read at (the watch continues from the next one).
    pub revision: i64,
    /// The leader key's create revision: the fencing token.
    pub fence: i64,
    /// Live nodes (`nodes/`).
    pub nodes: Vec<NodeRecord>,
    /// `drain/`.
    pub drained: Vec<String>,
    /// `jobs/`, each with its mod revision.
    pub jobs: Vec<(JobEntry, i64)>,
    /// `alloc/`, each with its mod revision.
    pub allocs: Vec<(String, NodeAlloc, i64)>,
    /// `assign/`: (node, job, attempt).
    pub assigns: Vec<(String, String, u32)>,
    /// `reports/`: (job, node, report).
    pub reports: Vec<(String, String, NodeReport)>,
    /// `stops/`.
    pub stops: Vec<String>,
}

impl LeaderCore {
    pub(crate) fn rebuild(&mut self, s: Snapshot, now: UnixMillis) {
        self.nodes.clear();
        self.names.clear();
        self.jobs.clear();
        self.pending = Pending::default();
        self.in_flight = None;
        self.stale = false;
        self.fence = s.fence;
        self.drained = s.drained.into_iter().collect();
        let mut allocs: BTreeMap<String, (NodeAlloc, i64)> = s
            .allocs
            .into_iter()
            .map(|(n, a, rev)| (n, (a, rev)))
            .collect();
        let mut nodes = s.nodes;
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for rec in nodes {
            let (alloc, rev) = allocs.remove(&rec.name).unwrap_or_default();
            self.add_node(rec, alloc, rev);
        }
        // Records of nodes that are gone.
        let gone: BTreeMap<String, NodeAlloc> = allocs
            .into_iter()
            .map(|(n, (a, rev))| {
                self.pending.delete_alloc(&n, rev);
                (n, a)
            })
            .collect();
        let mut waiting: Vec<(JobRequest, UnixMillis)> = Vec::new();
        for (entry, rev) in s.jobs {
            match entry.phase {
                JobPhase::Queued { .. } => {
                    waiting.push((entry.submission.request.clone(), entry.submitted_at));
                }
                JobPhase::Assigned { .. } => {}
                JobPhase::Ended { .. } => continue,
            }
            self.jobs.insert(
                entry.id().to_string(),
                Tracked {
                    entry,
                    rev,
                    reports: BTreeMap::new(),
                    stop_asked: false,
                },
            );
        }
        // What each live node's record holds that no assigned entry claims
        // (ahead of a plan that never committed, or stale) is freed.
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in &names {
            let stale: Vec<String> = self.nodes[name]
                .alloc
                .jobs
                .iter()
                .filter(|(job, e)| !self.claims(job, name, e.attempt))
                .map(|(job, _)| job.clone())
                .collect();
            if !stale.is_empty() {
                let n = self.nodes.get_mut(name).expect("listed");
                for job in stale {
                    n.alloc.jobs.remove(&job);
                }
                self.pending.touch_alloc(name);
            }
        }
        // Placed jobs: running where every node still holds its part; lost
        // where a node is gone or lacks it.
        let mut running: Vec<(JobRequest, Placement, UnixMillis)> = Vec::new();
        let mut lost: Vec<(String, String)> = Vec::new();
        for (job, t) in &self.jobs {
            let JobPhase::Assigned { nodes, at, .. } = &t.entry.phase else {
                continue;
            };
            let mut parts = Vec::new();
            let mut why = None;
            for n in nodes {
                match self.nodes.get(n) {
                    Some(st) => match st.alloc.jobs.get(job) {
                        Some(e) => parts.push((st.id, e)),
                        None => why = Some(format!("node {n} holds no allocation for it")),
                    },
                    None if gone.contains_key(n) || !self.nodes.contains_key(n) => {
                        why = Some(format!("node {n} was lost (its lease expired)"));
                    }
                    None => {}
                }
            }
            match (why, placement_of(job, &parts)) {
                (None, Some(p)) => running.push((t.entry.submission.request.clone(), p, *at)),
                (Some(why), _) => lost.push((job.clone(), why)),
                (None, None) => lost.push((job.clone(), "it holds nothing anywhere".into())),
            }
        }
        // A placement that conflicts with another (never, if every plan was
        // fenced) is lost rather than trusted.
        let specs: Vec<_> = self.nodes.values().map(|n| self.spec_of(n.id)).collect();
        let mut check = ClusterState::new(specs.clone());
        running.retain(|(_, p, _)| match check.adopt(p.clone()) {
            Ok(()) => true,
            Err(e) => {
                lost.push((p.job.clone(), format!("its allocation conflicts: {e}")));
                false
            }
        });
        // Parts of lost jobs still recorded on live nodes are freed by `lose`.
        let lost_jobs: BTreeSet<&String> = lost.iter().map(|(j, _)| j).collect();
        let running: Vec<_> = running
            .into_iter()
            .filter(|(r, _, _)| !lost_jobs.contains(&r.job))
            .collect();
        let sched: SchedConfig = self.cfg.sched.clone();
        self.sched = Scheduler::restore(sched, specs, running, waiting)
            .expect("placements were checked against the same nodes");
        // Assignments nobody claims go (their nodes kill what runs).
        for (node, job, attempt) in s.assigns {
            let claimed = self.jobs.get(&job).is_some_and(|t| {
                matches!(&t.entry.phase, JobPhase::Assigned { attempt: a, nodes, .. } if *a == attempt && nodes.contains(&node))
            });
            if !claimed {
                self.pending.delete_assign(&node, &job);
            }
        }
        // Every drain is known before the first decision.
        for n in self.nodes.values() {
            self.sched.set_drained(n.id, n.drained);
        }
        let ids: Vec<_> = self.nodes.values().map(|n| n.id).collect();
        for id in ids {
            self.apply_health(id, now);
        }
        for (job, why) in lost {
            self.lose(&job, &why, now);
        }
        for (job, node, report) in s.reports {
            self.report(job, node, report, now);
        }
        for job in s.stops {
            self.stop(&job, now);
        }
        let actions = self.sched.handle(joblet_sched::model::Event::Tick, now);
        self.on_actions(actions, now);
    }

    /// Whether a tracked, assigned job claims its entry on `node`.
    fn claims(&self, job: &str, node: &str, attempt: u32) -> bool {
        self.jobs.get(job).is_some_and(|t| {
            matches!(&t.entry.phase, JobPhase::Assigned { attempt: a, nodes, .. } if *a == attempt && nodes.iter().any(|n| n == node))
        })
    }
}
