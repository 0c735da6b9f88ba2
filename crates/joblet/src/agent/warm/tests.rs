use super::*;

fn id(n: u8) -> JobId {
    JobId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02}")).unwrap()
}

/// A launch of `flavour` that lands as idle shim `n` (the pool has room).
fn add_idle(pool: &mut WarmPool<u8>, flavour: Flavour, n: u8) {
    pool.launching(flavour);
    assert_eq!(pool.landed(flavour, None, Some((id(n), n))), None);
}

#[test]
fn runtime_sandboxes_are_kept_for_the_hot_runtime_only() {
    let (a, b) = (Path::new("/rt/trees/a"), Path::new("/rt/trees/b"));
    let mut pool = WarmPool::<u8>::new(1, 0);
    // Nothing is hot: no runtime sandbox is wanted.
    assert_eq!(pool.wanted_of(Flavour::Runtime), 0);
    add_idle(&mut pool, Flavour::Cpu, 1);
    // A job in runtime a finds none (it starts cold) and makes a hot.
    assert_eq!(pool.reserve_runtime(a), (None, vec![]));
    assert_eq!(pool.wanted_of(Flavour::Runtime), 1);
    pool.launching(Flavour::Runtime);
    assert_eq!(
        pool.landed(Flavour::Runtime, Some(a.to_owned()), Some((id(2), 2))),
        None
    );
    pool.built(&id(2), true);
    // A CPU job never takes it; a job in runtime a does.
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(1)));
    assert_eq!(pool.reserve(Flavour::Cpu), None);
    assert_eq!(pool.reserve_runtime(a), (Some(id(2)), vec![]));
    // Another runtime moves the heat; what was built for a goes.
    pool.launching(Flavour::Runtime);
    assert_eq!(
        pool.landed(Flavour::Runtime, Some(a.to_owned()), Some((id(3), 3))),
        None
    );
    assert_eq!(pool.reserve_runtime(b), (None, vec![3]));
    // A launch for a that lands after the heat moved is discarded.
    pool.launching(Flavour::Runtime);
    assert_eq!(
        pool.landed(Flavour::Runtime, Some(a.to_owned()), Some((id(4), 4))),
        Some(4)
    );
    assert_eq!(pool.hot(), Some(b));
    pool.launching(Flavour::Runtime);
    assert_eq!(
        pool.landed(Flavour::Runtime, Some(b.to_owned()), Some((id(5), 5))),
        None
    );
    assert_eq!(pool.cool(), vec![5]);
    assert_eq!(pool.wanted_of(Flavour::Runtime), 0);
}

#[test]
fn an_empty_pool_wants_its_target_and_reserves_nothing() {
    let mut pool = WarmPool::<()>::new(2, 1);
    assert_eq!(pool.wanted(), 3);
    pool.launching(Flavour::Cpu);
    assert_eq!(pool.wanted_of(Flavour::Cpu), 1);
    assert_eq!(pool.wanted_of(Flavour::Gpu), 1);
    assert_eq!(pool.reserve(Flavour::Cpu), None);
    assert!(pool.landed(Flavour::Cpu, None, None).is_none());
    assert_eq!(pool.wanted(), 3);
    assert_eq!(pool.idle(), 0);
}

#[test]
fn a_build_lasts_from_its_launch_to_the_shims_word() {
    let mut pool = WarmPool::<u8>::new(1, 1);
    assert_eq!(pool.to_build(), [Flavour::Gpu, Flavour::Cpu]);
    pool.launching(Flavour::Gpu);
    assert_eq!(pool.to_build(), [], "one build at a time");
    // Launched, not built yet: still building, and idle.
    assert_eq!(pool.landed(Flavour::Gpu, None, Some((id(1), 1))), None);
    assert_eq!(pool.to_build(), []);
    pool.built(&id(1), true);
    // The GPU-ready one is there: a CPU one is next.
    assert_eq!(pool.to_build(), [Flavour::Cpu]);
    // A launch that failed ends its build with it.
    pool.launching(Flavour::Cpu);
    assert_eq!(pool.landed(Flavour::Cpu, None, None), None);
    assert_eq!(pool.to_build(), [Flavour::Cpu]);
    // A shim the full pool discards still says when its build ends.
    pool.launching(Flavour::Gpu);
    assert_eq!(pool.landed(Flavour::Gpu, None, Some((id(2), 2))), Some(2));
    assert_eq!(pool.to_build(), []);
    pool.built(&id(2), true);
    assert_eq!(pool.to_build(), [Flavour::Cpu]);
    // So does one a job took before its build ended.
    add_idle(&mut pool, Flavour::Cpu, 3);
    assert_eq!(pool.reserve(Flavour::Cpu), Some(id(3)));
    pool.built(&id(3), true);
    assert_eq!(pool.to_build(), [Flavour::Cpu]);
}

#[test]
fn jobs_take_built_sandboxes_first() {
    let mut pool = WarmPool::<u8>::new(2, 2);
    for (n, flavour) in [(1, Flavour::Gpu), (2, Flavour::Cpu), (3, Flavour::Gpu)] {
        add_idle(&mut pool, flavour, n);
    }
    // Built: the CPU one (2) and the second GPU-ready one (3).
    pool.built(&id(2), true);
    pool.built(&id(3), true);
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(3)));
    // A built CPU sandbox before a GPU-ready one still being built.
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(2)));
    // Then the one being built, rather than none.
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(1)));
    // A CPU job never takes a GPU-ready one, built or not.
    add_idle(&mut pool, Flavour::Gpu, 4);
    pool.built(&id(4), true);
    assert_eq!(pool.reserve(Flavour::Cpu), None);
}

#[test]
fn a_sandbox_that_could_not_be_built_goes_last() {
    let mut pool = WarmPool::<u8>::new(2, 0);
    for n in [1, 2] {
        add_idle(&mut pool, Flavour::Cpu, n);
    }
    // The first could not build its sandbox; the second is building.
    pool.built(&id(1), false);
    assert_eq!(pool.to_build(), [], "the second is still building");
    assert_eq!(pool.reserve(Flavour::Cpu), Some(id(2)));
    assert_eq!(pool.reserve(Flavour::Cpu), Some(id(1)));
}

#[test]
fn a_burst_of_submissions_refills_at_once() {
    let mut pool = WarmPool::<u8>::new(1, 0);
    add_idle(&mut pool, Flavour::Cpu, 1);
    // One idle: a quiet node waits before building more.
    assert!(!pool.refill_now());
    let t0 = Instant::now();
    pool.submitted(t0);
    assert!(!pool.refill_now(), "a first submission is no burst");
    pool.submitted(t0 + Duration::from_millis(5));
    assert!(pool.refill_now(), "two submissions 5 ms apart");
    pool.submitted(t0 + Duration::from_millis(100));
    assert!(!pool.refill_now(), "the burst is over");
    // A flavour with none left is refilled at once, burst or not.
    assert_eq!(pool.reserve(Flavour::Cpu), Some(id(1)));
    assert!(pool.refill_now());
}

#[test]
fn a_pool_of_zero_never_launches() {
    let mut pool = WarmPool::<()>::new(0, 0);
    assert_eq!(pool.wanted(), 0);
    assert_eq!(pool.reserve(Flavour::Gpu), None);
}

#[test]
fn gpu_jobs_prefer_gpu_ready_shims_and_cpu_jobs_never_take_one() {
    let mut pool = WarmPool::<u8>::new(1, 1);
    add_idle(&mut pool, Flavour::Gpu, 1);
    // A CPU job finds no CPU shim: it gets none rather than the GPU one.
    assert_eq!(pool.reserve(Flavour::Cpu), None);
    add_idle(&mut pool, Flavour::Cpu, 2);
    // Full: another of a flavour is handed back to be discarded.
    assert_eq!(pool.landed(Flavour::Cpu, None, Some((id(3), 3))), Some(3));
    assert!(pool.has_idle());
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(1)));
    assert_eq!(pool.wanted_of(Flavour::Gpu), 1);
    // The GPU-ready ones are gone: the pool is refilled at once.
    assert!(!pool.has_idle());
    // No GPU-ready one left: a GPU job takes a CPU one.
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(2)));
    assert_eq!(pool.claim(&id(1)), Some(1));
    assert_eq!(pool.forget(&id(2)), Some(2));
    pool.give_up(Flavour::Gpu);
    assert_eq!(pool.wanted(), 1);
}

#[test]
fn a_closed_pool_hands_back_every_shim_and_keeps_none() {
    let mut pool = WarmPool::<u8>::new(2, 1);
    for (n, f) in [(1, Flavour::Cpu), (2, Flavour::Cpu), (3, Flavour::Gpu)] {
        add_idle(&mut pool, f, n);
    }
    pool.launching(Flavour::Cpu);
    assert_eq!(pool.reserve(Flavour::Gpu), Some(id(3)));
    let mut back = pool.close();
    back.sort_unstable();
    assert_eq!(
        back,
        [(1, true), (2, true), (3, false)],
        "idle (no job took them) and reserved"
    );
    assert!(pool.is_launching());
    // The launch under way lands after: handed back, not kept.
    assert_eq!(pool.landed(Flavour::Cpu, None, Some((id(4), 4))), Some(4));
    assert!(!pool.is_launching());
    assert_eq!(pool.wanted(), 0);
    assert_eq!(pool.reserve(Flavour::Cpu), None);
    assert_eq!(pool.claim(&id(3)), None);
}
