//! The workflow format: seed 001's file as it is, the keys and defaults,
//! and every refusal with its file, line and column (insta snapshots show
//! the message under the line it points at).

use std::time::Duration;

use joblet_workflow::{FormatError, Limits, Need, Problem, Workflow};

const SEED: &str = include_str!("fixtures/ml-training-pipeline.yaml");

const ANY_NODE: Limits = Limits {
    max_gpus_per_node: None,
};

fn parse(text: &str) -> Result<Workflow, FormatError> {
    Workflow::parse(text, "wf.yaml", &ANY_NODE)
}

/// The error, under the line and column it names.
fn shown(text: &str, e: &FormatError) -> String {
    let line = text.lines().nth(e.line - 1).unwrap_or("");
    format!("{line}\n{}^\n{e}", " ".repeat(e.column - 1))
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => shown(text, &e),
    }
}

#[test]
fn seed_001_is_read_as_written() {
    let limits = Limits {
        max_gpus_per_node: Some(2),
    };
    let wf = Workflow::parse(SEED, "ml-training-pipeline.yaml", &limits).unwrap();
    assert_eq!(wf.file(), "ml-training-pipeline.yaml");
    assert_eq!(wf.name(), None);
    let names: Vec<&str> = wf.jobs().iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        ["data-preprocessing", "model-training", "model-evaluation"]
    );

    let prep = wf.job("data-preprocessing").unwrap();
    assert_eq!(prep.command, "python3");
    assert_eq!(prep.args, ["preprocess.py"]);
    assert_eq!(prep.runtime.as_deref(), Some("python-3.11-ml"));
    assert!(prep.requires.is_empty());
    assert_eq!(prep.resources.max_memory_mb, Some(4096));
    assert_eq!(prep.resources.max_cpu, Some(200));
    assert_eq!(prep.resources.gpu_count, None);
    assert_eq!(
        (prep.retries, prep.retry_backoff),
        (0, Duration::from_secs(1))
    );

    let train = wf.job("model-training").unwrap();
    assert_eq!(train.args, ["train.py", "--epochs", "100"]);
    assert_eq!(train.requires.len(), 1);
    assert_eq!(train.requires[0].job, "data-preprocessing");
    assert_eq!(train.requires[0].need, Need::Completed);
    let r = train.request();
    assert_eq!((r.max_memory_mb, r.max_cpu), (16384, 800));
    assert_eq!((r.gpu_count, r.gpu_memory_mb), (2, 8192));
    assert_eq!(r.runtime, "python-3.11-ml");

    let eval = wf.job("model-evaluation").unwrap().request();
    assert_eq!((eval.max_memory_mb, eval.max_cpu), (8192, 0));
    assert_eq!((eval.gpu_count, eval.gpu_memory_mb), (1, 4096));
    for job in wf.jobs() {
        job.request().validate().unwrap();
    }
}

#[test]
fn seed_001_on_nodes_with_one_gpu_points_at_the_two_gpu_request() {
    let limits = Limits {
        max_gpus_per_node: Some(1),
    };
    let e = Workflow::parse(SEED, "ml-training-pipeline.yaml", &limits).unwrap_err();
    assert_eq!((e.line, e.column), (20, 7));
    assert!(matches!(
        *e.problem,
        Problem::TooManyGpus {
            asked: 2,
            max: 1,
            ..
        }
    ));
    insta::assert_snapshot!(shown(SEED, &e));
}

#[test]
fn every_key_of_the_format_is_read() {
    let wf = parse(
        r#"
name: nightly
description: the whole pipeline
resources:
  max_memory: 8GB
  max_cpu: 100
  max_io_bps: 1000000
retries: 2
retry_backoff: 5s
jobs:
  fetch:
    command: curl
    args: [-O, "https://example.com/data.csv"]
    network: host
    timeout: 1h30m
    retries: 0
    uploads: [fetch.sh, conf/]
    volumes: [cache, data:ro]
    environment: {URL: "https://example.com", PORT: 8080}
    secret_environment:
      TOKEN: s3cret
  train:
    command: python3
    requires:
      - fetch: COMPLETED
    resources:
      max_memory: 16384
      cpu_cores: "0-3"
      gpu_count: 1
      gpu_memory_mb: 10GB
      max_iobps: 500
    retry_backoff: 500ms
    executor: crun
    devices: [nvidia.com/gpu=0, "vendor.example/fpga=1"]
  report:
    command: python3
    args: [report.py]
    requires:
      - train: ANY
      - fetch: "FAILED"
"#,
    )
    .unwrap();
    assert_eq!(wf.name(), Some("nightly"));
    assert_eq!(wf.description(), Some("the whole pipeline"));

    let fetch = wf.job("fetch").unwrap();
    assert_eq!(fetch.args, ["-O", "https://example.com/data.csv"]);
    assert_eq!(fetch.timeout, Some(Duration::from_secs(5400)));
    assert_eq!(
        (fetch.retries, fetch.retry_backoff),
        (0, Duration::from_secs(5))
    );
    assert_eq!(fetch.uploads, ["fetch.sh", "conf/"]);
    assert_eq!(
        fetch.environment,
        [
            ("URL".to_owned(), "https://example.com".to_owned()),
            ("PORT".to_owned(), "8080".to_owned())
        ]
    );
    // Defaults, field by field; `max_io_bps` is `max_iobps`.
    assert_eq!(fetch.resources.max_memory_mb, Some(8192));
    assert_eq!(fetch.resources.max_cpu, Some(100));
    assert_eq!(fetch.resources.max_iobps, Some(1_000_000));
    let r = fetch.request();
    assert_eq!(
        (r.network.as_str(), r.timeout_ms),
        ("host", Some(5_400_000))
    );
    assert_eq!(r.volumes, ["cache", "data:ro"]);
    assert_eq!(r.secret_env, [("TOKEN".to_owned(), "s3cret".to_owned())]);

    let train = wf.job("train").unwrap();
    assert_eq!(train.resources.max_memory_mb, Some(16384));
    assert_eq!(train.resources.max_cpu, Some(100));
    assert_eq!(train.resources.max_iobps, Some(500));
    assert_eq!(train.resources.gpu_memory_mb, Some(10240));
    assert_eq!(train.resources.cpu_cores.as_deref(), Some("0-3"));
    assert_eq!(
        (train.retries, train.retry_backoff),
        (2, Duration::from_millis(500))
    );
    assert_eq!(train.executor.as_deref(), Some("crun"));
    let r = train.request();
    assert_eq!(r.executor, "crun");
    assert_eq!(r.devices, ["nvidia.com/gpu=0", "vendor.example/fpga=1"]);
    assert_eq!((fetch.executor.as_deref(), fetch.devices.len()), (None, 0));

    let report = wf.job("report").unwrap();
    let needs: Vec<(&str, Need)> = report
        .requires
        .iter()
        .map(|r| (r.job.as_str(), r.need))
        .collect();
    assert_eq!(needs, [("train", Need::Any), ("fetch", Need::Failed)]);
}

#[test]
fn flow_style_and_quoted_names_are_the_same_workflow() {
    let block = parse(
        "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a: COMPLETED\n",
    )
    .unwrap();
    let flow =
        parse("{\"jobs\": {\"a\": {command: x}, b: {command: y, requires: [{a: COMPLETED}]}}}")
            .unwrap();
    assert_eq!(block.jobs(), flow.jobs());
}

/// Each refused file, its error shown under the line it points at.
#[test]
fn refusals_point_at_the_offending_key_or_value() {
    let cases: &[(&str, &str)] = &[
        ("unknown_top_key", "jobz:\n  a:\n    command: x\n"),
        ("unknown_job_key", "jobs:\n  a:\n    command: x\n    comand: y\n"),
        ("unknown_resource_key", "jobs:\n  a:\n    command: x\n    resources:\n      gpus: 2\n"),
        ("missing_command", "jobs:\n  a:\n    args: [x]\n"),
        ("bad_state", "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a: DONE\n"),
        ("lowercase_state", "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a: completed\n"),
        ("requirement_without_state", "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a\n"),
        ("requirement_of_two_jobs", "jobs:\n  a:\n    command: x\n  b:\n    command: x\n  c:\n    command: y\n    requires:\n      - {a: COMPLETED, b: ANY}\n"),
        ("unknown_requirement", "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a: COMPLETED\n      - data-prep: COMPLETED\n"),
        ("self_requirement", "jobs:\n  a:\n    command: x\n    requires:\n      - a: ANY\n"),
        ("repeated_requirement", "jobs:\n  a:\n    command: x\n  b:\n    command: y\n    requires:\n      - a: COMPLETED\n      - a: FAILED\n"),
        ("cycle", "jobs:\n  c:\n    command: x\n    requires: [{a: COMPLETED}]\n  a:\n    command: x\n    requires: [{b: COMPLETED}]\n  b:\n    command: x\n    requires: [{c: ANY}]\n  d:\n    command: x\n"),
        ("unreachable", "jobs:\n  prep:\n    command: x\n  train:\n    command: x\n    requires:\n      - prep: COMPLETED\n  alert:\n    command: x\n    requires:\n      - prep: FAILED\n  report:\n    command: x\n    requires:\n      - train: COMPLETED\n      - alert: COMPLETED\n"),
        ("bad_job_name", "jobs:\n  a:\n    command: x\n  \"model training\":\n    command: y\n"),
        ("empty_jobs", "name: x\njobs: {}\n"),
        ("no_jobs_key", "name: x\n"),
        ("empty_file", ""),
        ("duplicate_job", "jobs:\n  a:\n    command: x\n  a:\n    command: y\n"),
        ("gpu_memory_without_gpus", "jobs:\n  a:\n    command: x\n    resources:\n      gpu_memory_mb: 4096\n"),
        ("inherited_bad_cpu_list", "resources:\n  cpu_cores: \"3-1\"\njobs:\n  a:\n    command: x\n"),
        ("both_iobps_names", "jobs:\n  a:\n    command: x\n    resources:\n      max_iobps: 1\n      max_io_bps: 2\n"),
        ("too_many_retries", "jobs:\n  a:\n    command: x\n    retries: 11\n"),
        ("negative_retries", "retries: -1\njobs:\n  a:\n    command: x\n"),
        ("bad_timeout", "jobs:\n  a:\n    command: x\n    timeout: soon\n"),
        ("long_backoff", "jobs:\n  a:\n    command: x\n    retry_backoff: 2d\n"),
        ("bad_size", "jobs:\n  a:\n    command: x\n    resources: {max_memory: 8XB}\n"),
        ("negative_cpu", "jobs:\n  a:\n    command: x\n    resources: {max_cpu: -100}\n"),
        ("gpu_share_above_one", "jobs:\n  a:\n    command: x\n    resources: {gpu_count: 1.5}\n"),
        ("bad_volume", "jobs:\n  a:\n    command: x\n    volumes: [data, \"my data:ro\"]\n"),
        ("bad_env_key", "jobs:\n  a:\n    command: x\n    environment:\n      OK: 1\n      1X: y\n"),
        ("env_key_twice", "jobs:\n  a:\n    command: x\n    environment:\n      A: 1\n      A: 2\n"),
        ("secret_also_in_env", "jobs:\n  a:\n    command: x\n    environment: {A: 1}\n    secret_environment: {A: 2}\n"),
        ("bad_network", "jobs:\n  a:\n    command: x\n    network: wifi\n"),
        ("bad_runtime", "jobs:\n  a:\n    command: x\n    runtime: \"python 3\"\n"),
        ("bad_executor", "jobs:\n  a:\n    command: x\n    executor: \"run c\"\n"),
        ("bad_device", "jobs:\n  a:\n    command: x\n    devices: [nvidia.com/gpu=0, nvidia.com/gpu]\n"),
        ("empty_command", "jobs:\n  a:\n    command: \"  \"\n"),
        ("empty_upload", "jobs:\n  a:\n    command: x\n    uploads: [a.py, \"\"]\n"),
        ("flow_style_unknown_requirement", "jobs: {a: {command: x}, b: {command: y, requires: [{c: ANY}]}}\n"),
        ("two_documents", "jobs:\n  a:\n    command: x\n---\njobs: {}\n"),
        ("bad_yaml", "jobs:\n  a:\n    command: [x\n"),
    ];
    for (name, text) in cases {
        insta::assert_snapshot!(*name, refused(text), text);
    }
}

#[test]
fn a_gpu_share_is_a_fraction_of_one_gpu() {
    let text = "jobs:\n  a:\n    command: x\n    resources: {gpu_count: 0.25}\n  b:\n    command: y\n    resources: {gpu_count: 2.0}\n";
    let wf = parse(text).unwrap();
    let a = wf.job("a").unwrap().request();
    assert_eq!((a.gpu_count, a.gpu_milli), (1, 250));
    a.validate().unwrap();
    let b = wf.job("b").unwrap().request();
    assert_eq!((b.gpu_count, b.gpu_milli), (2, 0));
}

#[test]
fn gpu_limits_apply_to_inherited_defaults_where_they_are_written() {
    let text = "resources:\n  gpu_count: 4\njobs:\n  a:\n    command: x\n  b:\n    command: y\n    resources: {gpu_count: 1}\n";
    let limits = Limits {
        max_gpus_per_node: Some(2),
    };
    let e = Workflow::parse(text, "wf.yaml", &limits).unwrap_err();
    assert_eq!((e.line, e.column), (2, 3));
    assert!(matches!(&*e.problem, Problem::TooManyGpus { job, asked: 4, max: 2 } if job == "a"));
    // Without the limit, the same file is fine.
    parse(text).unwrap();
}

#[test]
fn a_long_unreachable_route_is_cut_in_the_message() {
    // 0 needs 40 COMPLETED through a chain of 39 jobs, and FAILED directly.
    let mut text = String::from("jobs:\n  base:\n    command: x\n");
    for i in 1..40 {
        let prev = if i == 1 {
            "base".to_owned()
        } else {
            format!("s{}", i - 1)
        };
        text += &format!("  s{i}:\n    command: x\n    requires: [{{{prev}: COMPLETED}}]\n");
    }
    text += "  last:\n    command: x\n    requires: [{s39: COMPLETED}, {base: FAILED}]\n";
    let e = parse(&text).unwrap_err();
    let Problem::Unreachable {
        job,
        target,
        first,
        second,
    } = &*e.problem
    else {
        panic!("{e}")
    };
    assert_eq!((job.as_str(), target.as_str()), ("last", "base"));
    assert_eq!(first.jobs, ["last", "base"]);
    assert_eq!(second.jobs.len(), 41);
    assert!(e.to_string().len() < 400, "{e}");
    insta::assert_snapshot!(e.to_string());
}

/// A node's refusal of a job's executor (one it lacks, or its default
/// that cannot run the job) points at the `executor:` key, or at the job
/// when it names none.
#[test]
fn a_nodes_refusal_of_an_executor_points_at_its_key_or_the_job() {
    let text = "jobs:\n  a:\n    command: x\n    executor: kata\n  b:\n    command: y\n    devices: [nvidia.com/gpu=0]\n";
    let wf = parse(text).unwrap();
    let e = wf.refusal(
        text,
        wf.job("a").unwrap(),
        "executor",
        "this node has no executor \"kata\"; it has: native".into(),
    );
    assert_eq!((e.line, e.column), (4, 5), "{e}");
    assert!(
        e.to_string()
            .contains("job `a`: executor: this node has no executor"),
        "{e}"
    );
    let e = wf.refusal(
        text,
        wf.job("b").unwrap(),
        "executor",
        "executor \"native\" (native) lacks the cdi capability".into(),
    );
    assert_eq!((e.line, e.column), (5, 3), "{e}");
    assert!(
        e.to_string()
            .contains("job `b`: executor (the node's default): executor \"native\""),
        "{e}"
    );
    let e = wf.refusal(
        text,
        wf.job("b").unwrap(),
        "devices[0]",
        "no such device".into(),
    );
    assert_eq!(e.line, 7, "{e}");
}
