//! Command lines -> settings, without a node.

use std::time::Duration;

use clap::Parser;
use joblet_core::{JobRequest, JobState};

use super::*;

/// Parses a command line (after `rnx`) into its action, or the message the
/// user would see.
fn parse(line: &[&str]) -> Result<Action, String> {
    let cli = Cli::try_parse_from(std::iter::once("rnx").chain(line.iter().copied()))
        .map_err(|e| e.to_string())?;
    action(cli.command).map_err(|e| e.to_string())
}

fn request(line: &[&str]) -> JobRequest {
    match parse(line) {
        Ok(Action::Run(run)) => run.request,
        other => panic!("{line:?}: {other:?}"),
    }
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn seed_001_command_lines_parse_verbatim() {
    let base = || JobRequest::default();
    let cases: Vec<(&str, JobRequest)> = vec![
        (
            "job run --gpu=1 python gpu_hello.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["gpu_hello.py"]),
                gpu_count: 1,
                ..base()
            },
        ),
        (
            "job run --gpu=1 --gpu-memory=8GB python training_script.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["training_script.py"]),
                gpu_count: 1,
                gpu_memory_mb: 8192,
                ..base()
            },
        ),
        (
            "job run --gpu=2 --runtime=python-3.11-ml python distributed_training.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["distributed_training.py"]),
                gpu_count: 2,
                runtime: "python-3.11-ml".into(),
                ..base()
            },
        ),
        (
            "job run --gpu=2 --gpu-memory=16GB --max-memory=32768 --max-cpu=800 python intensive_gpu_workload.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["intensive_gpu_workload.py"]),
                gpu_count: 2,
                gpu_memory_mb: 16384,
                max_memory_mb: 32768,
                max_cpu: 800,
                ..base()
            },
        ),
        (
            "job run --gpu=4 --gpu-memory=16GB --max-memory=65536 --runtime=python-3.11-ml \
             --upload=model.py --upload=dataset/ \
             python -m torch.distributed.launch --nproc_per_node=4 model.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["-m", "torch.distributed.launch", "--nproc_per_node=4", "model.py"]),
                gpu_count: 4,
                gpu_memory_mb: 16384,
                max_memory_mb: 65536,
                runtime: "python-3.11-ml".into(),
                // Upload paths stay in RunSettings until the files are scanned.
                ..base()
            },
        ),
        (
            "job run --gpu=2 --gpu-memory=8GB --runtime=python-3.11-ml python tensorflow_training.py --batch-size=64",
            JobRequest {
                command: "python".into(),
                args: strings(&["tensorflow_training.py", "--batch-size=64"]),
                gpu_count: 2,
                gpu_memory_mb: 8192,
                runtime: "python-3.11-ml".into(),
                ..base()
            },
        ),
        (
            "job run --gpu=1 --gpu-memory=12GB --volume=data-lake --runtime=python-3.11-ml python rapids_etl.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["rapids_etl.py"]),
                gpu_count: 1,
                gpu_memory_mb: 12288,
                volumes: strings(&["data-lake"]),
                runtime: "python-3.11-ml".into(),
                ..base()
            },
        ),
        (
            "job run --gpu=1 --gpu-memory=24GB --runtime=python-3.11-ml python llm_inference.py --model=llama2-70b",
            JobRequest {
                command: "python".into(),
                args: strings(&["llm_inference.py", "--model=llama2-70b"]),
                gpu_count: 1,
                gpu_memory_mb: 24576,
                runtime: "python-3.11-ml".into(),
                ..base()
            },
        ),
        (
            "job run --max-cpu=400 --max-memory=8192 python preprocess.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["preprocess.py"]),
                max_cpu: 400,
                max_memory_mb: 8192,
                ..base()
            },
        ),
        (
            "job run --gpu=1 --gpu-memory=4096 python inference.py",
            JobRequest {
                command: "python".into(),
                args: strings(&["inference.py"]),
                gpu_count: 1,
                gpu_memory_mb: 4096,
                ..base()
            },
        ),
    ];
    for (line, want) in cases {
        assert_eq!(request(&words(line)), want, "{line}");
    }
}

#[test]
fn everything_after_the_command_belongs_to_the_job() {
    let cases: Vec<(&[&str], &str, &[&str])> = vec![
        (
            &["job", "run", "--", "python", "x.py", "--epochs", "3"],
            "python",
            &["x.py", "--epochs", "3"],
        ),
        // rnx's own flags, even global ones, after the command are the job's.
        (
            &[
                "job", "run", "python", "x.py", "--json", "--gpu=1", "-f", "--help",
            ],
            "python",
            &["x.py", "--json", "--gpu=1", "-f", "--help"],
        ),
        (&["job", "run", "--", "--weird"], "--weird", &[]),
        (&["job", "run", "echo", "--", "x"], "echo", &["--", "x"]),
    ];
    for (line, command, args) in cases {
        let r = request(line);
        assert_eq!(
            (r.command.as_str(), r.args),
            (command, strings(args)),
            "{line:?}"
        );
    }
}

#[test]
fn all_run_flags_reach_the_request() {
    let line = words(
        "--json job run --max-cpu=250 --cpu-cores=3,1,2 --max-memory=1GB --max-iobps=1048576 \
         -e A=1 --env B=x=y -s TOKEN=s3cret --secret-env PW= --upload=a.txt --volume=v1 \
         --volume=v2 --runtime=rt --timeout=1h30m --gpu=2 --gpu-memory=4GB \
         --gpu-time=2h --cuda=12.2 --mig=1g.10gb --gpu-profiling -f --reconnect-timeout=5s \
         --executor=runc --device nvidia.com/gpu=0 --device=nvidia.com/gpu=1 \
         -- sleep 1",
    );
    let Ok(Action::Run(run)) = parse(&line) else {
        panic!("{line:?}");
    };
    let want = JobRequest {
        command: "sleep".into(),
        args: strings(&["1"]),
        max_cpu: 250,
        cpu_cores: "1-3".into(),
        max_memory_mb: 1024,
        max_iobps: 1048576,
        gpu_count: 2,
        gpu_memory_mb: 4096,
        gpu_milli: 0,
        env: vec![("A".into(), "1".into()), ("B".into(), "x=y".into())],
        secret_env: vec![("TOKEN".into(), "s3cret".into()), ("PW".into(), "".into())],
        uploads: Vec::new(),
        network: String::new(),
        volumes: strings(&["v1", "v2"]),
        runtime: "rt".into(),
        timeout_ms: Some(5_400_000),
        timeout_seconds: Some(5400),
        gpu_time_seconds: Some(7200),
        cuda_version: "12.2".into(),
        mig_profile: "1g.10gb".into(),
        gpu_profiling: true,
        restart: String::new(),
        executor: "runc".into(),
        devices: strings(&["nvidia.com/gpu=0", "nvidia.com/gpu=1"]),
        interactive: false,
        tty: false,
        tty_rows: 0,
        tty_cols: 0,
    };
    assert_eq!(run.request, want);
    assert_eq!(run.uploads, [std::path::PathBuf::from("a.txt")]);
    assert_eq!(
        run.follow,
        Some(ReconnectPolicy::new(Duration::from_secs(5)))
    );

    // -it: input and a terminal, whose size is read when the job is sent.
    let it = request(&["job", "run", "-it", "--gpu=1", "--", "bash"]);
    assert_eq!((it.interactive, it.tty, it.tty_rows), (true, true, 0));
    let Ok(Action::Run(r)) = parse(&["job", "run", "--detach-keys=ctrl-a,d", "-t", "bash"]) else {
        panic!("--detach-keys");
    };
    assert_eq!(r.detach_keys.to_string(), "ctrl-a,d");
    assert!(parse(&["job", "run", "--detach-keys=ctrl-1", "bash"]).is_err());

    // A share of one GPU.
    let half = request(&["job", "run", "--gpu=0.5", "true"]);
    assert_eq!((half.gpu_count, half.gpu_milli), (1, 500));

    // Unset flags leave the node's defaults.
    let r = request(&["job", "run", "true"]);
    assert_eq!((r.timeout_ms, r.timeout_seconds), (None, None));
    assert_eq!(
        r,
        JobRequest {
            command: "true".into(),
            ..Default::default()
        }
    );
    // 0 asks for the node's default; a node that predates timeout_ms
    // gets none (its default too) rather than its "0 = no limit".
    let zero = request(&["job", "run", "--timeout=0", "true"]);
    assert_eq!((zero.timeout_ms, zero.timeout_seconds), (Some(0), None));
    // Sub-second limits are kept; older nodes get them rounded up.
    for (flag, ms, secs) in [
        ("--timeout=500ms", 500, 1),
        ("--timeout=0.5s", 500, 1),
        ("--timeout=1ms", 1, 1),
        ("--timeout=1.9s", 1900, 2),
        ("--timeout=2s", 2000, 2),
    ] {
        let r = request(&["job", "run", flag, "true"]);
        assert_eq!(
            (r.timeout_ms, r.timeout_seconds),
            (Some(ms), Some(secs)),
            "{flag}"
        );
    }
    let Ok(Action::Run(run)) = parse(&["job", "run", "true"]) else {
        panic!()
    };
    assert_eq!(run.follow, None);
}

/// Each bad value: the message names the flag and the accepted form.
#[test]
fn bad_values_name_the_flag_and_the_form() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--gpu-memory=8XB"],
            &["invalid value '8XB' for '--gpu-memory <SIZE>': expected a size like 8GB, 4096MB or 4096 (megabytes)"],
        ),
        (&["--gpu=-1"], &["'--gpu <N|SHARE>'", "expected a whole number of GPUs from 0 to 256"]),
        (&["--gpu=1.5"], &["'--gpu <N|SHARE>'", "share of one GPU from 0.001 to 0.999"]),
        (&["--gpu", "-1"], &["'--gpu <N|SHARE>'", "expected a whole number of GPUs from 0 to 256"]),
        (&["--gpu=99999999999999999999"], &["'--gpu <N|SHARE>'", "expected a whole number of GPUs from 0 to"]),
        (&["--max-cpu=-5"], &["'--max-cpu <PERCENT>'", "expected a whole number from 0 to 102400", "100 = one core"]),
        (&["--max-iobps=-1"], &["'--max-iobps <BYTES_PER_SEC>'", "expected a whole number from 0 to"]),
        (
            &["--max-memory=99999999999999999999"],
            &["'--max-memory <SIZE>'", "expected a size like 8GB, 4096MB or 4096"],
        ),
        (&["--max-memory=-5"], &["'--max-memory <SIZE>'", "expected a size like 8GB"]),
        (&["--timeout=soon"], &["'--timeout <DURATION>'", "expected a duration like 30s"]),
        (&["--timeout=-5"], &["'--timeout <DURATION>'", "expected a duration like 30s"]),
        (&["-e", "1X=2"], &["'--env <KEY=VALUE>'", "expected KEY=VALUE"]),
        (&["-e", "NOEQUALS"], &["'--env <KEY=VALUE>'", "expected KEY=VALUE"]),
        (&["--cpu-cores=3-1"], &["'--cpu-cores <LIST>'", "expected a CPU list like 0-3 or 1,3"]),
        (&["--runtime=a b"], &["'--runtime <NAME[@VERSION]>'", "expected NAME[@VERSION]", "like python-3.11-ml or python-3.11-ml@1.0"]),
        (&["--runtime=rt@"], &["'--runtime <NAME[@VERSION]>'", "expected NAME[@VERSION]"]),
        (&["--volume=../x"], &["'--volume <NAME[:ro]>'", "expected --volume=NAME[:ro]", "like data-lake or data-lake:ro"]),
        (&["--volume=data:rx"], &["'--volume <NAME[:ro]>'", "unknown mount mode \"rx\"", "expected --volume=NAME[:ro]"]),
        (&["--upload="], &["'--upload <PATH>'", "expected a file or directory path"]),
        (&["--reconnect-timeout=x"], &["'--reconnect-timeout <DURATION>'", "expected a duration"]),
        // Accepted by each flag, refused by the request rules (same as the server's).
        (&["--gpu-memory=8GB"], &["invalid --gpu-memory", "gpu_count of at least 1"]),
        (&["-e", "A=1", "-s", "A=2"], &["invalid --secret-env", "given twice"]),
        (&["--gpu-time=0"], &["'--gpu-time <DURATION>'", "expected a GPU time limit like 90s, 30m, 2h or 1h30m"]),
        (&["--gpu-time=-1h"], &["'--gpu-time <DURATION>'", "at least 1s"]),
        (&["--gpu=1", "--cuda=12"], &["'--cuda <VERSION>'", "expected a CUDA version like 12.2 or 12.2.1"]),
        (&["--gpu-time=1h"], &["invalid --gpu-time", "gpu_count of at least 1", "--gpu=N together with --gpu-time"]),
        (&["--cuda=12.2"], &["invalid --cuda", "--gpu=N together with --cuda"]),
        (&["--gpu=1", "--mig=1gpu"], &["'--mig <PROFILE>'", "expected a MIG profile as nvidia-smi names it, like 1g.10gb"]),
        (&["--mig=1g.10gb"], &["invalid --mig", "--gpu=N together with --mig"]),
        (&["--gpu-profiling"], &["invalid --gpu-profiling", "--gpu=N together with --gpu-profiling"]),
    ];
    for (flags, needles) in cases {
        let mut line = vec!["job", "run"];
        line.extend_from_slice(flags);
        line.extend(["python", "x.py"]);
        let msg = match parse(&line) {
            Err(msg) => msg,
            Ok(a) => panic!("{flags:?} was accepted: {a:?}"),
        };
        for needle in *needles {
            assert!(msg.contains(needle), "{flags:?}: {needle:?} not in:\n{msg}");
        }
    }
}

/// `--volume=NAME[:ro]` and `--runtime=NAME[@VERSION]` pass the request
/// rules and reach the wire whole (`:rw` is the default, so dropped).
#[test]
fn read_only_volumes_and_runtime_versions_reach_the_request() {
    let r = request(&words(
        "job run --volume=datasets:ro --volume=out:rw --volume=scratch \
         --runtime=python-3.11-ml@1.0+cu122 python train.py",
    ));
    assert_eq!(r.volumes, ["datasets:ro", "out", "scratch"]);
    assert_eq!(r.runtime, "python-3.11-ml@1.0+cu122");
    let wire = joblet_proto::job_request_to_pb(&r);
    assert_eq!(wire.volumes, ["datasets:ro", "out", "scratch"]);
    assert_eq!(wire.runtime, "python-3.11-ml@1.0+cu122");
}

#[test]
fn missing_command_is_a_usage_error() {
    for line in [
        &["job", "run"][..],
        &["job", "run", "--gpu=1"],
        &["job", "run", "--gpu=1", "--"],
    ] {
        let e =
            Cli::try_parse_from(std::iter::once("rnx").chain(line.iter().copied())).unwrap_err();
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{line:?}"
        );
        assert!(e.to_string().contains("<COMMAND>..."), "{e}");
    }
}

#[test]
fn secret_values_are_not_echoed_in_errors() {
    let msg = parse(&["job", "run", "-s", "1TOKEN=hunter2", "true"]).unwrap_err();
    assert!(msg.contains("'--secret-env <KEY=VALUE>'"), "{msg}");
    assert!(
        msg.contains("1TOKEN=***") && msg.contains("expected KEY=VALUE"),
        "{msg}"
    );
    assert!(!msg.contains("hunter2"), "{msg}");
    let msg = parse(&["job", "run", "-s", "hunter2", "true"]).unwrap_err();
    assert!(!msg.contains("hunter2"), "{msg}");
}

/// A 100 KB id is named by its start, as the node names it.
#[test]
fn huge_ids_are_echoed_clipped() {
    let huge = "z".repeat(100 * 1024);
    for line in [
        vec!["job", "status", huge.as_str()],
        vec!["job", "stop", huge.as_str()],
        vec!["gpu", "health", "--gpu-id", huge.as_str()],
    ] {
        let msg = parse(&line).unwrap_err();
        assert!(msg.len() < 1000, "{:?}: {} bytes", &line[..2], msg.len());
        assert!(msg.contains(&format!("'{}…'", "z".repeat(64))), "{msg}");
    }
    let msg = parse(&["job", "status", "xyz"]).unwrap_err();
    assert!(
        msg.contains("invalid value 'xyz' for '<ID>': job id \"xyz\" is not valid"),
        "{msg}"
    );
}

#[test]
fn other_commands() {
    assert_eq!(
        parse(&["job", "status", "--detail", "ABC123de"]),
        Ok(Action::Status {
            id: "abc123de".into(),
            detail: true
        })
    );
    assert_eq!(
        parse(&[
            "job",
            "list",
            "--state",
            "running",
            "--state=FAILED",
            "--limit",
            "5"
        ]),
        Ok(Action::List {
            states: vec![JobState::Running, JobState::Failed],
            limit: 5
        })
    );
    assert_eq!(
        parse(&["job", "log", "-f", "abc"]),
        Ok(Action::Log {
            id: "abc".into(),
            follow: Some(ReconnectPolicy::new(Duration::from_secs(60)))
        })
    );
    assert_eq!(
        parse(&["job", "log", "abc"]),
        Ok(Action::Log {
            id: "abc".into(),
            follow: None
        })
    );
    assert_eq!(
        parse(&["job", "stop", "abc", "--grace", "1m"]),
        Ok(Action::Stop {
            id: "abc".into(),
            grace_seconds: Some(60)
        })
    );
    assert_eq!(
        parse(&["job", "kill", "abc"]),
        Ok(Action::Kill { id: "abc".into() })
    );
    assert_eq!(
        parse(&["job", "delete", "abc"]),
        Ok(Action::Delete { id: "abc".into() })
    );
    assert_eq!(parse(&["whoami"]), Ok(Action::WhoAmI));
    assert_eq!(
        parse(&["audit"]),
        Ok(Action::Audit {
            since: None,
            owner: None
        })
    );
    assert_eq!(
        parse(&["audit", "--since", "24h", "--owner=alice"]),
        Ok(Action::Audit {
            since: Some(crate::parsers::Since::Ago(Duration::from_secs(86_400))),
            owner: Some("alice".into())
        })
    );
    assert_eq!(
        parse(&["audit", "--since=2025-01-02T03:04:05Z"]),
        Ok(Action::Audit {
            since: Some(crate::parsers::Since::At(1_735_787_045_000)),
            owner: None
        })
    );

    for (line, needle) in [
        (&["job", "status", "xyz!"][..], "is not valid"),
        (
            &["job", "list", "--state", "done"],
            "unknown job state \"done\"",
        ),
        (&["job", "list", "--limit=-1"], "expected a whole number"),
        (
            &["job", "stop", "abc", "--grace=later"],
            "expected a duration",
        ),
        (
            &["audit", "--since=last tuesday"],
            "or an RFC 3339 time like",
        ),
        (&["audit", "--owner="], "expected an owner name"),
    ] {
        let msg = parse(line).unwrap_err();
        assert!(msg.contains(needle), "{line:?}: {msg}");
    }
}

#[test]
fn request_round_trips_through_the_wire_form() {
    let r = request(&words(
        "job run --max-cpu=100 --cpu-cores=0-1 --max-memory=512 --gpu=1 --gpu-memory=1GB \
         -e A=1 -s S=2 --upload=u --volume=v --runtime=rt --timeout=30s --gpu-time=90s \
         --cuda=11.8.0 --mig=2g.20gb --gpu-profiling -- sh -c true",
    ));
    assert_eq!(
        joblet_proto::job_request_from_pb(joblet_proto::job_request_to_pb(&r)),
        r
    );
}

#[test]
fn every_field_error_maps_to_its_flag() {
    use joblet_core::FieldError;
    for (field, flag) in [
        ("command", "COMMAND"),
        ("args[3]", "COMMAND"),
        ("resources.max_cpu", "--max-cpu"),
        ("resources.cpu_cores", "--cpu-cores"),
        ("resources.max_memory_mb", "--max-memory"),
        ("resources.max_iobps", "--max-iobps"),
        ("resources.gpu_count", "--gpu"),
        ("resources.gpu_memory_mb", "--gpu-memory"),
        ("resources.gpu_time_seconds", "--gpu-time"),
        ("cuda_version", "--cuda"),
        ("mig_profile", "--mig"),
        ("gpu_profiling", "--gpu-profiling"),
        ("env", "--env"),
        ("env[\"A\"]", "--env"),
        ("secret_env[\"A\"]", "--secret-env"),
        ("uploads[0]", "--upload"),
        ("volumes[1]", "--volume"),
        ("runtime", "--runtime"),
        ("timeout_seconds", "--timeout"),
        ("timeout_ms", "--timeout"),
        ("executor", "--executor"),
        ("devices[1]", "--device"),
    ] {
        assert_eq!(
            flag_for_field(&FieldError::new(field, "x")),
            flag,
            "{field}"
        );
    }
}

#[test]
fn usage_errors_come_before_config_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let env = LookupEnv {
        rnx_config: None,
        home: Some(dir.path().to_owned()),
    };
    let cli = Cli::try_parse_from(["rnx", "job", "run", "--gpu-memory=1GB", "x"]).unwrap();
    let e = Settings::resolve(cli, &env).unwrap_err();
    assert!(matches!(e, Error::InvalidRequest { .. }), "{e}");
    let cli = Cli::try_parse_from(["rnx", "job", "list"]).unwrap();
    let e = Settings::resolve(cli, &env).unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e}");

    let path = dir.path().join("c.yml");
    std::fs::write(&path, "x").unwrap();
    let cli = Cli::try_parse_from([
        "rnx",
        "--node",
        "n1",
        "--config",
        path.to_str().unwrap(),
        "job",
        "list",
    ])
    .unwrap();
    let s = Settings::resolve(cli, &env).unwrap();
    assert_eq!(
        (s.config_path, s.node.as_deref(), s.format),
        (path, Some("n1"), Format::Human)
    );
}

#[test]
fn runtime_commands() {
    let policy = ReconnectPolicy::new(Duration::from_secs(60));
    for (line, want) in [
        ("runtime list", RuntimeAction::List { all: false }),
        ("runtime list --all", RuntimeAction::List { all: true }),
        (
            "runtime info python-3.11-ml@1.0",
            RuntimeAction::Info {
                name: "python-3.11-ml@1.0".into(),
            },
        ),
        (
            "runtime install python-3.11-ml --extra tensorflow --extra=jax --rebuild",
            RuntimeAction::Install {
                name: "python-3.11-ml".into(),
                extras: strings(&["tensorflow", "jax"]),
                rebuild: true,
            },
        ),
        (
            "runtime build ./my-runtime/",
            RuntimeAction::Build {
                path: "./my-runtime/".into(),
                extras: vec![],
                rebuild: false,
            },
        ),
        (
            "runtime remove rt@0.9",
            RuntimeAction::Remove {
                name: "rt@0.9".into(),
            },
        ),
        (
            "runtime test rt",
            RuntimeAction::Test {
                name: "rt".into(),
                follow: policy,
            },
        ),
        (
            "runtime test rt --reconnect-timeout=5s",
            RuntimeAction::Test {
                name: "rt".into(),
                follow: ReconnectPolicy::new(Duration::from_secs(5)),
            },
        ),
    ] {
        assert_eq!(parse(&words(line)), Ok(Action::Runtime(want)), "{line}");
    }
    for (line, needles) in [
        (
            "runtime info rt@",
            &["'<NAME[@VERSION]>'", "expected NAME[@VERSION]"][..],
        ),
        (
            "runtime install ../rt",
            &[
                "expected NAME[@VERSION]",
                "like python-3.11-ml or python-3.11-ml@1.0",
            ],
        ),
        (
            "runtime install rt --extra=a/b",
            &["'--extra <NAME>'", "like tensorflow"],
        ),
        ("runtime build", &["<PATH>"]),
        ("runtime remove", &["<NAME[@VERSION]>"]),
    ] {
        let msg = parse(&words(line)).unwrap_err();
        for n in needles {
            assert!(msg.contains(n), "{line}: {n:?} not in:\n{msg}");
        }
    }
}

#[test]
fn volume_commands() {
    for (line, want) in [
        (
            "volume create data-lake --size=1GB",
            VolumeAction::Create {
                name: "data-lake".into(),
                size_bytes: 1 << 30,
                kind: "filesystem",
                shared: false,
            },
        ),
        (
            "volume create scratch --size 512MB --type=memory --shared",
            VolumeAction::Create {
                name: "scratch".into(),
                size_bytes: 512 << 20,
                kind: "memory",
                shared: true,
            },
        ),
        ("volume list", VolumeAction::List),
        (
            "volume inspect data-lake",
            VolumeAction::Inspect {
                name: "data-lake".into(),
            },
        ),
        (
            "volume remove data-lake",
            VolumeAction::Remove {
                name: "data-lake".into(),
                force: false,
            },
        ),
        (
            "volume remove data-lake --force",
            VolumeAction::Remove {
                name: "data-lake".into(),
                force: true,
            },
        ),
        (
            "volume share data-lake",
            VolumeAction::SetShared {
                name: "data-lake".into(),
                shared: true,
            },
        ),
        (
            "volume unshare data-lake",
            VolumeAction::SetShared {
                name: "data-lake".into(),
                shared: false,
            },
        ),
    ] {
        assert_eq!(parse(&words(line)), Ok(Action::Volume(want)), "{line}");
    }
    for (line, needles) in [
        (
            "volume create v --size=0",
            &[
                "'--size <SIZE>'",
                "expected a size like 1GB, 512MB or 16MB (at least 1MB",
            ][..],
        ),
        (
            "volume create v --size=1.5GB",
            &["'--size <SIZE>'", "at least 1MB"],
        ),
        ("volume create v", &["--size <SIZE>"]),
        (
            "volume create v --size=1GB --type=disk",
            &[
                "invalid value 'disk' for '--type <TYPE>'",
                "filesystem, memory",
            ],
        ),
        (
            "volume create ../v --size=1GB",
            &["'<NAME>'", "like data-lake (a volume name, not a path)"],
        ),
        (
            "volume inspect v:ro",
            &["'<NAME>'", "a volume name, not a path"],
        ),
    ] {
        let msg = parse(&words(line)).unwrap_err();
        for n in needles {
            assert!(msg.contains(n), "{line}: {n:?} not in:\n{msg}");
        }
    }
}

#[test]
fn node_commands_and_gpus_of_another_node() {
    let drain = |name: &str, drain| {
        Action::Node(NodeAction::Drain {
            name: name.into(),
            drain,
        })
    };
    assert_eq!(
        parse(&words("node list")),
        Ok(Action::Node(NodeAction::List))
    );
    assert_eq!(
        parse(&words("node drain gpu-07")),
        Ok(drain("gpu-07", true))
    );
    assert_eq!(parse(&words("node undrain n2")), Ok(drain("n2", false)));
    assert_eq!(
        parse(&words("gpu status --on gpu-07 --all")),
        Ok(Action::Gpu(GpuAction::Status {
            all: true,
            on: Some("gpu-07".into()),
        }))
    );
    assert_eq!(
        parse(&words("gpu watch --on n3 --count 2")),
        Ok(Action::Gpu(GpuAction::Watch {
            interval: Duration::from_secs(1),
            count: Some(2),
            all: false,
            on: Some("n3".into()),
        }))
    );
    assert_eq!(
        parse(&words("gpu status")),
        Ok(Action::Gpu(GpuAction::Status {
            all: false,
            on: None,
        }))
    );
    // The global --node still picks the config entry, wherever it stands.
    let cli = Cli::try_parse_from(words("rnx gpu status --node prod --on n2")).unwrap();
    assert_eq!(cli.global.node.as_deref(), Some("prod"));
    for (line, needles) in [
        ("node drain", &["<NAME>"][..]),
        (
            "node drain n1/x",
            &[
                "'<NAME>'",
                "expected a node name as `rnx node list` shows it",
            ],
        ),
        ("gpu status --on a,b", &["'--on <NODE>'", "like gpu-07"]),
        ("node frobnicate n1", &["unrecognized subcommand"]),
    ] {
        let msg = parse(&words(line)).unwrap_err();
        for n in needles {
            assert!(msg.contains(n), "{line}: {n:?} not in:\n{msg}");
        }
    }
}

#[test]
fn workflow_files_are_read_and_checked_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("pipeline.yaml");
    std::fs::write(
        &good,
        "jobs:\n  a: {command: echo}\n  b: {command: echo, requires: [{a: COMPLETED}]}\n",
    )
    .unwrap();
    let g = good.to_str().unwrap();
    match parse(&["workflow", "run", g, "--follow"]) {
        Ok(Action::Workflow(WorkflowAction::Run { file, follow })) => {
            assert!(follow);
            assert_eq!(file.name, "pipeline.yaml");
            assert_eq!(file.path, good);
            assert_eq!(file.workflow.jobs().len(), 2);
            assert!(file.yaml.starts_with("jobs:"));
        }
        other => panic!("{other:?}"),
    }

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "jobs:\n  a:\n    comand: echo\n").unwrap();
    let b = bad.to_str().unwrap();
    let e = parse(&["workflow", "validate", b]).unwrap_err();
    assert!(e.starts_with(&format!("{b}:3:5: ")), "{e}");
    assert!(e.contains("unknown field `comand`"), "{e}");

    let cli = Cli::try_parse_from(["rnx", "workflow", "run", b]).unwrap();
    let err = action(cli.command).unwrap_err();
    assert_eq!(crate::exit::for_error(&err), crate::exit::USAGE);

    let missing = dir.path().join("missing.yaml");
    let e = parse(&["workflow", "run", missing.to_str().unwrap()]).unwrap_err();
    assert!(
        e.starts_with("cannot read workflow file ") && e.contains("missing.yaml"),
        "{e}"
    );
}

#[test]
fn workflow_ids_and_names() {
    assert_eq!(
        parse(&["workflow", "status", "1A2B", "--detail"]).unwrap(),
        Action::Workflow(WorkflowAction::Status {
            id: "1a2b".into(),
            detail: true
        })
    );
    assert_eq!(
        parse(&["workflow", "logs", "1a2b", "model-training"]).unwrap(),
        Action::Workflow(WorkflowAction::Logs {
            id: "1a2b".into(),
            job: Some("model-training".into())
        })
    );
    assert_eq!(
        parse(&["workflow", "list"]).unwrap(),
        Action::Workflow(WorkflowAction::List { limit: 0 })
    );
    let e = parse(&["workflow", "stop", "wf-1"]).unwrap_err();
    assert!(e.contains("invalid workflow id \"wf-1\""), "{e}");
}
