//! The engine rebuilt after a daemon restart from what the store, the
//! allocation ledger and the job directories say.

mod support;

use joblet_core::gpu::GpuState;
use joblet_core::JobState;
use joblet_engine::{
    Effect, EngineCore, Event, Final, PhaseView, RecoveredJob, Recovery, ShimFact,
};
use joblet_sched::model::{GpuHealth, GpuRef, Placement, Policy};
use support::*;

fn recovered(n: u32, ask: Ask, state: JobState, shim: ShimFact) -> RecoveredJob {
    RecoveredJob {
        submission: submission(n, ask),
        state,
        submitted_at: i64::from(n),
        ended: None,
        shim,
    }
}

fn gpu_placement(n: u32, gpus: &[u32]) -> Placement {
    let req = submission(n, ask_gpus(gpus.len() as u32)).request;
    Placement {
        gpu_milli: 0,
        job: id(n).to_string(),
        node: NODE,
        units: gpus
            .iter()
            .map(|&index| GpuRef {
                node: NODE,
                index,
                mig: None,
            })
            .collect(),
        memory_mb: 40_960,
        sharing: req.sharing,
        class: req.class,
        cpu_millis: 0,
        host_memory_mb: 0,
    }
}

fn recover(
    policy: joblet_sched::model::Policy,
    gpus: u32,
    r: Recovery,
) -> (EngineCore, Vec<Effect>) {
    let mut c = EngineCore::new(config(policy, node(gpus, 16)));
    let effects = c.handle(Event::Recovered(Box::new(r)), 100);
    (c, effects)
}

#[test]
fn a_live_job_keeps_its_gpus_and_a_waiting_job_waits_for_them() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        ask_gpus(2),
        JobState::Running,
        ShimFact::Alive,
    ));
    r.jobs.push(recovered(
        2,
        ask_gpus(1),
        JobState::Queued,
        ShimFact::NotStarted,
    ));
    r.ledger.push((
        submission(1, ask_gpus(2)).request,
        gpu_placement(1, &[0, 1]),
        5,
    ));
    let (c, effects) = recover(Policy::Fifo, 2, r);
    assert_eq!(effects, Vec::new(), "nothing to do: {effects:?}");
    assert!(matches!(c.phase(&id(1)), Some(PhaseView::Running(p)) if p.units.len() == 2));
    assert_eq!(c.phase(&id(2)), Some(PhaseView::Queued));
}

#[test]
fn a_job_that_ended_while_the_daemon_was_down_ends_and_releases() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        ask_gpus(1),
        JobState::Running,
        ShimFact::Exited(exited(0)),
    ));
    r.jobs.push(recovered(
        2,
        ask_gpus(1),
        JobState::Queued,
        ShimFact::NotStarted,
    ));
    r.ledger.push((
        submission(1, ask_gpus(1)).request,
        gpu_placement(1, &[0]),
        5,
    ));
    let (mut c, effects) = recover(Policy::Fifo, 1, r);
    assert_eq!(finish_of(&effects, 1).unwrap().state, JobState::Completed);
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::CheckRelease { job, .. } if *job == id(1))));
    assert_eq!(
        launched(&effects),
        Vec::new(),
        "GPU 0 is still being checked"
    );
    let effects = c.handle(
        Event::ReleaseChecked {
            job: id(1),
            dirty: Vec::new(),
        },
        101,
    );
    assert_eq!(launched(&effects), vec![id(2)]);
}

#[test]
fn a_job_whose_shim_vanished_is_reaped_and_lost() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        Ask::default(),
        JobState::Running,
        ShimFact::Gone,
    ));
    let (c, effects) = recover(Policy::Fifo, 0, r);
    assert_eq!(effects[0], Effect::ReapLost { job: id(1) });
    let fin = finish_of(&effects, 1).unwrap();
    assert!(
        fin.reason.starts_with("lost while daemon was down"),
        "{fin:?}"
    );
    assert_eq!(c.phase(&id(1)), None);
}

/// A kill of the daemon just as a GPU job ends leaves the job COMPLETED
/// in the store and its allocation in the ledger: the restart releases it.
#[test]
fn an_allocation_left_by_a_finished_job_is_released() {
    let mut r = recovery();
    let mut done = recovered(1, ask_gpus(1), JobState::Completed, ShimFact::NotStarted);
    done.ended = Some((
        Final {
            state: JobState::Completed,
            exit_code: Some(0),
            reason: "exited".into(),
        },
        50,
    ));
    r.jobs.push(done);
    r.ledger.push((
        submission(1, ask_gpus(1)).request,
        gpu_placement(1, &[0]),
        5,
    ));
    // And one whose record is gone altogether.
    r.ledger.push((
        submission(2, ask_gpus(1)).request,
        gpu_placement(2, &[1]),
        5,
    ));
    let (mut c, effects) = recover(Policy::Fifo, 2, r);
    let checks: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::CheckRelease { job, .. } => Some(job.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(checks, vec![id(1), id(2)]);
    for n in [1, 2] {
        let effects = c.handle(
            Event::ReleaseChecked {
                job: id(n),
                dirty: Vec::new(),
            },
            101,
        );
        match &effects[0] {
            Effect::Release { job, ended, .. } => {
                assert_eq!(*job, id(n));
                assert_eq!(ended.is_some(), n == 1, "the deleted job's audit says so");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(c.jobs().count(), 0);
    assert_eq!(c.scheduler().cluster().placements().count(), 0);
}

#[test]
fn pending_and_preempted_jobs_are_queued_again() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        Ask::default(),
        JobState::Pending,
        ShimFact::NotStarted,
    ));
    let (_, effects) = recover(Policy::Fifo, 0, r);
    assert_eq!(
        effects[0],
        Effect::Requeue {
            job: id(1),
            at: 100
        }
    );
    assert_eq!(launched(&effects), vec![id(1)]);
}

#[test]
fn a_gpu_job_on_a_node_without_gpus_fails_with_why() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        ask_gpus(1),
        JobState::Queued,
        ShimFact::NotStarted,
    ));
    let (c, effects) = recover(Policy::Fifo, 0, r);
    let fin = finish_of(&effects, 1).unwrap();
    assert!(fin.reason.starts_with("No GPUs available"), "{fin:?}");
    assert_eq!(c.phase(&id(1)), None);
}

#[test]
fn waiting_jobs_are_placed_only_on_gpus_healthy_at_restart() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        ask_gpus(1),
        JobState::Queued,
        ShimFact::NotStarted,
    ));
    r.gpus.push((
        0,
        GpuHealth {
            state: GpuState::Degraded,
            paused: false,
            temperature_c: None,
        },
    ));
    let (_, effects) = recover(Policy::Fifo, 2, r);
    let orders = launches(&effects);
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].placement.units[0].index, 1);
}

#[test]
fn waiting_jobs_keep_their_order() {
    let mut r = recovery();
    for n in 1..=3 {
        r.jobs.push(recovered(
            n,
            ask_gpus(1),
            JobState::Queued,
            ShimFact::NotStarted,
        ));
    }
    let (_, effects) = recover(Policy::Fifo, 2, r);
    assert_eq!(launched(&effects), vec![id(1), id(2)]);
}

/// The daemon died between recording a job's start and handing it to its
/// shim: nothing of it ran, so it is queued again, not lost.
#[test]
fn a_job_no_shim_ever_had_is_queued_again_and_starts() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        ask_gpus(1),
        JobState::Running,
        ShimFact::NeverStarted,
    ));
    r.ledger.push((
        submission(1, ask_gpus(1)).request,
        gpu_placement(1, &[0]),
        5,
    ));
    let (_, effects) = recover(Policy::Fifo, 1, r);
    assert_eq!(
        effects[0],
        Effect::Requeue {
            job: id(1),
            at: 100
        }
    );
    assert!(
        matches!(&effects[1], Effect::Release { job, dirty, ended: Some((f, _)), .. }
            if *job == id(1) && dirty.is_empty() && f.state == JobState::Preempted),
        "{effects:?}"
    );
    assert_eq!(launched(&effects), vec![id(1)]);
    assert!(finish_of(&effects, 1).is_none(), "it never ended");
}

/// Its directory was removed while the daemon was down: nothing of the job
/// can be read; whatever is left of it is reaped and it fails saying why.
#[test]
fn a_running_job_whose_directory_vanished_is_reaped_and_fails_saying_so() {
    let mut r = recovery();
    r.jobs.push(recovered(
        1,
        Ask::default(),
        JobState::Running,
        ShimFact::Vanished,
    ));
    let (_, effects) = recover(Policy::Fifo, 0, r);
    assert_eq!(effects[0], Effect::ReapLost { job: id(1) });
    let fin = finish_of(&effects, 1).unwrap();
    assert_eq!(fin.state, JobState::Failed);
    assert!(fin.reason.contains("job directory was removed"), "{fin:?}");
}
