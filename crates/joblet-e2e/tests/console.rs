//! The web console in a real browser: a simulated 8-GPU node, Debian's
//! chromium (headless) driven by Playwright for Python
//! (`tests/console/console_test.py`), sign-in through `rnx console`'s
//! one-time links. The browser sees the 8 GPUs on the overview; this test
//! runs a job from the CLI and the browser watches it appear in the jobs
//! page and its output arrive live in its detail view; the admin drains a
//! GPU from the GPU page (and `rnx gpu status` shows it draining); the
//! workflow run this test started is drawn as its DAG, every job
//! COMPLETED; the history page shows GPU-hours, queue waits and the failed
//! job; a viewer's session is refused the drain (the page says why, the
//! GPU is unchanged); and a used link is refused.
//!
//! The browser script takes a screenshot of each page: into a temporary
//! directory, or into `$JOBLET_CONSOLE_SCREENSHOTS` (relative to the
//! workspace root; `docs/console` refreshes the README's pictures).
//!
//! Needs the Playwright venv (`scripts/pytools.sh`) and `/usr/bin/chromium`,
//! both installed by `scripts/setup.sh`; without them the test fails and
//! says so.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use joblet_e2e::SimGpuNode;
use serde_json::json;

/// The whole browser run, well inside CI's patience.
const LIMIT: Duration = Duration::from_secs(110);

const CHROMIUM: &str = "/usr/bin/chromium";
const PAGES: [&str; 6] = [
    "overview",
    "jobs",
    "job-detail",
    "gpus",
    "workflows",
    "history",
];

/// Seed 001's pipeline (`examples/ml-training-pipeline`), its jobs as
/// short shell commands (this node has no `python-3.11-ml` runtime), and a
/// report that follows evaluation whatever became of it.
const WORKFLOW: &str = r#"name: console-pipeline
jobs:
  data-preprocessing:
    command: "sh"
    args: ["-c", "echo preprocessing; sleep 1"]
    resources:
      max_memory: 256
  model-training:
    command: "sh"
    args: ["-c", "echo training; sleep 2"]
    requires:
      - data-preprocessing: "COMPLETED"
    resources:
      gpu_count: 2
      gpu_memory_mb: 8192
  model-evaluation:
    command: "sh"
    args: ["-c", "echo evaluating; sleep 1"]
    requires:
      - model-training: "COMPLETED"
    resources:
      gpu_count: 1
  publish-report:
    command: "sh"
    args: ["-c", "echo report"]
    requires:
      - model-evaluation: "ANY"
      - data-preprocessing: "COMPLETED"
"#;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's Python with Playwright, and chromium; fails naming
/// scripts/setup.sh when either is missing.
fn browser_tools() -> (PathBuf, PathBuf) {
    let venv = std::env::var_os("JOBLET_PYTOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/lib/joblet-pytools"));
    let python = venv.join("bin/python");
    let chromium = PathBuf::from(CHROMIUM);
    assert!(
        chromium.is_file(),
        "{CHROMIUM} is missing: the console's browser test needs Debian's chromium; run scripts/setup.sh (it installs chromium and the Playwright venv)"
    );
    let ok = Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import Playwright: run scripts/setup.sh (scripts/pytools.sh installs Playwright into {})",
        python.display(),
        venv.display()
    );
    (python, chromium)
}

/// The browser script's process: its stdout as lines, its stderr kept
/// for failure messages.
struct Script {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    deadline: Instant,
}

impl Script {
    fn start(mut cmd: Command) -> Script {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting console_test.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let mut err_pipe = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    return;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                eprint!("{text}");
                keep.lock().unwrap().push_str(&text);
            }
        });
        Script {
            child,
            stdin,
            lines,
            stderr,
            deadline: Instant::now() + LIMIT,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the script's next line, which must be `want`; returns it.
    fn expect(&mut self, want: &str, node: &SimGpuNode) -> String {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) if line.starts_with(want) => line,
            Ok(line) => panic!(
                "console_test.py said {line:?}, expected {want:?}\nits stderr:\n{}",
                self.stderr()
            ),
            Err(_) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                // Let the stderr reader drain what the script left.
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "console_test.py never said {want:?} (it failed, or the browser run passed {LIMIT:?})\nits stderr:\n{}\ndaemon log tail:\n{}",
                    self.stderr(),
                    node.daemon_log_tail(40)
                )
            }
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("writing to console_test.py");
        self.stdin
            .flush()
            .expect("flushing console_test.py's stdin");
    }
}

/// Gives the simulated GPUs something to chart: every 250 ms, utilisation,
/// temperature and power that rise and fall (each GPU in its own phase;
/// below the slowdown temperature, memory left alone so release checks
/// see their baseline), written to the fake NVML's state file; and one
/// application XID (13, which leaves a GPU in service) on GPU 3, for its
/// XID history. Stops when the returned flag is set.
fn simulate_load(state_file: PathBuf) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let t0 = Instant::now();
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            let t = t0.elapsed().as_secs_f64();
            let gpus: serde_json::Map<String, serde_json::Value> = (0..8)
                .map(|i| {
                    let wave = ((t / 4.0 + f64::from(i)).sin() + 1.0) / 2.0;
                    let util = (10.0 + 85.0 * wave).round() as u32;
                    (
                        i.to_string(),
                        json!({
                            "utilization_gpu_pct": util,
                            "temperature_c": 38 + util / 3,
                            "power_mw": 60_000 + util * 3_000,
                        }),
                    )
                })
                .collect();
            let body = json!({"gpus": gpus, "events": [{"gpu": 3, "type": "xid", "data": 13}]});
            let tmp = state_file.with_extension("tmp");
            if std::fs::write(&tmp, body.to_string()).is_ok() {
                let _ = std::fs::rename(&tmp, &state_file);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    (stop, thread)
}

fn gpu_state(node: &SimGpuNode, index: usize) -> String {
    node.gpus()[index]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_console_in_a_browser() {
    let (python, chromium) = browser_tools();
    let node = SimGpuNode::start(16, "", "").expect("a simulated 8-GPU node");
    assert!(
        node.rest_address().is_some(),
        "the node serves no REST API / console (server.json has no rest address)\n{}",
        node.daemon_log_tail(30)
    );

    let (load_stop, load) = simulate_load(node.gpus.state.clone());

    // What the history and workflow pages will show.
    let failed = node.run(&["--", "sh", "-c", "exit 3"]);
    let wf_dir = tempfile::tempdir().unwrap();
    let wf_file = wf_dir.path().join("console-pipeline.yaml");
    std::fs::write(&wf_file, WORKFLOW).unwrap();
    let workflow = node.rnx_json(&["workflow", "run", wf_file.to_str().unwrap()])["id"]
        .as_str()
        .expect("a workflow id")
        .to_owned();
    assert_eq!(
        node.wait_done(&failed, Duration::from_secs(20))["state"],
        "FAILED"
    );

    let admin_link = node.rnx_json(&["console"])["url"]
        .as_str()
        .expect("rnx console prints a url")
        .to_owned();
    let viewer_link = node.rnx_json(&["console", "--role", "viewer"])["url"]
        .as_str()
        .expect("rnx console --role viewer prints a url")
        .to_owned();
    assert!(admin_link.contains("/console/login?code="), "{admin_link}");

    let temp_shots = tempfile::tempdir().unwrap();
    let shots = match std::env::var_os("JOBLET_CONSOLE_SCREENSHOTS") {
        Some(dir) => workspace_root().join(dir),
        None => temp_shots.path().to_path_buf(),
    };
    for page in PAGES {
        let _ = std::fs::remove_file(shots.join(format!("{page}.png")));
    }

    let mut cmd = Command::new(&python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console_test.py"))
        .arg("--admin-link")
        .arg(&admin_link)
        .arg("--viewer-link")
        .arg(&viewer_link)
        .arg("--workflow")
        .arg(&workflow)
        .arg("--screenshots")
        .arg(&shots)
        .arg("--chromium")
        .arg(&chromium);
    let mut script = Script::start(cmd);

    script.expect("STEP overview", &node);
    // A job from the CLI, printing a line a second; the browser finds it
    // in the jobs page and follows its output.
    let job = node.run(&[
        "--gpu=2",
        "--gpu-memory=8GB",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done",
    ]);
    script.send(&format!("JOB {job}"));

    script.expect("STEP drained 3", &node);
    assert_eq!(
        gpu_state(&node, 3),
        "DRAINING",
        "the console drained GPU 3, but rnx gpu status says otherwise: {:?}",
        node.gpus()[3]
    );
    let out = node.rnx_ok(&["gpu", "status"]);
    assert!(out.contains("DRAINING"), "{out}");
    script.send("OK");

    script.expect("STEP viewer-refused 4", &node);
    assert_eq!(
        gpu_state(&node, 4),
        "AVAILABLE",
        "a viewer's refused drain changed GPU 4: {:?}",
        node.gpus()[4]
    );
    script.send("OK");

    script.expect("DONE", &node);
    load_stop.store(true, Ordering::SeqCst);
    load.join().expect("the load thread");
    let status = script.child.wait().expect("waiting for console_test.py");
    assert!(
        status.success(),
        "console_test.py: {status}\n{}",
        script.stderr()
    );
    assert_eq!(
        node.status(&job)["state"],
        "COMPLETED",
        "{}",
        node.job_summary()
    );
    for page in PAGES {
        let png = std::fs::read(shots.join(format!("{page}.png"))).unwrap_or_else(|e| {
            panic!(
                "no screenshot of the {page} page in {}: {e}",
                shots.display()
            )
        });
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{page}.png is not a real screenshot ({} bytes)",
            png.len()
        );
    }
}
