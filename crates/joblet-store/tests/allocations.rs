//! The GPU allocations ledger: a scheduler restored from what the store
//! kept re-derives exactly the allocations it had; releases happen once.

use std::collections::BTreeMap;

use joblet_sched::model::{
    Action, Event, GpuSpec, JobRequest, NodeSpec, Placement, SchedConfig, Sharing, WorkloadClass,
};
use joblet_sched::scheduler::Scheduler;
use joblet_store::Store;

fn nodes() -> Vec<NodeSpec> {
    (0..4)
        .map(|id| NodeSpec {
            id,
            capacity: Default::default(),
            gpus: (0..8)
                .map(|index| GpuSpec {
                    index,
                    uuid: format!("GPU-{id}-{index}"),
                    memory_mb: 40_960,
                    numa: index / 4,
                    socket: index / 4,
                    nvlink_group: Some(id),
                    compute_capability: (8, 0),
                    mig: Vec::new(),
                })
                .collect(),
        })
        .collect()
}

fn req(i: u64, gpus: u32, shared: bool) -> JobRequest {
    JobRequest {
        gpu_milli: 0,
        job: format!("job-{i:04}"),
        owner: "alice".into(),
        queue: "default".into(),
        gpu_count: gpus,
        gpu_memory_mb: if shared { 8_192 } else { 0 },
        sharing: if shared {
            Sharing::Shared
        } else {
            Sharing::Exclusive
        },
        mig_profile: None,
        min_compute_capability: None,
        class: WorkloadClass::Training,
        priority: 0,
        allow_cross_numa: true,
        allow_cross_node: false,
        preemptible: false,
        time_limit_ms: None,
        checkpoint_interval_ms: None,
        cpu_millis: 0,
        host_memory_mb: 0,
    }
}

fn sorted(mut p: Vec<Placement>) -> Vec<Placement> {
    p.sort_by(|a, b| a.job.cmp(&b.job));
    p
}

#[test]
fn a_scheduler_restored_from_the_ledger_has_the_same_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let (db, key) = (dir.path().join("j.db"), dir.path().join("k"));
    let store = Store::open(&db, &key).unwrap();
    let config = SchedConfig::default();
    let mut s = Scheduler::new(config.clone(), nodes());
    let mut requests: BTreeMap<String, JobRequest> = BTreeMap::new();
    let mut running: Vec<String> = Vec::new();
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for i in 0..400u64 {
        let now = i as i64 * 1_000;
        let event = if i % 3 == 2 && !running.is_empty() {
            let job = running.remove(next(running.len() as u64) as usize);
            // The daemon releases the allocation when the job's GPUs are free.
            assert!(store.release_allocation(&job).unwrap());
            assert!(!store.release_allocation(&job).unwrap(), "exactly once");
            Event::Exited(job)
        } else {
            let r = req(i, [1, 2, 4, 8][next(4) as usize], next(3) == 0);
            requests.insert(r.job.clone(), r.clone());
            Event::Submit(Box::new(r))
        };
        for action in s.handle(event, now) {
            if let Action::Start { placement } = action {
                let r = &requests[&placement.job];
                store.record_allocation(r, &placement, now).unwrap();
                running.push(placement.job);
            }
        }
    }
    assert!(!running.is_empty(), "the workload keeps GPUs busy");
    let waiting: Vec<(JobRequest, i64)> = s.waiting_jobs().map(|r| (r.clone(), 0)).collect();
    let before = sorted(s.cluster().placements().cloned().collect());
    drop(store);

    let store = Store::open(&db, &key).unwrap();
    let ledger = store.allocations().unwrap();
    assert_eq!(ledger.len(), running.len());
    let restored = Scheduler::restore(config, nodes(), ledger, waiting).unwrap();
    restored.cluster().verify().unwrap();
    let after = sorted(restored.cluster().placements().cloned().collect());
    assert_eq!(before, after);
    assert_eq!(restored.running(), s.running());
}

#[test]
fn an_allocation_is_never_replaced_and_bad_rows_name_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("j.db"), &dir.path().join("k")).unwrap();
    let r = req(1, 1, false);
    let p = Placement {
        gpu_milli: 0,
        job: r.job.clone(),
        units: vec![joblet_sched::model::GpuRef {
            node: 0,
            index: 3,
            mig: None,
        }],
        memory_mb: 40_960,
        node: 0,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: Sharing::Exclusive,
        class: WorkloadClass::Training,
    };
    store.record_allocation(&r, &p, 5).unwrap();
    let err = store.record_allocation(&r, &p, 6).unwrap_err().to_string();
    assert!(
        err.contains("job-0001") && err.contains("already holds"),
        "{err}"
    );
    let other = Placement {
        job: "someone-else".into(),
        ..p.clone()
    };
    let err = store
        .record_allocation(&r, &other, 6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("someone-else"), "{err}");
    assert_eq!(store.allocations().unwrap(), vec![(r, p, 5)]);
}
