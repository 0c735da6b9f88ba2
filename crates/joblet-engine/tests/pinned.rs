//! Cluster mode: a job the cluster's leader placed here starts on exactly
//! that placement, waits while a local job winding down still holds it,
//! and is refused (FAILED, saying why) when the placement can never be had.

mod support;

use joblet_core::JobState;
use joblet_engine::{Effect, Event};
use joblet_sched::model::{GpuRef, Placement, Policy, Sharing, WorkloadClass};
use support::*;

fn pinned(n: u32, units: &[u32]) -> joblet_engine::Submission {
    let mut s = submission(n, ask_gpus(units.len() as u32));
    s.pinned = Some(Placement {
        gpu_milli: 0,
        job: id(n).to_string(),
        node: 0,
        units: units
            .iter()
            .map(|&index| GpuRef {
                node: 0,
                index,
                mig: None,
            })
            .collect(),
        memory_mb: 40_960,
        cpu_millis: 0,
        host_memory_mb: 0,
        sharing: Sharing::Exclusive,
        class: WorkloadClass::Training,
    });
    s
}

#[test]
fn a_pinned_job_starts_on_the_leaders_gpus_and_waits_for_a_local_job_winding_down() {
    let mut c = core(Policy::Fifo, node(4, 8));
    // The local scheduler would pick GPU 0; the leader chose 2 and 3.
    let e = c.handle(Event::Submitted(Box::new(pinned(1, &[2, 3]))), 10);
    let orders = launches(&e);
    assert_eq!(orders.len(), 1, "{e:?}");
    let units: Vec<u32> = orders[0].placement.units.iter().map(|u| u.index).collect();
    assert_eq!(units, vec![2, 3]);
    assert_eq!(c.handle(Event::Started { job: id(1) }, 11), Vec::new());
    // Job 1 ends; its GPUs are checked before release. The leader already
    // placed job 2 on GPU 3: it waits for the release.
    let e = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(0),
        },
        20,
    );
    assert!(finish_of(&e, 1).is_some());
    let e = c.handle(Event::Submitted(Box::new(pinned(2, &[3]))), 21);
    assert_eq!(launched(&e), Vec::new(), "{e:?}");
    assert_eq!(c.pinned_waiting(), 1);
    let e = c.handle(
        Event::ReleaseChecked {
            job: id(1),
            dirty: Vec::new(),
        },
        30,
    );
    assert_eq!(launched(&e), vec![id(2)], "{e:?}");
    assert_eq!(c.pinned_waiting(), 0);
}

#[test]
fn a_placement_this_node_can_never_give_is_refused_with_the_reason() {
    let mut c = core(Policy::Fifo, node(2, 8));
    let e = c.handle(Event::Submitted(Box::new(pinned(1, &[5]))), 10);
    assert_eq!(launched(&e), Vec::new());
    let fin = finish_of(&e, 1).expect("refused at once");
    assert_eq!(fin.state, JobState::Failed);
    assert!(
        fin.reason
            .starts_with("this node refused the placement the cluster's leader chose:"),
        "{}",
        fin.reason
    );
    assert!(!e.iter().any(|x| matches!(x, Effect::Launch(_))));
}

#[test]
fn a_pinned_job_stopped_while_it_waits_never_starts() {
    let mut c = core(Policy::Fifo, node(2, 8));
    let _ = c.handle(Event::Submitted(Box::new(pinned(1, &[0]))), 10);
    let _ = c.handle(Event::Started { job: id(1) }, 11);
    let e = c.handle(Event::Submitted(Box::new(pinned(2, &[0]))), 12);
    assert_eq!(launched(&e), Vec::new());
    let e = stop(&mut c, 2, JobState::Queued, 7, 13);
    assert!(finish_of(&e, 2).is_some(), "{e:?}");
    let e = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(0),
        },
        20,
    );
    let e2 = c.handle(
        Event::ReleaseChecked {
            job: id(1),
            dirty: Vec::new(),
        },
        30,
    );
    assert_eq!(launched(&e), Vec::new());
    assert_eq!(launched(&e2), Vec::new());
    assert_eq!(c.pinned_waiting(), 0);
}
