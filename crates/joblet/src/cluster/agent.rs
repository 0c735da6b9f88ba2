//! The node's side of the cluster: it runs what its assignments
//! (`assign/NAME/…`) say, and nothing else, through the local engine
//! (pinned to the GPUs the leader chose); it kills a run whose assignment
//! is withdrawn; it passes stop requests (`stops/ID`) on; and it reports
//! each run's end (`reports/ID/NAME`) in a transaction that holds only
//! while the assignment it ran under still exists, so a stale attempt's
//! end is never taken for the current one's. When the node fences itself
//! (cut off from etcd), it kills every cluster run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions};
use joblet_cluster::records::{
    decode, encode, run_id, Assignment, JobEntry, NodeReport, ReportState,
};
use joblet_cluster::Keys;
use joblet_core::{ClusterRun, JobId, JobState, Resources};
use joblet_store::Store;
use tokio::sync::broadcast::error::RecvError;

use super::etcd::EtcdPool;
use super::lease::Membership;
use crate::engine::{Ended, EngineHandle};

/// A run of a cluster job on this node.
#[derive(Debug, Clone)]
struct Run {
    attempt: u32,
    id: JobId,
    /// The assignment's create revision: the end report holds only while
    /// it is the same assignment.
    assigned_rev: i64,
    /// How many times the node had fenced itself when this run started: a
    /// fence kills only runs started before it (the agent may see the
    /// fence late, after the lease was renewed and newer runs started).
    fences: u64,
}

struct Agent {
    pool: EtcdPool,
    client: Client,
    keys: Keys,
    name: String,
    engine: EngineHandle,
    store: Arc<Store>,
    membership: Membership,
    /// By cluster job id.
    runs: BTreeMap<String, Run>,
    /// Ends not reported yet (etcd unreachable): retried.
    unreported: Vec<String>,
    /// Assignments seen while the node was fenced, by cluster job id, with
    /// their create revisions: started once a keep-alive is answered again
    /// (the lease held, so the leader still counts on this node), dropped
    /// if withdrawn first.
    deferred: BTreeMap<String, (Assignment, i64)>,
}

/// Starts the agent (in a task).
pub fn start(
    pool: EtcdPool,
    keys: Keys,
    name: String,
    engine: EngineHandle,
    store: Arc<Store>,
    membership: Membership,
) {
    let agent = Agent {
        client: pool.client(),
        pool,
        keys,
        name,
        engine,
        store,
        membership,
        runs: BTreeMap::new(),
        unreported: Vec::new(),
        deferred: BTreeMap::new(),
    };
    tokio::spawn(agent.run());
}

impl Agent {
    async fn run(mut self) {
        let mut ended = self.engine.subscribe_ended();
        let mut fenced = self.membership.fenced.clone();
        let mut retry = tokio::time::interval(Duration::from_secs(1));
        'resync: loop {
            self.client = self.pool.client();
            let (rev, stops) = match self.read_assignments().await {
                Ok(r) => r,
                Err(e) => {
                    self.pool.failed(&e);
                    tracing::warn!(error = %e, "cannot read this node's assignments; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            for job in stops {
                self.stop(&job, "stop").await;
            }
            let opts = |r| Some(WatchOptions::new().with_prefix().with_start_revision(r));
            let mut assigns = match self
                .client
                .watch(self.keys.assigns_of(&self.name), opts(rev + 1))
                .await
            {
                Ok(w) => w,
                Err(e) => {
                    self.pool.failed(&e);
                    continue;
                }
            };
            let mut stops = match self.client.watch(self.keys.stops(), opts(rev + 1)).await {
                Ok(w) => w,
                Err(e) => {
                    self.pool.failed(&e);
                    continue;
                }
            };
            loop {
                tokio::select! {
                    m = assigns.message() => match m {
                        Ok(Some(resp)) if !resp.canceled() => {
                            for ev in resp.events() {
                                let Some(kv) = ev.kv() else { continue };
                                if ev.event_type() == EventType::Put {
                                    match decode::<Assignment>("assignment", "", kv.value()) {
                                        Ok(a) => self.assigned(a, kv.create_revision()).await,
                                        Err(e) => tracing::error!(error = %e, "skipping an unreadable assignment"),
                                    }
                                } else if let Some(job) = std::str::from_utf8(kv.key()).ok().and_then(|k| k.rsplit('/').next()) {
                                    self.withdrawn(job).await;
                                }
                            }
                        }
                        _ => {
                            self.pool.rotate();
                            continue 'resync;
                        }
                    },
                    m = stops.message() => match m {
                        Ok(Some(resp)) if !resp.canceled() => {
                            for ev in resp.events() {
                                let Some(kv) = ev.kv() else { continue };
                                if ev.event_type() != EventType::Put {
                                    continue;
                                }
                                let how = String::from_utf8_lossy(kv.value()).to_string();
                                if let Some(job) = std::str::from_utf8(kv.key()).ok().and_then(|k| k.rsplit('/').next()) {
                                    self.stop(job, &how).await;
                                }
                            }
                        }
                        _ => {
                            self.pool.rotate();
                            continue 'resync;
                        }
                    },
                    e = ended.recv() => match e {
                        Ok(Ended { id, .. }) => self.ended(&id).await,
                        Err(RecvError::Lagged(_)) => self.sweep().await,
                        Err(RecvError::Closed) => return,
                    },
                    _ = fenced.changed() => self.fence().await,
                    _ = retry.tick() => {
                        if !self.unreported.is_empty() {
                            self.sweep().await;
                        }
                        if !self.deferred.is_empty() && !self.membership.expired() {
                            for (_, (a, rev)) in std::mem::take(&mut self.deferred) {
                                tracing::info!(job = %a.job, "the lease is renewed: starting an assignment deferred while fenced");
                                self.assigned(a, rev).await;
                            }
                        }
                    }
                }
            }
        }
    }

    /// This node's assignments now (each started unless running), and the
    /// stop requests; returns the revision read at.
    async fn read_assignments(&mut self) -> Result<(i64, Vec<String>), etcd_client::Error> {
        let resp = self
            .client
            .get(
                self.keys.assigns_of(&self.name),
                Some(GetOptions::new().with_prefix()),
            )
            .await?;
        let rev = resp.header().map_or(0, |h| h.revision());
        // What is still assigned is deferred again below if need be.
        self.deferred.clear();
        let mut seen = Vec::new();
        for kv in resp.kvs() {
            match decode::<Assignment>("assignment", "", kv.value()) {
                Ok(a) => {
                    seen.push(a.job.clone());
                    self.assigned(a, kv.create_revision()).await;
                }
                Err(e) => tracing::error!(error = %e, "skipping an unreadable assignment"),
            }
        }
        // Runs whose assignment went while the watch was down.
        let gone: Vec<String> = self
            .runs
            .keys()
            .filter(|j| !seen.contains(j))
            .cloned()
            .collect();
        for job in gone {
            self.withdrawn(&job).await;
        }
        let stops = self
            .client
            .get(
                self.keys.stops(),
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await?;
        let stops = stops
            .kvs()
            .iter()
            .filter_map(|kv| {
                std::str::from_utf8(kv.key())
                    .ok()?
                    .rsplit('/')
                    .next()
                    .map(str::to_owned)
            })
            .filter(|j| self.runs.contains_key(j))
            .collect();
        Ok((rev, stops))
    }

    /// Runs an assignment unless it runs already.
    async fn assigned(&mut self, a: Assignment, assigned_rev: i64) {
        if self
            .runs
            .get(&a.job)
            .is_some_and(|r| r.attempt == a.attempt)
        {
            return;
        }
        // Read before the deadline check: a fence after it counts more.
        let fences = *self.membership.fenced.borrow();
        if self.membership.expired() {
            tracing::warn!(job = %a.job, "fenced: deferring an assignment until the lease is renewed");
            self.deferred.insert(a.job.clone(), (a, assigned_rev));
            return;
        }
        // A newer put of the same job supersedes one deferred earlier.
        self.deferred.remove(&a.job);
        let Ok(id) = JobId::parse(&run_id(&a.job, a.attempt)) else {
            tracing::error!(job = %a.job, "an assignment names a malformed job id");
            return;
        };
        let run = Run {
            attempt: a.attempt,
            id: id.clone(),
            assigned_rev,
            fences,
        };
        self.runs.insert(a.job.clone(), run);
        // Recorded already (a restart, or the watch seen again): its end
        // may have been missed.
        match self.store.get(&id) {
            Ok(Some(rec)) => {
                if rec.state.is_terminal() {
                    self.ended(&id).await;
                }
                return;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(job = %a.job, error = %e, "cannot read the store");
                return;
            }
        }
        let entry = match self.client.get(self.keys.job(&a.job), None).await {
            Ok(r) => match r
                .kvs()
                .first()
                .map(|kv| decode::<JobEntry>("job entry", "", kv.value()))
            {
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    self.refuse(&a, format!("its entry is unreadable: {e}"))
                        .await;
                    return;
                }
                None => {
                    self.refuse(&a, "its entry is gone".into()).await;
                    return;
                }
            },
            Err(e) => {
                // Try again on the next read.
                tracing::warn!(job = %a.job, error = %e, "cannot read the job's entry");
                self.runs.remove(&a.job);
                return;
            }
        };
        let mut spec = entry.spec.clone();
        spec.cluster = Some(ClusterRun {
            job: a.job.clone(),
            node: self.name.clone(),
            attempt: a.attempt,
            fence: a.fence,
            units: a.placement.units.iter().map(|u| (u.index, u.mig)).collect(),
            memory_mb: a.placement.memory_mb,
            shared: a.placement.sharing == joblet_sched::model::Sharing::Shared,
            gpu_milli: (a.placement.gpu_milli > 0 && a.placement.gpu_milli < 1000)
                .then_some(a.placement.gpu_milli),
            gang: a.gang.clone(),
        });
        // Its GPUs on this node: a gang's part here may be fewer than the
        // job asked for in all.
        spec.resources = Resources {
            gpu_count: a.placement.units.len() as u32,
            ..spec.resources
        };
        match self
            .engine
            .submit_assigned(id.clone(), entry.owner.clone(), spec)
            .await
        {
            Ok(_) => {
                tracing::info!(job = %a.job, run = %id, attempt = a.attempt, "running the cluster's assignment")
            }
            Err(e) => {
                self.refuse(&a, format!("this node could not start it: {e}"))
                    .await
            }
        }
    }

    /// The assignment cannot run here: its end is reported at once.
    async fn refuse(&mut self, a: &Assignment, reason: String) {
        tracing::error!(job = %a.job, %reason, "refusing an assignment");
        let report = NodeReport {
            attempt: a.attempt,
            state: ReportState::Ended {
                state: JobState::Failed,
                exit_code: None,
                reason,
                at: crate::clock::now_ms(),
            },
        };
        if !self.report(&a.job, report).await {
            self.unreported.push(a.job.clone());
        }
    }

    /// The assignment was deleted: the run is killed if it still runs.
    async fn withdrawn(&mut self, job: &str) {
        if self.deferred.remove(job).is_some() {
            tracing::info!(%job, "a deferred assignment was withdrawn before it started");
        }
        let Some(run) = self.runs.remove(job) else {
            return;
        };
        let live = self
            .store
            .get(&run.id)
            .ok()
            .flatten()
            .is_some_and(|r| !r.state.is_terminal());
        if live {
            tracing::warn!(%job, run = %run.id, "assignment withdrawn: killing the run");
            if let Err(e) = self.engine.stop(run.id.clone(), None, true).await {
                tracing::warn!(%job, error = %e, "cannot kill a withdrawn run");
            }
        }
    }

    async fn stop(&mut self, job: &str, how: &str) {
        let Some(run) = self.runs.get(job) else {
            return;
        };
        let kill = how == "kill";
        if let Err(e) = self.engine.stop(run.id.clone(), None, kill).await {
            tracing::debug!(%job, error = %e, "stop request");
        }
    }

    /// A local job ended: if it is a cluster run, its end is reported.
    async fn ended(&mut self, id: &JobId) {
        let Some(job) = self
            .runs
            .iter()
            .find(|(_, r)| &r.id == id)
            .map(|(j, _)| j.clone())
        else {
            return;
        };
        let run = self.runs[&job].clone();
        let Ok(Some(rec)) = self.store.get(id) else {
            return;
        };
        if !rec.state.is_terminal() {
            return;
        }
        let report = NodeReport {
            attempt: run.attempt,
            state: ReportState::Ended {
                state: rec.state,
                exit_code: rec.exit_code,
                reason: rec.reason.clone(),
                at: rec.ended_ms.unwrap_or_else(crate::clock::now_ms),
            },
        };
        if self.report(&job, report).await {
            self.unreported.retain(|j| j != &job);
        } else if !self.unreported.contains(&job) {
            self.unreported.push(job);
        }
    }

    /// Writes a report while the run's assignment is the one it ran
    /// under; `false` when etcd could not be reached (retry). A report
    /// refused because the assignment changed is dropped: that run is
    /// stale.
    async fn report(&mut self, job: &str, report: NodeReport) -> bool {
        let Some(run) = self.runs.get(job) else {
            return true;
        };
        let assign = self.keys.assign(&self.name, job);
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                assign,
                CompareOp::Equal,
                run.assigned_rev,
            )])
            .and_then(vec![TxnOp::put(
                self.keys.report(job, &self.name),
                encode(&report),
                None,
            )]);
        match self.client.txn(txn).await {
            Ok(r) if r.succeeded() => true,
            Ok(_) => {
                tracing::warn!(%job, attempt = report.attempt, "not reporting the end of a run whose assignment is gone (a stale attempt)");
                true
            }
            Err(e) => {
                self.pool.failed(&e);
                self.client = self.pool.client();
                tracing::warn!(%job, error = %e, "cannot report a run's end yet; will retry");
                false
            }
        }
    }

    /// Reports every ended run not yet reported (after a missed broadcast
    /// or a failed write).
    async fn sweep(&mut self) {
        let ids: Vec<JobId> = self.runs.values().map(|r| r.id.clone()).collect();
        for id in ids {
            self.ended(&id).await;
        }
    }

    /// Cut off from etcd: every cluster run started before the fence dies
    /// before the lease can expire on the other side.
    async fn fence(&mut self) {
        let fences = *self.membership.fenced.borrow();
        let runs: Vec<Run> = self
            .runs
            .values()
            .filter(|r| r.fences < fences)
            .cloned()
            .collect();
        for run in runs {
            tracing::error!(run = %run.id, "fencing: killing a cluster run");
            if let Err(e) = self.engine.stop(run.id.clone(), None, true).await {
                tracing::debug!(error = %e, "fence kill");
            }
        }
    }
}
