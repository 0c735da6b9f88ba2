//! One test per placement rule: units and MIG, filters, exclusive and
//! shared, classes, health, gangs, NUMA / node spans, allocate's refusals.

mod placement_common;

use joblet_core::gpu::GpuState;
use joblet_sched::cluster::{AllocError, ClusterState};
use joblet_sched::model::{GpuRef, NodeSpec, Placement, Strategy, WorkloadClass};
use joblet_sched::place::place;
use placement_common::*;

fn start(
    s: &mut ClusterState,
    r: &joblet_sched::model::JobRequest,
    st: Strategy,
) -> Option<Placement> {
    let p = place(s, r, st)?;
    s.allocate(p.clone()).expect("place's answer is accepted");
    s.verify().expect("invariants hold");
    Some(p)
}

fn idx(p: &Placement) -> Vec<(u32, u32, Option<u32>)> {
    p.units.iter().map(|u| (u.node, u.index, u.mig)).collect()
}

fn gref(node: u32, index: u32, mig: Option<u32>) -> GpuRef {
    GpuRef { node, index, mig }
}

fn mig_node() -> NodeSpec {
    NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![
            gpu(0, 0, None),
            mig(
                gpu(1, 0, None),
                &[
                    (1, "1g.10gb", 10_000),
                    (2, "1g.10gb", 10_000),
                    (3, "3g.40gb", 40_000),
                ],
            ),
        ],
    }
}

#[test]
fn whole_gpu_requests_skip_mig_gpus_and_mig_requests_take_only_their_profile() {
    let mut s = ClusterState::new(vec![mig_node()]);
    assert_eq!(s.total_units(), 4);
    assert_eq!(s.free_units(), 4);
    let a = start(&mut s, &req("a", 1), Strategy::Pack).unwrap();
    assert_eq!(idx(&a), vec![(0, 0, None)]);
    assert!(
        place(&s, &req("b", 1), Strategy::Pack).is_none(),
        "MIG GPU is not whole"
    );
    let mut m = req("m", 2);
    m.mig_profile = Some("1g.10gb".into());
    let p = start(&mut s, &m, Strategy::Pack).unwrap();
    assert_eq!(idx(&p), vec![(0, 1, Some(1)), (0, 1, Some(2))]);
    assert_eq!(p.memory_mb, 10_000);
    m.job = "m2".into();
    assert!(
        place(&s, &m, Strategy::Pack).is_none(),
        "the 3g slice is another profile"
    );
    m.mig_profile = Some("3g.40gb".into());
    m.gpu_count = 1;
    assert_eq!(
        idx(&start(&mut s, &m, Strategy::Pack).unwrap()),
        vec![(0, 1, Some(3))]
    );
    assert_eq!(s.free_units(), 0);
}

#[test]
fn compute_capability_and_memory_filter_gpus() {
    let mut old = gpu(0, 0, None);
    old.compute_capability = (7, 0);
    old.memory_mb = 16_000;
    let s = ClusterState::new(vec![NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![old, gpu(1, 0, None)],
    }]);
    let mut r = req("a", 1);
    r.min_compute_capability = Some((8, 0));
    assert_eq!(
        idx(&place(&s, &r, Strategy::Pack).unwrap()),
        vec![(0, 1, None)]
    );
    let mut r = req("b", 1);
    r.gpu_memory_mb = 40_000;
    assert_eq!(
        idx(&place(&s, &r, Strategy::Pack).unwrap()),
        vec![(0, 1, None)]
    );
    r.gpu_count = 2;
    assert!(place(&s, &r, Strategy::Pack).is_none());
    // Without filters best fit takes the smaller GPU first.
    assert_eq!(
        idx(&place(&s, &req("c", 1), Strategy::BestFit).unwrap()),
        vec![(0, 0, None)]
    );
}

#[test]
fn exclusive_jobs_never_share_and_shared_jobs_never_join_them() {
    let mut s = ClusterState::new(vec![NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![gpu(0, 0, None)],
    }]);
    start(
        &mut s,
        &shared("s", 1, 1_000, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    assert!(place(&s, &req("x", 1), Strategy::Pack).is_none());
    let whole = Placement {
        gpu_milli: 0,
        job: "x".into(),
        units: vec![gref(0, 0, None)],
        memory_mb: MB,
        node: 0,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: WorkloadClass::Inference,
    };
    assert!(
        matches!(s.allocate(whole.clone()), Err(AllocError::Busy { holder, .. }) if holder == "s")
    );
    s.release("s").unwrap();
    start(&mut s, &req("x", 1), Strategy::Pack).unwrap();
    assert!(place(
        &s,
        &shared("t", 1, 1, WorkloadClass::Inference),
        Strategy::Pack
    )
    .is_none());
    assert_eq!(s.jobs_on(0, 0), vec!["x".to_string()]);
}

#[test]
fn shared_memory_never_exceeds_the_gpu_and_zero_reserves_it_all() {
    let mut s = ClusterState::new(vec![NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![gpu(0, 0, None)],
    }]);
    let half = MB / 2;
    start(
        &mut s,
        &shared("a", 1, half, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    start(
        &mut s,
        &shared("b", 1, half, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    assert!(place(
        &s,
        &shared("c", 1, 1, WorkloadClass::Inference),
        Strategy::Pack
    )
    .is_none());
    assert_eq!(s.free_units(), 0);
    s.release("a").unwrap();
    assert!(place(
        &s,
        &shared("z", 1, 0, WorkloadClass::Inference),
        Strategy::Pack
    )
    .is_none());
    s.release("b").unwrap();
    let z = start(
        &mut s,
        &shared("z", 1, 0, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    assert_eq!(z.memory_mb, 0);
    assert!(place(
        &s,
        &shared("c", 1, 1, WorkloadClass::Inference),
        Strategy::Pack
    )
    .is_none());
}

#[test]
fn training_and_inference_never_share_but_interactive_joins_either() {
    let mut s = ClusterState::new(vec![NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![gpu(0, 0, None), gpu(1, 0, None)],
    }]);
    let t = start(
        &mut s,
        &shared("t", 1, 1_000, WorkloadClass::Training),
        Strategy::Pack,
    )
    .unwrap();
    let i = start(
        &mut s,
        &shared("i", 1, 1_000, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    assert_ne!(t.units, i.units);
    let it = start(
        &mut s,
        &shared("it", 2, 1_000, WorkloadClass::Interactive),
        Strategy::Pack,
    )
    .unwrap();
    assert_eq!(it.units.len(), 2);
    assert!(place(
        &s,
        &shared("t2", 2, 1_000, WorkloadClass::Training),
        Strategy::Pack
    )
    .is_none());
    let bad = Placement {
        gpu_milli: 0,
        job: "t3".into(),
        units: i.units.clone(),
        memory_mb: 1_000,
        node: i.node,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Shared,
        class: WorkloadClass::Training,
    };
    assert!(
        matches!(s.allocate(bad), Err(AllocError::ClassConflict { holder, .. }) if holder == "i")
    );
}

#[test]
fn unhealthy_or_paused_gpus_take_no_new_jobs_but_keep_theirs() {
    let mut s = ClusterState::new(vec![NodeSpec {
        id: 0,
        capacity: Default::default(),
        gpus: vec![gpu(0, 0, None), gpu(1, 0, None)],
    }]);
    start(&mut s, &req("a", 1), Strategy::Pack).unwrap();
    for st in [
        GpuState::Degraded,
        GpuState::Offline,
        GpuState::Draining,
        GpuState::Resetting,
    ] {
        s.set_health(0, 1, health(st, false, None));
        assert!(place(&s, &req("b", 1), Strategy::Pack).is_none(), "{st}");
        assert_eq!(s.free_units(), 0);
        s.verify().unwrap();
    }
    s.set_health(0, 1, health(GpuState::Available, true, None));
    assert!(place(&s, &req("b", 1), Strategy::Pack).is_none(), "paused");
    let p = Placement {
        gpu_milli: 0,
        job: "b".into(),
        units: vec![gref(0, 1, None)],
        memory_mb: MB,
        node: 0,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: WorkloadClass::Training,
    };
    assert!(matches!(
        s.allocate(p),
        Err(AllocError::NotPlaceable { paused: true, .. })
    ));
    s.set_health(0, 0, health(GpuState::Degraded, false, None));
    assert_eq!(s.jobs_on(0, 0), vec!["a".to_string()], "holders stay");
    s.verify().unwrap();
    s.set_health(0, 1, health(GpuState::InUse, false, None));
    assert_eq!(
        idx(&place(&s, &req("b", 1), Strategy::Pack).unwrap()),
        vec![(0, 1, None)]
    );
    s.release("a").unwrap();
    assert_eq!(s.free_units(), 1, "GPU 0 is degraded");
}

#[test]
fn allocate_is_all_or_nothing() {
    let mut s = ClusterState::new(vec![dgx(0, 2)]);
    start(&mut s, &req("a", 1), Strategy::Pack).unwrap();
    let taken = s.placement("a").unwrap().units[0].clone();
    let other = (0..4)
        .map(|i| gref(0, i, None))
        .find(|u| *u != taken)
        .unwrap();
    let p = |units: Vec<GpuRef>| Placement {
        gpu_milli: 0,
        job: "b".into(),
        units,
        memory_mb: MB,
        node: 0,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: WorkloadClass::Training,
    };
    assert!(matches!(
        s.allocate(p(vec![other.clone(), taken])),
        Err(AllocError::Busy { .. })
    ));
    assert!(matches!(
        s.allocate(p(vec![other.clone(), gref(0, 9, None)])),
        Err(AllocError::NoSuchUnit { .. })
    ));
    assert!(matches!(
        s.allocate(p(vec![other.clone(), gref(0, 1, Some(1))])),
        Err(AllocError::NoSuchUnit { .. })
    ));
    assert!(matches!(
        s.allocate(p(vec![other.clone(), other.clone()])),
        Err(AllocError::DuplicateUnit { .. })
    ));
    assert_eq!(s.free_units(), 3, "nothing of the refused gangs was taken");
    assert!(s.jobs_on(other.node, other.index).is_empty());
    let mut dup = s.placement("a").unwrap().clone();
    dup.units = vec![other];
    assert!(matches!(
        s.allocate(dup),
        Err(AllocError::DuplicateJob { .. })
    ));
    s.verify().unwrap();
    let e = s
        .allocate(p(vec![gref(0, 9, None)]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("job b") && e.contains("node 0 GPU 9"), "{e}");
}

#[test]
fn gangs_stay_on_one_numa_node_unless_allowed() {
    let mut s = ClusterState::new(vec![dgx(0, 4)]);
    start(&mut s, &req("a", 2), Strategy::Pack).unwrap();
    assert_eq!(
        idx(s.placement("a").unwrap()),
        vec![(0, 0, None), (0, 1, None)]
    );
    // NUMA 0 has 2 free, NUMA 1 has 4: a 3-gang must go to NUMA 1.
    let b = start(&mut s, &req("b", 3), Strategy::Pack).unwrap();
    assert!(b.units.iter().all(|u| u.index >= 4));
    // 1 + 2 free now: a 3-gang fits only across NUMA nodes.
    assert!(place(&s, &req("c", 3), Strategy::Pack).is_none());
    let mut c = req("c", 3);
    c.allow_cross_numa = true;
    assert_eq!(start(&mut s, &c, Strategy::Pack).unwrap().units.len(), 3);
}

#[test]
fn gangs_span_nodes_only_when_allowed_and_no_node_fits() {
    let mut s = ClusterState::new(vec![dgx(0, 2), dgx(1, 2)]);
    let mut r = req("a", 4);
    r.allow_cross_node = true;
    let a = start(&mut s, &r, Strategy::Topology).unwrap();
    assert!(
        a.units.iter().all(|u| u.node == a.units[0].node),
        "one node fits"
    );
    s.release("a").unwrap();
    let hold = |job: &str, node: u32| Placement {
        gpu_milli: 0,
        job: job.into(),
        units: vec![gref(node, 0, None), gref(node, 1, None)],
        memory_mb: MB,
        node,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: WorkloadClass::Training,
    };
    s.allocate(hold("h0", 0)).unwrap();
    s.allocate(hold("h1", 1)).unwrap();
    let mut b = req("b", 3);
    b.allow_cross_numa = true;
    assert!(
        place(&s, &b, Strategy::Topology).is_none(),
        "2 + 2 free: no node holds 3"
    );
    b.allow_cross_node = true;
    let p = start(&mut s, &b, Strategy::Topology).unwrap();
    assert_eq!(p.units.len(), 3);
    assert!(p.units.iter().any(|u| u.node == 0) && p.units.iter().any(|u| u.node == 1));
    let mut c = req("c", 2);
    c.allow_cross_node = true;
    assert!(place(&s, &c, Strategy::Topology).is_none(), "1 free in all");
    c.gpu_count = 0;
    assert!(start(&mut s, &c, Strategy::Topology)
        .unwrap()
        .units
        .is_empty());
}

#[test]
fn remove_node_drops_its_jobs_whole() {
    let mut s = ClusterState::new(vec![dgx(0, 1), dgx(1, 1)]);
    let mut r = req("a", 4);
    r.allow_cross_node = true;
    start(&mut s, &r, Strategy::Pack).unwrap();
    assert_eq!(s.remove_node(1), vec!["a".to_string()]);
    assert!(s.placement("a").is_none());
    assert_eq!((s.total_units(), s.free_units()), (2, 2));
    s.verify().unwrap();
    s.add_node(dgx(1, 1));
    assert_eq!((s.total_units(), s.free_units()), (4, 4));
    assert!(s.remove_node(7).is_empty());
    s.verify().unwrap();
}
