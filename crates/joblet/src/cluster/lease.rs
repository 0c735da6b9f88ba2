//! This node's membership: its record under `nodes/NAME`, on a lease kept
//! alive every third of its TTL, and its fencing deadline
//! ([`joblet_cluster::fence`]): if keep-alives go unanswered until the
//! deadline, the node kills its cluster jobs itself, before the majority
//! side can expire its lease and place them elsewhere.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::PutOptions;
use joblet_cluster::fence::FenceClock;
use joblet_cluster::records::{encode, NodeRecord};
use joblet_cluster::Keys;
use joblet_sched::model::GpuHealth;

use super::etcd::EtcdPool;
use tokio::sync::watch;

/// Now on the clock the fencing deadline is kept in (shared with shims).
fn mono_ms() -> u64 {
    joblet_shim::fence::now_ms()
}

/// Margin kept between the fencing deadline and the earliest moment the
/// lease can expire: time to kill the node's jobs.
const FENCE_MARGIN: Duration = Duration::from_millis(1_000);

/// The node's lease as the rest of the daemon sees it.
#[derive(Clone)]
pub struct Membership {
    /// The current lease id; `None` while unregistered.
    pub lease: watch::Receiver<Option<i64>>,
    fence: Arc<Mutex<FenceClock>>,
    /// Bumped every time the node fences itself.
    pub fenced: watch::Receiver<u64>,
}

impl Membership {
    /// Whether the fencing deadline has passed (the node must run no
    /// cluster job now).
    pub fn expired(&self) -> bool {
        let f = self.fence.lock().expect("fence lock");
        f.expired(mono_ms())
    }
}

/// Every GPU's health now (by index), for the node's record.
pub type HealthNow = Arc<dyn Fn() -> Vec<(u32, GpuHealth)> + Send + Sync>;

/// Registers `record` and keeps it alive, in a task; publishes the
/// fencing deadline in `fence_file` for the shims; puts the record again
/// whenever `health` changes (a GPU failed, was drained or came back), so
/// the leader places nothing on a GPU that takes no jobs.
pub fn start(
    pool: EtcdPool,
    keys: Keys,
    mut record: NodeRecord,
    ttl: Duration,
    fence_file: PathBuf,
    health: HealthNow,
) -> Membership {
    record.health = health();
    let (lease_tx, lease) = watch::channel(None);
    let (fenced_tx, fenced) = watch::channel(0u64);
    // Nothing of an earlier life holds: no cluster job runs until the
    // first keep-alive is answered.
    if let Err(e) = joblet_shim::fence::write(&fence_file, 0) {
        tracing::error!(file = %fence_file.display(), error = %e, "cannot write the fencing deadline");
    }
    let fence = Arc::new(Mutex::new(FenceClock::new(
        u64::try_from(FENCE_MARGIN.as_millis()).unwrap_or(1_000),
    )));
    let m = Membership {
        lease,
        fence: fence.clone(),
        fenced,
    };
    let (pool_for_health, keys_for_health, record_for_health) =
        (pool.clone(), keys.clone(), record.clone());
    tokio::spawn(keep(
        pool,
        keys,
        record,
        ttl,
        lease_tx,
        fence.clone(),
        fence_file,
    ));
    tokio::spawn(watchdog(m.clone(), fenced_tx));
    tokio::spawn(republish(
        pool_for_health,
        keys_for_health,
        record_for_health,
        m.lease.clone(),
        health,
    ));
    m
}

/// Grants a lease, puts the record on it, keeps it alive; starts over
/// whenever the lease is lost.
async fn keep(
    pool: EtcdPool,
    keys: Keys,
    record: NodeRecord,
    ttl: Duration,
    lease_tx: watch::Sender<Option<i64>>,
    fence: Arc<Mutex<FenceClock>>,
    fence_file: PathBuf,
) {
    let ttl_s = i64::try_from(ttl.as_secs().max(2)).unwrap_or(5);
    let publish = |f: &FenceClock| {
        if let Err(e) = joblet_shim::fence::write(&fence_file, f.deadline().unwrap_or(0)) {
            tracing::error!(file = %fence_file.display(), error = %e, "cannot write the fencing deadline");
        }
    };
    let renewed = |sent: u64, ttl: i64| {
        let mut f = fence.lock().expect("fence lock");
        f.renewed(sent, u64::try_from(ttl).unwrap_or(0) * 1_000);
        publish(&f);
    };
    loop {
        let sent = mono_ms();
        let mut client = pool.client();
        let grant = match client.lease_grant(ttl_s, None).await {
            Ok(g) => g,
            Err(e) => {
                pool.failed(&e);
                tracing::warn!(error = %e, "cannot get an etcd lease; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let id = grant.id();
        renewed(sent, grant.ttl());
        let put = client
            .put(
                keys.node(&record.name),
                encode(&record),
                Some(PutOptions::new().with_lease(id)),
            )
            .await;
        if let Err(e) = put {
            pool.failed(&e);
            tracing::warn!(error = %e, "cannot register this node in etcd; retrying");
            let _ = client.lease_revoke(id).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        tracing::info!(node = %record.name, lease = id, ttl = grant.ttl(), "registered in the cluster");
        let _ = lease_tx.send(Some(id));
        keep_alive(&pool, id, ttl, &renewed).await;
        tracing::warn!(node = %record.name, lease = id, "the node's etcd lease is gone; registering again");
        {
            let mut f = fence.lock().expect("fence lock");
            f.lost();
            publish(&f);
        }
        let _ = lease_tx.send(None);
    }
}

/// Keeps lease `id` alive until etcd says it is gone; reopens the stream
/// when it breaks.
async fn keep_alive(pool: &EtcdPool, id: i64, ttl: Duration, renewed: &impl Fn(u64, i64)) {
    let every = ttl / 3;
    loop {
        let (mut keeper, mut stream) = match pool.client().lease_keep_alive(id).await {
            Ok(ks) => ks,
            Err(e) if gone(&e) => return,
            Err(e) => {
                pool.rotate();
                tracing::warn!(error = %e, "cannot open the lease keep-alive; retrying");
                tokio::time::sleep(every.min(Duration::from_millis(500))).await;
                continue;
            }
        };
        loop {
            let sent = mono_ms();
            if let Err(e) = keeper.keep_alive().await {
                tracing::warn!(error = %e, "lease keep-alive failed");
                break;
            }
            match tokio::time::timeout(every, stream.message()).await {
                Ok(Ok(Some(resp))) if resp.ttl() > 0 => renewed(sent, resp.ttl()),
                Ok(Ok(Some(_))) => return, // TTL 0: the lease is gone.
                Ok(Err(e)) if gone(&e) => return,
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_) => {
                    tracing::warn!("lease keep-alive unanswered; trying another etcd member");
                    break;
                }
            }
            tokio::time::sleep(every).await;
        }
        // Its member may be down: the next stream goes to another.
        pool.rotate();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// etcd says the lease does not exist (it expired while the node was cut
/// off): keeping it alive is over; a new one is granted.
fn gone(e: &etcd_client::Error) -> bool {
    e.to_string().contains("lease not found")
}

/// Puts the node's record again, on its current lease, when its GPUs'
/// health differs from what was last put (checked every second).
async fn republish(
    pool: EtcdPool,
    keys: Keys,
    mut record: NodeRecord,
    mut lease: watch::Receiver<Option<i64>>,
    health: HealthNow,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut put_on: Option<i64> = None;
    loop {
        tick.tick().await;
        let Some(id) = *lease.borrow_and_update() else {
            continue;
        };
        let now = health();
        // A new lease was registered with the record as it was then.
        if put_on != Some(id) {
            put_on = Some(id);
            if now == record.health {
                continue;
            }
        } else if now == record.health {
            continue;
        }
        record.health = now;
        let put = pool
            .client()
            .put(
                keys.node(&record.name),
                encode(&record),
                Some(PutOptions::new().with_lease(id)),
            )
            .await;
        match put {
            Ok(_) => tracing::info!(node = %record.name, "GPU health changed: node record updated"),
            Err(e) => {
                pool.failed(&e);
                // Tried again on the next tick.
                record.health.clear();
                tracing::warn!(error = %e, "cannot update this node's record");
            }
        }
    }
}

/// Fences the node when its deadline passes: bumps `fenced` once per lost
/// lease (the agent kills the node's cluster jobs).
async fn watchdog(m: Membership, fenced: watch::Sender<u64>) {
    let mut was = false;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        let now = m.expired();
        if now && !was {
            tracing::error!("cut off from etcd past the fencing deadline: killing this node's cluster jobs before its lease can expire");
            fenced.send_modify(|n| *n += 1);
        }
        was = now;
    }
}
