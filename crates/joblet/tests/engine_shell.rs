//! The engine's loop with a recording node agent and a real store: what
//! the API's calls do to the store, which starts reach the agent, and what
//! a restart recovers. No root, no processes, no GPUs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use joblet::agent::{AgentReport, NodeAgent, Persist, PersistRelease, Secrets, StartError};
use joblet::engine::{Engine, EngineConfig, EngineHandle};
use joblet::gpu::admission::Refused;
use joblet::state_dir::StateDir;
use joblet_core::{JobId, JobSpec, JobState, UnixMillis};
use joblet_engine::{DirtyGpu, Exit, Final, JobRules, LaunchOrder, ShimFact, StopHow, Ticket};
use joblet_sched::model::{
    GpuHealth, JobRequest, NodeCapacity, NodeSpec, Placement, Policy, SchedConfig, Unplaceable,
};
use joblet_store::{JobRecord, Store, StoreError};
use tokio::sync::mpsc;

/// What the recording agent saw, shared with the test.
#[derive(Default)]
struct Seen {
    started: Vec<JobId>,
    signalled: Vec<(JobId, StopHow)>,
    released: Vec<JobId>,
    /// Jobs whose start fails (before anything is recorded).
    refuse: BTreeSet<JobId>,
    /// What `probe` answers after a restart.
    shims: BTreeMap<JobId, ShimFact>,
}

struct Recording {
    seen: Arc<Mutex<Seen>>,
    tx: mpsc::UnboundedSender<AgentReport>,
    rx: mpsc::UnboundedReceiver<AgentReport>,
    max_jobs: u32,
}

impl Recording {
    fn new(
        seen: Arc<Mutex<Seen>>,
        max_jobs: u32,
    ) -> (Recording, mpsc::UnboundedSender<AgentReport>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Recording {
                seen,
                tx: tx.clone(),
                rx,
                max_jobs,
            },
            tx,
        )
    }
}

impl NodeAgent for Recording {
    fn node(&self) -> NodeSpec {
        NodeSpec {
            id: 0,
            gpus: Vec::new(),
            capacity: NodeCapacity {
                cpu_millis: Some(2000),
                memory_mb: Some(1024),
                max_jobs: Some(self.max_jobs),
            },
        }
    }
    fn reserve_id(&mut self, _spec: &JobSpec) -> Option<JobId> {
        None
    }
    fn abandon(&mut self, _id: &JobId) {}
    fn ended(&mut self, _id: &JobId) {}
    fn admit(&self, _: &JobRequest, _: &JobSpec, _: Option<Unplaceable>) -> Result<(), Refused> {
        Ok(())
    }
    fn start(
        &mut self,
        order: &LaunchOrder,
        _job: &JobRecord,
        persist: Persist<'_>,
        _secrets: Secrets<'_>,
    ) -> Result<(), StartError> {
        let mut seen = self.seen.lock().unwrap();
        if seen.refuse.contains(&order.job) {
            return Err(StartError::NoGpus);
        }
        persist(None).map_err(StartError::Persist)?;
        seen.started.push(order.job.clone());
        Ok(())
    }
    fn signal(&mut self, job: &JobId, how: StopHow, ticket: Option<Ticket>) {
        self.seen.lock().unwrap().signalled.push((job.clone(), how));
        let _ = self.tx.send(AgentReport::Signalled {
            job: job.clone(),
            ticket,
            failed: None,
        });
        let _ = self.tx.send(AgentReport::Exited {
            job: job.clone(),
            exit: Exit::of(Final::stopped("stopped by request")),
        });
    }
    fn check_release(&mut self, job: &JobId, _: &Placement, _: UnixMillis) {
        let _ = self.tx.send(AgentReport::ReleaseChecked {
            job: job.clone(),
            dirty: Vec::new(),
        });
    }
    fn release(
        &mut self,
        job: &JobId,
        _: &Placement,
        _: &[DirtyGpu],
        _: UnixMillis,
        persist: PersistRelease<'_>,
    ) -> Result<(), StoreError> {
        self.seen.lock().unwrap().released.push(job.clone());
        persist(&[], &[])
    }
    fn reap_lost(&mut self, _job: &JobId) {}
    async fn settle(&mut self, _not_started: &[JobId]) {}
    fn probe(&mut self, job: &JobId) -> ShimFact {
        self.seen
            .lock()
            .unwrap()
            .shims
            .get(job)
            .cloned()
            .unwrap_or(ShimFact::Gone)
    }
    fn adopt(&mut self, _: &JobId, _: &Placement, _: &JobRequest) {}
    fn recovered(&mut self, _keep: &BTreeSet<String>, _now: UnixMillis) {}
    fn gpu_health(&self) -> Vec<(u32, GpuHealth)> {
        Vec::new()
    }
    async fn next_report(&mut self) -> Option<AgentReport> {
        self.rx.recv().await
    }
    async fn close(&mut self) {}
}

struct Node {
    _dir: tempfile::TempDir,
    dirs: StateDir,
    store: Arc<Store>,
    seen: Arc<Mutex<Seen>>,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let dirs = StateDir::new(dir.path());
        std::fs::create_dir_all(dirs.jobs()).unwrap();
        let store = Arc::new(Store::open(&dirs.db(), &dirs.secrets_key()).unwrap());
        Node {
            _dir: dir,
            dirs,
            store,
            seen: Arc::default(),
        }
    }

    async fn engine(&self, max_jobs: u32) -> (EngineHandle, mpsc::UnboundedSender<AgentReport>) {
        let (agent, reports) = Recording::new(self.seen.clone(), max_jobs);
        let cfg = EngineConfig {
            sched: SchedConfig {
                policy: Policy::Fifo,
                ..SchedConfig::default()
            },
            stop_grace: Duration::from_secs(5),
            rules: JobRules::default(),
            state_reserve_mb: 0,
            min_free_disk_mb: 0,
        };
        let handle = Engine::start(self.store.clone(), self.dirs.clone(), cfg, agent)
            .await
            .unwrap();
        (handle, reports)
    }

    fn state(&self, id: &JobId) -> JobState {
        self.store.get(id).unwrap().unwrap().state
    }

    /// Waits until job `id` is in `state` (the engine works on its own task).
    async fn wait_state(&self, id: &JobId, state: JobState) {
        for _ in 0..200 {
            if self.state(id) == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("job {id} is {}, expected {state}", self.state(id));
    }
}

fn spec(memory_mb: Option<u64>) -> JobSpec {
    let mut s = joblet_core::JobRequest {
        command: "true".into(),
        ..Default::default()
    }
    .validate()
    .unwrap()
    .0;
    s.resources.max_memory_mb = memory_mb;
    s
}

async fn submit(h: &EngineHandle, memory_mb: Option<u64>) -> JobId {
    h.submit("alice".into(), spec(memory_mb), BTreeMap::new(), None)
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn a_job_runs_and_its_end_is_recorded_with_its_allocation_released() {
    let node = Node::new();
    let (h, reports) = node.engine(4).await;
    let a = submit(&h, Some(256)).await;
    node.wait_state(&a, JobState::Running).await;
    assert_eq!(
        node.store.allocations().unwrap().len(),
        1,
        "RUNNING with its allocation"
    );
    reports
        .send(AgentReport::Exited {
            job: a.clone(),
            exit: Exit::of(Final {
                state: JobState::Completed,
                exit_code: Some(0),
                reason: "exited".into(),
            }),
        })
        .unwrap();
    node.wait_state(&a, JobState::Completed).await;
    assert!(
        node.store.allocations().unwrap().is_empty(),
        "released with its end"
    );
}

#[tokio::test]
async fn stopping_the_queued_job_lets_the_next_one_start() {
    let node = Node::new();
    let (h, _reports) = node.engine(1).await;
    let a = submit(&h, None).await;
    let b = submit(&h, None).await;
    let c = submit(&h, None).await;
    node.wait_state(&a, JobState::Running).await;
    assert_eq!(node.state(&b), JobState::Queued);
    let rec = h.stop(b.clone(), None, false).await.unwrap();
    assert_eq!(rec.state, JobState::Stopped);
    assert_eq!(rec.reason, "stopped before it started");
    // A running job is signalled; its end frees the slot for C.
    let rec = h.stop(a.clone(), None, true).await.unwrap();
    assert_eq!(rec.id, a);
    node.wait_state(&a, JobState::Stopped).await;
    node.wait_state(&c, JobState::Running).await;
    let seen = node.seen.lock().unwrap();
    assert_eq!(seen.started, vec![a.clone(), c.clone()]);
    assert_eq!(seen.signalled, vec![(a, StopHow::Kill)]);
}

#[tokio::test]
async fn a_queued_job_can_be_deleted_a_running_one_cannot() {
    let node = Node::new();
    let (h, _reports) = node.engine(1).await;
    let a = submit(&h, None).await;
    let b = submit(&h, None).await;
    node.wait_state(&a, JobState::Running).await;
    let e = h.delete(a.clone()).await.unwrap_err().to_string();
    assert!(e.contains("stop it first"), "{e}");
    h.delete(b.clone()).await.unwrap();
    assert!(node.store.get(&b).unwrap().is_none());
    let e = h.stop(b, None, false).await.unwrap_err().to_string();
    assert!(e.contains("no job"), "{e}");
}

#[tokio::test]
async fn memory_the_node_does_not_have_is_refused_before_anything_is_recorded() {
    let node = Node::new();
    let (h, _reports) = node.engine(4).await;
    let e = h
        .submit("alice".into(), spec(Some(4096)), BTreeMap::new(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("resources.max_memory_mb") && e.contains("1024 MiB"),
        "{e}"
    );
    assert_eq!(node.store.count().unwrap(), 0);
}

#[tokio::test]
async fn a_start_that_fails_fails_the_job_and_the_next_one_starts() {
    let node = Node::new();
    let (h, _reports) = node.engine(1).await;
    // The first job's id is not known before it is submitted: refuse the
    // start of whatever starts first by submitting under a full node.
    let a = submit(&h, None).await;
    node.wait_state(&a, JobState::Running).await;
    let b = submit(&h, None).await;
    node.seen.lock().unwrap().refuse.insert(b.clone());
    let c = submit(&h, None).await;
    h.stop(a.clone(), None, true).await.unwrap();
    node.wait_state(&b, JobState::Failed).await;
    node.wait_state(&c, JobState::Running).await;
    let rec = node.store.get(&b).unwrap().unwrap();
    assert!(rec.reason.contains("No GPUs available"), "{}", rec.reason);
}

#[tokio::test]
async fn a_restart_finishes_what_ended_and_fails_what_vanished() {
    let node = Node::new();
    let (h, _reports) = node.engine(4).await;
    let ended = submit(&h, Some(100)).await;
    let vanished = submit(&h, Some(100)).await;
    let alive = submit(&h, Some(100)).await;
    for id in [&ended, &vanished, &alive] {
        node.wait_state(id, JobState::Running).await;
    }
    drop(h);
    {
        let mut seen = node.seen.lock().unwrap();
        seen.shims.insert(
            ended.clone(),
            ShimFact::Exited(Exit::of(Final {
                state: JobState::Completed,
                exit_code: Some(0),
                reason: "exited".into(),
            })),
        );
        seen.shims.insert(vanished.clone(), ShimFact::Gone);
        seen.shims.insert(alive.clone(), ShimFact::Alive);
    }
    let (_h2, _reports) = node.engine(4).await;
    assert_eq!(node.state(&ended), JobState::Completed);
    let lost = node.store.get(&vanished).unwrap().unwrap();
    assert_eq!(lost.state, JobState::Failed);
    assert!(lost.reason.starts_with("lost while daemon was down"));
    assert_eq!(node.state(&alive), JobState::Running);
    let held: Vec<String> = node
        .store
        .allocations()
        .unwrap()
        .into_iter()
        .map(|(_, p, _)| p.job)
        .collect();
    assert_eq!(
        held,
        vec![alive.to_string()],
        "only the live job holds anything"
    );
}
