//! Strategy choices (topology tiers, pack, spread, best fit, thermal ties),
//! `check_ever_placeable`'s reasons and the fragmentation metric.

mod placement_common;

use joblet_core::gpu::GpuState;
use joblet_sched::cluster::ClusterState;
use joblet_sched::model::{
    GpuRef, JobRequest, NodeSpec, Placement, Sharing, Strategy, Unplaceable, WorkloadClass,
};
use joblet_sched::place::place;
use placement_common::*;

fn hold(s: &mut ClusterState, job: &str, node: u32, gpus: &[u32]) {
    s.allocate(Placement {
        gpu_milli: 0,
        job: job.into(),
        units: gpus
            .iter()
            .map(|i| GpuRef {
                node,
                index: *i,
                mig: None,
            })
            .collect(),
        memory_mb: MB,
        node,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: Sharing::Exclusive,
        class: WorkloadClass::Training,
    })
    .unwrap();
}

fn at(s: &ClusterState, r: &JobRequest, st: Strategy) -> Vec<(u32, u32)> {
    place(s, r, st)
        .map(|p| p.units.iter().map(|u| (u.node, u.index)).collect())
        .unwrap_or_default()
}

fn cross(job: &str, n: u32) -> JobRequest {
    JobRequest {
        allow_cross_numa: true,
        ..req(job, n)
    }
}

#[test]
fn topology_prefers_an_nvlink_group_inside_one_numa_node() {
    let gpus = vec![
        gpu(0, 0, None),
        gpu(1, 0, None),
        gpu(2, 0, Some(7)),
        gpu(3, 0, Some(7)),
    ];
    let s = ClusterState::new(vec![NodeSpec {
        id: 0,
        gpus,
        capacity: Default::default(),
    }]);
    assert_eq!(
        at(&s, &req("a", 2), Strategy::Topology),
        vec![(0, 2), (0, 3)]
    );
}

#[test]
fn topology_prefers_nvlink_across_numa_then_one_numa_node() {
    let gpus = vec![
        gpu(0, 0, None),
        gpu(1, 0, Some(5)),
        gpu(2, 1, Some(5)),
        gpu(3, 1, None),
    ];
    let s = ClusterState::new(vec![NodeSpec {
        id: 0,
        gpus,
        capacity: Default::default(),
    }]);
    assert_eq!(
        at(&s, &cross("a", 2), Strategy::Topology),
        vec![(0, 1), (0, 2)]
    );
    assert_eq!(
        at(&s, &req("a", 2), Strategy::Topology),
        vec![(0, 0), (0, 1)]
    );
}

#[test]
fn topology_prefers_one_numa_node_then_one_socket() {
    let mut gpus: Vec<_> = (0..4).map(|i| gpu(i, i, None)).collect();
    for g in &mut gpus {
        g.socket = g.numa / 2;
    }
    let mut s = ClusterState::new(vec![NodeSpec {
        id: 0,
        gpus,
        capacity: Default::default(),
    }]);
    assert_eq!(
        at(&s, &cross("a", 2), Strategy::Topology),
        vec![(0, 0), (0, 1)]
    );
    hold(&mut s, "x", 0, &[1]);
    assert_eq!(
        at(&s, &cross("a", 2), Strategy::Topology),
        vec![(0, 2), (0, 3)]
    );
    assert!(at(&s, &req("a", 2), Strategy::Topology).is_empty());
    let s = ClusterState::new(vec![pcie(0, 2)]);
    assert_eq!(
        at(&s, &cross("a", 2), Strategy::Topology),
        vec![(0, 0), (0, 1)]
    );
}

#[test]
fn topology_ties_go_to_the_tightest_place_then_the_busiest_node() {
    let mut s = ClusterState::new(vec![dgx(0, 4), dgx(1, 4)]);
    hold(&mut s, "x", 1, &[0]);
    assert_eq!(at(&s, &req("a", 1), Strategy::Topology), vec![(1, 1)]);
    // NUMA 0 of node 0 and NUMA 1 of node 1 both have 4 free: node 1 is busier.
    assert_eq!(
        at(&s, &req("a", 4), Strategy::Topology),
        vec![(1, 4), (1, 5), (1, 6), (1, 7)]
    );
}

#[test]
fn thermal_ties_pick_the_coolest_place_and_gpu() {
    let mut s = ClusterState::new(vec![dgx(0, 2), dgx(1, 2)]);
    for i in 0..4 {
        s.set_health(0, i, health(GpuState::Available, false, Some(80)));
        s.set_health(1, i, health(GpuState::Available, false, Some(40)));
    }
    s.set_health(1, 0, health(GpuState::Available, false, Some(60)));
    for st in [
        Strategy::Topology,
        Strategy::Pack,
        Strategy::Spread,
        Strategy::BestFit,
    ] {
        // Node 1's NUMA 1 is coolest (hottest GPU 40 °C).
        assert_eq!(at(&s, &req("a", 1), st), vec![(1, 2)], "{st:?}");
        assert_eq!(at(&s, &cross("a", 1), st), vec![(1, 2)], "{st:?}");
    }
    s.verify().unwrap();
}

#[test]
fn pack_fills_the_busiest_node_and_spread_the_emptiest() {
    let mut s = ClusterState::new(vec![dgx(0, 4), dgx(1, 4), dgx(2, 4)]);
    hold(&mut s, "x", 1, &[0, 1]);
    hold(&mut s, "y", 2, &[0]);
    assert_eq!(at(&s, &req("a", 1), Strategy::Pack), vec![(1, 2)]);
    assert_eq!(at(&s, &req("a", 1), Strategy::Spread), vec![(0, 0)]);
    let mut spread = Vec::new();
    for j in 0..6 {
        let p = place(&s, &req(&format!("s{j}"), 1), Strategy::Spread).unwrap();
        spread.push(p.units[0].node);
        s.allocate(p).unwrap();
    }
    // Free per NUMA node (4,4) (2,4) (3,4): the emptiest NUMA node goes
    // first, ties to the emptiest node, so the levels even out.
    assert_eq!(spread, vec![0, 0, 2, 1, 0, 2]);
    s.verify().unwrap();
}

#[test]
fn best_fit_takes_the_tightest_domain_where_pack_takes_the_busiest_node() {
    let mut s = ClusterState::new(vec![dgx(0, 4), dgx(1, 4)]);
    hold(&mut s, "x", 0, &[0, 1, 2]); // node 0: 1 + 4 free
    hold(&mut s, "y", 1, &[0, 4]); // node 1: 3 + 3 free
    assert_eq!(
        at(&s, &cross("a", 3), Strategy::Pack),
        vec![(0, 4), (0, 5), (0, 6)]
    );
    assert_eq!(
        at(&s, &cross("a", 3), Strategy::BestFit),
        vec![(1, 1), (1, 2), (1, 3)]
    );
    assert_eq!(
        at(&s, &cross("a", 3), Strategy::Topology),
        vec![(1, 1), (1, 2), (1, 3)]
    );
    assert_eq!(
        at(&s, &cross("a", 3), Strategy::Spread),
        vec![(1, 1), (1, 2), (1, 3)]
    );
}

#[test]
fn shared_pack_fills_used_gpus_and_spread_prefers_empty_ones() {
    let mut s = ClusterState::new(vec![dgx(0, 2)]);
    let first = place(
        &s,
        &shared("a", 1, 1_000, WorkloadClass::Inference),
        Strategy::Pack,
    )
    .unwrap();
    s.allocate(first.clone()).unwrap();
    let r = shared("b", 1, 1_000, WorkloadClass::Inference);
    assert_eq!(place(&s, &r, Strategy::Pack).unwrap().units, first.units);
    assert_ne!(place(&s, &r, Strategy::Spread).unwrap().units, first.units);
}

#[test]
fn check_ever_placeable_names_each_reason() {
    let mut g = mig(gpu(1, 0, None), &[(1, "1g.10gb", 10_000)]);
    g.compute_capability = (9, 0);
    let s = ClusterState::new(vec![
        NodeSpec {
            id: 0,
            capacity: Default::default(),
            gpus: vec![gpu(0, 0, None), g, gpu(2, 1, None)],
        },
        NodeSpec {
            id: 1,
            capacity: Default::default(),
            gpus: vec![gpu(0, 0, None)],
        },
    ]);
    let ok = |r: JobRequest| s.check_ever_placeable(&r);
    assert_eq!(ok(req("a", 1)), Ok(()));
    assert_eq!(ok(req("a", 0)), Ok(()));
    let r = JobRequest {
        mig_profile: Some("2g.20gb".into()),
        ..req("a", 1)
    };
    assert_eq!(ok(r), Err(Unplaceable::NoSuchMigProfile("2g.20gb".into())));
    let r = JobRequest {
        min_compute_capability: Some((9, 0)),
        ..req("a", 1)
    };
    assert_eq!(
        ok(r.clone()),
        Err(Unplaceable::ComputeCapability {
            need: (9, 0),
            best: (8, 0)
        })
    );
    assert_eq!(
        ok(JobRequest {
            mig_profile: Some("1g.10gb".into()),
            ..r
        }),
        Ok(())
    );
    let r = JobRequest {
        gpu_memory_mb: MB + 1,
        ..req("a", 1)
    };
    assert_eq!(
        ok(r),
        Err(Unplaceable::TooMuchMemory {
            asked_mb: MB + 1,
            largest_mb: MB
        })
    );
    let r = JobRequest {
        allow_cross_node: true,
        ..req("a", 4)
    };
    assert_eq!(
        ok(r),
        Err(Unplaceable::LargerThanCluster { asked: 4, total: 3 })
    );
    assert_eq!(
        ok(JobRequest {
            allow_cross_node: true,
            ..req("a", 3)
        }),
        Ok(())
    );
    assert_eq!(
        ok(cross("a", 3)),
        Err(Unplaceable::LargerThanNode {
            asked: 3,
            largest: 2
        })
    );
    assert_eq!(ok(cross("a", 2)), Ok(()));
    assert_eq!(
        ok(req("a", 2)),
        Err(Unplaceable::LargerThanNuma {
            asked: 2,
            largest: 1
        })
    );
    let msg = ok(req("a", 2)).unwrap_err().to_string();
    assert!(msg.contains("NUMA"), "{msg}");
}

#[test]
fn fragmentation_counts_free_gpus_a_gang_cannot_use() {
    let mut s = ClusterState::new(vec![dgx(0, 4), dgx(1, 4)]);
    hold(&mut s, "x", 0, &[0]);
    hold(&mut s, "y", 1, &[0, 1, 2, 4, 5, 6]);
    assert_eq!(s.fragmentation(0), 0);
    assert_eq!(s.fragmentation(1), 0);
    // Gang of 2: node 1's NUMA nodes have 1 free each.
    assert_eq!(s.fragmentation(2), 2);
    // Gang of 4: node 0's NUMA 0 (3 free) and node 1's two.
    assert_eq!(s.fragmentation(4), 5);
    // Gang of 8 needs a whole node: node 0 has 7 free, node 1 has 2.
    assert_eq!(s.fragmentation(8), 9);
    // Larger than any node: spans nodes anyway.
    assert_eq!(s.fragmentation(9), 0);
    s.set_health(0, 4, health(GpuState::Offline, false, None));
    assert_eq!(s.fragmentation(4), 3 + 3 + 2);
}
