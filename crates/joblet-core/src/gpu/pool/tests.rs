//! Unit tests of `pool`.

use super::*;
use proptest::prelude::*;

fn pool(n: u32) -> GpuPool {
    let mut p = GpuPool::new();
    let present: Vec<_> = (0..n).map(|i| (format!("GPU-{i}"), i)).collect();
    p.sync(&present, 0);
    p
}

fn state(p: &GpuPool, i: u32) -> GpuState {
    p.get(&format!("GPU-{i}")).unwrap().state
}

#[test]
fn xid_79_degrades_the_gpu_and_it_takes_no_new_jobs() {
    let mut p = pool(4);
    let out = p.observe("GPU-3", Observed::Xid(79), 5);
    assert_eq!(state(&p, 3), GpuState::Degraded);
    assert!(!p.placeable("GPU-3"));
    assert!(p.placeable("GPU-2"));
    assert_eq!(
        out,
        vec![GpuUpdate::Transition {
            uuid: "GPU-3".into(),
            index: 3,
            from: GpuState::Available,
            to: GpuState::Degraded,
            cause: "XID 79 (GPU has fallen off the bus)".into()
        }]
    );
    assert!(p.allocate("GPU-3", "job", 6).is_err());
}

#[test]
fn xid_13_leaves_the_gpu_available() {
    let mut p = pool(1);
    let out = p.observe("GPU-0", Observed::Xid(13), 5);
    assert_eq!(state(&p, 0), GpuState::Available);
    assert!(p.placeable("GPU-0"));
    assert!(
        matches!(&out[..], [GpuUpdate::Noted { message, .. }] if message.contains("application error"))
    );
}

#[test]
fn a_device_fault_fails_the_jobs_on_the_gpu() {
    let mut p = pool(1);
    p.allocate("GPU-0", "j1", 1).unwrap();
    p.start("GPU-0", "j1", 2).unwrap();
    assert_eq!(state(&p, 0), GpuState::InUse);
    let out = p.observe("GPU-0", Observed::DoubleBitEcc, 3);
    assert!(out.iter().any(
        |u| matches!(u, GpuUpdate::EndJobs { jobs, failed: true, reason, .. }
        if jobs == &["j1".to_string()] && reason.contains("double-bit ECC"))
    ));
}

#[test]
fn heat_pauses_placements_until_the_gpu_cools_below_the_hysteresis() {
    let mut p = pool(1);
    let hot = |t| {
        Observed::Sample(GpuObservation {
            temperature_c: Some(t),
            slowdown_c: Some(90),
            ..Default::default()
        })
    };
    assert!(p.observe("GPU-0", hot(89), 1).is_empty());
    let out = p.observe("GPU-0", hot(95), 2);
    assert!(matches!(&out[..], [GpuUpdate::Paused { cause, .. }] if cause.contains("95 °C")));
    assert!(!p.placeable("GPU-0"));
    assert_eq!(state(&p, 0), GpuState::Available, "a pause is not a state");
    assert!(
        p.observe("GPU-0", hot(88), 3).is_empty(),
        "88 is within the hysteresis"
    );
    assert!(!p.placeable("GPU-0"));
    let out = p.observe("GPU-0", hot(85), 4);
    assert!(matches!(&out[..], [GpuUpdate::Resumed { .. }]));
    assert!(p.placeable("GPU-0"));
}

#[test]
fn unknown_slowdown_uses_the_seed_default() {
    let mut p = pool(1);
    let s = GpuObservation {
        temperature_c: Some(DEFAULT_SLOWDOWN_C),
        ..Default::default()
    };
    p.observe("GPU-0", Observed::Sample(s), 1);
    assert!(!p.placeable("GPU-0"));
}

#[test]
fn ecc_counters_and_lost_gpus_degrade_once() {
    let mut p = pool(2);
    let s = GpuObservation {
        volatile_uncorrected: Some(2),
        ..Default::default()
    };
    let out = p.observe("GPU-0", Observed::Sample(s.clone()), 1);
    assert!(
        matches!(&out[0], GpuUpdate::Transition { cause, .. } if cause.contains("uncorrectable ECC errors: 2 (was 0)"))
    );
    // Admin brings it back: the same count does not degrade it again.
    p.admin("GPU-0", AdminAction::Online, "admin", 2).unwrap();
    assert!(p.observe("GPU-0", Observed::Sample(s), 3).is_empty());
    assert_eq!(state(&p, 0), GpuState::Available);
    let lost = GpuObservation {
        lost: true,
        ..Default::default()
    };
    p.observe("GPU-1", Observed::Sample(lost.clone()), 4);
    assert_eq!(state(&p, 1), GpuState::Degraded);
    let again = p.observe("GPU-1", Observed::Sample(lost), 5);
    assert!(matches!(&again[..], [GpuUpdate::Noted { .. }]));
}

#[test]
fn drain_offline_online_round_trip() {
    let mut p = pool(1);
    p.allocate("GPU-0", "j1", 1).unwrap();
    p.start("GPU-0", "j1", 1).unwrap();
    p.admin("GPU-0", AdminAction::Drain, "alice", 2).unwrap();
    assert_eq!(state(&p, 0), GpuState::Draining);
    assert!(!p.placeable("GPU-0"));
    assert_eq!(
        p.admin("GPU-0", AdminAction::Offline { force: false }, "alice", 3),
        Err(AdminError::Busy {
            index: 0,
            jobs: vec!["j1".into()]
        })
    );
    // The running job finishes: the GPU stays draining.
    p.release("GPU-0", "j1", 4).unwrap();
    assert_eq!(state(&p, 0), GpuState::Draining);
    p.admin("GPU-0", AdminAction::Offline { force: false }, "alice", 5)
        .unwrap();
    assert_eq!(state(&p, 0), GpuState::Offline);
    assert!(matches!(
        p.admin("GPU-0", AdminAction::Drain, "alice", 6),
        Err(AdminError::NotDrainable { .. })
    ));
    p.admin("GPU-0", AdminAction::Online, "alice", 7).unwrap();
    assert_eq!(state(&p, 0), GpuState::Available);
    assert_eq!(p.get("GPU-0").unwrap().cause, "brought online by alice");
    assert!(matches!(
        p.admin("GPU-0", AdminAction::Online, "alice", 8),
        Err(AdminError::AlreadyThere { .. })
    ));
}

#[test]
fn forced_offline_stops_the_jobs() {
    let mut p = pool(1);
    p.allocate("GPU-0", "j1", 1).unwrap();
    let out = p
        .admin("GPU-0", AdminAction::Offline { force: true }, "bob", 2)
        .unwrap();
    assert!(out
        .iter()
        .any(|u| matches!(u, GpuUpdate::EndJobs { failed: false, jobs, .. } if jobs.len() == 1)));
    assert!(p.get("GPU-0").unwrap().jobs.is_empty());
}

#[test]
fn states_survive_restore_and_vanished_gpus_degrade() {
    let mut p = pool(2);
    p.admin("GPU-1", AdminAction::Offline { force: false }, "a", 1)
        .unwrap();
    let mut q = GpuPool::restore(p.entries().into_iter().cloned());
    assert_eq!(state(&q, 1), GpuState::Offline);
    let out = q.sync(&[("GPU-1".into(), 0)], 2);
    assert_eq!(state(&q, 0), GpuState::Degraded);
    assert!(out.iter().any(|u| matches!(u, GpuUpdate::Transition { cause, .. } if cause == "no longer reported by the driver")));
    assert_eq!(q.get("GPU-1").unwrap().index, 0, "index follows discovery");
}

#[derive(Debug, Clone)]
enum Op {
    Obs(u32, Observed),
    Admin(u32, AdminAction),
    Alloc(u32, u8),
    Start(u32, u8),
    Release(u32, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let gpu = 0u32..4;
    let observed = prop_oneof![
        prop::sample::select(vec![13u64, 31, 43, 48, 79, 94, 109]).prop_map(Observed::Xid),
        Just(Observed::SingleBitEcc),
        Just(Observed::DoubleBitEcc),
        (
            proptest::option::of(60u32..100),
            proptest::option::of(0u64..3),
            any::<bool>()
        )
            .prop_map(|(t, u, lost)| Observed::Sample(GpuObservation {
                temperature_c: t,
                slowdown_c: Some(90),
                volatile_uncorrected: u,
                lost,
                ..Default::default()
            })),
    ];
    let admin = prop_oneof![
        Just(AdminAction::Drain),
        any::<bool>().prop_map(|force| AdminAction::Offline { force }),
        Just(AdminAction::Online),
    ];
    prop_oneof![
        (gpu.clone(), observed).prop_map(|(g, o)| Op::Obs(g, o)),
        (gpu.clone(), admin).prop_map(|(g, a)| Op::Admin(g, a)),
        (gpu.clone(), 0u8..3).prop_map(|(g, j)| Op::Alloc(g, j)),
        (gpu.clone(), 0u8..3).prop_map(|(g, j)| Op::Start(g, j)),
        (gpu, 0u8..3).prop_map(|(g, j)| Op::Release(g, j)),
    ]
}

proptest! {
    #[test]
    fn every_sequence_keeps_the_invariants(ops in proptest::collection::vec(op(), 1..80)) {
        let mut p = pool(4);
        for (t, op) in ops.into_iter().enumerate() {
            let now = t as i64;
            let before: Vec<GpuState> = (0..4).map(|i| state(&p, i)).collect();
            let out = match op {
                Op::Obs(g, o) => p.observe(&format!("GPU-{g}"), o, now),
                Op::Admin(g, a) => p.admin(&format!("GPU-{g}"), a, "t", now).unwrap_or_default(),
                Op::Alloc(g, j) => p.allocate(&format!("GPU-{g}"), &format!("j{j}"), now).unwrap_or_default(),
                Op::Start(g, j) => p.start(&format!("GPU-{g}"), &format!("j{j}"), now).unwrap_or_default(),
                Op::Release(g, j) => p.release(&format!("GPU-{g}"), &format!("j{j}"), now).unwrap_or_default(),
            };
            for u in &out {
                if let GpuUpdate::Transition { index, from, to, .. } = u {
                    prop_assert!(from.can_go_to(*to));
                    prop_assert_eq!(before[*index as usize], *from);
                }
                if let GpuUpdate::Noted { message, .. } = u {
                    prop_assert!(!message.contains("ignored"), "impossible edge asked: {}", message);
                }
            }
            for e in p.entries() {
                if p.placeable(&e.uuid) {
                    prop_assert!(e.state.accepts_new_jobs() && e.paused.is_none());
                }
                if e.state == GpuState::Offline {
                    prop_assert!(e.jobs.is_empty());
                }
                if e.state == GpuState::Available {
                    prop_assert!(e.jobs.is_empty());
                }
                if matches!(e.state, GpuState::Allocated | GpuState::InUse) {
                    prop_assert!(!e.jobs.is_empty());
                }
            }
        }
    }
}

#[test]
fn quarantine_degrades_with_the_reason_and_ends_remaining_jobs() {
    let mut pool = GpuPool::new();
    pool.sync(&[("GPU-a".into(), 0)], 0);
    pool.allocate("GPU-a", "j1", 1).unwrap();
    pool.allocate("GPU-a", "j2", 1).unwrap();
    pool.release("GPU-a", "j1", 2).unwrap();
    let u = pool.quarantine("GPU-a", "4096 MiB still used after job j1", 3);
    let e = pool.get("GPU-a").unwrap();
    assert_eq!(e.state, GpuState::Degraded);
    assert!(
        e.cause.contains("quarantined: 4096 MiB still used"),
        "{}",
        e.cause
    );
    assert!(u.iter().any(|u| matches!(u, GpuUpdate::EndJobs { jobs, failed: true, .. } if jobs == &["j2".to_string()])));
    assert!(!pool.placeable("GPU-a"));
}

#[test]
fn a_restart_ends_again_what_a_failed_gpu_still_holds() {
    let mut pool = GpuPool::new();
    let _ = pool.sync(
        &[
            ("GPU-a".into(), 0),
            ("GPU-b".into(), 1),
            ("GPU-c".into(), 2),
        ],
        0,
    );
    for (uuid, job) in [("GPU-a", "j1"), ("GPU-b", "j2"), ("GPU-c", "j3")] {
        pool.allocate(uuid, job, 1).unwrap();
    }
    let failed = pool.observe("GPU-a", Observed::Xid(79), 2);
    assert!(failed
        .iter()
        .any(|u| matches!(u, GpuUpdate::EndJobs { .. })));
    let _ = pool.admin("GPU-c", AdminAction::Drain, "admin", 3).unwrap();
    assert_eq!(
        pool.endings(),
        vec![GpuUpdate::EndJobs {
            uuid: "GPU-a".into(),
            jobs: vec!["j1".into()],
            reason: failed
                .iter()
                .find_map(|u| match u {
                    GpuUpdate::EndJobs { reason, .. } => Some(reason.clone()),
                    _ => None,
                })
                .unwrap(),
            failed: true,
        }],
        "the failed GPU's job ends again with its reason; a draining GPU's runs on"
    );
}
