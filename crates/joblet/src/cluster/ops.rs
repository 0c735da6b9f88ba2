//! The job operations in cluster mode, for the service layer: a new job is
//! an entry in etcd the leader places; list and status read the entries
//! (status and log come from the node running the job when there is one).

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use joblet_cluster::records::{decode, encode, run_id, JobEntry, JobPhase, NodeRecord};
use joblet_cluster::RestartPolicy;
use joblet_core::joblog::LogEvent;
use joblet_core::record::{ClusterPlace, JobDetails, JobRecord};
use joblet_core::{JobId, JobSpec, JobState, PrefixError};
use joblet_engine::Submission;
use joblet_proto::pb;
use tokio::sync::mpsc;

use super::ClusterNode;
use crate::service::logs::{LogError, LogStream};
use crate::service::ApiError;

/// A job's entry and its id.
pub(super) struct Found {
    pub entry: JobEntry,
}

impl ClusterNode {
    /// Records a new job in the cluster (QUEUED); the leader places it.
    pub async fn submit(
        &self,
        owner: String,
        spec: JobSpec,
        restart: RestartPolicy,
    ) -> Result<JobDetails, ApiError> {
        let id = JobId::parse(&uuid::Uuid::new_v4().to_string())?;
        let mut submission = Submission::of(id.clone(), &owner, &spec, &self.rules);
        // A gang larger than every node spans nodes.
        if submission.request.gpu_count > 0 {
            let largest = self.largest_node_gpus().await?;
            if submission.request.gpu_count > largest {
                submission.request.allow_cross_node = true;
            }
        }
        let entry = JobEntry {
            owner,
            spec,
            submission,
            submitted_at: crate::clock::now_ms(),
            via: self.name.clone(),
            restart,
            phase: JobPhase::Queued {
                attempt: 1,
                reason: None,
            },
        };
        let key = self.keys.job(id.as_str());
        let value = encode(&entry);
        let done = self
            .retrying(|mut c| {
                let (key, value) = (key.clone(), value.clone());
                async move {
                    let txn = Txn::new()
                        .when(vec![Compare::version(key.as_str(), CompareOp::Equal, 0)])
                        .and_then(vec![TxnOp::put(key.as_str(), value.clone(), None)]);
                    if c.txn(txn).await?.succeeded() {
                        return Ok(true);
                    }
                    // Taken: by an earlier try of this very request whose
                    // answer was lost, or (never, with fresh UUIDs) another.
                    let r = c.get(key.as_str(), None).await?;
                    Ok(r.kvs()
                        .first()
                        .is_some_and(|kv| kv.value() == value.as_slice()))
                }
            })
            .await?;
        if !done {
            return Err(ApiError::Internal(format!("job id {id} is taken already")));
        }
        tracing::info!(job = %id, owner = %entry.owner, gpus = entry.submission.request.gpu_count, "job queued in the cluster");
        Ok(details(&entry))
    }

    /// The GPUs of the largest registered node.
    async fn largest_node_gpus(&self) -> Result<u32, ApiError> {
        let key = self.keys.nodes();
        let r = self
            .retrying(|mut c| {
                let key = key.clone();
                async move { c.get(key, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        Ok(r.kvs()
            .iter()
            .filter_map(|kv| decode::<NodeRecord>("node record", "", kv.value()).ok())
            .map(|n| n.spec.gpus.len() as u32)
            .max()
            .unwrap_or(0))
    }

    /// Every job entry, newest first, in `states` (empty = all), at most
    /// `limit` (0 = all).
    pub async fn list(
        &self,
        states: &[JobState],
        limit: usize,
    ) -> Result<Vec<JobDetails>, ApiError> {
        let key = self.keys.jobs();
        let r = self
            .retrying(|mut c| {
                let key = key.clone();
                async move { c.get(key, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut entries: Vec<JobEntry> = r
            .kvs()
            .iter()
            .filter_map(|kv| match decode::<JobEntry>("job entry", "", kv.value()) {
                Ok(e) => Some(e),
                Err(e) => {
                    tracing::error!(error = %e, "skipping an unreadable job entry");
                    None
                }
            })
            .filter(|e| states.is_empty() || states.contains(&e.state()))
            .collect();
        entries.sort_by(|a, b| {
            b.submitted_at
                .cmp(&a.submitted_at)
                .then_with(|| b.id().cmp(a.id()))
        });
        if limit > 0 {
            entries.truncate(limit);
        }
        Ok(entries.iter().map(details).collect())
    }

    /// The entry of the job `prefix` names (a full id or a unique prefix).
    pub(super) async fn find(&self, prefix: &str) -> Result<Found, ApiError> {
        let prefix = prefix.trim();
        if prefix.is_empty() {
            return Err(PrefixError::Empty.into());
        }
        joblet_core::id::check_prefix(prefix)?;
        let r = self
            .retrying(|mut c| {
                let key = self.keys.job(prefix);
                async move {
                    c.get(key, Some(GetOptions::new().with_prefix().with_limit(3)))
                        .await
                }
            })
            .await?;
        match r.kvs() {
            [] => Err(PrefixError::NotFound(prefix.to_string()).into()),
            [one] => Ok(Found {
                entry: decode("job entry", "", one.value())
                    .map_err(|e| ApiError::Internal(e.to_string()))?,
            }),
            many => Err(PrefixError::Ambiguous {
                prefix: prefix.to_string(),
                matches: many
                    .iter()
                    .filter_map(|kv| {
                        std::str::from_utf8(kv.key())
                            .ok()?
                            .rsplit('/')
                            .next()
                            .map(str::to_owned)
                    })
                    .collect(),
            }
            .into()),
        }
    }

    /// A job's status: from the node that runs (or ran) it, else from its
    /// entry.
    pub async fn status(
        &self,
        prefix: &str,
        local: impl FnOnce(&JobId) -> Result<JobDetails, ApiError>,
    ) -> Result<JobDetails, ApiError> {
        let Found { entry } = self.find(prefix).await?;
        let Some(node) = entry.nodes().first().cloned() else {
            return Ok(details(&entry));
        };
        let run = JobId::parse(&run_id(entry.id(), entry.attempt()))?;
        let from_node = if node == self.name {
            local(&run)
        } else {
            self.remote_status(&node, &run).await
        };
        match from_node {
            Ok(mut d) => {
                // The cluster's view of identity and state wins (the
                // run's own end is the cluster's once its node reported
                // it); the run's details (GPUs, history, output) are kept.
                let e = details(&entry);
                d.record.id = e.record.id;
                d.cluster = e.cluster;
                if d.record.state != e.record.state {
                    d.record.state = e.record.state;
                    d.record.reason = e.record.reason;
                    d.record.exit_code = e.record.exit_code;
                    d.record.ended_ms = e.record.ended_ms;
                }
                Ok(d)
            }
            Err(e) => {
                tracing::debug!(job = %entry.id(), %node, error = %e, "the job's node did not answer; showing the cluster's entry");
                Ok(details(&entry))
            }
        }
    }

    async fn remote_status(&self, node: &str, run: &JobId) -> Result<JobDetails, ApiError> {
        let address = self.address_of(node).await?;
        let ch = self
            .peers
            .channel(node, &address)
            .map_err(|e| ApiError::Cluster(e.to_string()))?;
        let mut c = pb::job_service_client::JobServiceClient::new(ch);
        let call = c.get_job_status(pb::JobRef {
            job_id: run.to_string(),
        });
        let job = within(node, call)
            .await?
            .map_err(|s| ApiError::Cluster(format!("node {node}: {}", s.message())))?
            .into_inner();
        joblet_proto::job_from_pb(job).map_err(ApiError::InvalidField)
    }

    /// A channel to node `name`'s API.
    pub async fn peer(&self, name: &str) -> Result<tonic::transport::Channel, ApiError> {
        let address = self.address_of(name).await?;
        self.peers
            .channel(name, &address)
            .map_err(|e| ApiError::Cluster(e.to_string()))
    }

    /// Where node `name`'s API is reached (its registration).
    pub(super) async fn address_of(&self, name: &str) -> Result<String, ApiError> {
        if name == self.name {
            return Ok(self.address.clone());
        }
        let r = self
            .retrying(|mut c| {
                let key = self.keys.node(name);
                async move { c.get(key, None).await }
            })
            .await?;
        let kv = r.kvs().first().ok_or_else(|| {
            ApiError::Cluster(format!(
                "node {name} is not registered in the cluster (down, or its lease expired)"
            ))
        })?;
        let rec: NodeRecord =
            decode("node record", "", kv.value()).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(rec.address)
    }

    /// A job's output, from the node that runs it; a queued job's once it
    /// is placed (with `follow`).
    pub async fn logs(
        &self,
        prefix: &str,
        from_seq: u64,
        follow: bool,
        local: impl FnOnce(JobId) -> Result<LogStream, ApiError>,
    ) -> Result<LogStream, ApiError> {
        let Found { mut entry } = self.find(prefix).await?;
        let id = entry.id().to_string();
        // A queued job has no output yet: wait for its placement.
        if entry.nodes().is_empty() && follow && !entry.state().is_terminal() {
            entry = self.placed(entry).await?;
        }
        let Some(node) = entry.nodes().first().cloned() else {
            let (tx, rx) = mpsc::channel(1);
            if entry.state().is_terminal() {
                let _ = tx.try_send(Ok(LogEvent::Ended(end_of(&entry))));
            }
            return Ok(rx);
        };
        let run = JobId::parse(&run_id(&id, entry.attempt()))?;
        if node == self.name {
            // Assigned here: the agent records the run a moment after.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while matches!(self.store.get(&run), Ok(None)) && std::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            return local(run);
        }
        let address = self.address_of(&node).await?;
        let ch = self
            .peers
            .channel(&node, &address)
            .map_err(|e| ApiError::Cluster(e.to_string()))?;
        let mut c = pb::job_service_client::JobServiceClient::new(ch);
        let call = c.get_job_logs(pb::GetJobLogsRequest {
            job_id: run.to_string(),
            from_seq,
            follow,
        });
        let mut stream = within(&node, call)
            .await?
            .map_err(|s| ApiError::Cluster(format!("node {node}: {}", s.message())))?
            .into_inner();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let item = match stream.message().await {
                    Ok(Some(ev)) => match joblet_proto::log_event_from_pb(ev) {
                        Ok(ev) => Ok(ev),
                        Err(e) => Err(LogError::Remote {
                            id: id.clone(),
                            node: node.clone(),
                            message: e.to_string(),
                        }),
                    },
                    Ok(None) => return,
                    Err(s) => Err(LogError::Remote {
                        id: id.clone(),
                        node: node.clone(),
                        message: s.message().to_string(),
                    }),
                };
                let last = item.is_err();
                if tx.send(item).await.is_err() || last {
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// `entry` (queued) once it is placed or has ended: its key watched
    /// (re-read and watched again if the watch breaks).
    async fn placed(&self, mut entry: JobEntry) -> Result<JobEntry, ApiError> {
        let key = self.keys.job(entry.id());
        loop {
            let mut c = self.etcd();
            let got = self
                .retrying(|mut c| {
                    let key = key.clone();
                    async move { c.get(key, None).await }
                })
                .await?;
            let rev = got.header().map_or(0, |h| h.revision());
            match got.kvs().first() {
                Some(kv) => {
                    entry = decode("job entry", &key, kv.value())
                        .map_err(|e| ApiError::Internal(e.to_string()))?;
                }
                None => return Err(PrefixError::NotFound(entry.id().to_string()).into()),
            }
            if !entry.nodes().is_empty() || entry.state().is_terminal() {
                return Ok(entry);
            }
            let opts = etcd_client::WatchOptions::new().with_start_revision(rev + 1);
            let Ok(mut w) = c.watch(key.as_str(), Some(opts)).await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            while let Ok(Some(resp)) = w.message().await {
                if resp.canceled() {
                    break;
                }
                let changed = resp.events().iter().any(|ev| ev.kv().is_some());
                if changed {
                    break;
                }
            }
        }
    }

    /// Asks for a job to stop (`kill`: at once): a queued job ends
    /// STOPPED by the leader, a placed one is stopped by its nodes.
    pub async fn stop(&self, prefix: &str, kill: bool) -> Result<JobDetails, ApiError> {
        let Found { entry } = self.find(prefix).await?;
        if entry.state().is_terminal() {
            return Err(ApiError::WrongState {
                id: entry.id().to_string(),
                state: entry.state(),
                hint: "it has ended already",
            });
        }
        let (key, how) = (
            self.keys.stop(entry.id()),
            if kill { "kill" } else { "stop" },
        );
        self.retrying(|mut c| {
            let key = key.clone();
            async move { c.put(key, how, None).await }
        })
        .await?;
        Ok(details(&entry))
    }
}

impl ClusterNode {
    /// Deletes an ended job: its entry in etcd, and every run of it on
    /// the nodes that ran it (`local` on this node; the others asked, their
    /// failure only logged: the entry is what lists and finds the job).
    pub async fn delete<F, Fut>(&self, prefix: &str, local: F) -> Result<JobId, ApiError>
    where
        F: Fn(JobId) -> Fut,
        Fut: std::future::Future<Output = Result<(), ApiError>>,
    {
        let Found { entry } = self.find(prefix).await?;
        let id = entry.submission.job.clone();
        if !entry.state().is_terminal() {
            return Err(ApiError::WrongState {
                id: id.to_string(),
                state: entry.state(),
                hint: "stop it first with `rnx job stop`",
            });
        }
        let key = self.keys.job(id.as_str());
        let value = encode(&entry);
        self.retrying(|mut c| {
            let (key, value) = (key.clone(), value.clone());
            async move {
                // Only the entry as read: an entry changed meanwhile stays.
                let txn = Txn::new()
                    .when(vec![Compare::value(key.as_str(), CompareOp::Equal, value)])
                    .and_then(vec![TxnOp::delete(key.as_str(), None)]);
                c.txn(txn).await.map(|_| ())
            }
        })
        .await?;
        for attempt in 1..=entry.attempt() {
            let Ok(run) = JobId::parse(&run_id(id.as_str(), attempt)) else {
                continue;
            };
            for node in entry.nodes() {
                let done = if *node == self.name {
                    local(run.clone()).await
                } else {
                    self.remote_delete(node, &run).await
                };
                if let Err(e) = done {
                    tracing::debug!(job = %id, %node, run = %run, error = %e, "run not deleted on its node");
                }
            }
        }
        tracing::info!(job = %id, "job deleted from the cluster");
        Ok(id)
    }

    async fn remote_delete(&self, node: &str, run: &JobId) -> Result<(), ApiError> {
        let mut c = pb::job_service_client::JobServiceClient::new(self.peer(node).await?);
        let call = c.delete_job(pb::JobRef {
            job_id: run.to_string(),
        });
        within(node, call)
            .await?
            .map_err(|s| ApiError::Cluster(format!("node {node}: {}", s.message())))?;
        Ok(())
    }
}

/// `call` to node `node`, given [`super::peer::CALL_TIMEOUT`] to answer.
async fn within<T>(node: &str, call: impl std::future::Future<Output = T>) -> Result<T, ApiError> {
    tokio::time::timeout(super::peer::CALL_TIMEOUT, call)
        .await
        .map_err(|_| {
            ApiError::Cluster(format!(
                "node {node} did not answer within {:?} (down or cut off?)",
                super::peer::CALL_TIMEOUT
            ))
        })
}

/// How a job that never ran (or whose node is gone) ended, from its entry.
fn end_of(entry: &JobEntry) -> joblet_core::joblog::JobEnd {
    let d = details(entry);
    joblet_core::joblog::JobEnd {
        state: d.record.state,
        exit_code: d.record.exit_code,
        reason: d.record.reason,
        total_bytes: 0,
    }
}

/// A job as its cluster entry describes it (no history, no GPU indices:
/// those are the running node's).
pub(super) fn details(entry: &JobEntry) -> JobDetails {
    let (state, reason, exit_code, started, ended) = match &entry.phase {
        JobPhase::Queued { reason, .. } => (
            JobState::Queued,
            reason.clone().unwrap_or_default(),
            None,
            None,
            None,
        ),
        JobPhase::Assigned { at, .. } => (JobState::Running, String::new(), None, Some(*at), None),
        JobPhase::Ended {
            state,
            exit_code,
            reason,
            at,
            ..
        } => (*state, reason.clone(), *exit_code, None, Some(*at)),
    };
    JobDetails {
        record: JobRecord {
            id: entry.submission.job.clone(),
            seq: 0,
            owner: entry.owner.clone(),
            spec: entry.spec.clone(),
            state,
            reason,
            exit_code,
            created_ms: entry.submitted_at,
            started_ms: started,
            ended_ms: ended,
            shim_pid: None,
        },
        transitions: Vec::new(),
        log_bytes: 0,
        gpus: None,
        cluster: Some(ClusterPlace {
            nodes: entry.nodes().to_vec(),
            attempt: entry.attempt(),
            restart: entry.restart.as_str().to_string(),
        }),
    }
}
