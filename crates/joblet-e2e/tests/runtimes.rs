//! Runtimes end to end, with the small `test-python` runtime of the
//! node's catalog (a Debian root with Python 3 and one local wheel; built
//! once per store with mmdebstrap and uv, then reused). Every node of this
//! file shares one runtime store under the target directory, as nodes of
//! one host would share a disk: the first install builds, the others find
//! it. What is shown: a job's root is the runtime's tree, read-only, with
//! nothing of the host's `/usr`; a setuid-root program placed in the tree
//! does not raise privileges; `rnx runtime test` runs the self-check in a
//! job; an interrupted install leaves nothing listed; `remove` is refused
//! while a job uses the runtime; and seed 001's lines that name a runtime
//! and a volume run verbatim on the simulated 8-GPU node (with a stand-in
//! `python-3.11-ml` built from the same base: the full one is measured
//! once, see BENCHMARKS.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joblet_e2e::{Node, NodeOptions, SimGpuNode};

/// The runtime store every node of this file uses.
fn store() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-runtimes");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn runtimes_config() -> String {
    format!("runtimes:\n  dir: \"{}\"\n", store().display())
}

fn node() -> Node {
    Node::start_with(NodeOptions {
        extra_config: runtimes_config(),
        ..Default::default()
    })
    .expect("node")
}

/// Installs the catalog's `test-python` (building it if the store has
/// not yet).
fn install_test_python(node: &Node) -> serde_json::Value {
    let out = node
        .rnx_cmd()
        .args(["--json", "runtime", "install", "test-python"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "install failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        node.daemon_log_tail(30)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The repo's `runtimes/test-python` copied with another name (and
/// version, and `cuda`): the same inputs, so its tree is the one stored.
fn stand_in(name: &str, version: &str, cuda: Option<&str>) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runtimes/test-python");
    let dir = tempfile::tempdir().unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(src.join("."))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copy.success());
    let yml = dir.path().join("runtime.yml");
    let mut text = std::fs::read_to_string(&yml)
        .unwrap()
        .replace("name: test-python", &format!("name: {name}"))
        .replace("version: \"1\"", &format!("version: \"{version}\""));
    if let Some(c) = cuda {
        text.push_str(&format!("cuda: \"{c}\"\n"));
    }
    std::fs::write(&yml, text).unwrap();
    dir
}

/// Runs `rnx job run --follow` with `args`; returns (exit code, stdout,
/// stderr).
fn follow(node: &Node, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["job", "run", "--follow"];
    all.extend_from_slice(args);
    let out = node.rnx(&all);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_runtime_job_runs_in_its_tree_read_only_without_the_hosts_usr_or_setuid() {
    let node = node();
    let installed = install_test_python(&node);
    let digest = installed["runtime"]["digest"].as_str().unwrap().to_owned();
    assert!(digest.starts_with("sha256:"), "{installed}");
    let list = node.rnx_json(&["runtime", "list"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "test-python" && r["digest"] == digest.as_str()),
        "{list}"
    );

    // Its Python, its packages, nothing of the host's.
    let (code, out, err) = follow(
        &node,
        &[
            "--runtime=test-python",
            "--",
            "python",
            "-c",
            "import probe, sys, os; print(probe.hello()); print(sys.version_info[:2]); print(os.path.exists('/usr/bin/gcc'), os.path.exists('/usr/bin/cargo')); print([p for p in sys.path if 'pyenv' in p or 'site-packages' in p])",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(Path::new("/usr/bin/gcc").exists());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "(3, 11)", "{out}");
    assert_eq!(lines[2], "False False", "{out}");
    assert_eq!(lines[3], "[]", "{out}");

    // The root cannot be written.
    let (code, out, _) = follow(
        &node,
        &[
            "--runtime=test-python",
            "--",
            "sh",
            "-c",
            "for p in /usr/x /etc/x /x /usr/local/lib/python3.11/dist-packages/x; do touch $p 2>&1; done; echo done",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(out.matches("Read-only file system").count(), 4, "{out}");

    // A setuid-root program placed in the tree runs as the job's user.
    let tree = store()
        .join("trees")
        .join(digest.trim_start_matches("sha256:"));
    let suid = tree.join(format!("usr/local/bin/suid-id-{}", std::process::id()));
    std::fs::copy(tree.join("usr/bin/id"), &suid).unwrap();
    std::os::unix::fs::chown(&suid, Some(0), Some(0)).unwrap();
    Command::new("chmod")
        .arg("4755")
        .arg(&suid)
        .status()
        .unwrap();
    let name = format!(
        "/usr/local/bin/{}",
        suid.file_name().unwrap().to_string_lossy()
    );
    let (code, out, err) = follow(&node, &["--runtime=test-python", "--", &name, "-u"]);
    std::fs::remove_file(&suid).unwrap();
    assert_eq!((code, out.trim()), (0, "65534"), "{err}");

    // The self-check, as a job in the runtime.
    let out = node.rnx(&["runtime", "test", "test-python"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("probe"),
        "{out:?}"
    );

    // A runtime that is not installed: the error says how to install it.
    let out = node.rnx(&["job", "run", "--runtime=python-9.9", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rnx runtime install python-9.9"), "{err}");
}

#[test]
fn remove_is_refused_while_a_job_runs_in_the_runtime() {
    let node = node();
    install_test_python(&node);
    let name = format!("rm-probe-{}", std::process::id());
    let dir = stand_in(&name, "1", None);
    node.rnx_ok(&["runtime", "build", dir.path().to_str().unwrap()]);
    let id = node.run(&[&format!("--runtime={name}"), "--", "sleep", "30"]);
    node.wait_list(Duration::from_secs(20), "the job running", |jobs| {
        jobs.iter()
            .any(|j| j["id"] == id.as_str() && j["state"] == "RUNNING")
    });
    let out = node.rnx(&["runtime", "remove", &name]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("used by 1 unfinished job") && err.contains(&id),
        "{err}"
    );
    node.rnx_ok(&["job", "kill", &id]);
    node.wait_done(&id, Duration::from_secs(20));
    node.rnx_ok(&["runtime", "remove", &name]);
    let list = node.rnx_json(&["runtime", "list"]);
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == name.as_str()),
        "{list}"
    );
    // The tree it shared with test-python stays.
    let (code, _, err) = follow(&node, &["--runtime=test-python", "--", "true"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn an_interrupted_install_leaves_no_runtime_listed() {
    let mut node = node();
    install_test_python(&node);
    let name = format!("cut-probe-{}", std::process::id());
    let dir = stand_in(&name, "1", None);
    // --rebuild: mmdebstrap runs again; the daemon is killed while it does.
    let mut build = node
        .rnx_cmd()
        .args(["runtime", "build", "--rebuild"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = build.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the build reported no base phase");
        if line.to_lowercase().contains("base") {
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    node.kill_daemon();
    let _ = build.wait();
    node.restart().expect("restart");
    let list = node.rnx_json(&["runtime", "list"]);
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == name.as_str()),
        "{list}"
    );
    let info = node.rnx(&["runtime", "info", &name]);
    assert!(!info.status.success());
}

/// The scripts seed 001's lines run, as a user would have them beside
/// `rnx` (in the stand-in runtime: plain Python).
fn seed_scripts(dir: &Path) {
    let script = |name: &str, body: &str| {
        std::fs::write(
            dir.join(name),
            format!("import os, sys\nprint('{name}', 'gpus', os.environ.get('CUDA_VISIBLE_DEVICES'), 'args', sys.argv[1:])\n{body}"),
        )
        .unwrap()
    };
    script("distributed_training.py", "");
    script("tensorflow_training.py", "");
    script("rapids_etl.py", "open('/volumes/data-lake/etl.csv', 'w').write('a,b\\n1,2\\n')\nprint(open('/volumes/data-lake/etl.csv').read().split())\n");
    script("cupy_analytics.py", "");
    script("llm_inference.py", "");
    script(
        "vision_pipeline.py",
        "print(sorted(os.listdir('/volumes/images')))\n",
    );
    script("train.py", "");
}

/// Seed 001's `ml-training-pipeline.yaml`, byte for byte, with the small
/// `preprocess.py`, `train.py` and `evaluate.py` of
/// `examples/ml-training-pipeline` beside it: `rnx workflow run` uploads
/// the directory, preprocess's dataset reaches train through the run's
/// shared volume, train gets 2 GPUs and evaluate 1, all COMPLETED.
#[test]
fn seed_001_ml_training_pipeline_runs_byte_for_byte_on_the_simulated_gpu_node() {
    // The simulated node stands for an 8-GPU server, whose CPUs model
    // training's `max_cpu: 800` fits; this machine may have 2, so the
    // scheduler is told 16 (`max_cpu` stays each job's ceiling).
    let node = SimGpuNode::start(8, "", &format!("  cpu_capacity: 16\n{}", runtimes_config()))
        .expect("GPU node");
    install_test_python(&node);
    let dir = stand_in("python-3.11-ml", "0-ci", Some("12.4"));
    node.rnx_ok(&["runtime", "build", dir.path().to_str().unwrap()]);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ml-training-pipeline");
    let file = example.join("ml-training-pipeline.yaml");
    let seed = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        seed,
        include_str!("../../joblet-workflow/tests/fixtures/ml-training-pipeline.yaml"),
        "the example is seed 001's file, byte for byte"
    );
    let started = node.rnx_json(&["workflow", "run", file.to_str().unwrap()]);
    let id = started["id"].as_str().unwrap().to_owned();
    let t0 = Instant::now();
    let s = loop {
        let s = node.rnx_json(&["workflow", "status", &id]);
        if !["PENDING", "RUNNING"].contains(&s["state"].as_str().unwrap()) {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "{s:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        s["state"],
        "COMPLETED",
        "{s:#}\n{}",
        node.daemon_log_tail(30)
    );
    let jobs = s["jobs"].as_array().unwrap();
    let by_name = |n: &str| jobs.iter().find(|j| j["name"] == n).unwrap().clone();
    let (prep, train, eval) = (
        by_name("data-preprocessing"),
        by_name("model-training"),
        by_name("model-evaluation"),
    );
    for j in [&prep, &train, &eval] {
        assert_eq!(j["state"], "COMPLETED", "{j:#}");
        assert!(
            j["runtime"]
                .as_str()
                .unwrap()
                .starts_with("python-3.11-ml@"),
            "{j:#}"
        );
    }
    assert_eq!(prep["gpu_indices"].as_array().unwrap().len(), 0);
    assert_eq!(
        train["gpu_indices"].as_array().unwrap().len(),
        2,
        "{train:#}"
    );
    assert_eq!(eval["gpu_indices"].as_array().unwrap().len(), 1, "{eval:#}");
    let log = |j: &serde_json::Value| node.rnx_ok(&["job", "log", j["job_id"].as_str().unwrap()]);
    assert!(log(&prep).contains("wrote 1000 rows"), "{}", log(&prep));
    let trained = log(&train);
    assert!(
        trained.contains("1000 rows, 100 epochs on 2 GPUs"),
        "{trained}"
    );
    assert!(log(&eval).contains("on 1 GPU"), "{}", log(&eval));
    // The readable view shows it.
    let text = node.rnx_ok(&["workflow", "status", &id]);
    for name in [
        "data-preprocessing",
        "model-training",
        "model-evaluation",
        "COMPLETED",
    ] {
        assert!(text.contains(name), "{text}");
    }
}

#[test]
fn seed_001_lines_with_a_runtime_and_volumes_run_on_the_simulated_gpu_node() {
    let node = SimGpuNode::start(8, "", &runtimes_config()).expect("GPU node");
    install_test_python(&node);
    let dir = stand_in("python-3.11-ml", "0-ci", Some("12.4"));
    node.rnx_ok(&["runtime", "build", dir.path().to_str().unwrap()]);
    node.rnx_ok(&["volume", "create", "data-lake", "--size=64MB"]);
    node.rnx_ok(&["volume", "create", "images", "--size=16MB"]);
    let scripts = tempfile::tempdir().unwrap();
    seed_scripts(scripts.path());
    // Seed 001's lines, flags as written; each also uploads its script.
    let lines: [&[&str]; 6] = [
        &[
            "--gpu=2",
            "--runtime=python-3.11-ml",
            "python",
            "distributed_training.py",
        ],
        &[
            "--gpu=2",
            "--gpu-memory=8GB",
            "--runtime=python-3.11-ml",
            "python",
            "tensorflow_training.py",
            "--batch-size=64",
        ],
        &[
            "--gpu=1",
            "--gpu-memory=12GB",
            "--volume=data-lake",
            "--runtime=python-3.11-ml",
            "python",
            "rapids_etl.py",
        ],
        &[
            "--gpu=1",
            "--max-memory=16384",
            "--runtime=python-3.11-ml",
            "python",
            "cupy_analytics.py",
        ],
        &[
            "--gpu=1",
            "--gpu-memory=24GB",
            "--runtime=python-3.11-ml",
            "python",
            "llm_inference.py",
            "--model=llama2-70b",
        ],
        &[
            "--gpu=1",
            "--gpu-memory=8GB",
            "--volume=images",
            "--runtime=python-3.11-ml",
            "python",
            "vision_pipeline.py",
        ],
    ];
    for line in lines {
        let script = line.iter().find(|a| a.ends_with(".py")).unwrap();
        let upload = format!("--upload={}", scripts.path().join(script).display());
        let mut args = vec![upload.as_str()];
        args.extend_from_slice(line);
        let (code, out, err) = follow(&node, &args);
        assert_eq!(
            code,
            0,
            "{line:?}: {out}{err}\n{}",
            node.daemon_log_tail(20)
        );
        let first = out.lines().next().unwrap_or_default().to_owned();
        let gpus = line
            .iter()
            .find_map(|a| a.strip_prefix("--gpu="))
            .unwrap()
            .parse::<usize>()
            .unwrap();
        let visible = first.split(' ').nth(2).unwrap_or_default();
        assert_eq!(visible.split(',').count(), gpus, "{line:?}: {out}");
        if script.starts_with("rapids") {
            assert!(out.contains("['a,b', '1,2']"), "{out}");
        }
    }
    // The job records the runtime it ran in, pinned.
    let jobs = node.rnx_json(&["job", "list"]);
    let job = &jobs.as_array().unwrap()[0];
    let st = node.status(job["id"].as_str().unwrap());
    assert_eq!(st["runtime"], "python-3.11-ml@0-ci", "{st}");
    node.wait_gpus_free(Duration::from_secs(20), "after the seed lines");
}

#[test]
fn a_runtime_needing_a_newer_cuda_than_the_driver_is_refused_for_gpu_jobs() {
    let node = SimGpuNode::start(8, "", &runtimes_config()).expect("GPU node");
    install_test_python(&node);
    let name = format!("cuda13-probe-{}", std::process::id());
    let dir = stand_in(&name, "1", Some("13.0"));
    node.rnx_ok(&["runtime", "build", dir.path().to_str().unwrap()]);
    let runtime = format!("--runtime={name}");
    let out = node.rnx(&["job", "run", "--gpu=1", &runtime, "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs CUDA 13.0") && err.contains("12.4"),
        "{err}"
    );
    // On CPU it runs.
    let (code, _, err) = follow(&node, &[&runtime, "--", "true"]);
    assert_eq!(code, 0, "{err}");
    node.rnx_ok(&["runtime", "remove", &name]);
}

/// Seed 001's lines in the real `python-3.11-ml` (numpy, pandas,
/// scikit-learn, PyTorch): a store where it is installed, named by
/// `JOBLET_ML_STORE` (`rnx runtime install python-3.11-ml` into it takes
/// about 4 minutes and 6 GiB). Not in CI: run it with
/// `JOBLET_ML_STORE=/var/tmp/joblet-rt-measure cargo test -p joblet-e2e --test runtimes -- --ignored`.
#[test]
#[ignore = "needs the full python-3.11-ml runtime (JOBLET_ML_STORE)"]
fn seed_001_lines_in_the_real_python_3_11_ml() {
    let store =
        std::env::var("JOBLET_ML_STORE").expect("JOBLET_ML_STORE: a store with python-3.11-ml");
    let node =
        SimGpuNode::start(8, "", &format!("runtimes:\n  dir: \"{store}\"\n")).expect("GPU node");
    let info = node.rnx_json(&["runtime", "info", "python-3.11-ml"]);
    assert_eq!(info["installed"], true, "{info}");
    node.rnx_ok(&["volume", "create", "data-lake", "--size=64MB"]);
    let scripts = tempfile::tempdir().unwrap();
    let ml = "import os, sys, numpy, pandas, sklearn, torch\n\
print(os.path.basename(sys.argv[0]), 'gpus', os.environ.get('CUDA_VISIBLE_DEVICES'), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__)\n";
    std::fs::write(scripts.path().join("distributed_training.py"), ml).unwrap();
    std::fs::write(
        scripts.path().join("rapids_etl.py"),
        format!("{ml}df = pandas.DataFrame({{'a': [1, 2, 3]}}); df.to_csv('/volumes/data-lake/etl.csv', index=False)\nprint('rows', len(pandas.read_csv('/volumes/data-lake/etl.csv')))\n"),
    )
    .unwrap();
    for line in [
        &[
            "--gpu=2",
            "--runtime=python-3.11-ml",
            "python",
            "distributed_training.py",
        ][..],
        &[
            "--gpu=1",
            "--gpu-memory=12GB",
            "--volume=data-lake",
            "--runtime=python-3.11-ml",
            "python",
            "rapids_etl.py",
        ],
    ] {
        let script = line.iter().find(|a| a.ends_with(".py")).unwrap();
        let upload = format!("--upload={}", scripts.path().join(script).display());
        let mut args = vec![upload.as_str()];
        args.extend_from_slice(line);
        let (code, out, err) = follow(&node, &args);
        println!("{line:?}:\n{out}{err}");
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("torch 2.6.0+cu124 cuda 12.4"), "{out}");
    }
    // The task's own check, and the host's Python packages out of sight
    // (the host has none of these; the runtime's are its own).
    let (code, out, err) = follow(
        &node,
        &["--runtime=python-3.11-ml", "python3", "-c", "import numpy, pandas, sklearn, torch; print(torch.__version__); import sys; print(sys.path)"],
    );
    println!("{out}{err}");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("2.6.0+cu124"), "{out}");
    assert!(!out.contains("pyenv") && !out.contains("/root/"), "{out}");
    let test = node.rnx(&["runtime", "test", "python-3.11-ml"]);
    println!("{}", String::from_utf8_lossy(&test.stdout));
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stderr)
    );
    node.rnx_ok(&["volume", "remove", "data-lake"]);
}

#[test]
fn jobs_in_a_runtime_start_in_sandboxes_built_ahead_on_its_tree() {
    let node = node();
    install_test_python(&node);
    let started = |id: &str| {
        node.daemon_log()
            .lines()
            .find(|l| l.contains("job started") && l.contains(id))
            .unwrap_or_default()
            .to_owned()
    };
    // The first job in the runtime starts cold and makes it hot.
    let first = node.run(&["--runtime=test-python", "--", "true"]);
    node.wait_done(&first, Duration::from_secs(30));
    assert!(started(&first).contains("cold"), "{}", started(&first));
    // The next ones take sandboxes built on its tree, and run right.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut warm = 0;
    while warm < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let (code, out, err) = follow(
            &node,
            &[
                "--runtime=test-python",
                "--",
                "python",
                "-c",
                "import probe; print(probe.hello())",
            ],
        );
        assert_eq!(code, 0, "{out}{err}");
        let jobs = node.rnx_json(&["job", "list"]);
        let id = jobs.as_array().unwrap()[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        if started(&id).contains("warm") {
            warm += 1;
        }
    }
    assert_eq!(warm, 2, "{}", node.daemon_log_tail(40));
    // A host-root job is not given one of them.
    let (code, out, _) = follow(
        &node,
        &["--", "sh", "-c", "test -e /usr/bin/gcc && echo host"],
    );
    assert_eq!((code, out.trim()), (0, "host"));
}
