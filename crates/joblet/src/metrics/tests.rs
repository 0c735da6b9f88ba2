//! The pure parts: a hand-built [`Snapshot`] encoded, read back line by line.

use std::collections::BTreeMap;
use std::time::Duration;

use joblet_gpu::nvml::{GpuReadings, ProcessUtilization};
use joblet_gpu::{GpuInfo, GpuProcess, MigGpuInstance, MigInfo, Thermal};

use super::engine::{reason_class, EngineMetrics};
use super::snapshot::{GpuSample, JobGpuUse, JobSample, JobUsage, LeaderCounts, Snapshot};
use super::{attribute, dcgm, render};

const MIB: u64 = 1024 * 1024;

fn gpu(index: u32, uuid: &str) -> GpuSample {
    GpuSample {
        info: GpuInfo {
            index,
            uuid: uuid.into(),
            name: "NVIDIA A100-SXM4-40GB".into(),
            minor: index,
            pci_bus_id: format!("0000:0{index}:00.0"),
            memory_total_bytes: Some(40960 * MIB),
            memory_used_bytes: Some(1000 * MIB),
            thermal: Thermal {
                current_c: Some(40 + index),
                ..Thermal::default()
            },
            utilization_gpu_pct: Some(10 * index),
            utilization_memory_pct: Some(5),
            ..GpuInfo::default()
        },
        state: Some("AVAILABLE".into()),
        ..GpuSample::default()
    }
}

fn readings(uuid: &str) -> GpuReadings {
    GpuReadings {
        uuid: uuid.into(),
        power_mw: Some(61_500),
        energy_mj: Some(123_456_789),
        sm_clock_mhz: Some(1410),
        mem_clock_mhz: Some(1215),
        pcie_replays: Some(3),
        memory_temp_c: Some(35),
        fb_free_bytes: Some(39000 * MIB),
        fb_reserved_bytes: Some(960 * MIB),
        remapped_correctable: Some(1),
        remapped_uncorrectable: Some(0),
        remap_failure: Some(false),
        ..GpuReadings::default()
    }
}

fn job(id: &str, owner: &str, state: &str) -> JobSample {
    JobSample {
        id: id.into(),
        owner: owner.into(),
        state: state.into(),
        ..JobSample::default()
    }
}

fn node() -> Snapshot {
    let mut g0 = gpu(0, "GPU-aaaa");
    g0.readings = Some(readings("GPU-aaaa"));
    g0.jobs = vec!["j1".into()];
    g0.state = Some("IN_USE".into());
    g0.last_xid = Some(43);
    let g1 = gpu(1, "GPU-bbbb");
    Snapshot {
        hostname: "gpu-07".into(),
        driver_version: "550.163.01".into(),
        policy: "backfill".into(),
        gpus: vec![g0, g1],
        jobs: vec![job("j1", "alice", "RUNNING"), job("j2", "bob", "QUEUED")],
        gpu_seconds_by_owner: BTreeMap::from([("alice".into(), 90.5)]),
        cluster: None,
    }
}

/// The sample lines of metric `name` (exactly that name).
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .collect()
}

fn value(line: &str) -> f64 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn dcgm_series_keep_dcgm_exporters_names_types_units_and_labels() {
    let text = render(&node(), &EngineMetrics::default()).unwrap();
    // Counters keep dcgm's names (no `_total`) and are declared counters.
    for counter in [
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    ] {
        assert!(
            text.contains(&format!("# TYPE {counter} counter\n")),
            "{counter}\n{text}"
        );
        assert!(!text.contains(&format!("{counter}_total")), "{text}");
    }
    for gauge in [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_XID_ERRORS",
    ] {
        assert!(text.contains(&format!("# TYPE {gauge} gauge\n")), "{gauge}");
    }
    let energy = samples(&text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
    assert_eq!(
        energy,
        [
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-aaaa\",pci_bus_id=\"00000000:00:00.0\",device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-07\",DCGM_FI_DRIVER_VERSION=\"550.163.01\",hpc_job=\"j1\",owner=\"alice\"} 123456789"
        ]
    );
    // Units: W (from mW), MiB (from bytes), MHz, C.
    let power = samples(&text, "DCGM_FI_DEV_POWER_USAGE");
    assert_eq!(power.len(), 1, "GPU 1 has no power reading: {power:?}");
    assert_eq!(value(power[0]), 61.5);
    let used = samples(&text, "DCGM_FI_DEV_FB_USED");
    assert_eq!(used.len(), 2);
    assert!(used.iter().all(|l| value(l) == 1000.0), "{used:?}");
    let free = samples(&text, "DCGM_FI_DEV_FB_FREE");
    assert!(free
        .iter()
        .any(|l| l.contains("gpu=\"0\"") && value(l) == 39000.0));
    // Without readings free is total - used.
    assert!(free
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && value(l) == 39960.0));
    assert_eq!(value(samples(&text, "DCGM_FI_DEV_FB_RESERVED")[0]), 960.0);
    assert_eq!(value(samples(&text, "DCGM_FI_DEV_SM_CLOCK")[0]), 1410.0);
    let temps = samples(&text, "DCGM_FI_DEV_GPU_TEMP");
    assert!(temps
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && value(l) == 41.0));
    assert_eq!(samples(&text, "DCGM_FI_DEV_MEMORY_TEMP").len(), 1);
    let xid = samples(&text, "DCGM_FI_DEV_XID_ERRORS");
    assert!(xid
        .iter()
        .any(|l| l.contains("gpu=\"0\"") && value(l) == 43.0));
    assert!(xid
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && value(l) == 0.0));
    // A GPU no job holds has no job labels.
    assert!(temps
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && !l.contains("hpc_job")));
}

#[test]
fn a_gpu_shared_by_two_jobs_repeats_each_dcgm_series_per_job_and_splits_memory_per_process() {
    let mut snap = node();
    let g = &mut snap.gpus[0];
    g.jobs = vec!["j1".into(), "j3".into()];
    g.info.processes = vec![
        GpuProcess {
            pid: 100,
            used_memory_bytes: Some(300 * MIB),
        },
        GpuProcess {
            pid: 200,
            used_memory_bytes: Some(700 * MIB),
        },
    ];
    let r = g.readings.as_mut().unwrap();
    // Also a graphics process: the same allocation counted once.
    r.graphics_processes = vec![GpuProcess {
        pid: 200,
        used_memory_bytes: Some(700 * MIB),
    }];
    r.process_utilization = vec![
        ProcessUtilization {
            pid: 100,
            sm_pct: 20,
            memory_pct: 1,
        },
        ProcessUtilization {
            pid: 200,
            sm_pct: 50,
            memory_pct: 1,
        },
    ];
    snap.jobs.push(job("j3", "carol", "RUNNING"));
    let owners = BTreeMap::from([(100, "j1"), (200, "j3")]);
    let mut by_job = attribute::by_job(&snap.gpus, |pid| owners.get(&pid).map(|j| j.to_string()));
    for j in &mut snap.jobs {
        j.gpus = by_job.remove(&j.id).unwrap_or_default();
    }
    let text = render(&snap, &EngineMetrics::default()).unwrap();
    let used: Vec<&str> = samples(&text, "DCGM_FI_DEV_FB_USED")
        .into_iter()
        .filter(|l| l.contains("gpu=\"0\""))
        .collect();
    assert_eq!(used.len(), 2, "{used:?}");
    assert!(used
        .iter()
        .any(|l| l.contains("hpc_job=\"j1\",owner=\"alice\"")));
    assert!(used
        .iter()
        .any(|l| l.contains("hpc_job=\"j3\",owner=\"carol\"")));
    let mem = samples(&text, "joblet_job_gpu_memory_bytes");
    let of = |job: &str| {
        mem.iter()
            .find(|l| l.contains(&format!("job_id=\"{job}\"")))
            .map(|l| value(l))
    };
    assert_eq!(of("j1"), Some((300 * MIB) as f64));
    assert_eq!(of("j3"), Some((700 * MIB) as f64));
    let sm = samples(&text, "joblet_job_gpu_sm_utilization_ratio");
    assert!(sm
        .iter()
        .any(|l| l.contains("job_id=\"j3\"") && value(l) == 0.5));
    let procs = samples(&text, "joblet_job_gpu_processes");
    assert!(procs.iter().all(|l| value(l) == 1.0), "{procs:?}");
}

#[test]
fn attribution_counts_a_process_in_both_lists_once_and_skips_foreign_pids() {
    let mut g = gpu(2, "GPU-cccc");
    g.info.processes = vec![
        GpuProcess {
            pid: 1,
            used_memory_bytes: Some(5),
        },
        GpuProcess {
            pid: 2,
            used_memory_bytes: None,
        },
        GpuProcess {
            pid: 3,
            used_memory_bytes: Some(9),
        },
    ];
    g.readings = Some(GpuReadings {
        graphics_processes: vec![GpuProcess {
            pid: 2,
            used_memory_bytes: Some(7),
        }],
        ..GpuReadings::default()
    });
    let got = attribute::by_job(&[g], |pid| (pid != 3).then(|| "j".to_string()));
    assert_eq!(
        got["j"],
        [JobGpuUse {
            index: 2,
            uuid: "GPU-cccc".into(),
            memory_bytes: 12,
            sm_pct: Some(0),
            processes: 2,
        }]
    );
}

#[test]
fn mig_slices_get_their_own_framebuffer_series_with_mig_labels() {
    let mut snap = node();
    let g = &mut snap.gpus[1];
    g.info.mig = Some(MigInfo {
        enabled: true,
        pending: true,
        gpu_instances: vec![
            MigGpuInstance {
                gpu_instance_id: 1,
                profile: "3g.20gb".into(),
                uuid: Some("MIG-one".into()),
                memory_total_bytes: Some(20000 * MIB),
                memory_used_bytes: Some(100 * MIB),
                ..MigGpuInstance::default()
            },
            MigGpuInstance {
                gpu_instance_id: 2,
                profile: "3g.20gb".into(),
                uuid: Some("MIG-two".into()),
                memory_total_bytes: Some(20000 * MIB),
                memory_used_bytes: Some(0),
                ..MigGpuInstance::default()
            },
        ],
    });
    g.mig_jobs = BTreeMap::from([("MIG-two".to_string(), vec!["j2".to_string()])]);
    let text = render(&snap, &EngineMetrics::default()).unwrap();
    let used: Vec<&str> = samples(&text, "DCGM_FI_DEV_FB_USED")
        .into_iter()
        .filter(|l| l.contains("gpu=\"1\""))
        .collect();
    assert_eq!(
        used.len(),
        2,
        "one per slice, none for the whole GPU: {used:?}"
    );
    assert!(used
        .iter()
        .any(|l| l.contains("GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\"") && value(l) == 100.0));
    assert!(used
        .iter()
        .any(|l| l.contains("GPU_I_ID=\"2\"") && l.contains("hpc_job=\"j2\",owner=\"bob\"")));
    // Device-wide fields stay per GPU, without MIG labels.
    let temps = samples(&text, "DCGM_FI_DEV_GPU_TEMP");
    assert!(temps
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && !l.contains("GPU_I_ID")));
}

#[test]
fn a_lost_gpu_has_no_dcgm_series_but_keeps_its_state() {
    let mut snap = node();
    snap.gpus[1].info.lost = true;
    snap.gpus[1].state = Some("OFFLINE".into());
    let text = render(&snap, &EngineMetrics::default()).unwrap();
    for f in dcgm::FIELDS {
        assert!(
            samples(&text, f.name)
                .iter()
                .all(|l| !l.contains("gpu=\"1\"")),
            "{}",
            f.name
        );
    }
    let state = samples(&text, "joblet_gpu_state");
    assert!(state
        .iter()
        .any(|l| l.contains("gpu=\"1\"") && l.contains("state=\"OFFLINE\"") && value(l) == 1.0));
}

#[test]
fn joblet_series_count_jobs_queue_gpu_states_usage_and_gpu_seconds() {
    let mut snap = node();
    snap.jobs.push(job("j4", "bob", "QUEUED"));
    snap.jobs[0].usage = Some(JobUsage {
        cpu_seconds: Some(1.25),
        memory_bytes: Some(4096),
        io_read_bytes: Some(10),
        io_write_bytes: None,
    });
    let engine = EngineMetrics::default();
    engine.launched(1_000, 3_000, Duration::from_millis(12), true);
    engine.launched(1_000, 1_000, Duration::from_millis(1), false);
    engine.ended("FAILED", None, "out of memory: limit 512 MB");
    engine.ended("COMPLETED", Some(0), "");
    engine.decided(Duration::from_micros(30));
    let text = render(&snap, &engine).unwrap();
    let one = |name: &str, labels: &str| -> f64 {
        let lines: Vec<&str> = samples(&text, name)
            .into_iter()
            .filter(|l| l.contains(labels))
            .collect();
        assert_eq!(lines.len(), 1, "{name} {labels}: {lines:?}\n{text}");
        value(lines[0])
    };
    assert_eq!(one("joblet_jobs", "state=\"QUEUED\""), 2.0);
    assert_eq!(one("joblet_jobs", "state=\"RUNNING\""), 1.0);
    assert!(samples(&text, "joblet_jobs")
        .iter()
        .all(|l| !l.contains("COMPLETED")));
    assert_eq!(
        one("joblet_queue_length", "policy=\"backfill\",owner=\"bob\""),
        2.0
    );
    assert_eq!(
        one(
            "joblet_gpu_state",
            "gpu=\"0\",uuid=\"GPU-aaaa\",state=\"IN_USE\""
        ),
        1.0
    );
    assert_eq!(
        one(
            "joblet_gpu_state",
            "gpu=\"0\",uuid=\"GPU-aaaa\",state=\"AVAILABLE\""
        ),
        0.0
    );
    assert_eq!(one("joblet_gpu_jobs", "gpu=\"0\""), 1.0);
    assert_eq!(one("joblet_job_cpu_seconds_total", "job_id=\"j1\""), 1.25);
    assert_eq!(one("joblet_job_memory_bytes", "job_id=\"j1\""), 4096.0);
    assert_eq!(one("joblet_job_io_read_bytes_total", "job_id=\"j1\""), 10.0);
    assert!(samples(&text, "joblet_job_io_written_bytes_total").is_empty());
    assert_eq!(
        one("joblet_owner_gpu_seconds_total", "owner=\"alice\""),
        90.5
    );
    assert_eq!(one("joblet_job_starts_total", ""), 1.0);
    assert_eq!(one("joblet_job_start_failures_total", ""), 1.0);
    assert_eq!(one("joblet_job_ends_total", "state=\"FAILED\""), 1.0);
    assert_eq!(one("joblet_job_failures_total", "reason=\"oom\""), 1.0);
    assert_eq!(one("joblet_job_start_latency_seconds_count", ""), 1.0);
    assert_eq!(
        one("joblet_job_start_latency_seconds_bucket", "le=\"0.025\""),
        1.0
    );
    assert_eq!(
        one("joblet_job_start_latency_seconds_bucket", "le=\"0.01\""),
        0.0
    );
    assert_eq!(one("joblet_job_queue_wait_seconds_sum", ""), 2.0);
    assert_eq!(one("joblet_scheduler_decision_seconds_count", ""), 1.0);
    // Counters end in _total, nothing else does; no camelCase label.
    for line in text.lines().filter(|l| l.starts_with("# TYPE joblet_")) {
        let name = line.split(' ').nth(2).unwrap();
        assert_eq!(
            line.ends_with(" counter"),
            name.ends_with("_total"),
            "{line}"
        );
    }
}

#[test]
fn a_cluster_node_exports_what_it_did_as_the_scheduler_leader() {
    let engine = EngineMetrics::default();
    let single = render(&node(), &engine).unwrap();
    assert!(!single.contains("joblet_cluster_"), "{single}");
    let mut snap = node();
    snap.cluster = Some(LeaderCounts {
        terms: 2,
        plans: 40,
        rejected: 3,
        placements: 97,
    });
    let text = render(&snap, &engine).unwrap();
    for (name, want) in [
        ("joblet_cluster_leader_terms_total", 2.0),
        ("joblet_cluster_plans_total", 40.0),
        ("joblet_cluster_plans_rejected_total", 3.0),
        ("joblet_cluster_placements_total", 97.0),
    ] {
        let lines = samples(&text, name);
        assert_eq!(lines.len(), 1, "{name}: {lines:?}\n{text}");
        assert_eq!(value(lines[0]), want, "{name}");
        assert!(
            text.contains(&format!("# TYPE {name} counter")),
            "{name} is a counter\n{text}"
        );
    }
}

#[test]
fn failure_reasons_fall_into_a_few_classes() {
    for (code, reason, class) in [
        (None, "out of memory: limit 512 MB", "oom"),
        (
            None,
            "GPU memory quota exceeded: used 2048 MB of 1024 MB on GPU-x",
            "gpu_memory_quota",
        ),
        (None, "GPU time limit of 1h reached", "gpu_time_limit"),
        (None, "timed out after 10s", "timeout"),
        (None, "XID 79 (GPU fallen off the bus)", "gpu_failure"),
        (
            None,
            "lost: the job's shim exited without recording an exit status",
            "lost",
        ),
        (Some(3), "exited with code 3", "exit_code"),
        (None, "killed by signal 9", "signal"),
        (None, "", "other"),
    ] {
        assert_eq!(reason_class(code, reason), class, "{reason}");
    }
}

#[test]
fn bus_ids_take_nvmls_eight_digit_domain() {
    assert_eq!(dcgm::nvml_bus_id("0000:07:00.0"), "00000000:07:00.0");
    assert_eq!(dcgm::nvml_bus_id("0000:b7:00.0"), "00000000:B7:00.0");
}
