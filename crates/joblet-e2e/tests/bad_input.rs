//! Bad input is refused with a message naming the flag or RPC field and the
//! accepted form, and nothing is recorded.
//!
//! Flags go through the real `rnx` binary. RPC fields are sent raw (values
//! `rnx` itself would never send, like negative numbers) to show the server
//! checks everything on its own.

use joblet_e2e::Node;
use joblet_proto::pb;
use tonic::Code;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_flags_name_the_flag_and_the_form() {
    let node = Node::start().unwrap();
    let table: &[(&[&str], &str, &str)] = &[
        (
            &["--gpu-memory=8XB", "--gpu=1", "--", "x"],
            "--gpu-memory",
            "8GB, 4096MB or 4096",
        ),
        (&["--gpu=-1", "--", "x"], "--gpu", "whole number"),
        (&["--max-cpu=-5", "--", "x"], "--max-cpu", "whole number"),
        (
            &["--max-cpu=99999999999999999999", "--", "x"],
            "--max-cpu",
            "whole number",
        ),
        (
            &["--max-memory=99999999999999999999", "--", "x"],
            "--max-memory",
            "8GB, 4096MB or 4096",
        ),
        (
            &["--max-iobps=-1", "--", "x"],
            "--max-iobps",
            "whole number",
        ),
        (&["--timeout=soon", "--", "x"], "--timeout", "30s"),
        (&["--timeout=1us", "--", "x"], "--timeout", "500ms"),
        (
            &["--gpu-time=1500ms", "--gpu=1", "--", "x"],
            "--gpu-time",
            "whole seconds",
        ),
        (&["-e", "1X=2", "--", "x"], "--env", "KEY=VALUE"),
        (&["-e", "NOEQUALS", "--", "x"], "--env", "KEY=VALUE"),
        (&["-s", "BAD KEY=v", "--", "x"], "--secret-env", "KEY=VALUE"),
        (&["--cpu-cores=3-1", "--", "x"], "--cpu-cores", "0-3"),
        (&["--runtime=a b", "--", "x"], "--runtime", "python-3.11-ml"),
        (&["--volume=../x", "--", "x"], "--volume", "data-lake"),
        (&["--gpu-memory=8GB", "--", "x"], "--gpu", "gpu_count"),
        (&[], "COMMAND", "required"),
        (&["--"], "COMMAND", "required"),
    ];
    for (flags, name, form) in table {
        let mut args = vec!["job", "run"];
        args.extend_from_slice(flags);
        let out = node.rnx(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            err.contains(name) && err.contains(form),
            "{flags:?}: expected {name:?} and {form:?} in: {err}"
        );
    }
    assert_eq!(
        node.rnx_json(&["job", "list"]).as_array().unwrap().len(),
        0,
        "nothing recorded"
    );
}

#[test]
fn unknown_and_ambiguous_job_ids() {
    let node = Node::start().unwrap();
    let unknown = node.rnx(&["job", "status", "deadbeef"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("no job with id or prefix \"deadbeef\""),
        "{}",
        stderr(&unknown)
    );
    let malformed = node.rnx(&["job", "log", "not-a-job!"]);
    assert_ne!(malformed.status.code(), Some(0));
    assert!(
        stderr(&malformed).contains("not-a-job!"),
        "{}",
        stderr(&malformed)
    );

    // Submit until two ids share a first character (16 possibilities).
    let mut ids: Vec<String> = Vec::new();
    let prefix = loop {
        let id = node.run(&["--", "true"]);
        if let Some(other) = ids.iter().find(|o| o.as_bytes()[0] == id.as_bytes()[0]) {
            break other[..1].to_owned();
        }
        ids.push(id);
        assert!(ids.len() < 40);
    };
    let amb = node.rnx(&["job", "status", &prefix]);
    assert_eq!(amb.status.code(), Some(1));
    assert!(stderr(&amb).contains("ambiguous"), "{}", stderr(&amb));
}

/// Sends raw RPCs with the node's admin identity.
fn raw_client(node: &Node) -> (tokio::runtime::Runtime, rnx::client::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resolved = rnx::config::load_node(&node.client_config(), None).unwrap();
    let client = rt.block_on(rnx::client::connect(&resolved)).unwrap();
    (rt, client)
}

/// INVALID_ARGUMENT whose message starts with the field's name.
fn assert_invalid(err: &tonic::Status, field: &str) {
    assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
    assert!(
        err.message().starts_with(field),
        "{field}: {}",
        err.message()
    );
}

#[test]
fn every_rpc_field_is_checked_by_the_server() {
    let node = Node::start().unwrap();
    let (rt, mut client) = raw_client(&node);
    let base = || pb::RunJobRequest {
        command: "true".into(),
        ..Default::default()
    };
    let res = |f: fn(&mut pb::Resources)| {
        let mut r = base();
        let mut resources = pb::Resources::default();
        f(&mut resources);
        r.resources = Some(resources);
        r
    };
    type Case = (pb::RunJobRequest, &'static str, &'static str);
    let cases: Vec<Case> = vec![
        (
            pb::RunJobRequest {
                command: "".into(),
                ..base()
            },
            "command",
            "is empty",
        ),
        (
            pb::RunJobRequest {
                args: vec!["a\0b".into()],
                ..base()
            },
            "args[0]",
            "NUL",
        ),
        (
            res(|r| r.max_cpu = -1),
            "resources.max_cpu",
            "must not be negative",
        ),
        (
            res(|r| r.max_cpu = i64::MAX),
            "resources.max_cpu",
            "too large",
        ),
        (
            res(|r| r.max_memory_mb = -1),
            "resources.max_memory_mb",
            "must not be negative",
        ),
        (
            res(|r| r.max_memory_mb = i64::MAX),
            "resources.max_memory_mb",
            "too large",
        ),
        (
            res(|r| r.max_iobps = -1),
            "resources.max_iobps",
            "must not be negative",
        ),
        (
            res(|r| r.gpu_count = -1),
            "resources.gpu_count",
            "must not be negative",
        ),
        (
            res(|r| r.gpu_count = i64::MAX),
            "resources.gpu_count",
            "too large",
        ),
        (
            res(|r| {
                r.gpu_count = 1;
                r.gpu_memory_mb = -1
            }),
            "resources.gpu_memory_mb",
            "must not be negative",
        ),
        (
            res(|r| r.gpu_memory_mb = 10),
            "resources.gpu_memory_mb",
            "gpu_count",
        ),
        (
            res(|r| r.cpu_cores = "9999".into()),
            "resources.cpu_cores",
            "CPU list",
        ),
        (
            pb::RunJobRequest {
                env: [("1A".to_string(), "x".to_string())].into(),
                ..base()
            },
            "env[\"1A\"]",
            "KEY=VALUE",
        ),
        (
            pb::RunJobRequest {
                secret_env: [("A=B".to_string(), "x".to_string())].into(),
                ..base()
            },
            "secret_env[\"A=B\"]",
            "KEY=VALUE",
        ),
        (
            pb::RunJobRequest {
                uploads: vec![pb::UploadEntry {
                    path: "x".into(),
                    kind: pb::UploadKind::File as i32,
                    ..Default::default()
                }],
                ..base()
            },
            "uploads",
            "SubmitJob",
        ),
        (
            pb::RunJobRequest {
                volumes: vec!["a/b".into()],
                ..base()
            },
            "volumes[0]",
            "expected NAME or NAME:ro",
        ),
        (
            pb::RunJobRequest {
                runtime: "x y".into(),
                ..base()
            },
            "runtime",
            "expected NAME or NAME@VERSION",
        ),
        (
            pb::RunJobRequest {
                timeout_seconds: Some(-5),
                ..base()
            },
            "timeout_seconds",
            "must not be negative",
        ),
        (
            pb::RunJobRequest {
                timeout_seconds: Some(i64::MAX),
                ..base()
            },
            "timeout_seconds",
            "too large",
        ),
        (
            pb::RunJobRequest {
                timeout_ms: Some(-1),
                ..base()
            },
            "timeout_ms",
            "must not be negative",
        ),
        (
            pb::RunJobRequest {
                timeout_ms: Some(i64::MAX),
                ..base()
            },
            "timeout_ms",
            "too large",
        ),
    ];
    for (req, field, needle) in cases {
        let err = rt.block_on(client.run_job(req.clone())).expect_err(field);
        assert_invalid(&err, field);
        assert!(err.message().contains(needle), "{field}: {}", err.message());
    }

    let list = |limit| pb::ListJobsRequest {
        states: vec![],
        limit,
    };
    let err = rt.block_on(client.list_jobs(list(-1))).unwrap_err();
    assert_invalid(&err, "limit");
    let err = rt
        .block_on(client.list_jobs(pb::ListJobsRequest {
            states: vec![42],
            limit: 0,
        }))
        .unwrap_err();
    assert_invalid(&err, "states");
    let err = rt
        .block_on(client.stop_job(pb::StopJobRequest {
            job_id: "".into(),
            grace_seconds: None,
        }))
        .unwrap_err();
    assert!(
        err.code() == Code::InvalidArgument && err.message().contains("empty"),
        "{err:?}"
    );
    let err = rt
        .block_on(client.get_job_status(pb::JobRef {
            job_id: "0123abcd".into(),
        }))
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let id = node.run(&["--", "sleep", "30"]);
    let err = rt
        .block_on(client.stop_job(pb::StopJobRequest {
            job_id: id.clone(),
            grace_seconds: Some(-1),
        }))
        .unwrap_err();
    assert_invalid(&err, "grace_seconds");
    let err = rt
        .block_on(client.delete_job(pb::JobRef { job_id: id.clone() }))
        .unwrap_err();
    assert!(
        err.code() == Code::FailedPrecondition && err.message().contains("stop it first"),
        "{err:?}"
    );
    node.rnx_ok(&["job", "kill", &id]);
    assert_eq!(
        node.rnx_json(&["job", "list"]).as_array().unwrap().len(),
        1,
        "only the valid job was recorded"
    );
}

#[test]
fn a_bad_config_file_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let table = [
        (
            format!(
                "server:\n  state_dir: {}\njobs:\n  default_timeout: soon\n",
                state.display()
            ),
            "jobs.default_timeout",
        ),
        (
            format!("server:\n  state_dir: {}\n  adress: 1\n", state.display()),
            "server.adress",
        ),
        (
            format!(
                "server:\n  state_dir: {}\n  address: \"localhost\"\n",
                state.display()
            ),
            "server.address",
        ),
        (
            format!(
                "server:\n  state_dir: {}\ngpu:\n  enabled: perhaps\n",
                state.display()
            ),
            "gpu.enabled",
        ),
    ];
    for (text, key) in table {
        let cfg = dir.path().join("joblet-config.yml");
        std::fs::write(&cfg, &text).unwrap();
        let out = std::process::Command::new(joblet_e2e::joblet_bin())
            .args(["server", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{text}");
        assert!(err.contains(key), "{key}: {err}");
        assert!(!state.exists(), "nothing is created when the config is bad");
    }
    let out = std::process::Command::new(joblet_e2e::joblet_bin())
        .args(["server", "--config", "/nonexistent/joblet.yml"])
        .output()
        .unwrap();
    assert!(!out.status.success() && stderr(&out).contains("/nonexistent/joblet.yml"));
}
