//! `rnx workflow …` against the fake node: a fake WorkflowService that
//! records what RunWorkflow received and answers GetWorkflow from a script.

use std::collections::VecDeque;

use joblet_proto::WorkflowService;

use super::*;

const WF_ID: &str = "feedbeef-0000-4000-8000-000000000042";
const T0: i64 = 1_735_787_045_000;

/// What the fake WorkflowService saw and will answer.
#[derive(Default)]
pub(super) struct FakeWorkflows {
    /// Each RunWorkflow call: the request, the file bytes that followed
    /// and in how many data messages.
    runs: Mutex<Vec<(pb::RunWorkflowRequest, Vec<u8>, usize)>>,
    /// What the next GetWorkflow calls answer, in order; then [`running`].
    polls: Mutex<VecDeque<pb::Workflow>>,
    stopped: Mutex<Vec<String>>,
}

fn wf_job(
    name: &str,
    state: &str,
    job_id: Option<&str>,
    requires: &[(&str, &str, bool)],
) -> pb::WorkflowJob {
    pb::WorkflowJob {
        name: name.into(),
        state: state.into(),
        requires: requires
            .iter()
            .map(|(job, state, holds)| pb::WorkflowRequirement {
                job: (*job).into(),
                state: (*state).into(),
                holds: *holds,
            })
            .collect(),
        command: "python3".into(),
        args: vec![format!("{name}.py")],
        attempt: u32::from(job_id.is_some()),
        max_attempts: 1,
        job_id: job_id.unwrap_or_default().into(),
        attempt_job_ids: job_id.into_iter().map(String::from).collect(),
        started_unix_ms: if job_id.is_some() { T0 + 1_000 } else { 0 },
        ended_unix_ms: if matches!(state, "COMPLETED" | "FAILED") {
            T0 + 5_000
        } else {
            0
        },
        exit_code: match state {
            "COMPLETED" => Some(0),
            "FAILED" => Some(1),
            _ => None,
        },
        reason: match state {
            "FAILED" => "exited with code 1".into(),
            _ => String::new(),
        },
        ..Default::default()
    }
}

fn wf(state: &str, jobs: Vec<pb::WorkflowJob>) -> pb::Workflow {
    let ended = matches!(state, "COMPLETED" | "FAILED" | "STOPPED" | "CANCELED");
    pb::Workflow {
        id: WF_ID.into(),
        name: "pipeline".into(),
        file: "pipeline.yaml".into(),
        owner: "admin".into(),
        state: state.into(),
        created_unix_ms: T0,
        ended_unix_ms: if ended { T0 + 60_000 } else { 0 },
        outcome: match state {
            "FAILED" => "train ended FAILED".into(),
            _ => String::new(),
        },
        jobs,
        ..Default::default()
    }
}

const JOB2: &str = "0f0e0d0c-0000-4000-8000-000000000001";

/// prep runs (as [`JOB_ID`], whose output the fake serves); train waits.
fn running() -> pb::Workflow {
    wf(
        "RUNNING",
        vec![
            wf_job("prep", "RUNNING", Some(JOB_ID), &[]),
            wf_job("train", "WAITING", None, &[("prep", "COMPLETED", false)]),
        ],
    )
}

fn training() -> pb::Workflow {
    wf(
        "RUNNING",
        vec![
            wf_job("prep", "COMPLETED", Some(JOB_ID), &[]),
            wf_job(
                "train",
                "RUNNING",
                Some(JOB2),
                &[("prep", "COMPLETED", true)],
            ),
        ],
    )
}

fn ended(state: &str, train: &str) -> pb::Workflow {
    wf(
        state,
        vec![
            wf_job("prep", "COMPLETED", Some(JOB_ID), &[]),
            wf_job("train", train, Some(JOB2), &[("prep", "COMPLETED", true)]),
        ],
    )
}

fn find_workflow(id: &str) -> Result<(), Status> {
    if WF_ID.starts_with(id) {
        Ok(())
    } else {
        Err(Status::not_found(format!(
            "no workflow with id or prefix {id:?} (see `rnx workflow list`)"
        )))
    }
}

#[tonic::async_trait]
impl WorkflowService for Fake {
    async fn run_workflow(
        &self,
        request: Request<tonic::Streaming<pb::RunWorkflowMessage>>,
    ) -> Result<Response<pb::Workflow>, Status> {
        let mut stream = request.into_inner();
        let mut first = None;
        let mut bytes = Vec::new();
        let mut data_messages = 0;
        while let Some(m) = stream.message().await? {
            match m.msg {
                Some(pb::run_workflow_message::Msg::Workflow(w)) => first = Some(w),
                Some(pb::run_workflow_message::Msg::Data(d)) => {
                    data_messages += 1;
                    bytes.extend(d.data);
                }
                None => {}
            }
        }
        let request = first.ok_or_else(|| Status::invalid_argument("no workflow"))?;
        let refuse = request.yaml.contains("gpu_count: 64");
        let validate_only = request.validate_only;
        let file = request.file.clone();
        self.workflows
            .runs
            .lock()
            .unwrap()
            .push((request, bytes, data_messages));
        if refuse {
            return Err(Status::invalid_argument(format!(
                "{file}:9:19: job `train` asks for 64 GPUs, but no node has more than 1: ask for at most 1 (resources.gpu_count)"
            )));
        }
        let mut answer = running();
        if validate_only {
            answer.id = String::new();
            answer.state = "PENDING".into();
            for j in &mut answer.jobs {
                *j = wf_job(&j.name, "WAITING", None, &[]);
            }
        }
        Ok(Response::new(answer))
    }

    async fn get_workflow(
        &self,
        r: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::Workflow>, Status> {
        find_workflow(&r.into_inner().workflow_id)?;
        let next = self.workflows.polls.lock().unwrap().pop_front();
        Ok(Response::new(next.unwrap_or_else(running)))
    }

    async fn list_workflows(
        &self,
        _: Request<pb::ListWorkflowsRequest>,
    ) -> Result<Response<pb::ListWorkflowsResponse>, Status> {
        let mut old = ended("COMPLETED", "COMPLETED");
        old.id = "0123abcd-0000-4000-8000-000000000007".into();
        old.name = String::new();
        Ok(Response::new(pb::ListWorkflowsResponse {
            workflows: vec![running(), old],
        }))
    }

    async fn stop_workflow(
        &self,
        r: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::Workflow>, Status> {
        let id = r.into_inner().workflow_id;
        find_workflow(&id)?;
        self.workflows.stopped.lock().unwrap().push(id);
        let mut w = running();
        w.stopping = true;
        Ok(Response::new(w))
    }

    async fn delete_workflow(
        &self,
        r: Request<pb::WorkflowRef>,
    ) -> Result<Response<pb::DeleteWorkflowResponse>, Status> {
        find_workflow(&r.into_inner().workflow_id)?;
        Ok(Response::new(pb::DeleteWorkflowResponse {
            workflow_id: WF_ID.into(),
            jobs_deleted: 2,
        }))
    }
}

impl Node {
    fn runs(&self) -> Vec<(pb::RunWorkflowRequest, Vec<u8>, usize)> {
        self.fake.workflows.runs.lock().unwrap().clone()
    }

    fn script(&self, polls: Vec<pb::Workflow>) {
        *self.fake.workflows.polls.lock().unwrap() = polls.into();
    }
}

/// A workflow file and its files: prep.py, scripts/train.py, notes.txt.
/// With `uploads`, every job lists what it needs.
fn pipeline(uploads: bool) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let (prep_up, train_up) = if uploads {
        (
            "    uploads: [prep.py]\n",
            "    uploads: [scripts/, ./prep.py]\n",
        )
    } else {
        ("", "")
    };
    let yaml = format!(
        "name: pipeline\njobs:\n  prep:\n    command: python3\n    args: [prep.py]\n{prep_up}  train:\n    command: python3\n    args: [scripts/train.py]\n    requires:\n      - prep: COMPLETED\n{train_up}"
    );
    let d = dir.path();
    std::fs::write(d.join("pipeline.yaml"), &yaml).unwrap();
    std::fs::write(d.join("prep.py"), "print('prep')\n").unwrap();
    std::fs::create_dir(d.join("scripts")).unwrap();
    std::fs::write(d.join("scripts/train.py"), "print('train')\n").unwrap();
    std::fs::write(d.join("notes.txt"), "n\n").unwrap();
    let file = d.join("pipeline.yaml");
    (dir, file, yaml)
}

fn manifest(r: &pb::RunWorkflowRequest) -> Vec<&str> {
    r.uploads.iter().map(|e| e.path.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_streams_the_yaml_file_name_and_manifest() {
    let node = start(Fake::default()).await;
    let (_dir, file, yaml) = pipeline(false);
    let f = file.to_str().unwrap();
    let out = node.rnx(&["workflow", "run", f]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = node.runs();
    let (req, bytes, _) = &runs[0];
    assert_eq!(req.file, "pipeline.yaml");
    assert_eq!(req.yaml, yaml);
    assert!(!req.validate_only);
    // Not every job lists uploads: the whole directory, relative to it.
    assert_eq!(
        manifest(req),
        [
            "notes.txt",
            "pipeline.yaml",
            "prep.py",
            "scripts",
            "scripts/train.py"
        ]
    );
    let expected_bytes = format!("n\n{yaml}print('prep')\nprint('train')\n");
    assert_eq!(text(bytes), expected_bytes);
    let s = text(&out.stdout);
    assert!(
        s.starts_with(&format!("ID: {WF_ID}\nName: pipeline\n")),
        "{s}"
    );
    assert!(s.contains("\nprep      RUNNING"), "{s}");
    let train = s
        .lines()
        .find(|l| l.starts_with("└─ train"))
        .unwrap_or_default();
    assert_eq!(
        train.split_whitespace().collect::<Vec<_>>().join(" "),
        "└─ train WAITING - - waits on: prep (COMPLETED, now RUNNING)",
        "{s}"
    );
    assert!(
        s.ends_with(&format!(
            "`rnx workflow status {WF_ID}`; read its output with `rnx workflow logs {WF_ID}`.\n"
        )),
        "{s}"
    );
    let e = text(&out.stderr);
    assert!(
        e.starts_with("rnx: uploading 4 files (") && e.contains("the workflow file's directory"),
        "{e}"
    );

    // Every job lists uploads: only their union.
    let (_dir, file, _) = pipeline(true);
    let out = node.rnx(&["workflow", "run", file.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = node.runs();
    let (req, bytes, _) = &runs[1];
    assert_eq!(manifest(req), ["prep.py", "scripts", "scripts/train.py"]);
    assert_eq!(text(bytes), "print('prep')\nprint('train')\n");
    assert!(
        text(&out.stderr).contains("(the jobs' uploads)"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn validate_sends_validate_only_and_no_files() {
    let node = start(Fake::default()).await;
    let (_dir, file, yaml) = pipeline(false);
    let f = file.to_str().unwrap();
    let out = node.rnx(&["workflow", "validate", f]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = node.runs();
    let (req, bytes, data_messages) = &runs[0];
    assert!(req.validate_only);
    assert!(req.uploads.is_empty(), "{:?}", req.uploads);
    assert_eq!((bytes.len(), *data_messages), (0, 0));
    assert_eq!(req.yaml, yaml);
    assert_eq!(req.file, "pipeline.yaml");
    let s = text(&out.stdout);
    assert!(s.starts_with(&format!("{f} is valid: 2 jobs\n")), "{s}");
    assert!(
        s.contains("Level 2:\n  train: python3 scripts/train.py\n    requires: prep COMPLETED\n"),
        "{s}"
    );
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    // What only the node can check comes back as the node said it.
    std::fs::write(
        &file,
        yaml.replace("  train:\n", "  train:\n    resources: {gpu_count: 64}\n"),
    )
    .unwrap();
    let out = node.rnx(&["workflow", "validate", f]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "rnx: error: pipeline.yaml:9:19: job `train` asks for 64 GPUs, but no node has more than 1: ask for at most 1 (resources.gpu_count)\n"
    );
    assert!(out.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn format_errors_show_line_and_column_and_send_nothing() {
    let node = start(Fake::default()).await;
    let (_dir, file, _) = pipeline(false);
    std::fs::write(&file, "jobs:\n  prep:\n    comand: python3\n").unwrap();
    let f = file.to_str().unwrap();
    for cmd in ["run", "validate"] {
        let out = node.rnx(&["workflow", cmd, f]).await;
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let e = text(&out.stderr);
        assert!(
            e.starts_with(&format!(
                "rnx: error: {f}:3:5: jobs.prep: unknown field `comand`"
            )),
            "{e}"
        );
        assert!(out.stdout.is_empty());
    }
    std::fs::write(
        &file,
        "jobs:\n  a: {command: x, requires: [{b: COMPLETED}]}\n  b: {command: x, requires: [{a: COMPLETED}]}\n",
    )
    .unwrap();
    let out = node.rnx(&["workflow", "run", f]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("jobs require each other in a cycle"),
        "{}",
        text(&out.stderr)
    );
    let out = node.rnx(&["workflow", "run", "/nonexistent/wf.yaml"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .starts_with("rnx: error: cannot read workflow file /nonexistent/wf.yaml: "),
        "{}",
        text(&out.stderr)
    );
    assert!(node.runs().is_empty(), "nothing may be sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_prints_each_change_and_exits_by_how_it_ended() {
    let node = start(Fake::default()).await;
    let (_dir, file, _) = pipeline(true);
    let f = file.to_str().unwrap();
    node.script(vec![running(), training(), ended("COMPLETED", "COMPLETED")]);
    let out = node.rnx(&["workflow", "run", f, "--follow"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("Following until it ends (Ctrl-C stops following"),
        "{s}"
    );
    let changes: Vec<&str> = s
        .lines()
        .filter(|l| l.len() > 9 && l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':')
        .collect();
    assert_eq!(
        changes,
        [
            "03:04:10 prep COMPLETED (job abc123de): exit code 0",
            "03:04:06 train RUNNING (job 0f0e0d0c)",
            "03:04:10 train COMPLETED (job 0f0e0d0c): exit code 0",
        ],
        "{s}"
    );
    assert!(s.contains("\nState: COMPLETED\n"), "{s}");

    node.script(vec![ended("FAILED", "FAILED")]);
    let out = node.rnx(&["workflow", "run", f, "--follow"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("03:04:10 train FAILED (job 0f0e0d0c): exited with code 1\n"),
        "{s}"
    );
    assert!(s.contains("Outcome: train ended FAILED\n"), "{s}");

    // --json: one document, the workflow as it ended; changes on stderr.
    node.script(vec![ended("COMPLETED", "COMPLETED")]);
    let out = node.rnx(&["--json", "workflow", "run", f, "-f"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "COMPLETED");
    assert_eq!(v["jobs"][1]["job_id"], JOB2);
    assert!(
        text(&out.stderr).contains("train COMPLETED (job 0f0e0d0c)"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn status_list_stop_delete_and_unknown_ids() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["workflow", "status", "feed"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("State: RUNNING\n"), "{s}");
    assert!(s.contains("waits on: prep (COMPLETED, now RUNNING)"), "{s}");
    let out = node.rnx(&["workflow", "status", "feed", "--detail"]).await;
    let s = text(&out.stdout);
    assert!(
        s.contains(&format!(
            "prep:\n  Command: python3 prep.py\n  Jobs:\n    attempt 1: {JOB_ID}\n"
        )),
        "{s}"
    );

    let out = node.rnx(&["workflow", "status", "ffff"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "rnx: error: no workflow with id or prefix \"ffff\" (see `rnx workflow list`)\n"
    );

    let out = node.rnx(&["workflow", "list"]).await;
    let s = text(&out.stdout);
    assert!(
        s.starts_with(
            "ID        NAME           STATE      JOBS      CREATED               DURATION\n"
        ),
        "{s}"
    );
    assert!(
        s.contains("feedbeef  pipeline       RUNNING    0/2 done"),
        "{s}"
    );
    assert!(
        s.contains("0123abcd  pipeline.yaml  COMPLETED  2/2 done  2025-01-02T03:04:05Z  1m\n"),
        "{s}"
    );

    let out = node.rnx(&["workflow", "stop", "feedbeef"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("workflow {WF_ID}: stop requested: running jobs are stopped, waiting ones canceled (state: RUNNING, 0/2 jobs done)\n")
    );
    assert_eq!(*node.fake.workflows.stopped.lock().unwrap(), ["feedbeef"]);
    let out = node.rnx(&["workflow", "delete", "feedbeef"]).await;
    assert_eq!(
        text(&out.stdout),
        format!("workflow {WF_ID} deleted, with 2 jobs\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn json_outputs_parse() {
    let node = start(Fake::default()).await;
    let (_dir, file, _) = pipeline(true);
    let f = file.to_str().unwrap();
    let json = |out: &Output| -> serde_json::Value {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
    };
    let v = json(&node.rnx(&["--json", "workflow", "run", f]).await);
    assert_eq!(v["id"], WF_ID);
    assert_eq!(v["jobs"][0]["name"], "prep");
    assert_eq!(v["jobs"][1]["requires"][0]["state"], "COMPLETED");
    let v = json(&node.rnx(&["--json", "workflow", "validate", f]).await);
    assert_eq!(v["id"], serde_json::Value::Null);
    let v = json(&node.rnx(&["--json", "workflow", "status", "feed"]).await);
    assert_eq!(v["state"], "RUNNING");
    assert_eq!(v["created"], "2025-01-02T03:04:05.000Z");
    let v = json(&node.rnx(&["--json", "workflow", "list"]).await);
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    let v = json(&node.rnx(&["--json", "workflow", "stop", "feed"]).await);
    assert_eq!(v["stopping"], true);
    let v = json(&node.rnx(&["--json", "workflow", "delete", "feed"]).await);
    assert_eq!(
        v,
        serde_json::json!({"id": WF_ID, "deleted": true, "jobs_deleted": 2})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_print_each_started_job_under_a_header() {
    let node = start(Fake::default()).await;
    let out = node.rnx(&["workflow", "logs", "feed"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut want = b"==> prep (job abc123de, attempt 1) <==\n".to_vec();
    want.extend(expected(pb::LogStream::Stdout));
    assert_eq!(text(&out.stdout), text(&want));
    assert_eq!(out.stderr, expected(pb::LogStream::Stderr));

    let out = node.rnx(&["workflow", "logs", "feed", "prep"]).await;
    assert_eq!(text(&out.stdout), text(&want));

    let out = node.rnx(&["workflow", "logs", "feed", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("rnx: error: workflow {WF_ID} has no job \"nope\"; its jobs: prep, train\n")
    );
    let out = node.rnx(&["workflow", "logs", "feed", "train"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("job train of workflow feedbeef-0000-4000-8000-000000000042 has no output: it is WAITING"),
        "{}",
        text(&out.stderr)
    );

    let out = node.rnx(&["--json", "workflow", "logs", "feed"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut stdout = String::new();
    let mut stderr = String::new();
    for line in text(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["job"], "prep");
        assert_eq!(v["job_id"], JOB_ID);
        assert_eq!(v["attempt"], 1);
        assert_eq!(v["event"], "output");
        match v["stream"].as_str() {
            Some("stdout") => stdout.push_str(v["data"].as_str().unwrap()),
            Some("stderr") => stderr.push_str(v["data"].as_str().unwrap()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(stdout, text(&expected(pb::LogStream::Stdout)));
    assert_eq!(stderr, text(&expected(pb::LogStream::Stderr)));
    assert!(out.stderr.is_empty());
}
