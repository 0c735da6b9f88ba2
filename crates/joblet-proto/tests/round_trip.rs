//! Domain → wire → domain gives back the original, for every conversion
//! with a way back: generated values (proptest) and the edges by name
//! (nothing set, every state, the largest numbers).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use joblet_core::executor::{ExecutorCaps, ExecutorInfo, ExecutorKind};
use joblet_core::gpu::GpuState;
use joblet_core::joblog::{JobEnd, LogEvent, Record, Stream};
use joblet_core::record::{
    AuditRecord, GpuEventRecord, JobDetails, JobGpus, JobRecord, TransitionRecord,
};
use joblet_core::{
    JobId, JobRequest, JobSpec, JobState, Network, Resources, UploadEntry, UploadKind, VolumeMount,
};
use joblet_proto::*;
use proptest::collection::{btree_map, btree_set, vec};
use proptest::option;
use proptest::prelude::*;

const GPU_STATES: [GpuState; 7] = [
    GpuState::Available,
    GpuState::Allocated,
    GpuState::InUse,
    GpuState::Degraded,
    GpuState::Resetting,
    GpuState::Offline,
    GpuState::Draining,
];

fn state() -> impl Strategy<Value = JobState> {
    proptest::sample::select(JobState::ALL.to_vec())
}

fn gpu_state() -> impl Strategy<Value = GpuState> {
    proptest::sample::select(GPU_STATES.to_vec())
}

/// Short text, any characters.
fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn non_empty_text() -> impl Strategy<Value = String> {
    "\\PC{1,12}"
}

fn positive() -> impl Strategy<Value = u64> {
    1..=i64::MAX as u64
}

fn nonzero_i64() -> impl Strategy<Value = i64> {
    any::<i64>().prop_filter("0 is the wire's none", |&v| v != 0)
}

fn job_id() -> impl Strategy<Value = JobId> {
    any::<u128>().prop_map(|v| {
        let h = format!("{v:032x}");
        JobId::parse(&format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        ))
        .unwrap()
    })
}

fn upload() -> impl Strategy<Value = UploadEntry> {
    (
        text(),
        proptest::sample::select(vec![
            UploadKind::File,
            UploadKind::Dir,
            UploadKind::Symlink,
            UploadKind::Unknown,
        ]),
        any::<u32>(),
        any::<u64>(),
        text(),
    )
        .prop_map(|(path, kind, mode, size, target)| UploadEntry {
            path,
            kind,
            mode,
            size,
            target,
        })
}

/// A request as a client builds it: each variable once (the wire's maps
/// hold a name once), sorted as the node reads them.
fn job_request() -> impl Strategy<Value = JobRequest> {
    let numbers = (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
        any::<i64>(),
    );
    let texts = (text(), text(), text(), text(), text(), text(), text());
    let lists = (
        vec(text(), 0..4),
        btree_map(text(), text(), 0..4),
        btree_map(text(), text(), 0..4),
        vec(upload(), 0..4),
        vec(text(), 0..3),
        any::<bool>(),
        vec(text(), 0..3),
    );
    let terminal = (any::<bool>(), any::<bool>(), 0..5000i64, 0..5000i64);
    (numbers, texts, lists, terminal).prop_map(
        |(
            (
                max_cpu,
                max_memory_mb,
                max_iobps,
                gpu_count,
                gpu_memory_mb,
                timeout,
                gpu_time,
                timeout_ms,
                gpu_milli,
            ),
            (command, cpu_cores, runtime, network, cuda_version, mig_profile, executor),
            (args, env, secret_env, uploads, volumes, gpu_profiling, devices),
            (interactive, tty, tty_rows, tty_cols),
        )| JobRequest {
            command,
            args,
            max_cpu,
            cpu_cores,
            max_memory_mb,
            max_iobps,
            gpu_count,
            gpu_memory_mb,
            gpu_milli,
            env: env.into_iter().collect(),
            secret_env: secret_env.into_iter().collect(),
            uploads,
            volumes,
            runtime,
            network,
            timeout_seconds: timeout,
            timeout_ms,
            gpu_time_seconds: gpu_time,
            cuda_version,
            mig_profile,
            gpu_profiling,
            restart: String::new(),
            executor,
            devices,
            interactive,
            tty,
            tty_rows,
            tty_cols,
        },
    )
}

fn resources() -> impl Strategy<Value = Resources> {
    (
        option::of(1..=u32::MAX),
        option::of(btree_set(0..=joblet_core::parse::MAX_CPU_ID, 1..8)),
        option::of(positive()),
        option::of(positive()),
        any::<u32>(),
        option::of(positive()),
        option::of(0..=i64::MAX as u64),
        option::of(non_empty_text()),
        option::of(1..=999u32),
    )
        .prop_map(
            |(cpu, cores, memory, iobps, gpu_count, gpu_memory, gpu_time, mig, milli)| Resources {
                max_cpu_percent: cpu,
                cpu_cores: cores.map(|c| c.into_iter().collect()),
                max_memory_mb: memory,
                max_iobps: iobps,
                gpu_count,
                gpu_memory_mb: gpu_memory,
                gpu_time: gpu_time.map(Duration::from_secs),
                mig_profile: mig,
                gpu_milli: milli,
            },
        )
}

fn spec() -> impl Strategy<Value = JobSpec> {
    (
        (text(), vec(text(), 0..4), resources()),
        (
            btree_map(text(), text(), 0..4),
            btree_set(text(), 0..4),
            any::<u64>(),
            any::<u64>(),
            vec(("[a-z][a-z0-9._-]{0,12}", any::<bool>()), 0..3),
        ),
        (
            option::of(non_empty_text()),
            any::<bool>(),
            option::of(positive()),
            option::of(non_empty_text()),
            any::<bool>(),
        ),
        (option::of(non_empty_text()), vec(text(), 0..3)),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                (command, args, resources),
                (env, secrets, upload_entries, upload_bytes, volumes),
                (runtime, host, timeout, cuda, gpu_profiling),
                (executor, devices),
                (stdin, tty),
            )| JobSpec {
                command,
                args,
                resources,
                env,
                secret_env_keys: secrets.into_iter().collect(),
                upload_entries,
                upload_bytes,
                volumes: volumes
                    .into_iter()
                    .map(|(name, read_only)| VolumeMount { name, read_only })
                    .collect(),
                runtime_digest: runtime.as_ref().map(|r| format!("sha256:{}", r.len())),
                runtime,
                network: if host { Network::Host } else { Network::None },
                // The wire carries milliseconds.
                timeout: timeout.map(Duration::from_millis),
                cuda,
                gpu_profiling,
                // The wire carries the workflow's id, job and attempt only
                // (covered apart).
                workflow: None,
                cluster: None,
                executor,
                devices,
                // The wire carries whether there is a terminal, not its
                // starting size.
                stdio: joblet_core::Stdio {
                    stdin,
                    tty: tty.then_some(joblet_core::TermSize {
                        rows: joblet_core::stdio::DEFAULT_ROWS,
                        cols: joblet_core::stdio::DEFAULT_COLS,
                    }),
                },
            },
        )
}

fn executor() -> impl Strategy<Value = ExecutorInfo> {
    (
        (
            non_empty_text(),
            proptest::sample::select(ExecutorKind::ALL.to_vec()),
            option::of(non_empty_text()),
            option::of(non_empty_text()),
            option::of(non_empty_text()),
        ),
        any::<[bool; 6]>(),
    )
        .prop_map(
            |((name, kind, binary, version, gpu_unavailable), [g, c, o, r, n, d])| ExecutorInfo {
                name,
                kind,
                binary,
                version,
                caps: ExecutorCaps {
                    gpu: g,
                    cdi: c,
                    oom_events: o,
                    checkpoint_restore: r,
                    join_netns: n,
                    device_cgroup: d,
                },
                gpu_unavailable,
                // The wire says whether the caller may use it, not who may.
                users: Vec::new(),
            },
        )
}

fn transition() -> impl Strategy<Value = TransitionRecord> {
    (option::of(state()), state(), any::<i64>(), text()).prop_map(|(from, to, at_ms, reason)| {
        TransitionRecord {
            from,
            to,
            at_ms,
            reason,
        }
    })
}

fn job_gpus() -> impl Strategy<Value = JobGpus> {
    (
        vec(any::<u32>(), 0..4),
        vec(text(), 0..4),
        option::of(1..=u64::MAX),
        text(),
        option::of(1..=u64::MAX),
    )
        .prop_map(|(indices, uuids, memory, sharing, peak)| JobGpus {
            indices,
            uuids,
            memory_mb_per_gpu: memory,
            sharing,
            peak_memory_mb: peak,
        })
}

fn job_details() -> impl Strategy<Value = JobDetails> {
    (
        (job_id(), any::<i64>(), text(), spec(), state(), text()),
        (
            option::of(any::<i32>()),
            any::<i64>(),
            option::of(nonzero_i64()),
            option::of(nonzero_i64()),
            option::of(any::<i32>()),
        ),
        (
            vec(transition(), 0..4),
            any::<u64>(),
            option::of(job_gpus()),
        ),
    )
        .prop_map(
            |(
                (id, seq, owner, spec, state, reason),
                (exit_code, created_ms, started_ms, ended_ms, shim_pid),
                (transitions, log_bytes, gpus),
            )| JobDetails {
                record: JobRecord {
                    id,
                    seq,
                    owner,
                    spec,
                    state,
                    reason,
                    exit_code,
                    created_ms,
                    started_ms,
                    ended_ms,
                    shim_pid,
                },
                transitions,
                log_bytes,
                gpus,
                cluster: None,
            },
        )
}

/// What the wire carries of `d`: the node's own bookkeeping (`seq`,
/// `shim_pid`) and the spec's upload counts stay behind.
fn as_sent(mut d: JobDetails) -> JobDetails {
    d.record.seq = 0;
    d.record.shim_pid = None;
    d.record.spec.upload_entries = 0;
    d.record.spec.upload_bytes = 0;
    d
}

fn audit_record() -> impl Strategy<Value = AuditRecord> {
    (
        (text(), text(), vec(text(), 0..4), vec(any::<u32>(), 0..4)),
        (option::of(1..=u64::MAX), text(), any::<i64>()),
        (
            option::of(nonzero_i64()),
            option::of(1..=u64::MAX),
            option::of(non_empty_text()),
            option::of(non_empty_text()),
        ),
    )
        .prop_map(
            |(
                (job_id, owner, gpu_uuids, gpu_indices),
                (memory_mb_per_gpu, sharing, start_ms),
                (end_ms, peak_memory_mb, ended, reason),
            )| AuditRecord {
                job_id,
                owner,
                gpu_uuids,
                gpu_indices,
                memory_mb_per_gpu,
                sharing,
                start_ms,
                end_ms,
                peak_memory_mb,
                ended,
                reason,
            },
        )
}

fn gpu_event() -> impl Strategy<Value = GpuEventRecord> {
    (
        text(),
        any::<u32>(),
        any::<i64>(),
        text(),
        option::of(gpu_state()),
        option::of(gpu_state()),
        text(),
    )
        .prop_map(
            |(uuid, index, at_ms, kind, from, to, message)| GpuEventRecord {
                uuid,
                index,
                at_ms,
                kind,
                from,
                to,
                message,
            },
        )
}

fn log_event() -> impl Strategy<Value = LogEvent> {
    prop_oneof![
        (
            any::<bool>(),
            any::<u64>(),
            any::<i64>(),
            vec(any::<u8>(), 0..64)
        )
            .prop_map(|(err, seq, unix_ms, data)| LogEvent::Chunk(Record {
                stream: if err { Stream::Stderr } else { Stream::Stdout },
                seq,
                unix_ms,
                data,
            })),
        (state(), option::of(any::<i32>()), text(), any::<u64>()).prop_map(
            |(state, exit_code, reason, total_bytes)| LogEvent::Ended(JobEnd {
                state,
                exit_code,
                reason,
                total_bytes,
            })
        ),
    ]
}

proptest! {
    #[test]
    fn job_requests(r in job_request()) {
        prop_assert_eq!(job_request_from_pb(job_request_to_pb(&r)), r);
    }

    #[test]
    fn jobs(d in job_details()) {
        let wire = job_to_pb(&d);
        prop_assert!(wire.secret_env.values().all(|v| v == "***"));
        prop_assert_eq!(
            wire.secret_env.keys().collect::<BTreeSet<_>>(),
            d.record.spec.secret_env_keys.iter().collect::<BTreeSet<_>>()
        );
        prop_assert_eq!(job_from_pb(wire).unwrap(), as_sent(d));
    }

    #[test]
    fn audit_records(r in audit_record()) {
        let wire = audit_record_to_pb(&r);
        prop_assert_eq!(wire.duration_ms, r.duration_ms().unwrap_or(0));
        prop_assert_eq!(audit_record_from_pb(wire), r);
    }

    #[test]
    fn gpu_events(e in gpu_event()) {
        prop_assert_eq!(gpu_event_from_pb(&e.uuid, e.index, gpu_event_to_pb(&e)).unwrap(), e);
    }

    #[test]
    fn log_events(e in log_event()) {
        prop_assert_eq!(log_event_from_pb(log_event_to_pb(e.clone())).unwrap(), e);
    }

    #[test]
    fn executors(e in executor(), allowed in any::<bool>()) {
        prop_assert_eq!(executor_from_pb(executor_to_pb(&e, allowed)).unwrap(), (e, allowed));
    }

    #[test]
    fn state_filters(states in vec(state(), 0..10)) {
        prop_assert_eq!(states_from_pb(&states_to_pb(&states)).unwrap(), states);
    }
}

fn minimal_job() -> JobDetails {
    JobDetails {
        record: JobRecord {
            id: JobId::parse("00000000-0000-4000-8000-000000000000").unwrap(),
            seq: 0,
            owner: String::new(),
            spec: JobSpec {
                command: String::new(),
                args: Vec::new(),
                resources: Resources::default(),
                env: BTreeMap::new(),
                secret_env_keys: Vec::new(),
                upload_entries: 0,
                upload_bytes: 0,
                volumes: Vec::new(),
                runtime: None,
                runtime_digest: None,
                network: Network::None,
                timeout: None,
                cuda: None,
                gpu_profiling: false,
                workflow: None,
                cluster: None,
                executor: None,
                devices: Vec::new(),
                stdio: Default::default(),
            },
            state: JobState::Pending,
            reason: String::new(),
            exit_code: None,
            created_ms: 0,
            started_ms: None,
            ended_ms: None,
            shim_pid: None,
        },
        transitions: Vec::new(),
        log_bytes: 0,
        gpus: None,
        cluster: None,
    }
}

#[test]
fn a_job_with_nothing_set_is_an_all_default_wire_job_but_for_id_and_state() {
    let wire = job_to_pb(&minimal_job());
    assert_eq!(
        wire,
        pb::Job {
            id: "00000000-0000-4000-8000-000000000000".into(),
            state: pb::JobState::Pending as i32,
            resources: Some(pb::Resources::default()),
            network: "none".into(),
            ..Default::default()
        }
    );
    assert_eq!(job_from_pb(wire).unwrap(), minimal_job());
}

#[test]
fn every_state_survives_as_job_transition_and_end() {
    for s in JobState::ALL {
        let mut d = minimal_job();
        d.record.state = s;
        d.transitions = vec![TransitionRecord {
            from: Some(s),
            to: s,
            at_ms: 1,
            reason: s.as_str().into(),
        }];
        assert_eq!(job_from_pb(job_to_pb(&d)).unwrap(), d, "{s}");
        let end = LogEvent::Ended(JobEnd {
            state: s,
            exit_code: None,
            reason: String::new(),
            total_bytes: 0,
        });
        assert_eq!(
            log_event_from_pb(log_event_to_pb(end.clone())).unwrap(),
            end
        );
    }
}

#[test]
fn the_largest_numbers_survive() {
    let mut d = minimal_job();
    let r = &mut d.record;
    r.created_ms = i64::MIN;
    r.started_ms = Some(i64::MAX);
    r.ended_ms = Some(i64::MIN);
    r.exit_code = Some(i32::MIN);
    r.spec.timeout = Some(Duration::from_millis(i64::MAX as u64));
    r.spec.resources = Resources {
        max_cpu_percent: Some(u32::MAX),
        cpu_cores: Some(vec![0, joblet_core::parse::MAX_CPU_ID]),
        max_memory_mb: Some(i64::MAX as u64),
        max_iobps: Some(i64::MAX as u64),
        gpu_count: u32::MAX,
        gpu_memory_mb: Some(i64::MAX as u64),
        gpu_time: Some(Duration::from_secs(i64::MAX as u64)),
        mig_profile: Some("7g.80gb".into()),
        gpu_milli: Some(999),
    };
    d.log_bytes = u64::MAX;
    d.gpus = Some(JobGpus {
        indices: vec![u32::MAX],
        uuids: vec!["GPU-x".into()],
        memory_mb_per_gpu: Some(u64::MAX),
        sharing: "mig".into(),
        peak_memory_mb: Some(u64::MAX),
    });
    assert_eq!(job_from_pb(job_to_pb(&d)).unwrap(), d);
}

#[test]
fn numbers_beyond_the_wire_saturate_and_zero_limits_read_as_unset() {
    let mut d = minimal_job();
    d.record.spec.resources.max_memory_mb = Some(u64::MAX);
    d.record.spec.timeout = Some(Duration::from_secs(u64::MAX));
    let wire = job_to_pb(&d);
    assert_eq!(wire.resources.as_ref().unwrap().max_memory_mb, i64::MAX);
    assert_eq!(wire.timeout_seconds, i64::MAX);
    assert_eq!(wire.timeout_ms, i64::MAX);

    let mut d = minimal_job();
    d.record.spec.resources.max_cpu_percent = Some(0);
    d.record.spec.runtime = Some(String::new());
    d.record.started_ms = Some(0);
    let back = job_from_pb(job_to_pb(&d)).unwrap();
    assert_eq!(back, minimal_job());
}

#[test]
fn a_request_with_nothing_set_round_trips() {
    let r = JobRequest::default();
    assert_eq!(job_request_from_pb(job_request_to_pb(&r)), r);
    let w = job_request_to_pb(&r);
    assert_eq!(w.timeout_seconds, None, "unset, not 0");
    assert_eq!(w.timeout_ms, None, "unset, not 0");
}

/// A sub-second limit is kept to the millisecond on the wire, with whole
/// seconds rounded up beside it for clients that predate `timeout_ms`; a
/// job from a node that predates it reads its whole seconds.
#[test]
fn timeouts_travel_in_milliseconds_beside_rounded_up_seconds() {
    let mut d = minimal_job();
    d.record.spec.timeout = Some(Duration::from_millis(1900));
    let wire = job_to_pb(&d);
    assert_eq!((wire.timeout_ms, wire.timeout_seconds), (1900, 2));
    assert_eq!(job_from_pb(wire).unwrap(), d);
    d.record.spec.timeout = Some(Duration::from_millis(500));
    let wire = job_to_pb(&d);
    assert_eq!((wire.timeout_ms, wire.timeout_seconds), (500, 1));

    let mut old = job_to_pb(&minimal_job());
    old.timeout_seconds = 30;
    assert_eq!(
        job_from_pb(old).unwrap().record.spec.timeout,
        Some(Duration::from_secs(30))
    );
}

#[test]
fn a_workflow_jobs_run_job_and_attempt_cross_the_wire() {
    let mut job = minimal_job();
    job.record.spec.workflow = Some(joblet_core::WorkflowJobRef {
        id: "3f2a9c1e-0000-4000-8000-000000000009".into(),
        job: "model-training".into(),
        attempt: 2,
        shared: Some("/volumes/wf-3f2a9c1e".into()),
    });
    let pb = job_to_pb(&job);
    assert_eq!(
        (
            pb.workflow_id.as_str(),
            pb.workflow_job.as_str(),
            pb.workflow_attempt
        ),
        ("3f2a9c1e-0000-4000-8000-000000000009", "model-training", 2)
    );
    let back = job_from_pb(pb).unwrap().record.spec.workflow.unwrap();
    assert_eq!((back.job.as_str(), back.attempt), ("model-training", 2));
    // Where the shared volume is inside the job is the node's business.
    assert_eq!(back.shared, None);
    // A job of its own has none.
    let plain = job_to_pb(&minimal_job());
    assert_eq!(plain.workflow_id, "");
    assert!(job_from_pb(plain).unwrap().record.spec.workflow.is_none());
}

#[test]
fn a_jobs_executor_and_devices_cross_the_wire() {
    let mut job = minimal_job();
    job.record.spec.executor = Some("runc".into());
    job.record.spec.devices = vec!["nvidia.com/gpu=0".into(), "vendor.example/fpga=1".into()];
    let pb = job_to_pb(&job);
    assert_eq!(pb.executor, "runc");
    assert_eq!(pb.devices, ["nvidia.com/gpu=0", "vendor.example/fpga=1"]);
    assert_eq!(job_from_pb(pb).unwrap(), job);
}

#[test]
fn the_native_executor_crosses_the_wire_as_every_node_has_it() {
    let catalog = joblet_core::executor::ExecutorCatalog::default();
    let native = &catalog.executors[0];
    let pb = executor_to_pb(native, true);
    assert_eq!((pb.name.as_str(), pb.kind.as_str()), ("native", "native"));
    assert_eq!(pb.capabilities, ["gpu", "oom-events", "device-cgroup"]);
    assert_eq!((pb.binary.as_str(), pb.gpu_unavailable.as_str()), ("", ""));
    assert_eq!(executor_from_pb(pb).unwrap(), (native.clone(), true));
}
