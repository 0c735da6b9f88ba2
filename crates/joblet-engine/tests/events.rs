//! The engine core, one event at a time: what each event does to a job and
//! which effects it asks for.

mod support;

use joblet_core::gpu::GpuState;
use joblet_core::JobState;
use joblet_engine::{
    Answer, DirtyGpu, Effect, Event, Exit, Final, PhaseView, Refusal, StopHow, Ticket,
};
use joblet_sched::model::{GpuHealth, Policy};
use support::*;

#[test]
fn a_cpu_job_is_placed_on_the_node_and_launched_once() {
    let mut c = core(Policy::Fifo, node(0, 4));
    let effects = submit(
        &mut c,
        1,
        Ask {
            cpu_millis: 1500,
            memory_mb: 1024,
            ..Ask::default()
        },
        10,
    );
    let orders = launches(&effects);
    assert_eq!(orders.len(), 1, "{effects:?}");
    let o = orders[0];
    assert_eq!(o.job, id(1));
    assert_eq!(o.placement.node, NODE);
    assert!(o.placement.units.is_empty());
    assert_eq!(
        (o.placement.cpu_millis, o.placement.host_memory_mb),
        (1500, 1024)
    );
    assert_eq!(o.stop_grace_ms, 10_000);
    assert!(matches!(c.phase(&id(1)), Some(PhaseView::Starting(_))));
    assert_eq!(c.handle(Event::Started { job: id(1) }, 11), Vec::new());
    assert!(matches!(c.phase(&id(1)), Some(PhaseView::Running(_))));
}

#[test]
fn max_running_holds_every_job_and_an_exit_starts_the_next() {
    let mut c = core(Policy::Fifo, node(2, 2));
    run(&mut c, 1, Ask::default(), 0);
    run(&mut c, 2, ask_gpus(1), 0);
    let effects = submit(&mut c, 3, Ask::default(), 1);
    assert_eq!(launched(&effects), Vec::new(), "no slot left: {effects:?}");
    assert_eq!(c.phase(&id(3)), Some(PhaseView::Queued));
    // The CPU job ends: its slot goes back with its end, in one step.
    let effects = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(0),
        },
        2,
    );
    match &effects[0] {
        Effect::Finish {
            job, fin, release, ..
        } => {
            assert_eq!(*job, id(1));
            assert_eq!(fin.state, JobState::Completed);
            assert!(
                release.is_some(),
                "a CPU job's allocation goes with its end"
            );
        }
        other => panic!("expected the finish first, got {other:?}"),
    }
    assert_eq!(launched(&effects), vec![id(3)]);
    assert_eq!(c.phase(&id(1)), None);
}

#[test]
fn memory_beyond_the_node_is_refused_before_it_is_recorded() {
    let c = core(Policy::Backfill, node(0, 4));
    let big = submission(
        1,
        Ask {
            memory_mb: 32_768,
            ..Ask::default()
        },
    );
    let why = c
        .never_placeable(&big.request)
        .expect("32 GiB on an 8 GiB node");
    assert!(why.to_string().contains("32768"), "{why}");
    assert_eq!(
        c.never_placeable(&submission(2, Ask::default()).request),
        None
    );
}

/// The bug this engine was built for: stopping the queued head job must
/// start the job behind it, and that start must be launched.
#[test]
fn stopping_the_queued_head_starts_the_job_behind_it() {
    for how in ["stop", "kill", "delete"] {
        let mut c = core(Policy::Fifo, node(8, 16));
        run(&mut c, 1, ask_gpus(4), 0);
        assert_eq!(launched(&submit(&mut c, 2, ask_gpus(8), 1)), Vec::new());
        assert_eq!(launched(&submit(&mut c, 3, ask_gpus(1), 2)), Vec::new());
        let effects = match how {
            "stop" => stop(&mut c, 2, JobState::Queued, 7, 3),
            "kill" => c.handle(
                Event::Stop {
                    job: id(2),
                    how: StopHow::Kill,
                    stored: JobState::Queued,
                    ticket: Ticket(7),
                },
                3,
            ),
            _ => c.handle(
                Event::Delete {
                    job: id(2),
                    stored: JobState::Queued,
                    ticket: Ticket(7),
                },
                3,
            ),
        };
        let fin = finish_of(&effects, 2).expect("the stopped job's end is recorded");
        assert_eq!(fin.state, JobState::Stopped, "{how}");
        assert_eq!(launched(&effects), vec![id(3)], "{how}: {effects:?}");
        if how == "delete" {
            assert!(effects.contains(&Effect::Delete {
                job: id(2),
                ticket: Ticket(7)
            }));
        } else {
            assert_eq!(answer_of(&effects, 7), Some(&Answer::Done));
        }
        assert_eq!(c.phase(&id(2)), None);
    }
}

#[test]
fn stopping_a_queued_job_that_is_not_the_head_keeps_the_queue_going() {
    let mut c = core(Policy::Fifo, node(0, 1));
    run(&mut c, 1, Ask::default(), 0);
    for n in 2..=4 {
        let _ = submit(&mut c, n, Ask::default(), i64::from(n));
    }
    let effects = stop(&mut c, 3, JobState::Queued, 1, 5);
    assert_eq!(
        finish_of(&effects, 3).unwrap().reason,
        "stopped before it started"
    );
    assert_eq!(launched(&effects), Vec::new(), "job 1 still holds the slot");
    let effects = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(0),
        },
        6,
    );
    assert_eq!(launched(&effects), vec![id(2)]);
}

#[test]
fn a_gpu_jobs_gpus_come_back_only_after_their_release_check() {
    let mut c = core(Policy::Fifo, node(2, 8));
    let order = run(&mut c, 1, ask_gpus(2), 0);
    assert_eq!(order.placement.units.len(), 2);
    let _ = submit(&mut c, 2, ask_gpus(1), 1);
    let effects = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(3),
        },
        2,
    );
    assert!(
        matches!(
            &effects[..],
            [Effect::Finish { release: None, fin, .. }, Effect::CheckRelease { .. }]
                if fin.state == JobState::Failed && fin.exit_code == Some(3)
        ),
        "{effects:?}"
    );
    assert!(matches!(c.phase(&id(1)), Some(PhaseView::Releasing(_))));
    // GPU 0 failed its check: quarantined, so job 2 gets GPU 1.
    let effects = c.handle(
        Event::ReleaseChecked {
            job: id(1),
            dirty: vec![DirtyGpu {
                index: 0,
                uuid: "GPU-0000".into(),
                why: "memory still in use".into(),
            }],
        },
        3,
    );
    assert!(
        matches!(&effects[0], Effect::Release { dirty, ended: Some(_), .. } if dirty.len() == 1)
    );
    let orders = launches(&effects);
    assert_eq!(orders.len(), 1, "{effects:?}");
    assert_eq!(orders[0].placement.units[0].index, 1);
    assert_eq!(c.phase(&id(1)), None);
}

#[test]
fn a_stop_asked_while_starting_is_sent_once_the_job_runs() {
    let mut c = core(Policy::Fifo, node(0, 4));
    let _ = submit(&mut c, 1, Ask::default(), 0);
    assert_eq!(stop(&mut c, 1, JobState::Running, 9, 1), Vec::new());
    let effects = c.handle(Event::Started { job: id(1) }, 2);
    assert_eq!(
        effects,
        vec![Effect::Signal {
            job: id(1),
            how: StopHow::Stop { grace_ms: 5_000 },
            ticket: Some(Ticket(9)),
        }]
    );
}

#[test]
fn a_start_that_fails_ends_the_job_and_answers_its_stops() {
    let mut c = core(Policy::Fifo, node(1, 4));
    let _ = submit(&mut c, 1, ask_gpus(1), 0);
    let _ = stop(&mut c, 1, JobState::Running, 4, 1);
    let effects = c.handle(
        Event::StartFailed {
            job: id(1),
            reason: "could not start the job's shim: boom".into(),
            recorded: true,
        },
        2,
    );
    let fin = finish_of(&effects, 1).unwrap();
    assert_eq!(fin.state, JobState::Failed);
    assert!(fin.reason.contains("boom"));
    assert_eq!(answer_of(&effects, 4), Some(&Answer::Done));
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::CheckRelease { .. })));
}

#[test]
fn a_start_refused_before_anything_was_recorded_frees_its_room_at_once() {
    let mut c = core(Policy::Fifo, node(1, 4));
    let _ = submit(&mut c, 1, ask_gpus(1), 0);
    let _ = submit(&mut c, 2, ask_gpus(1), 0);
    let effects = c.handle(
        Event::StartFailed {
            job: id(1),
            reason: "could not allocate its GPUs: GPU 0 is DEGRADED".into(),
            recorded: false,
        },
        1,
    );
    assert!(matches!(&effects[0], Effect::Finish { release: None, .. }));
    assert!(!effects
        .iter()
        .any(|e| matches!(e, Effect::CheckRelease { .. } | Effect::Release { .. })));
    assert_eq!(launched(&effects), vec![id(2)]);
}

#[test]
fn the_node_ends_a_job_with_its_own_reason() {
    let mut c = core(Policy::Fifo, node(1, 4));
    run(&mut c, 1, ask_gpus(1), 0);
    let effects = c.handle(
        Event::EndJobs {
            jobs: vec![id(1)],
            reason: "GPU 0 failed: XID 79".into(),
            failed: true,
        },
        1,
    );
    assert_eq!(
        effects,
        vec![Effect::Signal {
            job: id(1),
            how: StopHow::Kill,
            ticket: None
        }]
    );
    // Asked again (the monitor reports it twice): nothing more.
    let again = c.handle(
        Event::EndJobs {
            jobs: vec![id(1)],
            reason: "GPU 0 failed: XID 79".into(),
            failed: true,
        },
        1,
    );
    assert_eq!(again, Vec::new());
    let effects = c.handle(
        Event::Exited {
            job: id(1),
            exit: Exit::of(Final::stopped("killed")),
        },
        2,
    );
    let fin = finish_of(&effects, 1).unwrap();
    assert_eq!(
        (fin.state, fin.reason.as_str()),
        (JobState::Failed, "GPU 0 failed: XID 79")
    );
}

#[test]
fn a_queued_job_the_node_ends_never_starts() {
    let mut c = core(Policy::Fifo, node(1, 4));
    run(&mut c, 1, ask_gpus(1), 0);
    let _ = submit(&mut c, 2, ask_gpus(1), 1);
    let effects = c.handle(
        Event::EndJobs {
            jobs: vec![id(2)],
            reason: "GPU 0 taken offline by admin".into(),
            failed: false,
        },
        2,
    );
    assert_eq!(finish_of(&effects, 2).unwrap().state, JobState::Stopped);
    assert_eq!(launched(&effects), Vec::new());
    assert_eq!(c.phase(&id(2)), None);
}

#[test]
fn a_gpu_time_budget_reached_is_recorded_as_such() {
    let mut c = core(Policy::Fifo, node(1, 4));
    let mut sub = submission(1, ask_gpus(1));
    sub.gpu_time_reason = Some("GPU time limit reached: 1h of GPU time".into());
    let _ = c.handle(Event::Submitted(Box::new(sub)), 0);
    let _ = c.handle(Event::Started { job: id(1) }, 0);
    let effects = c.handle(
        Event::Exited {
            job: id(1),
            exit: Exit {
                fin: Final::failed("timed out after 1h"),
                timed_out: true,
            },
        },
        1,
    );
    assert_eq!(
        finish_of(&effects, 1).unwrap().reason,
        "GPU time limit reached: 1h of GPU time"
    );
}

#[test]
fn requests_the_job_cannot_take_are_refused_with_why() {
    let mut c = core(Policy::Fifo, node(0, 4));
    run(&mut c, 1, Ask::default(), 0);
    let effects = c.handle(
        Event::Delete {
            job: id(1),
            stored: JobState::Running,
            ticket: Ticket(1),
        },
        1,
    );
    assert_eq!(
        answer_of(&effects, 1),
        Some(&Answer::Refused(Refusal::Running))
    );
    // A job the engine no longer tracks: the stored state decides.
    let effects = stop(&mut c, 5, JobState::Completed, 2, 1);
    assert_eq!(
        answer_of(&effects, 2),
        Some(&Answer::Refused(Refusal::Finished {
            state: JobState::Completed
        }))
    );
    let effects = c.handle(
        Event::Delete {
            job: id(5),
            stored: JobState::Failed,
            ticket: Ticket(3),
        },
        1,
    );
    assert_eq!(
        effects,
        vec![Effect::Delete {
            job: id(5),
            ticket: Ticket(3)
        }]
    );
}

#[test]
fn a_job_deleted_while_its_gpus_are_checked_is_released_as_deleted() {
    let mut c = core(Policy::Fifo, node(1, 4));
    run(&mut c, 1, ask_gpus(1), 0);
    let _ = c.handle(
        Event::Exited {
            job: id(1),
            exit: exited(0),
        },
        1,
    );
    let effects = c.handle(
        Event::Delete {
            job: id(1),
            stored: JobState::Completed,
            ticket: Ticket(1),
        },
        2,
    );
    assert_eq!(
        effects,
        vec![Effect::Delete {
            job: id(1),
            ticket: Ticket(1)
        }]
    );
    let effects = c.handle(
        Event::ReleaseChecked {
            job: id(1),
            dirty: Vec::new(),
        },
        3,
    );
    assert!(matches!(&effects[0], Effect::Release { ended: None, .. }));
}

#[test]
fn an_unhealthy_gpu_takes_no_new_job_until_it_is_back() {
    let mut c = core(Policy::Fifo, node(1, 4));
    let degraded = GpuHealth {
        state: GpuState::Degraded,
        paused: false,
        temperature_c: None,
    };
    let _ = c.handle(
        Event::GpuChanged {
            index: 0,
            health: degraded,
        },
        0,
    );
    assert_eq!(launched(&submit(&mut c, 1, ask_gpus(1), 1)), Vec::new());
    let effects = c.handle(
        Event::GpuChanged {
            index: 0,
            health: GpuHealth {
                state: GpuState::Available,
                ..degraded
            },
        },
        2,
    );
    assert_eq!(launched(&effects), vec![id(1)]);
}
