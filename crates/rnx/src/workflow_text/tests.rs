//! The workflow views as people read them.

use joblet_proto::pb;
use joblet_workflow::Limits;

use super::*;

const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z
const ID: &str = "1a2b3c4d-0000-4000-8000-00000000abcd";

fn req(job: &str, state: &str, holds: bool) -> pb::WorkflowRequirement {
    pb::WorkflowRequirement {
        job: job.into(),
        state: state.into(),
        holds,
    }
}

/// A run mid-way: one job done, one on its second attempt, one waiting,
/// one canceled, one waiting at depth 3.
pub(crate) fn running() -> pb::Workflow {
    pb::Workflow {
        id: ID.into(),
        name: "ml-training".into(),
        description: String::new(),
        file: "ml-training-pipeline.yaml".into(),
        owner: "admin".into(),
        state: "RUNNING".into(),
        stopping: false,
        outcome: String::new(),
        created_unix_ms: T0,
        ended_unix_ms: 0,
        shared_volume: "wf-1a2b3c4d".into(),
        jobs: vec![
            pb::WorkflowJob {
                name: "data-preprocessing".into(),
                state: "COMPLETED".into(),
                command: "python3".into(),
                args: vec!["preprocess.py".into()],
                attempt: 1,
                max_attempts: 1,
                job_id: "aaaa1111-0000-4000-8000-000000000001".into(),
                attempt_job_ids: vec!["aaaa1111-0000-4000-8000-000000000001".into()],
                reason: "exited with code 0".into(),
                exit_code: Some(0),
                started_unix_ms: T0 + 1_000,
                ended_unix_ms: T0 + 63_000,
                runtime: "python-3.11-ml".into(),
                ..Default::default()
            },
            pb::WorkflowJob {
                name: "model-training".into(),
                state: "RUNNING".into(),
                requires: vec![req("data-preprocessing", "COMPLETED", true)],
                command: "python3".into(),
                args: vec!["train.py".into(), "--epochs".into(), "100".into()],
                attempt: 2,
                max_attempts: 3,
                job_id: "bbbb2222-0000-4000-8000-000000000002".into(),
                attempt_job_ids: vec![
                    "bbbb1111-0000-4000-8000-000000000001".into(),
                    "bbbb2222-0000-4000-8000-000000000002".into(),
                ],
                started_unix_ms: T0 + 70_000,
                gpu_count: 2,
                gpu_indices: vec![0, 1],
                ..Default::default()
            },
            pb::WorkflowJob {
                name: "model-evaluation".into(),
                state: "WAITING".into(),
                requires: vec![req("model-training", "COMPLETED", false)],
                command: "python3".into(),
                args: vec!["evaluate.py".into()],
                max_attempts: 1,
                gpu_count: 1,
                ..Default::default()
            },
            pb::WorkflowJob {
                name: "alert".into(),
                state: "CANCELED".into(),
                requires: vec![req("data-preprocessing", "FAILED", false)],
                command: "notify".into(),
                max_attempts: 1,
                reason: "data-preprocessing ended COMPLETED, needed FAILED".into(),
                ..Default::default()
            },
            pb::WorkflowJob {
                name: "report".into(),
                state: "WAITING".into(),
                requires: vec![
                    req("model-evaluation", "ANY", false),
                    req("alert", "ANY", true),
                ],
                command: "report".into(),
                max_attempts: 1,
                ..Default::default()
            },
        ],
    }
}

/// The line of `s` that holds `needle`, its runs of blanks made one.
fn line_of(s: &str, needle: &str) -> String {
    let line = s
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{s}"));
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
    let mut buf = Vec::new();
    f(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

#[test]
fn status_draws_the_dag_by_depth() {
    let w = WorkflowView::from(&running());
    let s = text(|o| write_status(o, &w, false, T0 + 330_000));
    insta::assert_snapshot!(s);
    assert!(
        s.contains("waits on: model-training (COMPLETED, now RUNNING)"),
        "{s}"
    );
    // report hangs under model-evaluation but also requires alert.
    assert!(
        s.contains("      └─ report (after model-evaluation, alert)  WAITING"),
        "{s}"
    );
    assert!(s.contains("\n└─ model-training  "), "{s}");
    assert!(s.contains("2 GPUs [0,1]"), "{s}");
    assert!(s.contains(" 2/3 "), "{s}");
}

#[test]
fn status_detail_lists_every_attempt() {
    let w = WorkflowView::from(&running());
    let s = text(|o| write_status(o, &w, true, T0 + 330_000));
    insta::assert_snapshot!(s);
    assert!(
        s.contains("    attempt 1: bbbb1111-0000-4000-8000-000000000001\n    attempt 2: bbbb2222"),
        "{s}"
    );
}

#[test]
fn ended_run_shows_its_outcome_and_reasons() {
    let mut wf = running();
    wf.state = "FAILED".into();
    wf.ended_unix_ms = T0 + 600_000;
    wf.outcome = "model-training ended FAILED".into();
    wf.jobs[1].state = "FAILED".into();
    wf.jobs[1].attempt = 3;
    wf.jobs[1].reason = "exited with code 1".into();
    wf.jobs[1].ended_unix_ms = T0 + 500_000;
    wf.jobs[2].state = "CANCELED".into();
    wf.jobs[2].reason = "model-training ended FAILED, needed COMPLETED".into();
    let w = WorkflowView::from(&wf);
    let s = text(|o| write_status(o, &w, false, T0 + 999_000));
    assert!(s.contains("State: FAILED\n"), "{s}");
    assert!(s.contains("Outcome: model-training ended FAILED\n"), "{s}");
    assert!(
        s.contains("Duration: 10m (ended 2025-01-02T03:14:05Z)\n"),
        "{s}"
    );
    assert_eq!(
        line_of(&s, "└─ model-evaluation"),
        "└─ model-evaluation CANCELED - - 1 GPU model-training ended FAILED, needed COMPLETED"
    );
    assert_eq!(
        line_of(&s, "└─ model-training"),
        "└─ model-training FAILED 3/3 7m 10s 2 GPUs [0,1] exited with code 1"
    );
}

#[test]
fn without_retries_there_is_no_attempt_column() {
    let mut wf = running();
    for j in &mut wf.jobs {
        j.max_attempts = 1;
    }
    let s = text(|o| write_status(o, &WorkflowView::from(&wf), false, T0));
    assert!(s.contains("\nJOB  "), "{s}");
    assert!(!s.contains("ATTEMPT"), "{s}");
}

#[test]
fn list_table() {
    let mut done = running();
    done.id = "ffff0000-0000-4000-8000-000000000009".into();
    done.name = String::new();
    done.state = "COMPLETED".into();
    done.created_unix_ms = T0 - 3_600_000;
    done.ended_unix_ms = T0 - 3_000_000;
    for j in &mut done.jobs {
        j.state = "COMPLETED".into();
    }
    let views = [WorkflowView::from(&running()), WorkflowView::from(&done)];
    let s = text(|o| write_list(o, &views, T0 + 90_000));
    insta::assert_snapshot!(s);
    assert_eq!(
        text(|o| write_list(o, &[], T0)),
        "ID  NAME  STATE  JOBS  CREATED  DURATION\n"
    );
}

#[test]
fn follow_lines() {
    let w = WorkflowView::from(&running());
    assert_eq!(
        change_line(&w.jobs[1], T0 + 80_000),
        "03:05:15 model-training RUNNING (job bbbb2222, attempt 2/3)"
    );
    assert_eq!(
        change_line(&w.jobs[0], T0 + 80_000),
        "03:05:08 data-preprocessing COMPLETED (job aaaa1111): exit code 0"
    );
    assert_eq!(
        change_line(&w.jobs[3], T0 + 80_000),
        "03:05:25 alert CANCELED: data-preprocessing ended COMPLETED, needed FAILED"
    );
    let mut retry = w.jobs[1].clone();
    retry.state = "RETRY_WAIT".into();
    retry.retry_at_unix_ms = Some(T0 + 90_000);
    assert_eq!(
        change_line(&retry, T0 + 80_000),
        "03:05:25 model-training RETRY_WAIT (job bbbb2222, attempt 2/3): next attempt at 03:05:35"
    );
    assert_ne!(change_key(&retry), change_key(&w.jobs[1]));
}

#[test]
fn a_job_above_what_it_requires_names_it() {
    let mut wf = running();
    wf.jobs.swap(0, 1);
    let s = text(|o| write_status(o, &WorkflowView::from(&wf), false, T0));
    assert!(
        line_of(&s, "model-training (")
            .starts_with("└─ model-training (after data-preprocessing) RUNNING"),
        "{s}"
    );
    // Its edge would lead up to data-preprocessing, two levels up.
    assert!(
        line_of(&s, "└─ model-evaluation")
            .starts_with("└─ model-evaluation (after model-training) WAITING"),
        "{s}"
    );
}

#[test]
fn depths_follow_the_longest_path() {
    // d requires b and c; c requires b; b requires a.
    assert_eq!(
        depths(&[vec![], vec![0], vec![1], vec![1, 2]]),
        [0, 1, 2, 3]
    );
    // A job defined before what it requires.
    assert_eq!(depths(&[vec![1], vec![]]), [1, 0]);
    // A cycle (never in a checked file) ends.
    assert_eq!(depths(&[vec![1], vec![0]]).len(), 2);
}

const PIPELINE: &str = r#"name: ml-training
jobs:
  data-preprocessing:
    command: "python3"
    args: ["preprocess.py"]
    runtime: "python-3.11-ml"
    uploads: [preprocess.py, data/]
    resources:
      max_memory: 4096
      max_cpu: 200
  model-training:
    command: "python3"
    args: ["train.py", "--epochs", "100"]
    requires:
      - data-preprocessing: "COMPLETED"
    retries: 2
    timeout: 2h
    resources:
      gpu_count: 2
      gpu_memory_mb: 8192
  alert:
    command: notify
    requires:
      - data-preprocessing: FAILED
  model-evaluation:
    command: "python3"
    args: ["evaluate.py"]
    volumes: ["results:ro"]
    executor: crun
    devices: ["vendor.example/fpga=0"]
    requires:
      - model-training: "COMPLETED"
"#;

#[test]
fn validate_shows_levels_requirements_and_resources() {
    let wf = Workflow::parse(
        PIPELINE,
        "ml.yaml",
        &Limits {
            max_gpus_per_node: None,
        },
    )
    .unwrap();
    let s = text(|o| write_validated(o, "pipelines/ml.yaml", &wf));
    insta::assert_snapshot!(s);
    assert!(s.starts_with("pipelines/ml.yaml is valid: 4 jobs\n"), "{s}");
    assert!(
        s.contains("Level 2:\n  model-training: python3 train.py --epochs 100\n    requires: data-preprocessing COMPLETED\n"),
        "{s}"
    );
    assert!(s.contains("    resources: 2 GPUs (8192 MB each)\n"), "{s}");
}

#[test]
fn a_long_chain_stays_narrow_past_the_drawn_depth() {
    let names: Vec<String> = (0..12).map(|i| format!("j{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let requires: Vec<Vec<usize>> = (0..12)
        .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
        .collect();
    let cells = tree_names(&refs, &requires, &depths(&requires));
    assert_eq!(cells[8], format!("{}└─ j8", "   ".repeat(7)));
    // Deeper jobs are drawn at the deepest indent and say what they follow.
    assert_eq!(cells[11], format!("{}└─ j11 (after j10)", "   ".repeat(7)));
    assert!(cells.iter().all(|c| c.chars().count() <= 40), "{cells:#?}");
}

#[test]
fn durations_under_a_minute_keep_their_milliseconds() {
    assert_eq!(span(T0, T0 + 120), "120ms");
    assert_eq!(span(T0, T0 + 1_500), "1s 500ms");
    assert_eq!(span(T0, T0 + 61_500), "1m 1s");
    assert_eq!(span(T0 + 5, T0), "0s");
}
