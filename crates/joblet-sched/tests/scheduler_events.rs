//! Events other than submit/exit: GPU health, nodes, cancel, rejects, the
//! fragmentation metric, and restore from the ledger.

mod scheduler_support;

use joblet_core::gpu::GpuState;
use joblet_sched::model::{Event, GpuHealth, Placement, Policy};
use joblet_sched::scheduler::Scheduler;
use scheduler_support::*;

fn health(state: GpuState, paused: bool) -> Event {
    Event::GpuChanged {
        node: 0,
        index: 0,
        health: GpuHealth {
            state,
            paused,
            temperature_c: None,
        },
    }
}

fn sorted_placements(s: &Scheduler) -> Vec<Placement> {
    let mut v: Vec<Placement> = s.cluster().placements().cloned().collect();
    v.sort_by(|a, b| a.job.cmp(&b.job));
    v
}

#[test]
fn no_start_on_a_closed_gpu_and_its_jobs_are_not_preempted() {
    for (state, paused) in [
        (GpuState::Degraded, false),
        (GpuState::Offline, false),
        (GpuState::Draining, false),
        (GpuState::Available, true),
    ] {
        let mut s = Scheduler::new(config(Policy::Las), vec![node(0, 2)]);
        let mut a = req("a", 1);
        a.preemptible = true;
        submit(&mut s, a, 0);
        let gpu0 = s.cluster().placement("a").unwrap().units[0].index;
        let ev = match health(state, paused) {
            Event::GpuChanged { node, health, .. } => Event::GpuChanged {
                node,
                index: gpu0,
                health,
            },
            e => e,
        };
        assert!(
            s.handle(ev, 1).is_empty(),
            "{state:?}: nothing is preempted"
        );
        assert!(started(&submit(&mut s, req("two", 2), 2)).is_empty());
        assert!(preempted(&s.handle(Event::Tick, 1_000_000)).is_empty());
        exit(&mut s, "a", 2_000_000);
        assert!(
            started(&s.handle(Event::Tick, 2_000_001)).is_empty(),
            "{state:?}"
        );
        let back = Event::GpuChanged {
            node: 0,
            index: gpu0,
            health: GpuHealth {
                state: GpuState::Available,
                paused: false,
                temperature_c: None,
            },
        };
        assert_eq!(started(&s.handle(back, 2_000_002)), ["two"]);
    }
}

#[test]
fn node_removed_requeues_preemptible_jobs_and_rejects_the_others() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 2), node(1, 2)]);
    let mut p = req("p", 2);
    p.preemptible = true;
    submit(&mut s, p, 0);
    submit(&mut s, req("fixed", 2), 0);
    let on0 = s.cluster().placement("p").unwrap().units[0].node;
    let a = s.handle(Event::NodeRemoved(on0), 10);
    assert_eq!(preempted(&a), ["p"]);
    assert!(rejected(&a).is_empty());
    assert_eq!(s.cluster().placement("p"), None);
    // The requeued job waits for the node to come back.
    assert!(started(&exit(&mut s, "p", 20)).is_empty());
    assert_eq!(s.waiting(), 1);
    assert_eq!(
        started(&s.handle(Event::NodeAdded(node(on0, 2)), 30)),
        ["p"]
    );
    let on = s.cluster().placement("fixed").unwrap().units[0].node;
    let a = s.handle(Event::NodeRemoved(on), 40);
    assert_eq!(
        rejected(&a),
        [("fixed".to_string(), format!("node {on} removed"))]
    );
    assert!(exit(&mut s, "fixed", 50).is_empty());
    s.cluster().verify().unwrap();
}

#[test]
fn cancel_removes_waiting_jobs_and_waits_for_running_ones() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 1)]);
    let mut a = req("a", 1);
    a.preemptible = true;
    submit(&mut s, a, 0);
    submit(&mut s, req("b", 1), 0);
    submit(&mut s, req("c", 1), 0);
    assert!(s.handle(Event::Cancel("b".into()), 1).is_empty());
    assert_eq!(s.waiting(), 1);
    assert!(s.handle(Event::Cancel("a".into()), 2).is_empty());
    assert_eq!(
        s.cluster().free_units(),
        0,
        "a holds its GPU until it exits"
    );
    assert_eq!(started(&exit(&mut s, "a", 3)), ["c"]);
    assert_eq!(s.waiting(), 0);
}

#[test]
fn unplaceable_requests_are_rejected_and_duplicates_ignored() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 4), node(1, 4)]);
    let r = rejected(&submit(&mut s, req("big", 5), 0));
    assert_eq!(r[0].0, "big");
    assert!(r[0].1.contains("largest node has 4"), "{}", r[0].1);
    let mut huge = req("huge", 9);
    huge.allow_cross_node = true;
    assert!(rejected(&submit(&mut s, huge, 0))[0]
        .1
        .contains("cluster has 8"));
    assert_eq!(started(&submit(&mut s, req("a", 4), 0)), ["a"]);
    assert!(
        submit(&mut s, req("a", 1), 0).is_empty(),
        "duplicate key ignored"
    );
    assert_eq!(s.running(), 1);
}

#[test]
fn fragmentation_counts_free_units_the_smallest_gang_cannot_use() {
    let mut s = Scheduler::new(config(Policy::Fifo), vec![node(0, 4), node(1, 4)]);
    assert_eq!(s.fragmentation(), 0);
    submit(&mut s, req("a", 3), 0);
    submit(&mut s, req("b", 3), 0);
    assert!(started(&submit(&mut s, req("c", 2), 0)).is_empty());
    assert_eq!(s.fragmentation(), 2, "one free GPU on each node");
}

#[test]
fn restore_re_derives_the_same_allocations() {
    let mut s = Scheduler::new(config(Policy::Las), vec![node(0, 4), node(1, 4)]);
    let mut reqs = std::collections::BTreeMap::new();
    let mut starts = std::collections::BTreeMap::new();
    for (i, g) in [1u32, 2, 3, 1, 4, 2, 2, 0].into_iter().enumerate() {
        let mut r = req(&format!("j{i}"), g);
        r.preemptible = i % 2 == 0;
        reqs.insert(r.job.clone(), (r.clone(), i as i64));
        for job in started(&submit(&mut s, r, i as i64)) {
            starts.insert(job, i as i64);
        }
    }
    starts.remove("j1");
    for job in started(&exit(&mut s, "j1", 100)) {
        starts.insert(job, 100);
    }
    assert!(starts.contains_key("j5"), "j5 took j1's GPUs");
    let running: Vec<_> = starts
        .iter()
        .map(|(job, t)| {
            let p = s
                .cluster()
                .placement(job)
                .cloned()
                .expect("every running job, CPU-only too, is in the ledger");
            (reqs[job].0.clone(), p, *t)
        })
        .collect();
    let waiting: Vec<_> = s
        .waiting_jobs()
        .map(|r| (r.clone(), reqs[&r.job].1))
        .collect();
    let restored = Scheduler::restore(
        config(Policy::Las),
        vec![node(0, 4), node(1, 4)],
        running,
        waiting,
    )
    .unwrap();
    restored.cluster().verify().unwrap();
    assert_eq!(sorted_placements(&restored), sorted_placements(&s));
    assert_eq!(
        (restored.running(), restored.waiting()),
        (s.running(), s.waiting())
    );

    // A ledger that oversubscribes is refused, naming the job.
    let p = s.cluster().placements().next().unwrap().clone();
    let mut twin = p.clone();
    twin.job = "twin".into();
    let r = reqs[&p.job].0.clone();
    let mut rt = r.clone();
    rt.job = "twin".into();
    let err = Scheduler::restore(
        config(Policy::Las),
        vec![node(0, 4), node(1, 4)],
        vec![(r, p, 0), (rt, twin, 0)],
        vec![],
    )
    .unwrap_err();
    assert!(err.to_string().contains("twin"), "{err}");
}

#[test]
fn a_drained_node_takes_no_new_job_and_its_running_ones_keep_their_gpus() {
    for policy in [Policy::Fifo, Policy::Backfill, Policy::Las] {
        let mut s = Scheduler::new(config(policy), vec![node(0, 8), node(1, 8)]);
        let a = submit(&mut s, req("a", 2), 0);
        assert_eq!(started(&a), ["a"]);
        let on = |s: &Scheduler, j: &str| s.cluster().placement(j).map(|p| p.node);
        let first = on(&s, "a").unwrap();
        let other = 1 - first;
        let _ = s.handle(
            Event::NodeDrained {
                node: first,
                drained: true,
            },
            1,
        );
        for (i, j) in ["b", "c", "d", "e"].into_iter().enumerate() {
            let acts = submit(&mut s, req(j, 2), 2 + i as i64);
            assert_eq!(started(&acts), [j], "{policy:?}: {j}");
            assert_eq!(
                on(&s, j),
                Some(other),
                "{policy:?}: {j} placed on the drained node"
            );
        }
        // Full but for the drained node: the next one waits.
        assert_eq!(
            started(&submit(&mut s, req("f", 2), 10)),
            Vec::<String>::new()
        );
        assert_eq!(on(&s, "a"), Some(first), "a keeps its GPUs");
        // Undrained: it starts there.
        let acts = s.handle(
            Event::NodeDrained {
                node: first,
                drained: false,
            },
            11,
        );
        assert_eq!(started(&acts), ["f"], "{policy:?}");
        assert_eq!(on(&s, "f"), Some(first));
    }
}
