//! One test per host-capacity rule of the cluster state and placement:
//! every placement takes a job slot, its CPU and its memory on each node it
//! touches; CPU-only placements by strategy; allocate's refusals; restore
//! over a lowered capacity; and what can never be placed.

mod placement_common;

use joblet_sched::cluster::{AllocError, ClusterState, HostLoad};
use joblet_sched::model::{JobRequest, NodeCapacity, NodeSpec, Placement, Strategy, Unplaceable};
use joblet_sched::place::place;
use placement_common::*;

fn limits(mut n: NodeSpec, cpu: Option<u64>, mem: Option<u64>, jobs: Option<u32>) -> NodeSpec {
    n.capacity = NodeCapacity {
        cpu_millis: cpu,
        memory_mb: mem,
        max_jobs: jobs,
    };
    n
}

/// A node without GPUs.
fn cpu_node(id: u32, cpu: Option<u64>, mem: Option<u64>, jobs: Option<u32>) -> NodeSpec {
    limits(
        NodeSpec {
            id,
            gpus: Vec::new(),
            capacity: NodeCapacity::default(),
        },
        cpu,
        mem,
        jobs,
    )
}

fn cpu_job(job: &str, millis: u64, mb: u64) -> JobRequest {
    JobRequest {
        cpu_millis: millis,
        host_memory_mb: mb,
        ..req(job, 0)
    }
}

fn start(s: &mut ClusterState, r: &JobRequest, st: Strategy) -> Option<Placement> {
    let p = place(s, r, st)?;
    s.allocate(p.clone()).expect("place's answer is accepted");
    s.verify().expect("invariants hold");
    Some(p)
}

fn used(s: &ClusterState, node: u32) -> (u64, u64, u32) {
    let h = s.host_used(node).expect("node");
    (h.cpu_millis, h.memory_mb, h.jobs)
}

#[test]
fn cpu_only_placements_take_a_node_and_are_in_the_ledger() {
    let mut s = ClusterState::new(vec![cpu_node(0, None, None, None)]);
    let p = start(&mut s, &cpu_job("a", 1_500, 512), Strategy::Pack).unwrap();
    assert_eq!((p.node, p.units.len()), (0, 0));
    assert_eq!((p.cpu_millis, p.host_memory_mb), (1_500, 512));
    assert_eq!(s.placement("a"), Some(&p));
    assert_eq!(used(&s, 0), (1_500, 512, 1), "untracked, still counted");
    assert_eq!(s.release("a"), Some(p));
    assert_eq!(used(&s, 0), (0, 0, 0));
    s.verify().unwrap();
}

#[test]
fn no_node_is_oversubscribed_in_cpu_memory_or_jobs() {
    let mut s = ClusterState::new(vec![cpu_node(0, Some(4_000), Some(8_192), Some(3))]);
    start(&mut s, &cpu_job("a", 3_000, 0), Strategy::Pack).unwrap();
    assert!(place(&s, &cpu_job("cpu", 1_001, 0), Strategy::Pack).is_none());
    start(&mut s, &cpu_job("b", 1_000, 8_000), Strategy::Pack).unwrap();
    assert!(place(&s, &cpu_job("mem", 0, 193), Strategy::Pack).is_none());
    start(&mut s, &cpu_job("c", 0, 0), Strategy::Pack).unwrap();
    assert!(
        place(&s, &cpu_job("slot", 0, 0), Strategy::Pack).is_none(),
        "3 jobs run"
    );
    assert_eq!(used(&s, 0), (4_000, 8_000, 3));
    s.release("c");
    start(&mut s, &cpu_job("d", 0, 192), Strategy::Pack).unwrap();
}

#[test]
fn gpu_jobs_need_a_job_slot_and_their_cpu_on_every_node_they_touch() {
    let n0 = limits(dgx(0, 2), Some(8_000), None, Some(2));
    let n1 = limits(dgx(1, 2), Some(8_000), None, Some(2));
    let mut s = ClusterState::new(vec![n0, n1]);
    let mut big = JobRequest {
        allow_cross_node: true,
        cpu_millis: 3_000,
        ..req("big", 6)
    };
    big.allow_cross_numa = true;
    let p = start(&mut s, &big, Strategy::Topology).unwrap();
    assert_eq!(p.nodes().collect::<Vec<_>>(), [0, 1]);
    assert_eq!(p.node, p.units[0].node);
    assert_eq!(used(&s, 0), (3_000, 0, 1));
    assert_eq!(used(&s, 1), (3_000, 0, 1));
    // Two GPUs are free but on the nodes' CPU only 5,000 millicores are left.
    let hungry = JobRequest {
        cpu_millis: 6_000,
        allow_cross_numa: true,
        ..req("hungry", 1)
    };
    assert!(place(&s, &hungry, Strategy::Topology).is_none());
    let one = JobRequest {
        cpu_millis: 5_000,
        allow_cross_numa: true,
        ..req("one", 1)
    };
    let p1 = start(&mut s, &one, Strategy::Topology).unwrap();
    // Its node now runs 2 jobs, its limit: the GPU left free there is out
    // of reach even for a job asking no CPU.
    assert_eq!(used(&s, p1.node), (8_000, 0, 2));
    assert_eq!(s.free_units(), 1);
    assert!(place(&s, &req("none", 1), Strategy::Pack).is_none());
    s.release("big");
    assert!(place(&s, &req("some", 1), Strategy::Pack).is_some());
}

#[test]
fn the_free_capacity_index_leaves_out_nodes_without_a_job_slot() {
    // One full-slot node with free GPUs and one open node: every strategy
    // of the fast path (no CPU or memory asked) lands on the open node.
    let full = limits(dgx(0, 2), None, None, Some(1));
    let mut s = ClusterState::new(vec![full, dgx(1, 2)]);
    let pin = Placement {
        gpu_milli: 0,
        job: "pin".into(),
        node: 0,
        units: Vec::new(),
        memory_mb: 0,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: joblet_sched::model::WorkloadClass::Training,
    };
    s.allocate(pin).unwrap();
    for st in [
        Strategy::Pack,
        Strategy::Spread,
        Strategy::BestFit,
        Strategy::Topology,
    ] {
        let p = place(&s, &req("x", 2), st).unwrap();
        assert!(p.units.iter().all(|u| u.node == 1), "{st:?}: {p:?}");
        let mut cross = req("y", 6);
        cross.allow_cross_node = true;
        assert!(place(&s, &cross, st).is_none(), "{st:?}: node 0 is full");
    }
    s.verify().unwrap();
}

#[test]
fn cpu_only_jobs_pack_on_the_busiest_node_and_spread_to_the_emptiest() {
    let nodes = vec![
        cpu_node(0, Some(8_000), None, None),
        cpu_node(1, Some(4_000), None, None),
        cpu_node(2, Some(16_000), None, None),
    ];
    let mut s = ClusterState::new(nodes);
    let on = |s: &ClusterState, r: &JobRequest, st| place(s, r, st).unwrap().node;
    let r = cpu_job("r", 2_000, 0);
    assert_eq!(on(&s, &r, Strategy::Pack), 1, "least CPU left after");
    assert_eq!(on(&s, &r, Strategy::BestFit), 1);
    assert_eq!(on(&s, &r, Strategy::Topology), 1);
    assert_eq!(on(&s, &r, Strategy::Spread), 2, "most CPU left after");
    // Untracked everywhere: pack by running jobs, spread away from them.
    let mut s2 = ClusterState::new(vec![
        cpu_node(0, None, None, None),
        cpu_node(1, None, None, None),
    ]);
    start(&mut s2, &cpu_job("a", 0, 0), Strategy::Pack).unwrap();
    assert_eq!(on(&s2, &cpu_job("b", 0, 0), Strategy::Pack), 0);
    assert_eq!(on(&s2, &cpu_job("b", 0, 0), Strategy::Spread), 1);
    // A node that cannot hold the job is never chosen.
    start(&mut s, &cpu_job("fill", 7_000, 0), Strategy::Pack);
    assert_eq!(used(&s, 0), (7_000, 0, 1));
    assert_eq!(on(&s, &cpu_job("c", 3_000, 0), Strategy::Pack), 1);
    assert_eq!(on(&s, &cpu_job("c", 5_000, 0), Strategy::Pack), 2);
}

#[test]
fn allocate_refuses_what_does_not_fit_naming_node_and_dimension() {
    let mut s = ClusterState::new(vec![cpu_node(0, Some(1_000), None, Some(1))]);
    let p = |job: &str, node: u32, cpu: u64| Placement {
        gpu_milli: 0,
        job: job.into(),
        node,
        units: Vec::new(),
        memory_mb: 0,
        cpu_millis: cpu,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: joblet_sched::model::WorkloadClass::Training,
    };
    let err = s.allocate(p("a", 0, 1_500)).unwrap_err();
    assert_eq!(
        err,
        AllocError::HostFull {
            job: "a".into(),
            node: 0,
            what: "millicores of CPU",
            asked: 1_500,
            left: 1_000
        }
    );
    assert_eq!(
        err.to_string(),
        "job a: node 0 has 1000 millicores of CPU left but 1500 were asked"
    );
    assert!(matches!(
        s.allocate(p("b", 7, 0)),
        Err(AllocError::NoSuchNode { node: 7, .. })
    ));
    s.allocate(p("c", 0, 0)).unwrap();
    assert!(matches!(
        s.allocate(p("d", 0, 0)),
        Err(AllocError::HostFull {
            what: "job slots",
            ..
        })
    ));
    assert_eq!(used(&s, 0), (0, 0, 1), "nothing of the refused ones");
    s.verify().unwrap();
}

#[test]
fn adopt_charges_a_ledger_over_a_lowered_capacity_and_verify_reports_it() {
    let mut s = ClusterState::new(vec![cpu_node(0, Some(2_000), None, Some(1))]);
    let p = |job: &str, cpu: u64| Placement {
        gpu_milli: 0,
        job: job.into(),
        node: 0,
        units: Vec::new(),
        memory_mb: 0,
        cpu_millis: cpu,
        host_memory_mb: 0,
        sharing: joblet_sched::model::Sharing::Exclusive,
        class: joblet_sched::model::WorkloadClass::Training,
    };
    s.adopt(p("a", 1_500)).unwrap();
    s.adopt(p("b", 1_500)).unwrap();
    assert_eq!(used(&s, 0), (3_000, 0, 2));
    let e = s.verify().unwrap_err();
    assert!(e.contains("node 0"), "{e}");
    assert!(place(&s, &cpu_job("c", 0, 0), Strategy::Pack).is_none());
    s.release("a");
    s.release("b");
    s.verify().unwrap();
    assert!(place(&s, &cpu_job("c", 2_000, 0), Strategy::Pack).is_some());
}

#[test]
fn remove_node_returns_its_cpu_only_jobs_too() {
    let mut s = ClusterState::new(vec![cpu_node(0, None, None, None), dgx(1, 1)]);
    start(&mut s, &cpu_job("cpu", 0, 0), Strategy::Spread).unwrap();
    let on = s.placement("cpu").unwrap().node;
    start(&mut s, &req("gpu", 1), Strategy::Pack).unwrap();
    let lost = s.remove_node(on);
    assert!(lost.contains(&"cpu".to_string()), "{lost:?}");
    assert_eq!(s.placement("cpu"), None);
    s.verify().unwrap();
}

#[test]
fn requests_that_can_never_fit_are_named() {
    let s = ClusterState::new(vec![
        limits(dgx(0, 1), Some(8_000), Some(24_576), None),
        cpu_node(1, Some(32_000), Some(16_384), Some(4)),
    ]);
    let ask = |r: &JobRequest| s.check_ever_placeable(r);
    let err = ask(&cpu_job("mem", 0, 32_768)).unwrap_err();
    assert_eq!(
        err,
        Unplaceable::TooMuchHostMemory {
            asked_mb: 32_768,
            largest_mb: 24_576
        }
    );
    assert_eq!(
        err.to_string(),
        "asks for 32768 MiB of memory but the largest node offers 24576 MiB"
    );
    let err = ask(&cpu_job("cpu", 40_000, 0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "asks for 40000 millicores of CPU but the largest node offers 32000"
    );
    assert_eq!(ask(&cpu_job("ok", 32_000, 0)), Ok(()));
    assert_eq!(ask(&cpu_job("ok", 0, 24_576)), Ok(()));
    // Each fits some node, but no node offers both.
    assert_eq!(
        ask(&cpu_job("both", 16_000, 20_000)),
        Err(Unplaceable::NoNodeOffersAll {
            gpus: 0,
            cpu_millis: 16_000,
            memory_mb: 20_000
        })
    );
    // GPUs on node 0, the CPU only on node 1.
    let gpu_cpu = JobRequest {
        cpu_millis: 16_000,
        ..req("g", 1)
    };
    let err = ask(&gpu_cpu).unwrap_err();
    assert!(matches!(err, Unplaceable::NoNodeOffersAll { gpus: 1, .. }));
    assert!(
        err.to_string().contains("which no node offers together"),
        "{err}"
    );
    // The GPU checks come first and keep their words.
    assert_eq!(
        ask(&req("many", 3)),
        Err(Unplaceable::LargerThanCluster { asked: 3, total: 2 })
    );
    // A node whose limit of running jobs is 0 runs nothing.
    let closed = ClusterState::new(vec![cpu_node(0, None, None, Some(0))]);
    assert_eq!(
        closed.check_ever_placeable(&cpu_job("x", 0, 0)),
        Err(Unplaceable::NoJobSlots)
    );
    let empty = ClusterState::new(Vec::new());
    assert_eq!(
        empty.check_ever_placeable(&cpu_job("x", 0, 0)),
        Err(Unplaceable::NoJobSlots)
    );
    assert_eq!(
        HostLoad::of_request(&cpu_job("x", 5, 6)),
        HostLoad {
            cpu_millis: 5,
            memory_mb: 6,
            jobs: 1
        }
    );
}

#[test]
fn records_written_before_capacity_existed_read_back_without_any() {
    // The daemon's store keeps requests and placements as JSON.
    let placement: Placement = serde_json::from_str(
        r#"{"job":"j","units":[{"node":0,"index":1,"mig":null}],"memory_mb":0,"sharing":"exclusive","class":"training"}"#,
    )
    .unwrap();
    assert_eq!(
        (
            placement.node,
            placement.cpu_millis,
            placement.host_memory_mb
        ),
        (0, 0, 0)
    );
    let r = req("j", 1);
    let mut old = serde_json::to_value(&r).unwrap();
    let fields = old.as_object_mut().unwrap();
    fields.remove("cpu_millis");
    fields.remove("host_memory_mb");
    assert_eq!(serde_json::from_value::<JobRequest>(old).unwrap(), r);
    let spec: NodeSpec = serde_json::from_str(r#"{"id":3,"gpus":[]}"#).unwrap();
    assert_eq!(spec.capacity, NodeCapacity::default());
}
