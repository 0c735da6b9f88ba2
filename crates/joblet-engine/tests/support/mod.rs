//! Shared pieces of the engine core's tests: a node, jobs, and readers of
//! the effects the core returns.

#![allow(dead_code)]

use joblet_core::{JobId, JobState};
use joblet_engine::{
    Answer, CoreConfig, Effect, EngineCore, Event, Exit, Final, LaunchOrder, Recovery, StopHow,
    Submission, Ticket,
};
use joblet_sched::model::{
    GpuSpec, JobRequest, NodeCapacity, NodeSpec, Policy, SchedConfig, Sharing, Strategy,
    WorkloadClass,
};

pub const NODE: u32 = 0;

/// One GPU of the test node: 40 GB, NUMA node by halves.
pub fn gpu(index: u32, of: u32) -> GpuSpec {
    GpuSpec {
        index,
        uuid: format!("GPU-{index:04}"),
        memory_mb: 40_960,
        numa: index * 2 / of.max(1),
        socket: 0,
        nvlink_group: None,
        compute_capability: (8, 0),
        mig: Vec::new(),
    }
}

/// A node with `gpus` GPUs, 4 CPUs, 8 GiB and `max_jobs` slots.
pub fn node(gpus: u32, max_jobs: u32) -> NodeSpec {
    NodeSpec {
        id: NODE,
        gpus: (0..gpus).map(|i| gpu(i, gpus)).collect(),
        capacity: NodeCapacity {
            cpu_millis: Some(4000),
            memory_mb: Some(8192),
            max_jobs: Some(max_jobs),
        },
    }
}

pub fn config(policy: Policy, node: NodeSpec) -> CoreConfig {
    CoreConfig {
        sched: SchedConfig {
            policy,
            strategy: Strategy::Topology,
            ..SchedConfig::default()
        },
        node,
        stop_grace_ms: 10_000,
    }
}

/// A core on a recovered, empty node.
pub fn core(policy: Policy, node: NodeSpec) -> EngineCore {
    let mut c = EngineCore::new(config(policy, node));
    let effects = c.handle(Event::Recovered(Box::default()), 0);
    assert_eq!(effects, Vec::new(), "an empty recovery does nothing");
    c
}

/// Job id number `n`.
pub fn id(n: u32) -> JobId {
    JobId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
}

/// What a job asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask {
    pub gpus: u32,
    pub cpu_millis: u64,
    pub memory_mb: u64,
    pub time_limit_ms: Option<u64>,
}

pub fn ask_gpus(gpus: u32) -> Ask {
    Ask {
        gpus,
        ..Ask::default()
    }
}

pub fn submission(n: u32, ask: Ask) -> Submission {
    Submission {
        job: id(n),
        request: JobRequest {
            gpu_milli: 0,
            job: id(n).to_string(),
            owner: "alice".into(),
            queue: "default".into(),
            gpu_count: ask.gpus,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: ask.time_limit_ms,
            checkpoint_interval_ms: None,
            cpu_millis: ask.cpu_millis,
            host_memory_mb: ask.memory_mb,
        },
        wall_limit_ms: ask.time_limit_ms,
        gpu_time_reason: None,
        pinned: None,
    }
}

pub fn submit(c: &mut EngineCore, n: u32, ask: Ask, now: i64) -> Vec<Effect> {
    c.handle(Event::Submitted(Box::new(submission(n, ask))), now)
}

/// The launch orders among `effects`.
pub fn launches(effects: &[Effect]) -> Vec<&LaunchOrder> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Launch(o) => Some(&**o),
            _ => None,
        })
        .collect()
}

/// The ids launched by `effects`.
pub fn launched(effects: &[Effect]) -> Vec<JobId> {
    launches(effects).iter().map(|o| o.job.clone()).collect()
}

/// Submits and starts job `n` (it must start at once).
pub fn run(c: &mut EngineCore, n: u32, ask: Ask, now: i64) -> LaunchOrder {
    let effects = submit(c, n, ask, now);
    let order = launches(&effects)
        .into_iter()
        .find(|o| o.job == id(n))
        .unwrap_or_else(|| panic!("job {n} did not start: {effects:?}"))
        .clone();
    let started = c.handle(Event::Started { job: id(n) }, now);
    assert_eq!(started, Vec::new());
    order
}

pub fn exited(code: i32) -> Exit {
    Exit::of(Final {
        state: if code == 0 {
            JobState::Completed
        } else {
            JobState::Failed
        },
        exit_code: Some(code),
        reason: format!("exited with code {code}"),
    })
}

pub fn stop(c: &mut EngineCore, n: u32, stored: JobState, ticket: u64, now: i64) -> Vec<Effect> {
    c.handle(
        Event::Stop {
            job: id(n),
            how: StopHow::Stop { grace_ms: 5_000 },
            stored,
            ticket: Ticket(ticket),
        },
        now,
    )
}

pub fn answer_of(effects: &[Effect], ticket: u64) -> Option<&Answer> {
    effects.iter().find_map(|e| match e {
        Effect::Answer { ticket: t, answer } if t.0 == ticket => Some(answer),
        _ => None,
    })
}

/// The final state `effects` record for job `n`.
pub fn finish_of(effects: &[Effect], n: u32) -> Option<&Final> {
    effects.iter().find_map(|e| match e {
        Effect::Finish { job, fin, .. } if *job == id(n) => Some(fin),
        _ => None,
    })
}

pub fn recovery() -> Recovery {
    Recovery::default()
}
