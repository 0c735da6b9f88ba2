//! The printer's output, as people and scripts read it.

use super::*;
use joblet_proto::pb;

const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z

fn transition(from: pb::JobState, to: pb::JobState, at: i64, reason: &str) -> pb::Transition {
    pb::Transition {
        from: from as i32,
        to: to as i32,
        at_unix_ms: at,
        reason: reason.into(),
    }
}

/// A finished GPU job with every field set.
fn sample_job() -> pb::Job {
    use pb::JobState::*;
    pb::Job {
        id: "abc123de-f456-7890-1234-567890abcdef".into(),
        command: "python".into(),
        args: vec![
            "train.py".into(),
            "--epochs".into(),
            "3".into(),
            "--note=two words".into(),
        ],
        state: Completed as i32,
        owner: "admin".into(),
        resources: Some(pb::Resources {
            max_cpu: 200,
            cpu_cores: "0-3".into(),
            max_memory_mb: 1024,
            max_iobps: 10_485_760,
            gpu_count: 2,
            gpu_memory_mb: 8192,
            gpu_time_seconds: Some(7200),
            gpu_milli: 0,
        }),
        gpus: Some(pb::JobGpus {
            indices: vec![0, 1],
            uuids: vec![
                "GPU-1a2b3c4d-0000-1111-2222-333344445555".into(),
                "GPU-5e6f7a8b-0000-1111-2222-333344445555".into(),
            ],
            memory_mb_per_gpu: 8192,
            sharing: "exclusive".into(),
            peak_memory_mb: 5500,
        }),
        cuda_version: "12.2".into(),
        mig_profile: String::new(),
        gpu_profiling: true,
        env: [("MODE".to_owned(), "fast".to_owned())].into(),
        secret_env: [("API_TOKEN".to_owned(), "***".to_owned())].into(),
        exit_code: Some(0),
        reason: "exited with code 0".into(),
        created_unix_ms: T0,
        started_unix_ms: T0 + 1_500,
        ended_unix_ms: T0 + 1_500 + 330_000,
        timeout_seconds: 3600,
        timeout_ms: 3_600_000,
        workflow_id: String::new(),
        workflow_job: String::new(),
        workflow_attempt: 0,
        nodes: Vec::new(),
        attempt: 0,
        restart: String::new(),
        executor: "runc".into(),
        devices: vec!["nvidia.com/gpu=0".into(), "vendor.example/fpga=1".into()],
        interactive: false,
        tty: false,
        runtime: "python-3.11-ml@1.0".into(),
        network: "none".into(),
        transitions: vec![
            transition(Unspecified, Pending, T0, "submitted"),
            transition(Pending, Queued, T0 + 10, ""),
            transition(Queued, Running, T0 + 1_500, "started with pid 4242"),
            transition(Running, Completed, T0 + 331_500, "exited with code 0"),
        ],
        log_bytes: 1234,
        volumes: vec!["data-lake".into(), "images:ro".into()],
        runtime_digest: "sha256:0123456789abcdef0123456789abcdef".into(),
    }
}

fn minimal_running_job() -> pb::Job {
    pb::Job {
        id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
        command: "sleep".into(),
        args: vec!["600".into()],
        state: pb::JobState::Running as i32,
        owner: "alice".into(),
        created_unix_ms: T0 + 60_000,
        started_unix_ms: T0 + 61_000,
        ..Default::default()
    }
}

fn human(f: impl FnOnce(&mut Printer<&mut Vec<u8>>) -> io::Result<()>) -> String {
    let mut buf = Vec::new();
    f(&mut Printer::new(Format::Human, &mut buf)).unwrap();
    String::from_utf8(buf).unwrap()
}

fn json(f: impl FnOnce(&mut Printer<&mut Vec<u8>>) -> io::Result<()>) -> serde_json::Value {
    let mut buf = Vec::new();
    f(&mut Printer::new(Format::Json, &mut buf)).unwrap();
    serde_json::from_slice(&buf).unwrap()
}

#[test]
fn status_human() {
    let job = JobView::from(&sample_job());
    insta::assert_snapshot!(human(|p| p.job_status(&job, false, T0 + 999_000)));
}

#[test]
fn status_human_detail() {
    let job = JobView::from(&sample_job());
    insta::assert_snapshot!(human(|p| p.job_status(&job, true, T0 + 999_000)));
}

#[test]
fn status_shows_a_sub_second_timeout_to_the_millisecond() {
    let job = JobView::from(&pb::Job {
        timeout_ms: 1900,
        timeout_seconds: 2,
        ..minimal_running_job()
    });
    let text = human(|p| p.job_status(&job, false, T0 + 62_000));
    assert!(text.contains("Timeout: 1s 900ms\n"), "{text}");
}

#[test]
fn status_human_running_minimal() {
    let job = JobView::from(&minimal_running_job());
    insta::assert_snapshot!(human(|p| p.job_status(&job, false, T0 + 61_000 + 125_000)));
}

#[test]
fn list_human() {
    let jobs = [
        JobView::from(&minimal_running_job()),
        JobView::from(&sample_job()),
    ];
    insta::assert_snapshot!(human(|p| p.job_list(&jobs)));
    assert_eq!(
        human(|p| p.job_list(&[])),
        "ID  STATUS  EXIT  OWNER  CREATED  COMMAND\n"
    );
}

#[test]
fn workflow_jobs_name_their_workflow() {
    let mut in_wf = minimal_running_job();
    in_wf.workflow_id = "1a2b3c4d-0000-4000-8000-00000000abcd".into();
    in_wf.workflow_job = "model-training".into();
    in_wf.workflow_attempt = 2;
    let jobs = [JobView::from(&in_wf), JobView::from(&sample_job())];
    let list = human(|p| p.job_list(&jobs));
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[0].contains("  CREATED               WORKFLOW                   COMMAND"),
        "{list}"
    );
    assert!(
        lines[1].ends_with("1a2b3c4d/model-training#2  sleep 600"),
        "{list}"
    );
    assert!(
        lines[2].contains("  -                          python"),
        "{list}"
    );

    let status = human(|p| p.job_status(&jobs[0], false, T0 + 62_000));
    assert!(
        status.contains("Owner: alice\nWorkflow: 1a2b3c4d-0000-4000-8000-00000000abcd (job model-training, attempt 2)\n"),
        "{status}"
    );
    let v = json(|p| p.job_status(&jobs[0], false, 0));
    assert_eq!(v["workflow_id"], "1a2b3c4d-0000-4000-8000-00000000abcd");
    assert_eq!(v["workflow_job"], "model-training");
    assert_eq!(v["workflow_attempt"], 2);
    let alone = json(|p| p.job_status(&jobs[1], false, 0));
    assert_eq!(alone["workflow_id"], serde_json::Value::Null);
    assert_eq!(alone["workflow_attempt"], serde_json::Value::Null);
    assert!(!human(|p| p.job_status(&jobs[1], false, 0)).contains("Workflow"));
}

#[test]
fn status_json() {
    let job = JobView::from(&sample_job());
    let mut buf = Vec::new();
    Printer::new(Format::Json, &mut buf)
        .job_status(&job, false, 0)
        .unwrap();
    insta::assert_snapshot!(String::from_utf8(buf).unwrap());
}

#[test]
fn list_json_is_an_array_of_the_same_view() {
    let job = JobView::from(&sample_job());
    let one = json(|p| p.job_status(&job, false, 0));
    let list = json(|p| p.job_list(std::slice::from_ref(&job)));
    assert_eq!(list, serde_json::Value::Array(vec![one]));
}

#[test]
fn run_prints_only_the_id() {
    let job = JobView::from(&sample_job());
    assert_eq!(human(|p| p.job_started(&job)), format!("{}\n", job.id));
    assert_eq!(json(|p| p.job_started(&job))["id"], job.id.as_str());
}

#[test]
fn actions_and_whoami() {
    let job = JobView::from(&minimal_running_job());
    assert_eq!(
        human(|p| p.job_signalled(&job, "SIGKILL sent")),
        "job 0f0e0d0c-0000-4000-8000-000000000001: SIGKILL sent (state: RUNNING)\n"
    );
    assert_eq!(human(|p| p.job_deleted("abc")), "job abc deleted\n");
    assert_eq!(
        json(|p| p.job_deleted("abc")),
        serde_json::json!({"id": "abc", "deleted": true})
    );
    let who = WhoAmIView {
        name: "admin".into(),
        role: "admin".into(),
        node: "default".into(),
        address: "127.0.0.1:50051".into(),
        node_version: "0.1.0".into(),
        supported: vec!["env".into(), "secret_env".into(), "timeout".into()],
        state_disk: Some(crate::view::StateDiskView {
            path: "/var/lib/joblet".into(),
            free_bytes: 41 << 30,
            total_bytes: 252 << 30,
        }),
        executors: vec![
            executor(
                "native",
                "native",
                &["gpu", "oom-events", "device-cgroup"],
                None,
                true,
                None,
            ),
            executor(
                "runc",
                "runc",
                &["gpu", "cdi", "oom-events", "device-cgroup"],
                Some("1.1.12"),
                true,
                None,
            ),
            executor(
                "gvisor",
                "runsc",
                &["oom-events"],
                Some("release-20221219.0"),
                false,
                Some("runsc release 20221219 has no nvproxy"),
            ),
        ],
        default_executor: Some("native".into()),
    };
    insta::assert_snapshot!(human(|p| p.whoami(&who)));
    let j = json(|p| p.whoami(&who));
    assert_eq!(j["default_executor"], "native");
    assert_eq!(j["executors"][0]["default"], true);
    assert_eq!(j["executors"][2]["allowed"], false);
    assert_eq!(
        j["executors"][2]["gpu_unavailable"],
        "runsc release 20221219 has no nvproxy"
    );
    assert_eq!(j["executors"][0]["binary"], serde_json::Value::Null);
    // A node that predates executors: no section at all.
    let old = WhoAmIView {
        executors: Vec::new(),
        default_executor: None,
        ..who
    };
    assert!(!human(|p| p.whoami(&old)).contains("Executors"));
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(3 << 20), "3.0 MiB");
}

fn executor(
    name: &str,
    kind: &str,
    caps: &[&str],
    version: Option<&str>,
    allowed: bool,
    gpu_unavailable: Option<&str>,
) -> crate::view::ExecutorView {
    crate::view::ExecutorView {
        name: name.into(),
        kind: kind.into(),
        binary: (kind != "native").then(|| format!("/usr/bin/{kind}")),
        version: version.map(Into::into),
        capabilities: caps.iter().map(|c| c.to_string()).collect(),
        gpu_unavailable: gpu_unavailable.map(Into::into),
        allowed,
        default: name == "native",
    }
}

/// Seed 001's lines, for a placed and for a waiting GPU job.
#[test]
fn gpu_lines_of_job_status() {
    let placed = human(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
    assert!(
        placed.contains("GPUs: [0, 1] (2 GPUs allocated)\nGPU Memory: 8192 MB required per GPU\n"),
        "{placed}"
    );
    assert!(placed.contains("GPU UUIDs: GPU-1a2b3c4d-0000-1111-2222-333344445555, GPU-5e6f7a8b-0000-1111-2222-333344445555\n"), "{placed}");
    assert!(placed.contains("GPU Peak Memory: 5500 MB\n"), "{placed}");

    let mut waiting = sample_job();
    waiting.state = pb::JobState::Queued as i32;
    waiting.gpus = None;
    waiting.resources = Some(pb::Resources {
        gpu_count: 2,
        ..Default::default()
    });
    let text = human(|p| p.job_status(&JobView::from(&waiting), false, T0));
    assert!(text.contains("GPUs: waiting for 2 GPUs\n"), "{text}");
    assert!(!text.contains("GPU Memory"), "not asked for: {text}");
    assert!(!text.contains("GPU UUIDs"), "{text}");
    let v = json(|p| p.job_status(&JobView::from(&waiting), false, T0));
    assert_eq!(v["gpus"], serde_json::Value::Null);
    assert_eq!(v["resources"]["gpu_count"], 2);

    let mut one = sample_job();
    one.gpus = Some(pb::JobGpus {
        indices: vec![3],
        uuids: vec!["GPU-x".into()],
        sharing: "shared".into(),
        ..Default::default()
    });
    let text = human(|p| p.job_status(&JobView::from(&one), false, T0));
    assert!(text.contains("GPUs: [3] (1 GPU allocated)\n"), "{text}");
    assert!(text.contains("GPU Sharing: shared\n"), "{text}");
    assert!(!text.contains("GPU Peak Memory"), "{text}");

    let mut mig = sample_job();
    mig.gpus = Some(pb::JobGpus {
        indices: vec![1, 1],
        uuids: vec!["MIG-a".into(), "MIG-b".into()],
        sharing: "mig".into(),
        ..Default::default()
    });
    mig.mig_profile = "1g.10gb".into();
    mig.gpu_profiling = false;
    let text = human(|p| p.job_status(&JobView::from(&mig), false, T0));
    assert!(
        text.contains("GPUs: [1, 1] (2 MIG slices allocated)\n"),
        "{text}"
    );
    assert!(text.contains("GPU UUIDs: MIG-a, MIG-b\n"), "{text}");
    assert!(text.contains("MIG Profile: 1g.10gb\n"), "{text}");
    assert!(!text.contains("GPU Profiling"), "{text}");
    let v = json(|p| p.job_status(&JobView::from(&mig), false, T0));
    assert_eq!(v["mig_profile"], "1g.10gb");
    assert_eq!(v["gpu_profiling"], false);

    let cpu = human(|p| p.job_status(&JobView::from(&minimal_running_job()), false, T0));
    assert!(!cpu.contains("GPU"), "{cpu}");
}

#[test]
fn gpu_fields_in_json() {
    let v = json(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
    assert_eq!(v["gpus"]["indices"], serde_json::json!([0, 1]));
    assert_eq!(
        v["gpus"]["uuids"][1],
        "GPU-5e6f7a8b-0000-1111-2222-333344445555"
    );
    assert_eq!(v["gpus"]["memory_mb_per_gpu"], 8192);
    assert_eq!(v["gpus"]["peak_memory_mb"], 5500);
    assert_eq!(v["resources"]["gpu_time_seconds"], 7200);
    assert_eq!(v["cuda_version"], "12.2");
    assert_eq!(v["mig_profile"], serde_json::Value::Null);
    assert_eq!(v["gpu_profiling"], true);
    let text = human(|p| p.job_status(&JobView::from(&sample_job()), false, T0));
    assert!(text.contains("GPU Profiling: enabled\n"), "{text}");
    assert!(!text.contains("MIG Profile"), "{text}");
}

fn audit_records() -> Vec<AuditView> {
    [
        pb::AuditRecord {
            job_id: "abc123de-f456-7890-1234-567890abcdef".into(),
            owner: "alice".into(),
            gpu_uuids: vec!["GPU-aaaa".into(), "GPU-bbbb".into()],
            gpu_indices: vec![0, 1],
            memory_mb_per_gpu: 8192,
            sharing: "exclusive".into(),
            start_ms: T0,
            end_ms: T0 + 5_430_000,
            duration_ms: 5_430_000,
            peak_memory_mb: 7900,
            ended: "FAILED".into(),
            reason: "GPU memory quota exceeded: used 9000 MB of 8192 MB on GPU-aaaa".into(),
        },
        pb::AuditRecord {
            job_id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
            owner: "bob".into(),
            gpu_uuids: vec!["GPU-cccc".into()],
            gpu_indices: vec![2],
            sharing: "shared".into(),
            start_ms: T0 + 60_000,
            ..Default::default()
        },
    ]
    .iter()
    .map(AuditView::from)
    .collect()
}

#[test]
fn audit_table() {
    insta::assert_snapshot!(human(|p| p.audit(&audit_records())));
    assert_eq!(
        human(|p| p.audit(&[])),
        "JOB  OWNER  GPUS  START  END  DURATION  PEAK MEM  ENDED\n"
    );
}

#[test]
fn audit_json() {
    let v = json(|p| p.audit(&audit_records()));
    insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
    let open = &v[1];
    assert_eq!(open["end"], serde_json::Value::Null);
    assert_eq!(open["end_ms"], serde_json::Value::Null);
    assert_eq!(open["duration_ms"], serde_json::Value::Null);
    assert_eq!(open["memory_mb_per_gpu"], serde_json::Value::Null);
    assert_eq!(v[0]["start"], "2025-01-02T03:04:05.000Z");
    assert_eq!(v[0]["duration_ms"], 5_430_000);
}

/// A job of a cluster: placed on `nodes`, as attempt `attempt`.
fn cluster_job(nodes: &[&str], attempt: u32) -> pb::Job {
    pb::Job {
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        attempt,
        restart: "on-node-failure".into(),
        ..minimal_running_job()
    }
}

#[test]
fn list_human_cluster() {
    let mut queued = cluster_job(&[], 1);
    queued.id = "77777777-0000-4000-8000-000000000002".into();
    queued.state = pb::JobState::Queued as i32;
    queued.started_unix_ms = 0;
    let mut spread = cluster_job(&["gpu-01", "gpu-02"], 1);
    spread.id = "5a5a5a5a-0000-4000-8000-000000000003".into();
    let jobs = [
        JobView::from(&cluster_job(&["gpu-07"], 2)),
        JobView::from(&spread),
        JobView::from(&queued),
    ];
    insta::assert_snapshot!(human(|p| p.job_list(&jobs)));
}

#[test]
fn the_node_column_shows_only_with_cluster_information() {
    let single = [
        JobView::from(&minimal_running_job()),
        JobView::from(&sample_job()),
    ];
    let text = human(|p| p.job_list(&single));
    assert!(!text.contains("NODE"), "{text}");
    assert!(
        text.starts_with("ID        STATUS     EXIT  OWNER  CREATED               COMMAND\n"),
        "{text}"
    );

    // One job with cluster information is enough; the others show `-`.
    let mixed = [
        JobView::from(&cluster_job(&["gpu-07"], 1)),
        JobView::from(&sample_job()),
    ];
    let text = human(|p| p.job_list(&mixed));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("  CREATED               NODE    COMMAND"),
        "{text}"
    );
    assert!(lines[1].ends_with("  gpu-07  sleep 600"), "{text}");
    assert!(lines[2].contains("  -       python train.py"), "{text}");

    // With a workflow too: NODE comes before WORKFLOW.
    let mut in_wf = cluster_job(&["gpu-07"], 1);
    in_wf.workflow_id = "1a2b3c4d-0000-4000-8000-00000000abcd".into();
    in_wf.workflow_job = "train".into();
    in_wf.workflow_attempt = 1;
    let text = human(|p| p.job_list(&[JobView::from(&in_wf)]));
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("CREATED               NODE    WORKFLOW          COMMAND"),
        "{text}"
    );
    assert!(
        text.contains("  gpu-07  1a2b3c4d/train#1  sleep 600"),
        "{text}"
    );
}

#[test]
fn status_shows_node_attempt_and_restart_in_a_cluster() {
    let job = JobView::from(&cluster_job(&["gpu-07"], 2));
    let text = human(|p| p.job_status(&job, false, T0 + 62_000));
    assert!(
        text.contains("Owner: alice\nNode: gpu-07\nAttempt: 2 (placed again after its node was lost)\nRestart: on-node-failure\nCreated: "),
        "{text}"
    );

    let job = JobView::from(&cluster_job(&["gpu-01", "gpu-02"], 1));
    let text = human(|p| p.job_status(&job, false, T0 + 62_000));
    assert!(
        text.contains("Nodes: gpu-01, gpu-02\nAttempt: 1\nRestart: on-node-failure\n"),
        "{text}"
    );

    let mut queued = cluster_job(&[], 1);
    queued.restart = String::new();
    queued.state = pb::JobState::Queued as i32;
    let text = human(|p| p.job_status(&JobView::from(&queued), false, T0));
    assert!(
        text.contains("Node: - (not placed yet)\nAttempt: 1\nCreated: "),
        "{text}"
    );
    queued.state = pb::JobState::Stopped as i32;
    let text = human(|p| p.job_status(&JobView::from(&queued), false, T0));
    assert!(text.contains("Node: -\nAttempt: 1\n"), "{text}");

    for single in [sample_job(), minimal_running_job()] {
        let text = human(|p| p.job_status(&JobView::from(&single), true, T0));
        for word in ["Node", "Attempt", "Restart"] {
            assert!(!text.contains(word), "{word}: {text}");
        }
    }
}

#[test]
fn cluster_fields_in_json() {
    let job = JobView::from(&cluster_job(&["gpu-01", "gpu-02"], 3));
    let v = json(|p| p.job_status(&job, false, 0));
    assert_eq!(v["nodes"], serde_json::json!(["gpu-01", "gpu-02"]));
    assert_eq!(v["attempt"], 3);
    assert_eq!(v["restart"], "on-node-failure");
    let list = json(|p| p.job_list(std::slice::from_ref(&job)));
    assert_eq!(list[0]["nodes"], v["nodes"]);
    assert_eq!(list[0]["attempt"], 3);

    let queued = json(|p| p.job_status(&JobView::from(&cluster_job(&[], 1)), false, 0));
    assert_eq!(queued["nodes"], serde_json::json!([]));

    // On a node on its own the fields are there, and null, as the
    // workflow fields are.
    let single = json(|p| p.job_status(&JobView::from(&sample_job()), false, 0));
    for key in ["nodes", "attempt", "restart"] {
        assert_eq!(single[key], serde_json::Value::Null, "{key}");
    }
    // A node not in a cluster sends attempt 0, whatever else it sends.
    let stray = pb::Job {
        nodes: vec!["x".into()],
        restart: "never".into(),
        ..minimal_running_job()
    };
    let v = json(|p| p.job_status(&JobView::from(&stray), false, 0));
    assert_eq!(v["nodes"], serde_json::Value::Null);
    assert_eq!(v["restart"], serde_json::Value::Null);
}

#[test]
fn gpu_status_names_the_node_in_a_cluster() {
    let response = pb::GpuStatusResponse {
        node: "gpu-07".into(),
        backend: "nvml".into(),
        driver_version: "550.54".into(),
        cuda_driver_version: "12.4".into(),
        ..Default::default()
    };
    let view = GpuNodeView::from_pb(response.clone());
    let text = human(|p| p.gpu_status(&view, false));
    assert_eq!(
        text,
        "Node: gpu-07\nDriver 550.54 · CUDA 12.4 · via nvml\nno GPUs on this node\n"
    );
    assert_eq!(json(|p| p.gpu_status(&view, false))["node"], "gpu-07");

    let alone = GpuNodeView::from_pb(pb::GpuStatusResponse {
        node: String::new(),
        ..response
    });
    let text = human(|p| p.gpu_status(&alone, false));
    assert!(text.starts_with("Driver 550.54"), "{text}");
    assert_eq!(
        json(|p| p.gpu_status(&alone, false))["node"],
        serde_json::Value::Null
    );
}

#[test]
fn node_list_and_changes_through_the_printer() {
    let list = NodeListView::from(&pb::ListNodesResponse {
        cluster: true,
        answered_by: "n1".into(),
        nodes: vec![pb::Node {
            name: "n1".into(),
            address: "10.0.0.1:50051".into(),
            state: "ready".into(),
            leader: true,
            gpus_total: 8,
            gpus_free: 8,
            ..Default::default()
        }],
    });
    assert_eq!(
        human(|p| p.node_list(&list)),
        "NAME  STATE  LEADER  GPUS  JOBS  CPU  MEMORY  ADDRESS         LABELS\n\
         n1    ready  *       8/8   0     -    -       10.0.0.1:50051  -\n\
         answered by n1\n"
    );
    let v = json(|p| p.node_list(&list));
    assert_eq!(v["nodes"][0]["leader"], true);
    assert_eq!(v["nodes"][0]["memory_mb"], serde_json::Value::Null);
    let node = &list.nodes[0];
    assert_eq!(
        human(|p| p.node_changed(node)),
        "node n1 is ready: new jobs may be placed on it\n"
    );
    assert_eq!(json(|p| p.node_changed(node))["name"], "n1");
}
