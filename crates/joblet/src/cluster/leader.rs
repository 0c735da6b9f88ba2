//! The scheduler leader's shell: nodes with `cluster.scheduler` campaign
//! through etcd's election API on their lease; the winner rebuilds
//! [`LeaderCore`] from a snapshot at one revision, follows a watch from
//! the next, and runs each plan the core returns as one transaction
//! fenced by its leader key's create revision. A compacted or cancelled
//! watch, or a rejected plan, means a new snapshot. When its fence no
//! longer holds (its lease expired, another leads), it stops and
//! campaigns again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType, LeaderKey, ResignOptions, WatchOptions};
use joblet_cluster::keys::Key;
use joblet_cluster::leader::{Input, LeaderConfig, LeaderCore, Output};
use joblet_cluster::records::decode;
use joblet_cluster::Keys;
use joblet_sched::model::SchedConfig;

use super::etcd::{self, EtcdPool};
use super::lease::Membership;

/// Counters for `rnx node list` and metrics.
#[derive(Debug, Default)]
pub struct LeaderCounters {
    pub terms: AtomicU64,
    pub plans: AtomicU64,
    pub rejected: AtomicU64,
    pub placements: AtomicU64,
}

/// Campaigns forever (in a task).
pub fn start(
    pool: EtcdPool,
    keys: Keys,
    name: String,
    membership: Membership,
    sched: SchedConfig,
    counters: Arc<LeaderCounters>,
) {
    tokio::spawn(campaign(pool, keys, name, membership, sched, counters));
}

async fn campaign(
    pool: EtcdPool,
    keys: Keys,
    name: String,
    membership: Membership,
    sched: SchedConfig,
    counters: Arc<LeaderCounters>,
) {
    let mut lease_rx = membership.lease.clone();
    loop {
        let current = *lease_rx.borrow_and_update();
        let Some(lease) = current else {
            let _ = lease_rx.changed().await;
            continue;
        };
        let mut client = pool.client();
        let won = tokio::select! {
            r = client.campaign(keys.election(), name.clone(), lease) => r,
            _ = lease_rx.changed() => continue,
        };
        let key = match won {
            Ok(mut r) => match r.take_leader() {
                Some(k) => k,
                None => continue,
            },
            Err(e) => {
                pool.failed(&e);
                tracing::warn!(error = %e, "campaign for scheduler leadership failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let fence = key.rev();
        counters.terms.fetch_add(1, Ordering::Relaxed);
        tracing::info!(node = %name, fence, "leading the cluster's scheduler");
        let why = lead(&pool, &keys, &key, &membership, &sched, &counters).await;
        tracing::warn!(node = %name, fence, reason = %why, "no longer leading the cluster's scheduler");
        let _ = pool
            .client()
            .resign(Some(ResignOptions::new().with_leader(key)))
            .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Leads until the fence no longer holds; returns why it stopped.
async fn lead(
    pool: &EtcdPool,
    keys: &Keys,
    key: &LeaderKey,
    membership: &Membership,
    sched: &SchedConfig,
    counters: &LeaderCounters,
) -> String {
    let fence = key.rev();
    let mut cfg = LeaderConfig::new(sched.clone(), keys.clone());
    // One compare of every transaction is the fence.
    cfg.max_txn_ops = 127;
    let mut core = LeaderCore::new(cfg);
    let mut lease = membership.lease.clone();
    'resync: loop {
        let mut client = pool.client();
        let client = &mut client;
        let snap = match etcd::snapshot(client, keys, fence).await {
            Ok(s) => s,
            Err(e) => {
                pool.failed(&e);
                tracing::warn!(error = %e, "cannot read the cluster from etcd; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                if membership.expired() {
                    return "cut off from etcd".into();
                }
                continue;
            }
        };
        let from = snap.revision + 1;
        let mut pending = vec![Input::Snapshot(Box::new(snap))];
        let mut watch = match client
            .watch(
                format!("{}/", keys.prefix()),
                Some(WatchOptions::new().with_prefix().with_start_revision(from)),
            )
            .await
        {
            Ok(w) => w,
            Err(e) => {
                pool.failed(&e);
                tracing::warn!(error = %e, "cannot watch the cluster; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            // Everything that arrived goes to the core first, so that what
            // happens during a transaction is batched into the next one.
            while !pending.is_empty() {
                let now = crate::clock::now_ms();
                let outs: Vec<Output> = pending
                    .drain(..)
                    .flat_map(|input| core.handle(input, now))
                    .collect();
                for out in outs {
                    match out {
                        Output::Commit(plan) => {
                            match etcd::commit(client, &plan, key.key(), fence).await {
                                Ok(Some(revision)) => {
                                    counters.plans.fetch_add(1, Ordering::Relaxed);
                                    counters
                                        .placements
                                        .fetch_add(plan.placed.len() as u64, Ordering::Relaxed);
                                    pending.push(Input::Committed {
                                        plan: plan.id,
                                        revision,
                                    });
                                }
                                Ok(None) => {
                                    if !still_leading(client, key).await {
                                        return "another node leads (the fencing compare failed)"
                                            .into();
                                    }
                                    counters.rejected.fetch_add(1, Ordering::Relaxed);
                                    pending.push(Input::Rejected { plan: plan.id });
                                }
                                Err(e) => {
                                    pool.failed(&e);
                                    tracing::warn!(error = %e, "a plan's transaction failed; reading the cluster again");
                                    continue 'resync;
                                }
                            }
                        }
                        Output::Resync => continue 'resync,
                    }
                }
            }
            tokio::select! {
                m = watch.message() => match m {
                    Ok(Some(resp)) => {
                        if resp.canceled() || resp.compact_revision() > 0 {
                            tracing::warn!(compacted = resp.compact_revision(), reason = resp.cancel_reason(), "the cluster watch was cancelled; reading the cluster again");
                            continue 'resync;
                        }
                        for i in resp.events().iter().filter_map(|ev| input_of(keys, ev)) {
                            tracing::debug!(input = ?i, "leader input");
                            pending.push(i);
                        }
                    }
                    Ok(None) | Err(_) => {
                        pool.rotate();
                        continue 'resync;
                    }
                },
                _ = tick.tick() => pending.push(Input::Tick),
                _ = lease.changed() => {
                    if lease.borrow().is_none() {
                        return "this node's lease was lost".into();
                    }
                }
            }
            if membership.expired() {
                return "cut off from etcd past the fencing deadline".into();
            }
        }
    }
}

/// Whether our leader key still exists with our create revision.
async fn still_leading(client: &mut Client, key: &LeaderKey) -> bool {
    match client.get(key.key(), None).await {
        Ok(r) => r
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == key.rev()),
        // Unknown: assume not, and campaign again (safe either way).
        Err(_) => false,
    }
}

/// The core's input for a watched change; `None` for keys only the
/// leader writes (allocations, assignments) and unreadable values.
fn input_of(keys: &Keys, ev: &etcd_client::Event) -> Option<Input> {
    let kv = ev.kv()?;
    let key = std::str::from_utf8(kv.key()).ok()?;
    let put = ev.event_type() == EventType::Put;
    let parsed = keys.parse(key)?;
    fn read<T: for<'de> serde::Deserialize<'de>>(what: &str, key: &str, value: &[u8]) -> Option<T> {
        match decode(what, key, value) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(error = %e, "skipping an unreadable etcd value");
                None
            }
        }
    }
    Some(match (parsed, put) {
        (Key::Node(_), true) => Input::NodeUp(Box::new(read("node record", key, kv.value())?)),
        (Key::Node(n), false) => Input::NodeGone(n.to_string()),
        (Key::Drain(n), d) => Input::Drain {
            node: n.to_string(),
            drained: d,
        },
        (Key::Job(_), true) => Input::Job {
            entry: Box::new(read("job entry", key, kv.value())?),
            rev: kv.mod_revision(),
        },
        (Key::Job(j), false) => Input::JobDeleted(j.to_string()),
        (Key::Report { job, node }, true) => Input::Report {
            job: job.to_string(),
            node: node.to_string(),
            report: read("node report", key, kv.value())?,
        },
        (Key::Stop(j), true) => Input::Stop { job: j.to_string() },
        _ => return None,
    })
}
